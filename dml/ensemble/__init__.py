"""Ensembles across Dask workers (docs/trees.md): random forests of histogram trees grown
together without moving rows, and bagging of any scikit-learn estimator."""
from dml.ensemble._adaboost import AdaBoostClassifier
from dml.ensemble._bagging import BaggingClassifier, BaggingRegressor
from dml.ensemble._gb import GradientBoostingClassifier, GradientBoostingRegressor
from dml.ensemble._forest import RandomForestClassifier, RandomForestRegressor

__all__ = ["RandomForestClassifier", "RandomForestRegressor", "BaggingClassifier",
           "BaggingRegressor", "GradientBoostingClassifier", "GradientBoostingRegressor",
           "AdaBoostClassifier"]
