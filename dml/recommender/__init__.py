"""Recommender systems: matrix factorisation of a sparse ratings matrix.

See docs/recommender.md."""
from dml.recommender._mf import MatrixFactorization

__all__ = ["MatrixFactorization"]
