"""Clustering: distributed k-means and tools to choose the number of clusters.

:class:`KMeans` runs Lloyd's algorithm over row blocks where only the centres travel, with
k-means||, k-means++ or random initialisation. :func:`elbow` and :func:`gap_statistic` fit a
range of ``k`` together (one scheduler call per Lloyd iteration for all the models).

See docs/clustering.md.
"""
__all__ = ["KMeans", "elbow", "gap_statistic"]

_WHERE = {"KMeans": "dml.cluster._kmeans", "elbow": "dml.cluster._selection",
          "gap_statistic": "dml.cluster._selection"}


def __getattr__(name):
    # Lazy, so that workers unpickling a kernel of dml.cluster._lloyd do not import scikit-learn.
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'dml.cluster' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
