"""Clustering: distributed k-means and tools to choose the number of clusters.

:class:`KMeans` runs Lloyd's algorithm over row blocks where only the centres travel, with
k-means||, k-means++ or random initialisation. :func:`elbow` and :func:`gap_statistic` fit a
range of ``k`` together (one scheduler call per Lloyd iteration for all the models).

See docs/clustering.md.
"""
from dml._lazy import attach as _attach

__all__ = ["KMeans", "elbow", "gap_statistic"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "KMeans": "dml.cluster._kmeans",
    "elbow": "dml.cluster._selection",
    "gap_statistic": "dml.cluster._selection",
})
