"""Evaluation metrics computed as reductions over row blocks.

Each metric takes NumPy arrays, lists, pandas Series, Dask arrays or Dask Series (probabilities
and scores also as 2-D Dask arrays), aligns y_true, y_pred and sample_weight to the same row blocks,
computes small per-block statistics where the blocks live and merges them in a fixed order: the
full vectors are never gathered to the client. Signatures and results follow scikit-learn 1.9
(binary and multiclass targets; multilabel indicator targets are not supported).

Classification: :func:`accuracy_score`, :func:`zero_one_loss`, :func:`confusion_matrix`,
:func:`precision_recall_fscore_support`, :func:`precision_score`, :func:`recall_score`,
:func:`f1_score`, :func:`fbeta_score`, :func:`specificity_score`, :func:`cohen_kappa_score`,
:func:`log_loss`, :func:`roc_auc_score`.

Regression: :func:`mean_squared_error`, :func:`root_mean_squared_error`,
:func:`mean_absolute_error`, :func:`r2_score`.

Clustering: :func:`silhouette_score`. Ranking (recommenders): :func:`precision_at_k`,
:func:`recall_at_k`, :func:`ndcg_at_k`, :func:`average_precision_at_k`, :func:`mrr`.
"""
from dml._lazy import attach as _attach

__all__ = ["accuracy_score", "zero_one_loss", "confusion_matrix",
           "precision_recall_fscore_support", "precision_score", "recall_score", "f1_score",
           "fbeta_score", "specificity_score", "cohen_kappa_score", "log_loss", "roc_auc_score",
           "mean_squared_error", "root_mean_squared_error", "mean_absolute_error", "r2_score",
           "silhouette_score", "precision_at_k", "recall_at_k", "ndcg_at_k",
           "average_precision_at_k", "mrr", "rmse", "mae"]

# Imported on first use, so that a worker unpickling one of the package's functions does not
# import every module of it (docs/cold_start.md). ``rmse`` and ``mae`` are the short
# names the CLI and job files use.
__getattr__, __dir__ = _attach(__name__, {
    "accuracy_score": "dml.metrics._classification",
    "cohen_kappa_score": "dml.metrics._classification",
    "confusion_matrix": "dml.metrics._classification",
    "f1_score": "dml.metrics._classification",
    "fbeta_score": "dml.metrics._classification",
    "precision_recall_fscore_support": "dml.metrics._classification",
    "precision_score": "dml.metrics._classification",
    "recall_score": "dml.metrics._classification",
    "specificity_score": "dml.metrics._classification",
    "zero_one_loss": "dml.metrics._classification",
    "log_loss": "dml.metrics._scores",
    "roc_auc_score": "dml.metrics._scores",
    "mean_absolute_error": "dml.metrics._regression",
    "mean_squared_error": "dml.metrics._regression",
    "r2_score": "dml.metrics._regression",
    "root_mean_squared_error": "dml.metrics._regression",
    "rmse": "dml.metrics._regression:root_mean_squared_error",
    "mae": "dml.metrics._regression:mean_absolute_error",
    "silhouette_score": "dml.metrics._cluster",
    "average_precision_at_k": "dml.metrics._ranking",
    "mrr": "dml.metrics._ranking",
    "ndcg_at_k": "dml.metrics._ranking",
    "precision_at_k": "dml.metrics._ranking",
    "recall_at_k": "dml.metrics._ranking",
})
