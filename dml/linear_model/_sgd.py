"""SGD-trained linear models: SGDClassifier, SGDRegressor, Perceptron (SPEC §2).

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
from dml.base import DaskEstimatorMixin
from dml.linear_model._base import (LabelStats, LinearClassifierMixin, LinearRegressorMixin,
                                    SGDMixin, check_classes, check_weights,
                                    compute_class_weight, discover_classes)
from dml.linear_model._problem import LinearProblem
from dml.optim.losses import get_loss

__all__ = ["SGDClassifier", "SGDRegressor", "Perceptron"]

CLASSIFICATION_LOSSES = ("hinge", "log_loss", "modified_huber", "squared_hinge", "perceptron",
                         "squared_error", "huber", "epsilon_insensitive",
                         "squared_epsilon_insensitive")
REGRESSION_LOSSES = ("squared_error", "huber", "epsilon_insensitive",
                     "squared_epsilon_insensitive")


class _SGDClassifierBase(SGDMixin, LinearClassifierMixin, DaskEstimatorMixin, ClassifierMixin,
                         BaseEstimator):
    _STACKABLE = ("alpha", "l1_ratio", "eta0", "power_t")

    def _loss(self):
        if self.loss not in CLASSIFICATION_LOSSES:
            raise ValueError(f"{type(self).__name__}: loss must be one of "
                             f"{list(CLASSIFICATION_LOSSES)}, got {self.loss!r}")
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

    def fit(self, X, y, coef_init=None, intercept_init=None, sample_weight=None):
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
        """
        blocks, problem = self._fit_setup(X, y, sample_weight)
        init = self._init_params(problem, coef_init, intercept_init)
        params = self._run_sgd(blocks, problem, problem.loss, init_params=init)
        self._set_coef(problem, params)
        return self

    def _fit_setup(self, X, y, sample_weight):
        """Validate the data, find the classes and build the problem (``fit`` before training)."""
        blocks = self._fit_blocks(X, y, sample_weight)
        stats = discover_classes(blocks)
        check_classes(stats, type(self).__name__)
        cw = compute_class_weight(self.class_weight, stats.classes, stats.counts,
                                  type(self).__name__)
        problem = self._problem(blocks.n_features, stats.classes, cw)
        self.classes_ = stats.classes
        self._sgd_state = None
        return blocks, problem

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass of SGD over (X, y), continuing from the previous call.

        ``classes`` lists every label the model will see; pass it on the first call (without
        it the labels of the first batch are taken as all the classes, and a later call with a
        new label fails).
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
"squared_error", "huber", "epsilon_insensitive", "squared_epsilon_insensitive"}, default "hinge"
    penalty : {"l2", "l1", "elasticnet"} or None, default "l2"
    alpha : float, default 1e-4
        Penalty strength; also sets the ``optimal`` step size 1 / (alpha (t0 + t)).
    l1_ratio : float, default 0.15
        Elastic-net mixing ρ (penalty ρ‖w‖₁ + (1 − ρ)/2 ‖w‖²).
    fit_intercept : bool, default True
        The intercept is never penalised.
    max_iter : int, default 1000
        Maximum number of epochs.
    tol : float or None, default 1e-3
        Stop when the epoch objective (or the validation score with ``early_stopping``) has not
        improved by ``tol`` for ``n_iter_no_change`` epochs.
    shuffle : bool, default True
        Visit every block's rows in a new seeded order each epoch.
    verbose : int, default 0
        Log a line per epoch on the ``dml.optim`` logger and show a progress line on stderr.
    epsilon : float, default 0.1
        For the huber and epsilon-insensitive losses.
    random_state : int, RandomState, Generator or None
    learning_rate : {"optimal", "constant", "invscaling", "adaptive"}, default "optimal"
    eta0 : float, default 0.01
    power_t : float, default 0.5
    early_stopping : bool, default False
        Hold out ``validation_fraction`` of every block's rows and stop on their accuracy.
    validation_fraction : float, default 0.1
    n_iter_no_change : int, default 5
    class_weight : dict, "balanced" or None
    warm_start : bool, default False
        Start from the previous fit's coefficients (the optimiser state restarts).
    average : bool or int, default False
        Return the average of the iterates (after step ``average`` when an int).
    batch_size : int, default 32
        Rows per mini-batch step.
    local_steps : int, "epoch" or None, default None
        Mini-batch steps every stream takes between combinations of the streams; None: rounds
        of about 256 steps of all streams together (2,048 with the ``optimal`` schedule);
        "epoch": one round per epoch (each stream a full local epoch; the fewest passes when
        the data is read from storage on every pass).
    stream_steps : int or None, default 128
        Least mini-batch steps per epoch of one stream: consecutive blocks are walked in
        sequence by one model until it has this many steps, so a model's progress per epoch
        does not shrink as the data is cut into more partitions (docs/partition_parallel_sgd.md).
        None: every block is a stream (plain local SGD).
    combine : {"auto", "sum", "average"}, default "auto"
        How the streams' updates are combined after a round: "sum" adds them (as one sequential
        pass would make them), "average" averages the streams' parameters; "auto": "average"
        for ``learning_rate="optimal"``, "sum" otherwise.
    optimizer : {"sgd", "momentum", "nesterov", "adam"}, default "sgd"
    momentum : float, default 0.9
    checkpoint_dir : str or None
        Write the training state there every ``checkpoint_every`` epochs; a fit started again
        with the same directory resumes from it and ends with the same model.
    checkpoint_every : int, default 1
    persist : {"auto", True, False}, default "auto"
        Keep the prepared blocks in worker memory ("auto": when they take at most half of it).
    progress : None, False, "text", "notebook", callable or object
        Progress display (see :mod:`dml.optim.progress`); "notebook": an HTML bar in Jupyter.
    callbacks : list of callables, optional
        ``callback(state, record)`` after every epoch; returning True stops training.

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

    def __init__(self, loss="hinge", *, penalty="l2", alpha=1e-4, l1_ratio=0.15,
                 fit_intercept=True, max_iter=1000, tol=1e-3, shuffle=True, verbose=0,
                 epsilon=0.1, random_state=None, learning_rate="optimal", eta0=0.01,
                 power_t=0.5, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=5, class_weight=None, warm_start=False, average=False,
                 batch_size=32, local_steps=None,
                 stream_steps=128, combine="auto", optimizer="sgd", momentum=0.9,
                 checkpoint_dir=None, checkpoint_every=1, persist="auto", progress=None,
                 callbacks=None):
        self.loss = loss
        self.penalty = penalty
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.shuffle = shuffle
        self.verbose = verbose
        self.epsilon = epsilon
        self.random_state = random_state
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.power_t = power_t
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.average = average
        self.batch_size = batch_size
        self.local_steps = local_steps
        self.stream_steps = stream_steps
        self.combine = combine
        self.optimizer = optimizer
        self.momentum = momentum
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.persist = persist
        self.progress = progress
        self.callbacks = callbacks


