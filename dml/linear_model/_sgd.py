"""SGD-trained linear models: SGDClassifier, SGDRegressor, Perceptron (see docs/linear_models.md).

They mirror scikit-learn's estimators of the same names, trained by the partition-parallel
mini-batch engine of :mod:`dml.optim` instead of per-sample SGD. The differences, all deliberate:

* steps are mini-batch steps (``batch_size``, default 32: per-sample steps would spend the time
  in Python); the step counter ``t`` of the ``optimal`` / ``invscaling`` schedules counts
  mini-batches;
* every block trains on its own rows and the blocks' models are averaged once per round
  (``local_steps``; by default one round per epoch);
* the l1 part of a penalty is a proximal (soft-threshold) step, not scikit-learn's cumulative
  truncation;
* the early-stopping validation part is a seeded random subset of every block's rows (not
  stratified);
* extra options: ``optimizer`` (sgd, momentum, nesterov, adam), ``checkpoint_dir`` /
  ``checkpoint_every`` (resumable fits), ``persist``, ``progress``, ``callbacks``.

With one block, ``batch_size=1`` and ``shuffle=False`` the updates are those of scikit-learn's
plain SGD (e.g. ``Perceptron``).
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if

from dml._blocks import BlockSpec
from dml._param_validation import Interval, Real, StrOptions
from dml._typing import ArrayLike, Self
from dml.base import DaskEstimatorMixin, fit_context
from dml.linear_model._base import (LABELS, LabelStats, LinearClassifierMixin,
                                    LinearRegressorMixin,
                                    SGDMixin, check_classes, check_weights,
                                    compute_class_weight, discover_classes)
from dml.linear_model._problem import LinearProblem
from dml.optim.data import hold
from dml.optim.losses import get_loss
from dml.optim.params import Param, table

__all__ = ["SGDClassifier", "SGDRegressor", "Perceptron"]

CLASSIFICATION_LOSSES = ("hinge", "log_loss", "modified_huber", "squared_hinge", "perceptron",
                         "squared_error", "huber", "epsilon_insensitive",
                         "squared_epsilon_insensitive")
REGRESSION_LOSSES = ("squared_error", "huber", "epsilon_insensitive",
                     "squared_epsilon_insensitive")

_FIT_INTERCEPT = Param(True, ["boolean"], "bool\nThe intercept is never penalised.")
_EPSILON = Param(0.1, [Interval(Real, 0, None, closed="left")],
                 "float\nFor the huber and epsilon-insensitive losses.")
_CLASS_WEIGHT = Param(None, [StrOptions({"balanced"}), dict, None],
                      'dict, "balanced" or None\nWeights of the classes ("balanced": '
                      "n / (K · count)).")


class _SGDClassifierBase(SGDMixin, LinearClassifierMixin, DaskEstimatorMixin, ClassifierMixin,
                         BaseEstimator):
    # Sparse steps cost O(nnz) (dml.optim.sparse_steps); docs/sparse.md.
    _block_spec = BlockSpec(accept_sparse=True)
    _stacked_fits = True

    def _loss(self):
        return get_loss(self.loss, epsilon=self.epsilon)

    def _problem(self, n_features, classes, class_weight):
        K = len(classes)
        return LinearProblem(n_features, self._loss(), task="binary" if K == 2 else "ovr",
                             n_outputs=1 if K == 2 else K, fit_intercept=self.fit_intercept,
                             classes=classes, class_weight=class_weight,
                             estimator=type(self).__name__)

    def _set_coef(self, problem, params):
        W, b = problem.unpack(params)
        self.coef_ = np.array(W, dtype=np.float64)
        self.intercept_ = np.array(b, dtype=np.float64)

    def _init_params(self, problem, coef_init, intercept_init):
        if coef_init is None and self.warm_start and hasattr(self, "coef_") \
                and self.coef_.shape == (problem.K, problem.d):
            coef_init, intercept_init = self.coef_, self.intercept_
        if coef_init is None:
            return None
        coef = np.asarray(coef_init, dtype=np.float64).reshape(problem.K, problem.d)
        return problem.pack(coef, intercept_init)

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, coef_init: ArrayLike | None = None,
            intercept_init: ArrayLike | None = None,
            sample_weight: ArrayLike | None = None) -> Self:
        """Fit by partition-parallel mini-batch SGD.

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame, shape (n_samples, n_features)
        y : array-like, dask array/Series or column name, shape (n_samples,)
        coef_init, intercept_init : ndarray, optional
            Starting point (otherwise zeros, or the previous fit's with ``warm_start``).
        sample_weight : array-like, dask array/Series or column name, optional

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import SGDClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
        >>> clf = SGDClassifier(random_state=0).fit(X, y)
        >>> float((clf.predict(X) == y).mean()) > 0.95
        True
        """
        blocks, problem = self._fit_setup(X, y, sample_weight)
        init = self._init_params(problem, coef_init, intercept_init)
        params = self._run_sgd(blocks, problem, problem.loss, init_params=init)
        self._set_coef(problem, params)
        return self

    def _fit_setup(self, X, y, sample_weight):
        """Validate the data, find the classes and build the problem (``fit`` before training)."""
        blocks = self._fit_blocks(X, y, sample_weight)
        # The classes are counted while the blocks are held, and each stream's rows joined
        # there (the linear problem's preparation gives X back as it is): the preparation
        # then joins only the encoded labels. Not with a validation split, whose training
        # rows are taken out of every block.
        blocks = hold(blocks, self.persist, self._stream_shape(), reduce=LABELS,
                      join_rows=not self.early_stopping)
        stats = discover_classes(blocks)
        check_classes(stats, type(self).__name__)
        cw = compute_class_weight(self.class_weight, stats.classes, stats.counts,
                                  type(self).__name__)
        problem = self._problem(blocks.n_features, stats.classes, cw)
        self.classes_ = stats.classes
        self._sgd_state = None
        return blocks, problem

    @fit_context
    def partial_fit(self, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None,
                    sample_weight: ArrayLike | None = None) -> Self:
        """One pass of SGD over (X, y), continuing from the previous call.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : array-like, Dask array/Series or str of shape (n_samples,)
            Targets; a string names a column of X's dataframe.
        classes : array-like of shape (n_classes,), default=None
            Every label the model will see; pass it on the first call (without it the labels of the
            first batch are taken as all the classes, and a later call with a new label fails).
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each sample (a column name of X's dataframe is accepted).

        Returns
        -------
        self : object
            The updated estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import SGDClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
        >>> clf = SGDClassifier(random_state=0).partial_fit(X[:100], y[:100], classes=[0, 1])
        >>> clf.partial_fit(X[100:], y[100:]).classes_
        array([0, 1])
        """
        name = type(self).__name__
        first = not hasattr(self, "classes_") or getattr(self, "_sgd_state", None) is None
        if classes is not None:
            classes = np.unique(np.asarray(classes))
            if not first and not np.array_equal(classes, self.classes_):
                raise ValueError(f"{name}: `classes={list(classes)}` is not the same as on the "
                                 f"first partial_fit call ({list(self.classes_)})")
        blocks = self._fit_blocks(X, y, sample_weight, reset=first)
        if first:
            if isinstance(self.class_weight, str):
                raise ValueError(f"{name}: class_weight={self.class_weight!r} is not supported "
                                 "by partial_fit (the class frequencies of the whole data are "
                                 "unknown); pass a dict or use fit")
            if classes is None:
                classes = discover_classes(blocks).classes
            check_classes(LabelStats(classes, np.ones(len(classes)), np.ones(len(classes))),
                          name)
            self.classes_ = classes
        cw = compute_class_weight(self.class_weight, self.classes_,
                                  np.ones(len(self.classes_)), name)
        problem = self._problem(blocks.n_features, self.classes_, cw)
        params = self._run_sgd(blocks, problem, problem.loss, partial=True)
        self._set_coef(problem, params)
        return self

    def _has_proba(self):
        if self.loss not in ("log_loss", "modified_huber"):
            raise AttributeError(f"probability estimates are not available for "
                                 f"loss={self.loss!r}; use loss='log_loss' or 'modified_huber'")
        return True

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities (log_loss: logistic; modified_huber: (clip(f, −1, 1) + 1) / 2);
        one-vs-rest columns are normalised to sum to one, as in scikit-learn."""
        return self._predict_proba(X, "log" if self.loss == "log_loss" else "modified_huber")

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        return self._predict_log_proba(X, "log" if self.loss == "log_loss" else "modified_huber")


class SGDClassifier(_SGDClassifierBase):
    """Linear classifier trained by partition-parallel mini-batch SGD.

    Binary problems train one weight vector; K > 2 classes train K one-vs-rest vectors together
    (W is K × d, one pass over the data per epoch for all of them). See the module docstring for
    how this differs from scikit-learn's per-sample SGD.

    Parameters
    ----------
    loss : {"hinge", "log_loss", "modified_huber", "squared_hinge", "perceptron", \
"squared_error", "huber", "epsilon_insensitive", "squared_epsilon_insensitive"}, default="hinge"
        The loss; "log_loss" and "modified_huber" give probabilities.
    {SGD_PARAMETERS}

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray
    n_iter_ : int
        Epochs run.
    t_ : int
        Mini-batch steps taken.
    history_ : list of dict
        Per epoch: epoch, objective, validation_score (with early stopping), learning_rate,
        steps, seconds.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.linear_model import SGDClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> clf = SGDClassifier(loss="log_loss", random_state=0).fit(X, y)
    >>> float((clf.predict(X) == y).mean()) > 0.95
    True
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    """

    _params = table("*", loss=Param("hinge", [StrOptions(set(CLASSIFICATION_LOSSES))],
                                    positional=True),
                    fit_intercept=_FIT_INTERCEPT, epsilon=_EPSILON, class_weight=_CLASS_WEIGHT)


class Perceptron(_SGDClassifierBase):
    """The perceptron: SGD on max(0, −y f) with a constant step ``eta0`` and no penalty.

    ``Perceptron(batch_size=1, shuffle=False)`` on one block makes scikit-learn's
    ``Perceptron(shuffle=False)`` updates: :class:`SGDClassifier` with ``loss="perceptron"``,
    ``learning_rate="constant"`` and no averaging.

    Parameters
    ----------
    {SGD_PARAMETERS}

    Attributes
    ----------
    coef_, intercept_, classes_, n_iter_, t_, history_ : as :class:`SGDClassifier`

    Examples
    --------
    >>> import numpy as np
    >>> from dml.linear_model import Perceptron
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 3.0], [3.0, 1.0]]); y = [0, 0, 1, 1]
    >>> Perceptron(batch_size=1).fit(X, y).predict(X)
    array([0, 0, 1, 1])
    """

    loss = "perceptron"
    learning_rate = "constant"
    power_t = 0.5
    epsilon = 0.1
    average = False

    _params = table("*", exclude=("learning_rate", "power_t", "average"),
                    penalty={"default": None}, eta0={"default": 1.0},
                    random_state={"default": 0}, fit_intercept=_FIT_INTERCEPT,
                    class_weight=_CLASS_WEIGHT)


class SGDRegressor(SGDMixin, LinearRegressorMixin, DaskEstimatorMixin, RegressorMixin,
                   BaseEstimator):
    """Linear regression trained by partition-parallel mini-batch SGD.

    Objective ``(1/n) Σ wᵢ L(yᵢ, x·w + b) + alpha R(w)`` with L one of squared_error, huber,
    epsilon_insensitive, squared_epsilon_insensitive; the validation score of
    ``early_stopping`` is R². scikit-learn's regressor defaults: ``learning_rate="invscaling"``,
    ``power_t=0.25``.

    Parameters
    ----------
    loss : {"squared_error", "huber", "epsilon_insensitive", "squared_epsilon_insensitive"}, \
default="squared_error"
        The loss.
    {SGD_PARAMETERS}

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : ndarray of shape (1,)
    n_iter_, t_, history_ : as :class:`SGDClassifier`

    Examples
    --------
    >>> import numpy as np
    >>> from dml.linear_model import SGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3)); y = X @ [1.0, -2.0, 0.5] + 3.0
    >>> reg = SGDRegressor(learning_rate="constant", eta0=0.05, random_state=0).fit(X, y)
    >>> np.round(reg.coef_, 1), np.round(reg.intercept_, 1)
    (array([ 1. , -2. ,  0.5]), array([3.]))
    """

    _block_spec = BlockSpec(y_numeric=True, accept_sparse=True)
    _stacked_fits = True
    _params = table("*", loss=Param("squared_error", [StrOptions(set(REGRESSION_LOSSES))],
                                    positional=True),
                    learning_rate={"default": "invscaling"}, power_t={"default": 0.25},
                    fit_intercept=_FIT_INTERCEPT, epsilon=_EPSILON)

    def _problem(self, n_features):
        return LinearProblem(n_features, get_loss(self.loss, epsilon=self.epsilon),
                             task="regression", fit_intercept=self.fit_intercept,
                             estimator=type(self).__name__)

    def _set_coef(self, problem, params):
        W, b = problem.unpack(params)
        self.coef_ = np.array(W[0], dtype=np.float64)
        self.intercept_ = np.array(b, dtype=np.float64)

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, coef_init: ArrayLike | None = None,
            intercept_init: ArrayLike | None = None,
            sample_weight: ArrayLike | None = None) -> Self:
        """Fit by partition-parallel mini-batch SGD (see :meth:`SGDClassifier.fit`).

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : array-like, Dask array/Series or str of shape (n_samples,)
            Targets; a string names a column of X's dataframe.
        coef_init : ndarray of shape (n_features,), default=None
            Starting coefficients (otherwise zeros, or the previous fit's with ``warm_start``).
        intercept_init : ndarray of shape (1,), default=None
            Starting intercept.
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each sample (a column name of X's dataframe is accepted).

        Returns
        -------
        self : object
            The fitted estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import SGDRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(500, 2)); y = X @ [1.0, -2.0] + 3.0
        >>> reg = SGDRegressor(learning_rate="constant", eta0=0.05, random_state=0)
        >>> np.round(reg.fit(X, y).coef_, 1)
        array([ 1., -2.])
        """
        blocks, problem = self._fit_setup(X, y, sample_weight)
        if coef_init is None and self.warm_start and hasattr(self, "coef_") \
                and self.coef_.shape == (problem.d,):
            coef_init, intercept_init = self.coef_, self.intercept_
        init = None if coef_init is None else problem.pack(np.asarray(coef_init, float),
                                                           intercept_init)
        params = self._run_sgd(blocks, problem, problem.loss, init_params=init)
        self._set_coef(problem, params)
        return self

    def _fit_setup(self, X, y, sample_weight):
        """Validate the data and build the problem (``fit`` before training)."""
        blocks = self._fit_blocks(X, y, sample_weight)
        check_weights(blocks, type(self).__name__)
        problem = self._problem(blocks.n_features)
        self._sgd_state = None
        return blocks, problem

    @fit_context
    def partial_fit(self, X: ArrayLike, y: ArrayLike,
                    sample_weight: ArrayLike | None = None) -> Self:
        """One pass of SGD over (X, y), continuing from the previous call.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : array-like, Dask array/Series or str of shape (n_samples,)
            Targets; a string names a column of X's dataframe.
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each sample (a column name of X's dataframe is accepted).

        Returns
        -------
        self : object
            The updated estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import SGDRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(500, 2)); y = X @ [1.0, -2.0] + 3.0
        >>> reg = SGDRegressor(learning_rate="constant", eta0=0.05, random_state=0)
        >>> reg.partial_fit(X, y).partial_fit(X, y).coef_.shape
        (2,)
        """
        first = getattr(self, "_sgd_state", None) is None
        blocks = self._fit_blocks(X, y, sample_weight, reset=first)
        problem = self._problem(blocks.n_features)
        params = self._run_sgd(blocks, problem, problem.loss, partial=True)
        self._set_coef(problem, params)
        return self
