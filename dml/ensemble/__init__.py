"""Ensembles across Dask workers (docs/trees.md): random forests of histogram trees grown
together without moving rows, and bagging of any scikit-learn estimator."""
from dml._lazy import attach as _attach

__all__ = ["RandomForestClassifier", "RandomForestRegressor", "BaggingClassifier",
           "BaggingRegressor", "GradientBoostingClassifier", "GradientBoostingRegressor",
           "AdaBoostClassifier"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "RandomForestClassifier": "dml.ensemble._forest",
    "RandomForestRegressor": "dml.ensemble._forest",
    "BaggingClassifier": "dml.ensemble._bagging",
    "BaggingRegressor": "dml.ensemble._bagging",
    "GradientBoostingClassifier": "dml.ensemble._gb",
    "GradientBoostingRegressor": "dml.ensemble._gb",
    "AdaBoostClassifier": "dml.ensemble._adaboost",
})
