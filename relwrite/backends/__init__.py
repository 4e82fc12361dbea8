"""Evaluation of graphs: the NumPy reference backend (`relwrite.backends.numpy`)."""
