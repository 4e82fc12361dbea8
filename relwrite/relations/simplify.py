"""Simplify: algebraic identities beyond the canonical form (comparisons, extrema, powers, reductions)."""
