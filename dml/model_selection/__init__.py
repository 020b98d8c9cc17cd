"""Model selection (SPEC §8): splitters, cross-validation and hyper-parameter search.

* :class:`KFold`, :class:`StratifiedKFold`, :class:`ShuffleSplit`, :func:`train_test_split`:
  scikit-learn's row indices, also for Dask collections (row count and labels only reach the
  client), lazy Dask row selection that keeps the source's partitions.
* :func:`cross_validate`, :func:`cross_val_score`, :class:`GridSearchCV`,
  :class:`RandomizedSearchCV`: every (candidate, fold) fit runs concurrently on the current Dask
  cluster (tasks on scattered data for scikit-learn estimators, concurrent driver loops for dml
  estimators and Dask data), results laid out as scikit-learn's.
"""
from dml.model_selection._search import GridSearchCV, RandomizedSearchCV
from dml.model_selection._split import (KFold, ShuffleSplit, StratifiedKFold, check_cv,
                                        take_rows, train_test_split)
from dml.model_selection._validation import cross_val_score, cross_validate, get_scorer

__all__ = ["KFold", "StratifiedKFold", "ShuffleSplit", "train_test_split", "check_cv",
           "take_rows", "cross_validate", "cross_val_score", "get_scorer", "GridSearchCV",
           "RandomizedSearchCV"]
