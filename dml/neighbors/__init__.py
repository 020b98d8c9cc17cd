"""Exact k-nearest neighbours over a training set kept on the workers (see docs/neighbors.md).

:class:`NearestNeighbors` answers neighbour queries; :class:`KNeighborsClassifier` and
:class:`KNeighborsRegressor` vote or average over the neighbours' targets. Queries are brute
force: every training block returns its own k nearest rows, and the partial results are merged
in training-row order, so the answer equals scikit-learn's ``algorithm="brute"`` whatever the
partitioning.
"""
__all__ = ["NearestNeighbors", "KNeighborsClassifier", "KNeighborsRegressor"]

_WHERE = {"NearestNeighbors": "dml.neighbors._unsupervised",
          "KNeighborsClassifier": "dml.neighbors._classification",
          "KNeighborsRegressor": "dml.neighbors._regression"}


def __getattr__(name):
    # Lazy, so that workers unpickling a kernel do not import the estimator modules.
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'dml.neighbors' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
