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
from dml.metrics._classification import (accuracy_score, cohen_kappa_score, confusion_matrix,
                                         f1_score, fbeta_score, precision_recall_fscore_support,
                                         precision_score, recall_score, specificity_score,
                                         zero_one_loss)
from dml.metrics._scores import log_loss, roc_auc_score
from dml.metrics._regression import (mean_absolute_error, mean_squared_error, r2_score,
                                     root_mean_squared_error)

__all__ = [
    "accuracy_score", "zero_one_loss", "confusion_matrix", "precision_recall_fscore_support",
    "precision_score", "recall_score", "f1_score", "fbeta_score", "specificity_score",
    "cohen_kappa_score", "log_loss", "roc_auc_score",
    "mean_squared_error", "root_mean_squared_error", "mean_absolute_error", "r2_score",
]
from dml.metrics._cluster import silhouette_score  # noqa: E402,F401  (clustering, issue 6)
from dml.metrics._ranking import (average_precision_at_k, mrr, ndcg_at_k,  # noqa: E402,F401
                                  precision_at_k, recall_at_k)  # (ranking, issue 5)
rmse = root_mean_squared_error  # noqa: E305  (the short names the CLI and job files use)
mae = mean_absolute_error
__all__ += ["silhouette_score",
            "precision_at_k", "recall_at_k", "ndcg_at_k", "average_precision_at_k", "mrr",
            "rmse", "mae"]
