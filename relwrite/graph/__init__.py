"""The graph language: types, variables, ops, FunctionGraph, features, terms and printing.

Its modules import one another one way, bottom to top: types, basic,
subtensor, shape, ops, terms, printing, fg, features, then shape_inference,
destroy and parse; none defers an import into a function.  Three conveniences of
the core classes need a module above them, and that module attaches them:
`ops` gives `Variable` its operators and the methods that build ops
(`x + y`, `x[i]`, `x.sum()`, `x.shape`), `printing` its notebook picture, and
`basic` gives `TensorType` its `__call__` (a type makes a variable).  Why
attach: every op takes and makes Variables, so ops must import basic, and the
operators build ops, so one side has to reach the other after both are
loaded.  An import deferred into each method keeps the circle, only hidden;
a table of ops in basic that ops fills is a second list of the operators to
keep in step, read from global state at every `x + y`; one module for
Variable and every op would be 1,600 lines with the core lost in it.
Attaching keeps each dependency in the module that has it, the methods
defined next to the ops they build.  This file imports `ops` and `printing`,
and Python runs a package's `__init__` before any module in it, so no
Variable is ever seen without its operators.  JAX attaches its arrays'
methods the same way (`register_jax_array_methods`), and Aesara sets
`TensorType.variable_type` from the module that defines `TensorVariable`.
The cost: the operators are not in Variable's class body, whose docstring
points here.  `Variable.eval`, which compiles, is attached the same way by
`relwrite.compile.function`, which the root package imports (so before any
module of ours runs).
"""

# imported for what they do on import: ops and printing attach Variable's operators, methods and
# picture; terms registers graph variables with etuples, cons and unification
from relwrite.graph import ops, printing, terms  # noqa: F401
