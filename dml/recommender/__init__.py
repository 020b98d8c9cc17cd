"""Recommender systems: matrix factorisation of a sparse ratings matrix.

See docs/recommender.md."""
from dml._lazy import attach as _attach

__all__ = ["MatrixFactorization"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "MatrixFactorization": "dml.recommender._mf",
})
