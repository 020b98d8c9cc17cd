"""Histogram decision trees trained across Dask workers (see docs/trees.md).

:class:`DecisionTreeClassifier` and :class:`DecisionTreeRegressor` grow level by level: one pass
over the persisted, uint8-binned row blocks per level computes the histograms of every open node.
The same machinery grows the trees of :mod:`dml.ensemble`'s forests together.
:func:`impurity` and :func:`information_gain` compute the definitions of docs/trees.md for given
class counts.
"""
from dml._lazy import attach as _attach

__all__ = ["DecisionTreeClassifier", "DecisionTreeRegressor", "impurity", "information_gain"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "DecisionTreeClassifier": "dml.tree._classes",
    "DecisionTreeRegressor": "dml.tree._classes",
    "impurity": "dml.tree._criteria",
    "information_gain": "dml.tree._criteria",
})
