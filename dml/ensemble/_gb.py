"""Gradient-boosted trees on the histogram engine, in the spirit of scikit-learn's
HistGradientBoosting (same parameter names and maths; see docs/gradient_boosting.md).

The features are binned once (the quantile bins of :mod:`dml.tree`); each round fits one tree
per output to the gradients of the loss by best-first growth from distributed histograms of
gradients and hessians (:mod:`dml.ensemble._gb_grow`); the driver is
:mod:`dml.ensemble._gb_fit`.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from dml._typing import Any, ArrayLike, Self
from dml._blocks import BlockSpec
from dml._param_validation import (RANDOM_STATE, Integral, Interval, Real, RealNotInt,
                                   StrOptions)
from dml.base import DaskEstimatorMixin, check_is_fitted, fit_context
from dml.ensemble._gb_categorical import encode_coded
from dml.ensemble._gb_fit import fit_boosting, raw_from_leaves
from dml.ensemble._gb_losses import make_loss
from dml.tree._binning import as_float_block
from dml.tree._model import apply_float

__all__ = ["GradientBoostingClassifier", "GradientBoostingRegressor"]


def _raw_kernel(xb, nodes, categorical, categories, is_cat, name, baseline, n_out, staged):
    x = encode_coded(as_float_block(xb, categorical, categories, name), is_cat, categorical,
                     categories)
    return raw_from_leaves(apply_float(x, nodes), nodes, baseline, n_out, staged=staged)


class _GBBase(DaskEstimatorMixin):
    _block_spec = BlockSpec(numeric=False)
    _parameter_constraints = {
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "max_leaf_nodes": [Interval(Integral, 2, None, closed="left"), None],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left")],
        "l2_regularization": [Interval(Real, 0, None, closed="left")],
        "max_features": [Interval(RealNotInt, 0, 1, closed="right")],
        # Bins are stored as uint8 and bin 255 is reserved for missing values.
        "max_bins": [Interval(Integral, 2, 255, closed="both")],
        "subsample": [Interval(RealNotInt, 0, 1, closed="right")],
        "warm_start": ["boolean"],
        "early_stopping": [StrOptions({"auto"}), "boolean"],
        "scoring": [StrOptions({"loss"})],
        "validation_fraction": [Interval(RealNotInt, 0, 1, closed="neither"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "categorical_features": ["array-like", StrOptions({"from_dtype"}), None],
        "random_state": RANDOM_STATE,
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # NaN is a missing value that follows each split's learned direction.
        tags.input_tags.allow_nan = True
        return tags

    def _raw(self, X, staged=False):
        check_is_fitted(self, "nodes_")
        T = self.n_trees_per_iteration_
        shape = (self.n_iter_, T) if staged else (T,)
        return self._blockwise(X, _raw_kernel, self.nodes_, self.categorical_,
                               self.categories_, self.is_categorical_, type(self).__name__,
                               self._baseline, T, staged, dtype=np.float64, tail_shape=shape,
                               numeric=False)

    def _stages(self, X, out):
        # NumPy arrays, also for Dask input (the stages share one pass over X).
        raw = np.asarray(self._raw(X, staged=True))
        for i in range(self.n_iter_):
            yield out(raw[:, i, :])

    @property
    def feature_importances_(self):
        """Total split gain per feature over all trees, normalised to sum to 1."""
        check_is_fitted(self, "nodes_")
        s = self._importance_sums.sum()
        return self._importance_sums / s if s > 0 else self._importance_sums.copy()

    def _loss_obj(self):
        return make_loss(self.loss, getattr(self, "n_classes_", 1),
                         getattr(self, "quantile", None) or 0.5)


_PARAMS = """
    learning_rate : float, default 0.1
        Shrinkage of the leaf values.
    max_iter : int, default 100
        Boosting rounds (one tree per round, or one per class for multiclass log loss).
    max_leaf_nodes : int or None, default 31
        Leaves per tree; nodes are split best first (largest gain first).
    max_depth : int or None, default None
        Maximum depth (edges from the root to a leaf).
    min_samples_leaf : int, default 20
        Minimum rows per leaf.
    l2_regularization : float, default 0.0
        λ in the leaf value -G / (H + λ) and in the gain.
    max_features : float in (0, 1], default 1.0
        Share of the features each split may use, drawn per node from the node's own
        generator.
    max_bins : int, default 255
        Bins per feature (2..255): exact thresholds when a feature has at most ``max_bins``
        distinct values, else quantiles of a distributed sketch. Missing values get a bin of
        their own and a learned direction at every split. Also the most categories a
        categorical feature may have.
    categorical_features : "from_dtype", None, array-like of bool, int or str, \
