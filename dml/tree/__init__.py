"""Histogram decision trees trained across Dask workers (see docs/trees.md).

:class:`DecisionTreeClassifier` and :class:`DecisionTreeRegressor` grow level by level: one pass
over the persisted, uint8-binned row blocks per level computes the histograms of every open node.
The same machinery grows the trees of :mod:`dml.ensemble`'s forests together.
:func:`impurity` and :func:`information_gain` compute the definitions of docs/trees.md for given
class counts.
"""
from dml.tree._classes import DecisionTreeClassifier, DecisionTreeRegressor
from dml.tree._criteria import impurity, information_gain

__all__ = ["DecisionTreeClassifier", "DecisionTreeRegressor", "impurity", "information_gain"]
