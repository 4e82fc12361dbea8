"""Compiling a graph into a callable: `function.function` rewrites it by a mode's query (the engine)
and links it with a backend (NumPy, or C); `profile` times both.

It sits above the engine and the backends, which never import it: the
engine evaluates with `relwrite.backends.numpy` and `relwrite.backends.exact`
only, and the backends know nothing of rewriting.
"""
