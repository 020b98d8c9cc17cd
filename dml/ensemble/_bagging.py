"""Bagging of any scikit-learn estimator, members trained on workers (see docs/trees.md).

Member ``m`` gets a bootstrap sample of ``max_samples`` rows drawn with replacement from all
partitions: the number of rows taken from each block is multinomial in the block sizes (from the
member's generator), and each block draws its rows from ``block_rng(seed, "bagging", m, block)``.
Only the sampled rows move: each member's task gathers its sample and fits a clone of
``estimator`` there; members train in parallel. Prediction is blockwise (soft vote when the
members have ``predict_proba``, else majority vote; the mean for regression).

Prefer :class:`~dml.ensemble.RandomForestClassifier` for trees on large data: it never moves rows
and grows all trees in the same passes. Bagging suits other base estimators (kNN, SVMs, small
networks) and samples that fit in one worker's memory.
"""
from __future__ import annotations

import logging

import numpy as np
from dask import delayed
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from dml._blocks import block_rng, seed_from
from dml._param_validation import RANDOM_STATE, HasMethods, Integral, Interval, RealNotInt
from dml._typing import Any, ArrayLike, Self
from dml.base import DaskEstimatorMixin, check_is_fitted, fit_context
from dml.optim.progress import compute_with_progress, make_progress

__all__ = ["BaggingClassifier", "BaggingRegressor"]

#: Each member fitted is logged here at INFO.
_logger = logging.getLogger("dml.ensemble")


def _sample_block(index, xb, yb, wb, seed, member, counts):
    k = int(counts[index])
    if k == 0:
        return xb[:0], yb[:0]
    rows = block_rng(seed, "bagging", member, index).integers(0, xb.shape[0], k)
    return xb[rows], yb[rows]


def _fit_member(name, estimator, *samples):
    X = np.concatenate([s[0] for s in samples])
    y = np.concatenate([s[1] for s in samples])
    try:
        return estimator.fit(X, y)
    except (ValueError, TypeError) as exc:
        # The member's own message (e.g. scikit-learn trees' float32 range) would not say which
        # estimator failed, or that the data reached it through bagging.
        raise type(exc)(f"{name}: the base estimator {type(estimator).__name__} could not be "
                        f"fitted on its bootstrap sample: {exc}") from exc


def _vote_kernel(xb, members, classes, soft):
    n, k = xb.shape[0], len(classes)
    out = np.zeros((n, k))
    for est in members:
        if soft:
            proba = est.predict_proba(xb)
            cols = np.searchsorted(classes, est.classes_)
            out[:, cols] += proba
        else:
            pred = np.searchsorted(classes, est.predict(xb))
            out[np.arange(n), pred] += 1.0
    return out / len(members)


def _take(idx, classes):
    return classes[idx]


def _mean_kernel(xb, members):
    return np.mean([est.predict(xb) for est in members], axis=0)


class _BaggingBase(DaskEstimatorMixin):
    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "max_samples": [Interval(Integral, 1, None, closed="left"),
                        Interval(RealNotInt, 0, 1, closed="right")],
        "random_state": RANDOM_STATE,
        "verbose": ["verbose"],
        "progress": "no_validation",  # checked by dml.optim.progress.make_progress
    }

    def _fit(self, X, y, default):
        name = type(self).__name__
        n_est = self.n_estimators
        blocks = self._fit_blocks(X, y, None, y_numeric=isinstance(self, RegressorMixin))
        lengths = blocks.lengths
        n = int(lengths.sum())
        ms = self.max_samples
        size = int(ms) if isinstance(ms, Integral) else max(1, int(round(ms * n)))
        seed = seed_from(self.random_state)
        base = self.estimator if self.estimator is not None else default
        members = []
        for m in range(n_est):
            counts = block_rng(seed, "bagging-sizes", m).multinomial(size, lengths / n)
            samples = blocks.map_parts(_sample_block, seed, m, counts, with_index=True)
            est = clone(base)
            if "random_state" in est.get_params():
                est.set_params(random_state=int(block_rng(seed, "member", m).integers(2**31 - 1)))
            members.append(delayed(_fit_member, pure=True)(name, est, *samples))
        progress = make_progress(self.progress, self.verbose)
        if progress is not None:
            progress.start(n_est, desc=name)
        try:
            # Members train in parallel; each one finished is reported as it arrives.
            self.estimators_ = compute_with_progress(members, progress, "member", _logger,
                                                     desc=name)
        finally:
            if progress is not None:
                progress.close()
        return blocks


