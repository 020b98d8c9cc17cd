"""Model selection: splitters, cross-validation and hyper-parameter search.

* :class:`KFold`, :class:`StratifiedKFold`, :class:`ShuffleSplit`, the group splitters
  (:class:`GroupKFold`, :class:`StratifiedGroupKFold`, :class:`LeaveOneGroupOut`,
  :class:`GroupShuffleSplit`), :func:`train_test_split`: scikit-learn's row indices, also for
  Dask collections (row count, labels and groups only reach the client), lazy Dask row
  selection that keeps the source's partitions. Searches and :func:`cross_validate` pass
  ``groups`` to the splitter, as scikit-learn's do.
* :func:`cross_validate`, :func:`cross_val_score`, :class:`GridSearchCV`,
  :class:`RandomizedSearchCV`: every (candidate, fold) fit runs concurrently on the current Dask
  cluster (tasks on scattered data for scikit-learn estimators, concurrent driver loops for dml
  estimators and Dask data), results laid out as scikit-learn's.
* :func:`get_scorer`, :func:`score_predictions`, :func:`metric_info`: one table of metric names
  (scikit-learn's scorer names and short aliases) for searches and for reports such as the
  ``dml`` command's.

See docs/model_selection.md.
"""
from dml.model_selection._search import GridSearchCV, RandomizedSearchCV
from dml.model_selection._split import (GroupKFold, GroupShuffleSplit, KFold, LeaveOneGroupOut,
                                        ShuffleSplit, StratifiedGroupKFold, StratifiedKFold,
                                        check_cv, split_indices, take_rows, train_test_split)
from dml.model_selection._scoring import (default_metrics, get_scorer, metric_info,
                                          metric_names, score_predictions)
from dml.model_selection._validation import cross_val_score, cross_validate

__all__ = ["KFold", "StratifiedKFold", "ShuffleSplit", "GroupKFold", "StratifiedGroupKFold",
           "LeaveOneGroupOut", "GroupShuffleSplit", "train_test_split", "check_cv",
           "split_indices", "take_rows", "cross_validate", "cross_val_score", "get_scorer",
           "GridSearchCV", "RandomizedSearchCV", "score_predictions", "metric_info",
           "metric_names", "default_metrics"]
