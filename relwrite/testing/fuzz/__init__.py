"""Differential fuzzing: random graphs under every mode against a NumPy walk of the original graph.

`run(graphs, seed)` draws graphs with the constructors a user writes (shared
subexpressions, ranks 0-2 with broadcasting, static lengths known and
unknown, float/int/bool dtypes, constants and Python literals at the edges of
each dtype's range, every op of `relwrite.graph.ops`), evaluates each under
every mode on several input sets (random, wide-range and edge values) and
compares with a plain NumPy evaluation of the original, unrewritten graph:
same shape, dtype, NaN and infinity positions, values close, and an error
wherever NumPy raises.  Each difference is classified:

- improvement: the reference is off (non-finite or inaccurate) and the mode
  agrees with an extended-precision walk of the original graph: in
  ``np.longdouble``, then with the exact reference's mpmath numbers of
  128 and 4096 bits, which neither overflow nor underflow.  Where even those
  overflow to an infinity of the sign of the mode's finite value (a
  cancellation like 1 - sigmoid(1e19) needs more bits than any walk has), or
  pass through an infinity that a later op hides (a comparison, 1 / x) where
  the rewritten graph's walk, after a stabilization, passes through none, the
  same walk of the rewritten graph must give the mode's value (within its own
  rounding noise);
- declared: a rule that fired is tagged ``unsafe``, or declares that it
  reassociates or stabilizes (`Rule.semantics`) and the extended-precision
  walks of the original and of the rewritten graph agree (right over the
  reals but for the constants the rules computed in the graph's dtypes,
  which may move by their rounding; only rounding and range differ: a
  stabilization may move an underflow, too), or, where no walk of the original settles, the walks of
  the rewritten graph and of the graph made without the reassociating rules
  agree and that graph is no bug; or the original raises and the rewritten
  graph, walked the same way, gives a value (a refinement: rewriting removed
  the computation that failed, see docs/rule-safety.md);
- bug: anything else: a wrong value, dtype or shape (``wrong``), an exception
  where NumPy gives a value (``crashed``), a rewritten graph failing
  ``check_integrity`` (``invalid``), a rewriter or compilation failure the
  library swallowed with a warning (``warned``), or an intermediate value
  whose static type is not what the graph computes (``types``, mode-independent).

Rounding noise is told apart from bugs by evaluating the reference again with
every floating intermediate perturbed by a couple of ulps: an element is
accepted within the spread that noise produces (so ill-conditioned
expressions do not count as bugs), and values that depend on undefined
conversions (NaN, infinity or out-of-range floats cast to integers) are not
compared.  Graph `i` of a run is drawn from ``(seed, i)`` alone, so any case
replays by itself; every failure carries a self-contained Python reproducer,
shrunk to few nodes.

The modules, each importing only those before it: `semantics` (the NumPy
meaning of every op, written apart from the backends), `recipe` (graphs as
constructor calls, and their NumPy reference), `generate` (drawing recipes
and inputs), `arbiter` (nodes by the exact reference), `walks` (graph walks
in a precision), `judge` (one graph under each mode, classified) and `run`
(runs, shrinking, reports).  `benchmarks/fuzz.py` and the suite drive it.
"""

from relwrite.testing.fuzz.generate import draw_graph
from relwrite.testing.fuzz.judge import BUG_CATEGORIES, Finding, FuzzTimeout, check
from relwrite.testing.fuzz.recipe import Recipe, RecipeStep, Ref
from relwrite.testing.fuzz.run import (
    DEFAULT_MODES,
    GRAPH_ROW,
    Failure,
    FuzzReport,
    check_graph,
    parse_mode,
    run,
    shrink,
    signature,
)

__all__ = [
    "BUG_CATEGORIES",
    "DEFAULT_MODES",
    "GRAPH_ROW",
    "Failure",
    "Finding",
    "FuzzReport",
    "FuzzTimeout",
    "Recipe",
    "RecipeStep",
    "Ref",
    "check",
    "check_graph",
    "draw_graph",
    "parse_mode",
    "run",
    "shrink",
    "signature",
]
