"""Recommender systems: matrix factorisation of a sparse ratings matrix (SPEC §4)."""
from dml.recommender._mf import MatrixFactorization

__all__ = ["MatrixFactorization"]