default "from_dtype"
        The categorical features: "from_dtype" takes the pandas ``category`` columns; else a
        boolean mask, column indices or column names (None: none). A numeric column named here
        must hold non-negative integer codes (NaN: missing). A categorical split sends a set
        of categories left (found by ordering the categories by gradient over hessian, as
        scikit-learn's HistGradientBoosting); categories not seen in training are treated as
        missing at prediction. See docs/gradient_boosting.md.
    subsample : float in (0, 1], default 1.0
        Share of the training rows used by each round, drawn per (round, block).
    warm_start : bool, default False
        Keep the fitted trees and add rounds up to ``max_iter`` on the next ``fit``.
    early_stopping : "auto" or bool, default "auto"
        Stop when the validation loss has not improved by ``tol`` for ``n_iter_no_change``
        rounds; "auto" enables it above 10,000 rows.
    scoring : {"loss"}, default "loss"
    validation_fraction : float or None, default 0.1
        Share of each block's rows held out for early stopping (None: the training loss).
    n_iter_no_change : int, default 10
    tol : float, default 1e-7
    random_state : None, int, RandomState or Generator
        Seeds the validation split, the row and the feature subsampling.

    Attributes
    ----------
    n_iter_ : int
        Rounds fitted (early stopping may end before ``max_iter``).
    n_trees_per_iteration_ : int
    train_score_, validation_score_ : ndarray
        Negative loss before the first round and after each round (training rows /
        validation rows; ``validation_score_`` is empty without early stopping).
    nodes_ : dict of ndarray
        All trees as flat arrays (round-major; ``tree_start`` marks each tree's first node;
        ``value`` holds the shrunk leaf values).
    feature_importances_ : ndarray
        Normalised total split gain per feature.
    is_categorical_ : ndarray of bool
        The categorical features.
    categories_ : list
        Per feature, its categories (None for a numeric feature): the pandas categories, or
        the sorted codes seen in training.
    bin_edges_, n_bins_, has_missing_values_, do_early_stopping_ : the binning and settings
        the fit used.
"""


class GradientBoostingRegressor(RegressorMixin, _GBBase, BaseEstimator):
    """Histogram gradient-boosted regression trees fitted across Dask workers.

    Parameters
    ----------
    loss : {"squared_error", "absolute_error", "quantile", "poisson"}, default "squared_error"
        Absolute error and quantile re-fit each leaf to the median / ``quantile`` of its
        residuals; poisson uses a log link (predictions are ``exp`` of the raw score).
    quantile : float in (0, 1) or None, default None
        The quantile predicted by ``loss="quantile"``.
%(params)s
    Examples
    --------
    >>> import numpy as np
    >>> from dml.ensemble import GradientBoostingRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 3)); y = 2 * X[:, 0] + np.sin(X[:, 1])
    >>> reg = GradientBoostingRegressor(max_iter=50, random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.9), reg.n_iter_
    (True, 50)
    """

    _parameter_constraints = {
        **_GBBase._parameter_constraints,
        "loss": [StrOptions({"squared_error", "absolute_error", "quantile", "poisson"})],
        "quantile": [Interval(Real, 0, 1, closed="neither"), None],
    }

    def __init__(self, loss="squared_error", quantile=None, learning_rate=0.1, max_iter=100,
                 max_leaf_nodes=31, max_depth=None, min_samples_leaf=20, l2_regularization=0.0,
                 max_features=1.0, max_bins=255, subsample=1.0, warm_start=False,
                 early_stopping="auto", scoring="loss", validation_fraction=0.1,
                 n_iter_no_change=10, tol=1e-7, random_state=None,
                 categorical_features="from_dtype"):
        self.loss = loss
        self.categorical_features = categorical_features
        self.quantile = quantile
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.max_leaf_nodes = max_leaf_nodes
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.max_features = max_features
        self.max_bins = max_bins
        self.subsample = subsample
        self.warm_start = warm_start
        self.early_stopping = early_stopping
        self.scoring = scoring
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.random_state = random_state

    def _validate_param_relations(self):
        from dml._param_validation import invalid_parameter

        if self.loss == "quantile" and self.quantile is None:
            raise invalid_parameter(self, "quantile", "a float in (0, 1) when "
                                    "loss='quantile' (the quantile to predict)")

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None, *,
            X_val: ArrayLike | None = None, y_val: ArrayLike | None = None,
            sample_weight_val: ArrayLike | None = None) -> Self:
        """Fit the boosted trees (NumPy, pandas, Dask array or dataframe; y may be a column).

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
            The training data (NaN marks a missing value).
        y : array-like, dask array/Series or column name of shape (n_samples,)
            The targets.
        sample_weight : array-like, dask array/Series or column name, optional
            Row weights (they multiply the gradients and hessians).
        X_val, y_val : array-like, DataFrame or Dask collection, optional
            A validation set for early stopping (the issue tracker's ``validation_data``;
            scikit-learn's names): used instead of holding out ``validation_fraction`` of
            the training rows. Both or neither; an error with ``early_stopping=False``;
            unused when "auto" early stopping is off (at most 10,000 rows). Its blocks
            need not match those of X.
        sample_weight_val : array-like or Dask collection, optional
            Weights of the validation rows.

        Returns
        -------
        self : object
            The fitted model.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import GradientBoostingRegressor
        >>> X = np.arange(100.0).reshape(-1, 1); y = (X[:, 0] > 50).astype(float)
        >>> GradientBoostingRegressor(max_iter=5).fit(X, y).n_iter_
        5
        """
        return fit_boosting(self, X, y, sample_weight, classify=False, X_val=X_val,
                            y_val=y_val, sample_weight_val=sample_weight_val)

    def _out(self, raw):
        return self._loss_obj().inverse_link(raw)

    def predict(self, X: ArrayLike) -> Any:
        """Predicted values (the inverse link of the summed raw scores).

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray or dask.array.Array of shape (n_samples,)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import GradientBoostingRegressor
        >>> X = np.arange(100.0).reshape(-1, 1); y = (X[:, 0] > 50).astype(float)
        >>> reg = GradientBoostingRegressor(max_iter=100).fit(X, y)
        >>> np.round(reg.predict(np.array([[10.0], [90.0]])), 2).tolist()
        [0.0, 1.0]
        """
        raw = self._raw(X)
        if isinstance(raw, np.ndarray):
            return self._out(raw)
        return raw.map_blocks(self._out, drop_axis=1, dtype=np.float64)

    def staged_predict(self, X: ArrayLike) -> Any:
        """Predictions after each round (a generator, ``n_iter_`` arrays).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Yields
        ------
        y_pred : ndarray of shape (n_samples,)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import GradientBoostingRegressor
        >>> X = np.arange(100.0).reshape(-1, 1); y = X[:, 0]
        >>> reg = GradientBoostingRegressor(max_iter=3).fit(X, y)
        >>> len(list(reg.staged_predict(X)))
        3
        """
        yield from self._stages(X, self._out)


class GradientBoostingClassifier(ClassifierMixin, _GBBase, BaseEstimator):
    """Histogram gradient-boosted classification trees fitted across Dask workers.

    Binary targets fit one tree per round to the log loss of the log-odds; K > 2 classes fit K
    trees per round (multinomial log loss, softmax probabilities).

    Parameters
    ----------
    loss : {"log_loss"}, default "log_loss"
    class_weight : dict, "balanced" or None, default None
        Multiplies the sample weights per class.
%(params)s
    Examples
    --------
    >>> import numpy as np
    >>> from dml.ensemble import GradientBoostingClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 4)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> clf = GradientBoostingClassifier(max_iter=30, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9), clf.classes_.tolist()
    (True, [0, 1])
    """

    _parameter_constraints = {
        **_GBBase._parameter_constraints,
        "loss": [StrOptions({"log_loss"})],
        "class_weight": [StrOptions({"balanced"}), dict, None],
    }

    def __init__(self, loss="log_loss", learning_rate=0.1, max_iter=100, max_leaf_nodes=31,
                 max_depth=None, min_samples_leaf=20, l2_regularization=0.0, max_features=1.0,
                 max_bins=255, subsample=1.0, warm_start=False, early_stopping="auto",
                 scoring="loss", validation_fraction=0.1, n_iter_no_change=10, tol=1e-7,
                 class_weight=None, random_state=None,
                 categorical_features="from_dtype"):
        self.loss = loss
        self.categorical_features = categorical_features
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.max_leaf_nodes = max_leaf_nodes
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.max_features = max_features
        self.max_bins = max_bins
        self.subsample = subsample
        self.warm_start = warm_start
        self.early_stopping = early_stopping
        self.scoring = scoring
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.class_weight = class_weight
        self.random_state = random_state

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None, *,
            X_val: ArrayLike | None = None, y_val: ArrayLike | None = None,
            sample_weight_val: ArrayLike | None = None) -> Self:
        """Fit the boosted trees (see :meth:`GradientBoostingRegressor.fit`).

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
            The training data (NaN marks a missing value).
        y : array-like, dask array/Series or column name of shape (n_samples,)
            The class labels.
        sample_weight : array-like, dask array/Series or column name, optional
            Row weights.
        X_val, y_val, sample_weight_val : optional
            A validation set for early stopping (see :meth:`GradientBoostingRegressor.fit`).

        Returns
        -------
        self : object
            The fitted model.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import GradientBoostingClassifier
        >>> X = np.arange(100.0).reshape(-1, 1); y = (X[:, 0] > 50).astype(int)
        >>> GradientBoostingClassifier(max_iter=5).fit(X, y).n_iter_
        5
        """
        return fit_boosting(self, X, y, sample_weight, classify=True, X_val=X_val,
                            y_val=y_val, sample_weight_val=sample_weight_val)

    def _proba(self, raw):
        return self._loss_obj().inverse_link(raw)

    def decision_function(self, X: ArrayLike) -> Any:
        """Raw scores: the log-odds (binary, shape (n,)) or per-class scores (n, K).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray or dask.array.Array

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import GradientBoostingClassifier
        >>> X = np.arange(100.0).reshape(-1, 1); y = (X[:, 0] > 50).astype(int)
        >>> clf = GradientBoostingClassifier(max_iter=20).fit(X, y)
        >>> bool(clf.decision_function(np.array([[90.0]]))[0] > 0)
        True
        """
        raw = self._raw(X)
        if self.n_trees_per_iteration_ == 1:
            return raw[:, 0]
        return raw

    def predict_proba(self, X: ArrayLike) -> Any:
        """Class probabilities (columns in the order of ``classes_``).

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray or dask.array.Array of shape (n_samples, n_classes)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import GradientBoostingClassifier
        >>> X = np.arange(100.0).reshape(-1, 1); y = (X[:, 0] > 50).astype(int)
        >>> clf = GradientBoostingClassifier(max_iter=50).fit(X, y)
        >>> clf.predict_proba(np.array([[10.0], [90.0]])).argmax(axis=1).tolist()
        [0, 1]
        """
        check_is_fitted(self, "nodes_")
        raw = self._raw(X)
        if isinstance(raw, np.ndarray):
            return self._proba(raw)
        return raw.map_blocks(self._proba, chunks=(raw.chunks[0], (self.n_classes_,)),
                              dtype=np.float64)

    def predict(self, X: ArrayLike) -> Any:
        """The class of highest probability.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray or dask.array.Array of shape (n_samples,)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import GradientBoostingClassifier
        >>> X = np.arange(100.0).reshape(-1, 1); y = (X[:, 0] > 50).astype(int)
        >>> GradientBoostingClassifier(max_iter=50).fit(X, y).predict(np.array([[90.0]]))
        array([1])
        """
        idx = self.predict_proba(X).argmax(axis=1)
        if isinstance(idx, np.ndarray):
            return self.classes_[idx]
        return idx.map_blocks(_take, self.classes_, dtype=self.classes_.dtype)

    def staged_predict_proba(self, X: ArrayLike) -> Any:
        """Class probabilities after each round (a generator, ``n_iter_`` arrays).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Yields
        ------
        proba : ndarray of shape (n_samples, n_classes)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import GradientBoostingClassifier
        >>> X = np.arange(100.0).reshape(-1, 1); y = (X[:, 0] > 50).astype(int)
        >>> clf = GradientBoostingClassifier(max_iter=4).fit(X, y)
        >>> [p.shape for p in clf.staged_predict_proba(X[:2])]
        [(2, 2), (2, 2), (2, 2), (2, 2)]
        """
        yield from self._stages(X, self._proba)

    def staged_predict(self, X: ArrayLike) -> Any:
        """Predicted classes after each round (a generator, ``n_iter_`` arrays).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Yields
        ------
        labels : ndarray of shape (n_samples,)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import GradientBoostingClassifier
        >>> X = np.arange(100.0).reshape(-1, 1); y = (X[:, 0] > 50).astype(int)
        >>> clf = GradientBoostingClassifier(max_iter=4).fit(X, y)
        >>> len(list(clf.staged_predict(X)))
        4
        """
        for p in self.staged_predict_proba(X):
            yield self.classes_[np.asarray(p).argmax(axis=1)]


def _take(idx, classes):
    return classes[idx]


for _cls in (GradientBoostingClassifier, GradientBoostingRegressor):
    _cls.__doc__ = _cls.__doc__.replace("%(params)s", _PARAMS)