class Perceptron(_SGDClassifierBase):
    """The perceptron: SGD on max(0, −y f) with a constant step ``eta0`` and no penalty.

    ``Perceptron(batch_size=1, shuffle=False)`` on one block makes scikit-learn's
    ``Perceptron(shuffle=False)`` updates. Parameters as :class:`SGDClassifier`.

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

    def __init__(self, *, penalty=None, alpha=1e-4, l1_ratio=0.15, fit_intercept=True,
                 max_iter=1000, tol=1e-3, shuffle=True, verbose=0, eta0=1.0, random_state=0,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=5,
                 class_weight=None, warm_start=False, batch_size=32, local_steps=None,
                 stream_steps=128, combine="auto",
                 optimizer="sgd", momentum=0.9, checkpoint_dir=None, checkpoint_every=1,
                 persist="auto", progress=None, callbacks=None):
        self.penalty = penalty
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.shuffle = shuffle
        self.verbose = verbose
        self.eta0 = eta0
        self.random_state = random_state
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.batch_size = batch_size
        self.local_steps = local_steps
        self.stream_steps = stream_steps
        self.combine = combine
        self.optimizer = optimizer
        self.momentum = momentum
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.persist = persist
        self.progress = progress
        self.callbacks = callbacks


class SGDRegressor(SGDMixin, LinearRegressorMixin, DaskEstimatorMixin, RegressorMixin,
                   BaseEstimator):
    """Linear regression trained by partition-parallel mini-batch SGD.

    Objective ``(1/n) Σ wᵢ L(yᵢ, x·w + b) + alpha R(w)`` with L one of squared_error, huber,
    epsilon_insensitive, squared_epsilon_insensitive. Parameters as :class:`SGDClassifier`
    (scikit-learn's regressor defaults: ``learning_rate="invscaling"``, ``power_t=0.25``); the
    validation score of ``early_stopping`` is R².

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

    _block_spec = BlockSpec(y_numeric=True)
    _STACKABLE = ("alpha", "l1_ratio", "eta0", "power_t")

    def __init__(self, loss="squared_error", *, penalty="l2", alpha=1e-4, l1_ratio=0.15,
                 fit_intercept=True, max_iter=1000, tol=1e-3, shuffle=True, verbose=0,
                 epsilon=0.1, random_state=None, learning_rate="invscaling", eta0=0.01,
                 power_t=0.25, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=5, warm_start=False, average=False, batch_size=32,
                 local_steps=None,
                 stream_steps=128, combine="auto", optimizer="sgd", momentum=0.9, checkpoint_dir=None,
                 checkpoint_every=1, persist="auto", progress=None, callbacks=None):
        self.loss = loss
        self.penalty = penalty
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.shuffle = shuffle
        self.verbose = verbose
        self.epsilon = epsilon
        self.random_state = random_state
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.power_t = power_t
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.average = average
        self.batch_size = batch_size
        self.local_steps = local_steps
        self.stream_steps = stream_steps
        self.combine = combine
        self.optimizer = optimizer
        self.momentum = momentum
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.persist = persist
        self.progress = progress
        self.callbacks = callbacks

    def _problem(self, n_features):
        if self.loss not in REGRESSION_LOSSES:
            raise ValueError(f"SGDRegressor: loss must be one of {list(REGRESSION_LOSSES)}, got "
                             f"{self.loss!r}")
        return LinearProblem(n_features, get_loss(self.loss, epsilon=self.epsilon),
                             task="regression", fit_intercept=self.fit_intercept,
                             estimator=type(self).__name__)

    def _set_coef(self, problem, params):
        W, b = problem.unpack(params)
        self.coef_ = np.array(W[0], dtype=np.float64)
        self.intercept_ = np.array(b, dtype=np.float64)

    def fit(self, X, y, coef_init=None, intercept_init=None, sample_weight=None):
        """Fit by partition-parallel mini-batch SGD (see :meth:`SGDClassifier.fit`)."""
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

    def partial_fit(self, X, y, sample_weight=None):
        """One pass of SGD over (X, y), continuing from the previous call."""
        first = getattr(self, "_sgd_state", None) is None
        blocks = self._fit_blocks(X, y, sample_weight, reset=first)
        problem = self._problem(blocks.n_features)
        params = self._run_sgd(blocks, problem, problem.loss, partial=True)
        self._set_coef(problem, params)
        return self
