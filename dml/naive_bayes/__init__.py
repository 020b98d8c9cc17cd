"""Naive Bayes classifiers fitted by one pass of per-block count reductions.

Every parameter of a naive Bayes model is a sum over rows, so a fit is one map-reduce: each block
returns its statistics keyed by the labels (and, for :class:`CategoricalNB`, the categories) that
it happens to contain, and an associative ``combine`` merges them by label. Neither the classes
nor the categories need to be known before the pass, and all classes are counted together (one
pass over the data, where dask-ml's GaussianNB makes one per class).

The estimators follow scikit-learn 1.9 (same constructor parameters and fitted attributes)
and add a ``missing`` parameter implementing the missing-value rule of docs/naive_bayes.md: with
``missing="ignore"`` a missing attribute is not counted for that attribute at fit time and is
skipped in the product at predict time.

Layout: the per-block kernels and their combines (plain NumPy/pandas, testable without a
cluster) are in :mod:`dml.naive_bayes._kernels` (CategoricalNB's in
:mod:`dml.naive_bayes._categorical`, prediction in :mod:`dml.naive_bayes._predict`); the
fit/predict machinery shared by the estimators in :mod:`dml.naive_bayes._base`; the
estimators in :mod:`dml.naive_bayes._gaussian` and :mod:`dml.naive_bayes._discrete`.

See docs/naive_bayes.md.
"""
from dml._lazy import attach as _attach

__all__ = ["GaussianNB", "MultinomialNB", "ComplementNB", "BernoulliNB", "CategoricalNB"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "GaussianNB": "dml.naive_bayes._gaussian",
    "MultinomialNB": "dml.naive_bayes._discrete",
    "ComplementNB": "dml.naive_bayes._discrete",
    "BernoulliNB": "dml.naive_bayes._discrete",
    "CategoricalNB": "dml.naive_bayes._discrete",
})
