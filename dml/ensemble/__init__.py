"""Ensembles trained across Dask workers: random forests of histogram trees grown
together without moving rows, and bagging of any scikit-learn estimator.

See docs/trees.md."""
from dml.ensemble._bagging import BaggingClassifier, BaggingRegressor
from dml.ensemble._forest import RandomForestClassifier, RandomForestRegressor

__all__ = ["RandomForestClassifier", "RandomForestRegressor", "BaggingClassifier",
           "BaggingRegressor"]
