"""Gaussian naive Bayes."""
from __future__ import annotations


import numpy as np

from dml._param_validation import Interval, Real
from dml.naive_bayes._base import _BaseNB, _validate_priors
from dml.naive_bayes._kernels import _gaussian_block, _gaussian_combine, _safe_div

__all__ = ["GaussianNB"]


class GaussianNB(_BaseNB):
    """Gaussian naive Bayes, fitted in one pass over Dask blocks.

    Per class and feature the weighted count, mean and variance (ddof=0) are reduced over the
    blocks with Chan's parallel formula (two-pass within each block), all classes together. As in
    scikit-learn, ``epsilon_ = var_smoothing * max_j Var(X[:, j])`` (unweighted variance of all of
    X) is added to every variance; that variance is merged from the per-class statistics, not
    computed in another pass.

    Parameters
    ----------
    priors : array-like of shape (n_classes,), default=None
        Prior probabilities of the classes. If given they are not adjusted to the data.
    var_smoothing : float, default=1e-9
        Portion of the largest feature variance added to the variances for stability.
    missing : {"error", "ignore"}, default="error"
        What a NaN in X means. ``"error"`` raises a ValueError. ``"ignore"`` applies the
        missing-value rule of docs/naive_bayes.md: at fit time the mean and variance of feature j
        for class c use only the class-c rows where j is observed (and ``epsilon_`` uses the
        observed values of each feature); at predict time the factor of a missing feature is left
        out of the product (its log term is 0). If a class never has feature j observed, its
        ``theta_`` is 0 and its ``var_`` is ``epsilon_``, as for a class without samples in
        scikit-learn. Infinity is always an error. Fitting a block that does contain NaN is
        slower (about three times the time of a block without, and two more block-sized
        temporaries: the zero-filled values and the mask).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels, sorted.
    class_count_ : ndarray of shape (n_classes,)
        Weighted number of training samples per class.
    class_prior_ : ndarray of shape (n_classes,)
        Probability of each class.
    theta_ : ndarray of shape (n_classes, n_features)
        Mean of each feature per class.
    var_ : ndarray of shape (n_classes, n_features)
        Variance of each feature per class, plus ``epsilon_``.
    epsilon_ : float
        Absolute additive value to variances.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X was a dataframe with string column names.

    Notes
    -----
    ``partial_fit`` keeps running statistics of all data seen, so ``epsilon_`` is always
    ``var_smoothing`` times the largest variance of *all* data seen so far and a sequence of
    ``partial_fit`` calls equals one ``fit``. This deliberately differs from scikit-learn's
    ``partial_fit``, which uses the variance of the latest batch only.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.naive_bayes import GaussianNB
    >>> X = np.array([[-1, -1], [-2, -1], [-3, -2], [1, 1], [2, 1], [3, 2]])
    >>> y = np.array([1, 1, 1, 2, 2, 2])
    >>> clf = GaussianNB().fit(X, y)
    >>> clf.predict([[-0.8, -1]])
    array([1])
    >>> clf.theta_
    array([[-2.  , -1.33...],
           [ 2.  ,  1.33...]])
    >>> X_missing = np.array([[np.nan, -1.0], [0.9, np.nan]])
    >>> GaussianNB(missing="ignore").fit(X, y).predict(X_missing)
    array([1, 2])
    """

    _kind = "gaussian"
    _poor_score = False

    def __init__(self, *, priors=None, var_smoothing=1e-9, missing="error"):
        self.priors = priors
        self.var_smoothing = var_smoothing
        self.missing = missing

    _parameter_constraints = {**_BaseNB._parameter_constraints,
                              "priors": ["array-like", None],
                              "var_smoothing": [Interval(Real, 0, None, closed="left")]}

    def _reduce(self, blocks):
        return blocks.map_reduce(_gaussian_block, type(self).__name__, self.missing,
                                 combine=_gaussian_combine, with_index=True)

    def _combine(self, parts):
        return _gaussian_combine(parts)

    def _empty_stats(self, classes, d):
        L = len(classes)
        return {"classes": classes, "wsum": np.zeros(L), "n": np.zeros((L, d)),
                "mean": np.zeros((L, d)), "m2": np.zeros((L, d)),
                "gn": np.zeros(d), "gmean": np.zeros(d), "gm2": np.zeros(d)}

    def _finalise(self, stats):
        L = len(stats["classes"])
        if self.priors is not None:
            prior = _validate_priors(self.priors, L, "GaussianNB")
        gn = stats["gn"]
        gvar = _safe_div(stats["gm2"], gn)
        eps = self.var_smoothing * float(gvar[gn > 0].max()) if (gn > 0).any() else 0.0
        self.epsilon_ = eps
        self.theta_ = stats["mean"].copy()
        self.var_ = _safe_div(stats["m2"], stats["n"]) + eps
        self.class_count_ = stats["wsum"].copy()
        if self.priors is None:
            self.class_prior_ = self.class_count_ / self.class_count_.sum()
        else:
            self.class_prior_ = prior

    def _jll_params(self):
        return (self.theta_, self.var_, self.class_prior_)