class BaggingClassifier(_BaggingBase, ClassifierMixin, BaseEstimator):
    """Bagging classifier: clones of ``estimator`` fitted on workers from bootstrap samples.

    Parameters
    ----------
    estimator : scikit-learn classifier or None (a DecisionTreeClassifier)
    n_estimators : int, default 10
    max_samples : int or float, default 1.0
        Sample size per member (a fraction of the rows when a float), drawn with replacement.
    random_state : None, int, RandomState or Generator
    verbose : int, default 0
        Above 0: a progress line on stderr as each member finishes (plain lines when stderr is
        not a terminal); every member is also logged at INFO on the ``dml.ensemble`` logger.
    progress : None, False, "text", "notebook", callable or object, default None
        Progress display (see :mod:`dml.optim.progress`); a callable gets ``{"epoch": members
        finished, "unit": "member"}``.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.ensemble import BaggingClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int)
    >>> bag = BaggingClassifier(n_estimators=5, random_state=0).fit(X, y)
    >>> bool(bag.score(X, y) > 0.9)
    True
    """

    def __init__(self, estimator=None, n_estimators=10, max_samples=1.0, random_state=None,
                 verbose=0, progress=None):
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.max_samples = max_samples
        self.random_state = random_state
        self.verbose = verbose
        self.progress = progress

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the members on bootstrap samples of X, y.

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
            The training data.
        y : array-like, dask array/Series or column name of shape (n_samples,)
            The targets.

        Returns
        -------
        self : object
            The fitted ensemble.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import BaggingClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int)
        >>> bag = BaggingClassifier(n_estimators=5, random_state=0)
        >>> len(bag.fit(X, y).estimators_)
        5
        """
        self._fit(X, y, DecisionTreeClassifier())
        self.classes_ = np.unique(np.concatenate([e.classes_ for e in self.estimators_]))
        return self

    def predict_proba(self, X: ArrayLike) -> Any:
        """Mean of the members' probabilities (or vote fractions without predict_proba).

        Columns in the order of ``classes_``.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        proba : ndarray or dask.array.Array of shape (n_samples, n_classes)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import BaggingClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int)
        >>> bag = BaggingClassifier(n_estimators=5, random_state=0)
        >>> bag.fit(X, y).predict_proba(np.array([[2.0, 0.0, 0.0]]))
        array([[0., 1.]])
        """
        check_is_fitted(self, "estimators_")
        soft = all(hasattr(e, "predict_proba") for e in self.estimators_)
        return self._blockwise(X, _vote_kernel, self.estimators_, self.classes_, soft,
                               dtype=np.float64, tail_shape=(len(self.classes_),))

    def predict(self, X: ArrayLike) -> Any:
        """The class of highest mean probability over the members.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        labels : ndarray or dask.array.Array of shape (n_samples,)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import BaggingClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int)
        >>> bag = BaggingClassifier(n_estimators=5, random_state=0)
        >>> bag.fit(X, y).predict(np.array([[2.0, 0.0, 0.0], [-2.0, 0.0, 0.0]]))
        array([1, 0])
        """
        proba = self.predict_proba(X)
        idx = proba.argmax(axis=1)
        if isinstance(idx, np.ndarray):
            return self.classes_[idx]
        return idx.map_blocks(_take, self.classes_, dtype=self.classes_.dtype)


class BaggingRegressor(_BaggingBase, RegressorMixin, BaseEstimator):
    """Bagging regressor: the mean of clones of ``estimator`` fitted on bootstrap samples.

    Parameters
    ----------
    estimator : scikit-learn regressor or None (a DecisionTreeRegressor)
        The members' estimator, cloned for each.
    n_estimators : int, default 10
        The number of members.
    max_samples : int or float, default 1.0
        Sample size per member (a fraction of the rows when a float), drawn with replacement.
    random_state : None, int, RandomState or Generator
        Seeds the samples and the members' own random states.
    verbose : int, default 0
        Above 0: a progress line on stderr as each member finishes (plain lines when stderr is
        not a terminal); every member is also logged at INFO on the ``dml.ensemble`` logger.
    progress : None, False, "text", "notebook", callable or object, default None
        Progress display (see :mod:`dml.optim.progress`); a callable gets ``{"epoch": members
        finished, "unit": "member"}``.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.ensemble import BaggingRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = X[:, 0] * 2
    >>> bool(BaggingRegressor(n_estimators=5, random_state=0).fit(X, y).score(X, y) > 0.9)
    True
    """

    def __init__(self, estimator=None, n_estimators=10, max_samples=1.0, random_state=None,
                 verbose=0, progress=None):
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.max_samples = max_samples
        self.random_state = random_state
        self.verbose = verbose
        self.progress = progress

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the members on bootstrap samples of X, y (see :meth:`BaggingClassifier.fit`).

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
            The training data.
        y : array-like, dask array/Series or column name of shape (n_samples,)
            The targets.

        Returns
        -------
        self : object
            The fitted ensemble.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import BaggingRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 2)); y = X[:, 0] * 2
        >>> bag = BaggingRegressor(n_estimators=5, random_state=0)
        >>> len(bag.fit(X, y).estimators_)
        5
        """
        self._fit(X, y, DecisionTreeRegressor())
        return self

    def predict(self, X: ArrayLike) -> Any:
        """Mean of the members' predictions.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        y_pred : ndarray or dask.array.Array of shape (n_samples,)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import BaggingRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 2)); y = X[:, 0] * 2
        >>> bag = BaggingRegressor(n_estimators=5, random_state=0)
        >>> bag.fit(X, y).predict(np.array([[1.0, 0.0]])).round(1)
        array([2.])
        """
        check_is_fitted(self, "estimators_")
        return self._blockwise(X, _mean_kernel, self.estimators_, dtype=np.float64)
