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
from dml._lazy import attach as _attach

__all__ = ["KFold", "StratifiedKFold", "ShuffleSplit", "GroupKFold", "StratifiedGroupKFold",
           "LeaveOneGroupOut", "GroupShuffleSplit", "train_test_split", "check_cv",
           "split_indices", "take_rows", "cross_validate", "cross_val_score", "get_scorer",
           "GridSearchCV", "RandomizedSearchCV", "score_predictions", "metric_info",
           "metric_names", "default_metrics"]

# Imported on first use, so that a worker unpickling one of the package's functions does not
# import every module of it (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "GridSearchCV": "dml.model_selection._search",
    "RandomizedSearchCV": "dml.model_selection._search",
    "GroupKFold": "dml.model_selection._split",
    "GroupShuffleSplit": "dml.model_selection._split",
    "KFold": "dml.model_selection._split",
    "LeaveOneGroupOut": "dml.model_selection._split",
    "ShuffleSplit": "dml.model_selection._split",
    "StratifiedGroupKFold": "dml.model_selection._split",
    "StratifiedKFold": "dml.model_selection._split",
    "check_cv": "dml.model_selection._split",
    "split_indices": "dml.model_selection._split",
    "take_rows": "dml.model_selection._split",
    "train_test_split": "dml.model_selection._split",
    "default_metrics": "dml.model_selection._scoring",
    "get_scorer": "dml.model_selection._scoring",
    "metric_info": "dml.model_selection._scoring",
    "metric_names": "dml.model_selection._scoring",
    "score_predictions": "dml.model_selection._scoring",
    "cross_val_score": "dml.model_selection._validation",
    "cross_validate": "dml.model_selection._validation",
})
