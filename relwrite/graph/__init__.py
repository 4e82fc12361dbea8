"""The graph language: types, variables, ops, FunctionGraph, features, terms and printing."""

from relwrite.graph import terms  # noqa: F401  (registers graph variables with etuples, cons, unification)
