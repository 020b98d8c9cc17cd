"""Exact k-nearest neighbours over a training set kept on the workers (see docs/neighbors.md).

:class:`NearestNeighbors` answers neighbour queries; :class:`KNeighborsClassifier` and
:class:`KNeighborsRegressor` vote or average over the neighbours' targets. Queries are brute
force: every training block returns its own k nearest rows, and the partial results are merged
in training-row order, so the answer equals scikit-learn's ``algorithm="brute"`` whatever the
partitioning.
"""
from dml._lazy import attach as _attach

__all__ = ["NearestNeighbors", "KNeighborsClassifier", "KNeighborsRegressor"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "NearestNeighbors": "dml.neighbors._unsupervised",
    "KNeighborsClassifier": "dml.neighbors._classification",
    "KNeighborsRegressor": "dml.neighbors._regression",
})
