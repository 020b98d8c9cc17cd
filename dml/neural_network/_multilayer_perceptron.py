"""MLPClassifier and MLPRegressor trained by partition-parallel mini-batch SGD.

They mirror scikit-learn's estimators of the same names (parameters, ``coefs_``/``intercepts_``
shapes, ``loss_curve_``, stopping rules) and are trained by the engine of :mod:`dml.optim`:
every block runs its mini-batch steps on its own rows and the blocks' parameters and optimiser
state are combined after each round (``local_steps``, streams: :mod:`dml.optim.engine`). With one
block this is plain sequential mini-batch SGD. Differences from scikit-learn, all deliberate:

* biases start at 0 (docs/neural_network.md; scikit-learn draws them like the weights) and
  ``init="he"`` is available; Glorot bounds are √(6/(fan_in + fan_out)) for every activation;
* the L2 term is scikit-learn's: ``alpha / (2 · batch_size) · Σ‖W‖²`` added to the mean batch
  loss (its gradient ``alpha · W / batch_size``);
* the early-stopping validation part is a seeded random subset of every block's rows (not
  stratified); validation scores are accuracy / R², as scikit-learn's;
* extras: ``dropout`` (inverted dropout on hidden units while training), ``dtype`` (float32 or
  float64 parameters and arithmetic), ``local_steps``, ``checkpoint_dir``, ``persist``,
  ``progress``, ``callbacks``; ``history_`` records every epoch.

Two classes train one logistic output unit; more classes a softmax layer. The regressor has one
output (y is a vector).

See docs/neural_network.md.
"""
from __future__ import annotations

import numbers
import warnings
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning

from dml._blocks import BlockSpec, seed_from
from dml._param_validation import Interval, Real, StrOptions, invalid_parameter
from dml._typing import Any, ArrayLike, Self
from dml.base import DaskEstimatorMixin, check_is_fitted, fit_context
from dml.linear_model._base import LABELS, check_classes, discover_classes, LabelStats
from dml.neural_network._problem import ACTIVATIONS, MLPProblem, forward
from dml.optim import checkpoint as ckpt
from dml.optim.data import hold, prepare
from dml.optim.engine import SGDConfig, final_params, initial_state, train
from dml.optim.optimizers import OptimizerState, make_optimizer
from dml.optim.params import Param, ParamTableMixin, not_fingerprinted, passthrough, table
from dml.optim.penalties import make_penalty
from dml.optim.schedules import make_schedule
from dml.optim.state import TrainState
from dml.optim.training import TrainConfig

__all__ = ["MLPClassifier", "MLPRegressor"]

_DTYPES = {"float64": np.float64, "float32": np.float32}


def _state_to_dict(state: TrainState) -> dict:
    return {"params": state.params, "t": int(state.opt.t), "slots": dict(state.opt.slots),
            "seed": int(state.seed), "epoch": int(state.epoch), "lr_scale": float(state.lr_scale)}


def _as_input(X, dtype):
    """A block in the network's dtype; sparse stays sparse (the first layer's product is)."""
    return X.astype(dtype, copy=False) if sp.issparse(X) else np.asarray(X, dtype=dtype)


def _state_from_dict(d: dict) -> TrainState:
    params = np.array(d["params"])
    return TrainState(params=params,
                      opt=OptimizerState(int(d["t"]), {k: np.array(v, dtype=params.dtype)
                                                       for k, v in d["slots"].items()}),
                      seed=int(d["seed"]), epoch=int(d["epoch"]), lr_scale=float(d["lr_scale"]))


def _proba_kernel(X, coefs, intercepts, activation, output, dtype):
    P = forward(_as_input(X, dtype), coefs, intercepts, activation, output)
    if output == "logistic":
        P = np.hstack([1 - P, P])
    return P.astype(np.float64, copy=False)


def _predict_kernel(X, coefs, intercepts, activation, output, dtype, classes):
    P = forward(_as_input(X, dtype), coefs, intercepts, activation, output)
    idx = (P[:, 0] > 0.5).astype(np.intp) if output == "logistic" else P.argmax(axis=1)
    return classes[idx]


def _regress_kernel(X, coefs, intercepts, activation, dtype):
    P = forward(_as_input(X, dtype), coefs, intercepts, activation, "identity")
    return P[:, 0].astype(np.float64, copy=False)


def _unit(closed):
    return [Interval(Real, 0, 1, closed=closed)]


class _BaseMLP(ParamTableMixin, DaskEstimatorMixin, BaseEstimator):
    # Sparse X: the first layer's products are sparse (docs/sparse.md).
    _block_spec = BlockSpec(accept_sparse=True)
    _params = table(
        "*", exclude=("penalty", "l1_ratio", "eta0", "optimizer", "average"),
        hidden_layer_sizes=Param((100,), "no_validation",
                                 "tuple of int\nThe number of units of each hidden layer.",
                                 positional=True),
        activation=Param("relu", [StrOptions(set(ACTIVATIONS))],
                         '{"relu", "tanh", "logistic", "identity"}\nThe hidden units\' '
                         "activation.", positional=True),
        solver=Param("adam", [StrOptions({"adam", "sgd"})],
                     '{"adam", "sgd"}\n"sgd" uses Nesterov momentum (``nesterovs_momentum``), '
                     "plain momentum, or none (``momentum=0``); lbfgs is not a mini-batch "
                     "solver."),
        alpha=Param(1e-4, [Interval(Real, 0, None, closed="left")],
                    "float\nL2 strength (scikit-learn's scaling: ``alpha / (2 · batch_size) · "
                    "Σ‖W‖²``)."),
        learning_rate_init=Param(0.001, [Interval(Real, 0, None, closed="neither")],
                                 "float\nThe initial step size (adam's constant one)."),
        nesterovs_momentum=Param(True, ["boolean"], "bool\nNesterov's momentum with "
                                 'solver="sgd" and ``momentum > 0``.'),
        beta_1=Param(0.9, _unit("left"), "float\nAdam's decay of the first moment."),
        beta_2=Param(0.999, _unit("left"), "float\nAdam's decay of the second moment."),
        epsilon=Param(1e-8, [Interval(Real, 0, None, closed="neither")],
                      "float\nAdam's numerical stability term."),
        dropout=Param(0.0, _unit("left"),
                      "float\nProbability of dropping each hidden unit during training "
                      "(inverted scaling; off at prediction)."),
        init=Param("glorot", [StrOptions({"glorot", "he"})],
                   '{"glorot", "he"}\nThe initial weights\' distribution.'),
        dtype=Param("float64", "no_validation",
                    '{"float64", "float32"}\nParameter and arithmetic precision.'),
        batch_size={"default": "auto",
                    "constraints": [Interval(Integral, 1, None, closed="left"),
                                    StrOptions({"auto"})],
                    "doc": 'int or "auto"\nRows per step on every block; "auto" is '
                           "min(200, n_samples)."},
        learning_rate={"default": "constant",
                       "constraints": [StrOptions({"constant", "invscaling", "adaptive"})],
                       "doc": '{"constant", "invscaling", "adaptive"}\nStep-size schedule of '
                              'solver="sgd" (adam keeps ``learning_rate_init``).'},
        power_t={}, max_iter={"default": 200}, tol={"default": 1e-4},
        verbose={"default": False},
        warm_start={"doc": "bool\nStart ``fit`` from the previous ``coefs_``/``intercepts_`` "
                           "(same layer shapes)."},
        early_stopping={"doc": "bool\nHold out ``validation_fraction`` of every block's rows, "
                               "stop when their accuracy / R² stops improving and keep the "
                               "best epoch's weights."},
        n_iter_no_change={"default": 10},
        # A network needs more sequential steps per epoch than a linear model to reach, in the
        # same epochs, what one sequential pass reaches (docs/partition_parallel_sgd.md).
        stream_steps={"default": 1024})

    # ---- hyper-parameters ----
    def _np_dtype(self):
        key = np.dtype(self.dtype).name if not isinstance(self.dtype, str) else self.dtype
        if key not in _DTYPES:
            raise ValueError(f"{type(self).__name__}: dtype must be 'float32' or 'float64', got "
                             f"{self.dtype!r}")
        return _DTYPES[key]

    def _hidden(self):
        sizes = self.hidden_layer_sizes
        if isinstance(sizes, numbers.Integral):
            sizes = (sizes,)
        try:
            sizes = tuple(sizes)
        except TypeError:
            sizes = None
        if sizes is None or not all(isinstance(s, numbers.Integral) and s >= 1 for s in sizes):
            raise ValueError(f"{type(self).__name__}: hidden_layer_sizes must be a tuple of "
                             f"positive integers, got {self.hidden_layer_sizes!r}")
        return tuple(int(s) for s in sizes)

    def _validate_param_relations(self):
        try:
            self._hidden()
        except ValueError:
            raise invalid_parameter(self, "hidden_layer_sizes",
                                    "a positive int or a tuple of positive ints") from None
        try:
            self._np_dtype()
        except (ValueError, TypeError):
            raise invalid_parameter(self, "dtype", "'float32' or 'float64'") from None

    def _batch(self, n):
        bs = self.batch_size
        if bs == "auto":
            return max(1, min(200, int(n)))
        return int(bs)

    def _stream_shape(self, n) -> tuple:
        """(batch_size, stream_steps) of the SGD fit on ``n`` rows: the task groups its held
        blocks are grouped in (:func:`dml.optim.data.hold`)."""
        return self._batch(n), passthrough(self, "sgd")["stream_steps"]

    def _sgd_config(self, problem, n) -> SGDConfig:
        bs = self._batch(n)
        if self.solver == "adam":
            opt = make_optimizer("adam", beta_1=self.beta_1, beta_2=self.beta_2,
                                 epsilon=self.epsilon)
            # scikit-learn's adam has a constant base step whatever learning_rate says.
            schedule = make_schedule("constant", eta0=self.learning_rate_init)
        else:
            name = "sgd" if self.momentum == 0 else ("nesterov" if self.nesterovs_momentum
                                                    else "momentum")
            opt = make_optimizer(name, momentum=self.momentum)
            schedule = make_schedule(self.learning_rate, eta0=self.learning_rate_init,
                                     power_t=self.power_t)
        # scikit-learn adds alpha/(2·batch) Σ‖W‖² to the mean batch loss.
        penalty = make_penalty("l2", float(self.alpha) / min(bs, max(int(n), 1)),
                               penalised=problem.penalised)
        return SGDConfig(optimizer=opt, schedule=schedule, penalty=penalty, batch_size=bs,
                         shuffle=bool(self.shuffle), **passthrough(self, "sgd"))

    def _train_config(self, partial) -> TrainConfig:
        early = bool(self.early_stopping) and not partial
        return TrainConfig(
            max_iter=self.max_iter, tol=None if partial else self.tol, early_stopping=early,
            restore_best=early, checkpoint_dir=None if partial else self.checkpoint_dir,
            callbacks=tuple(self.callbacks or ()), name=type(self).__name__,
            **passthrough(self, "train"))

    def _fingerprint(self, blocks, problem) -> dict:
        skip = not_fingerprinted(self)
        params = {k: repr(v) for k, v in sorted(self.get_params(deep=False).items())
                  if k not in skip}
        fp = {"estimator": type(self).__name__, "params": params,
              "lengths": [int(n) for n in blocks.lengths], "n_features": int(blocks.n_features)}
        if problem.classes is not None:
            fp["classes"] = [str(c) for c in problem.classes.tolist()]
        return fp

    # ---- training ----
    def _problem(self, n_features, classes=None):
        if classes is None:
            out, n_out = "identity", 1
        elif len(classes) == 2:
            out, n_out = "logistic", 1
        else:
            out, n_out = "softmax", len(classes)
        return MLPProblem([n_features, *self._hidden(), n_out], self.activation, out,
                          classes=classes, dropout=self.dropout, init=self.init,
                          dtype=self._np_dtype(), estimator=type(self).__name__)

    def _warm_params(self, problem):
        if not (self.warm_start and hasattr(self, "coefs_")):
            return None
        shapes = [tuple(np.shape(c)) for c in self.coefs_]
        if shapes != problem.shapes:
            return None
        return problem.pack(self.coefs_, self.intercepts_)

    def _run(self, blocks, problem, *, partial=False, init_params=None):
        cfg = self._sgd_config(problem, blocks.n_samples)
        previous = getattr(self, "_sgd_state", None)
        tc = self._train_config(partial)
        fingerprint = None
        if partial and previous is not None:
            state = _state_from_dict(previous)
            seed = state.seed
        else:
            seed = seed_from(self.random_state)
            if not partial:
                fingerprint = self._fingerprint(blocks, problem)
                if self.checkpoint_dir is not None:
                    resumed = ckpt.load(self.checkpoint_dir, fingerprint)
                    if resumed is not None:
                        seed = resumed.seed
            state = initial_state(problem, cfg, seed, params=init_params)
        fraction = self.validation_fraction if tc.early_stopping else None
        data = prepare(problem, blocks, seed=seed, validation_fraction=fraction,
                       persist=self.persist, config=cfg)
        state = train(problem, data, cfg, tc, state, fingerprint=fingerprint,
                      max_epochs=1 if partial else None)
        if not partial and state.stop_reason == "max_iter" and self.tol is not None:
            warnings.warn(f"{type(self).__name__}: maximum number of iterations ({self.max_iter}) "
                          "reached and the optimization hasn't converged yet.",
                          ConvergenceWarning)
        self._sgd_state = _state_to_dict(state)
        if partial:
            self.history_ = list(getattr(self, "history_", [])) + list(state.history[-1:])
            self.n_iter_ = int(getattr(self, "n_iter_", 0)) + 1
        else:
            self.history_ = list(state.history)
            self.n_iter_ = int(state.epoch)
        self.t_ = int(state.opt.t)
        self.loss_curve_ = [float(h["objective"]) for h in self.history_]
        self.loss_ = self.loss_curve_[-1] if self.loss_curve_ else None
        if tc.early_stopping:
            self.validation_scores_ = [float(h.get("validation_score", np.nan))
                                       for h in self.history_]
            self.best_validation_score_ = float(np.nanmax(self.validation_scores_))
        self._set_weights(problem, final_params(state, cfg))

    def _set_weights(self, problem, params):
        coefs, intercepts = problem.unpack(np.array(params, copy=True))
        self.coefs_ = [np.array(c) for c in coefs]
        self.intercepts_ = [np.array(b) for b in intercepts]
        self.n_layers_ = len(problem.sizes)
        self.n_outputs_ = int(problem.sizes[-1])
        self.out_activation_ = problem.output

    def _args(self):
        check_is_fitted(self, "coefs_")
        dtype = self.coefs_[0].dtype
        return self.coefs_, self.intercepts_, self.activation, self.out_activation_, dtype


class MLPClassifier(ClassifierMixin, _BaseMLP):
    """Multi-layer perceptron classifier trained by partition-parallel mini-batch SGD.

    Parameters are scikit-learn's ``MLPClassifier`` ones (``solver`` "adam" or "sgd"; lbfgs is
    not offered) plus the extras of the module docstring.

    Parameters
    ----------
    {SGD_PARAMETERS}

    Attributes
    ----------
    classes_ : ndarray
    coefs_ : list of ndarray, shape (fan_in, fan_out) per layer (scikit-learn's layout)
    intercepts_ : list of ndarray, shape (fan_out,) per layer
    n_layers_, n_outputs_, out_activation_ : as scikit-learn
    loss_, loss_curve_ : final and per-epoch training loss (with the L2 term)
    validation_scores_, best_validation_score_ : with ``early_stopping``
    n_iter_ : int
        Epochs run.
    t_ : int
        Mini-batch steps taken (the largest block's count per round).
    history_ : list of dict
        Per epoch: epoch, objective, validation_score, learning_rate, steps, seconds.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.neural_network import MLPClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> clf = MLPClassifier((16,), learning_rate_init=0.02, max_iter=60, batch_size=32,
    ...                     random_state=0).fit(X, y)
    >>> float(clf.score(X, y)) > 0.9
    True
    >>> [c.shape for c in clf.coefs_], clf.predict_proba(X[:2]).shape
    ([(2, 16), (16, 1)], (2, 2))
    """

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit on X, y (NumPy, pandas, Dask array or dataframe; y may be a column name).

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
            The fitted estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neural_network import MLPClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = MLPClassifier((4,), max_iter=5, tol=None, random_state=0)
        >>> clf.fit(X, y).classes_
        array([0, 1])
        """
        blocks = self._fit_blocks(X, y, sample_weight)
        # Held in the SGD fit's task groups (its stream layout needs only the lengths).
        n = None if blocks.known_lengths is None else int(np.sum(blocks.known_lengths))
        blocks = hold(blocks, self.persist, None if n is None else self._stream_shape(n),
                      reduce=LABELS)
        stats = discover_classes(blocks)
        check_classes(stats, type(self).__name__)
        problem = self._problem(blocks.n_features, stats.classes)
        init = self._warm_params(problem)
        self.classes_ = stats.classes
        self._sgd_state = None
        self._run(blocks, problem, init_params=init)
        return self

    @fit_context
    def partial_fit(self, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None,
                    sample_weight: ArrayLike | None = None) -> Self:
        """One epoch over (X, y), continuing from the previous call; pass ``classes`` first.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : array-like, Dask array/Series or str of shape (n_samples,)
            Targets; a string names a column of X's dataframe.
        classes : array-like of shape (n_classes,), default=None
            Every label the model will see; pass it on the first call (without it the labels of the
            first batch are taken as all the classes).
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each sample (a column name of X's dataframe is accepted).

        Returns
        -------
        self : object
            The updated estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neural_network import MLPClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = MLPClassifier((4,), max_iter=5, tol=None, random_state=0)
        >>> clf.partial_fit(X, y, classes=[0, 1]).partial_fit(X, y).classes_
        array([0, 1])
        """
        name = type(self).__name__
        first = getattr(self, "_sgd_state", None) is None
        if classes is not None:
            classes = np.unique(np.asarray(classes))
            if not first and not np.array_equal(classes, self.classes_):
                raise ValueError(f"{name}: `classes={list(classes)}` is not the same as on the "
                                 f"first partial_fit call ({list(self.classes_)})")
        blocks = self._fit_blocks(X, y, sample_weight, reset=first)
        if first:
            if classes is None:
                classes = discover_classes(blocks).classes
            check_classes(LabelStats(classes, np.ones(len(classes)), np.ones(len(classes))),
                          name)
            self.classes_ = classes
        problem = self._problem(blocks.n_features, self.classes_)
        self._run(blocks, problem, partial=True)
        return self

    def predict_proba(self, X: ArrayLike) -> Any:
        """Class probabilities, columns in the order of ``classes_``.

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
        >>> from dml.neural_network import MLPClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = MLPClassifier((4,), max_iter=5, tol=None, random_state=0)
        >>> clf.fit(X, y).predict_proba(X[:3]).shape
        (3, 2)
        """
        args = self._args()
        return self._blockwise(X, _proba_kernel, *args, dtype=np.float64,
                               tail_shape=(len(self.classes_),))

    def predict_log_proba(self, X: ArrayLike) -> Any:
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        log_proba : ndarray or dask.array.Array of shape (n_samples, n_classes)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neural_network import MLPClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = MLPClassifier((4,), max_iter=5, tol=None, random_state=0)
        >>> clf.fit(X, y).predict_log_proba(X[:3]).shape
        (3, 2)
        """
        p = self.predict_proba(X)
        with np.errstate(divide="ignore"):
            return np.log(p)

    def predict(self, X: ArrayLike) -> Any:
        """The most probable class.

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
        >>> from dml.neural_network import MLPClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = MLPClassifier((4,), max_iter=5, tol=None, random_state=0)
        >>> clf.fit(X, y).predict(np.array([[3.0, 0.0], [-3.0, 0.0]]))
        array([1, 0])
        """
        args = self._args()
        return self._blockwise(X, _predict_kernel, *args, self.classes_,
                               dtype=self.classes_.dtype)


class MLPRegressor(RegressorMixin, _BaseMLP):
    """Multi-layer perceptron regressor (identity output, squared loss ½(f − y)²).

    The early-stopping validation score is R².

    Parameters
    ----------
    {SGD_PARAMETERS}

    Attributes
    ----------
    coefs_, intercepts_, n_layers_, n_outputs_, out_activation_, loss_, loss_curve_, \
validation_scores_, best_validation_score_, n_iter_, t_, history_
        As :class:`MLPClassifier`.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.neural_network import MLPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, size=(400, 1)); y = np.sin(X[:, 0])
    >>> reg = MLPRegressor((32,), activation="tanh", learning_rate_init=0.02, batch_size=32,
    ...                    max_iter=60, random_state=0).fit(X, y)
    >>> float(reg.score(X, y)) > 0.95
    True
    """

    _block_spec = BlockSpec(y_numeric=True, accept_sparse=True)

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit on X, y (NumPy, pandas, Dask array or dataframe; y may be a column name).

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
            The fitted estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neural_network import MLPRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 2)); y = X[:, 0] - X[:, 1]
        >>> reg = MLPRegressor((4,), max_iter=5, tol=None, random_state=0)
        >>> [c.shape for c in reg.fit(X, y).coefs_]
        [(2, 4), (4, 1)]
        """
        blocks = self._fit_blocks(X, y, sample_weight)
        problem = self._problem(blocks.n_features)
        init = self._warm_params(problem)
        self._sgd_state = None
        self._run(blocks, problem, init_params=init)
        return self

    @fit_context
    def partial_fit(self, X: ArrayLike, y: ArrayLike,
                    sample_weight: ArrayLike | None = None) -> Self:
        """One epoch over (X, y), continuing from the previous call.

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
        >>> from dml.neural_network import MLPRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 2)); y = X[:, 0] - X[:, 1]
        >>> reg = MLPRegressor((4,), max_iter=5, tol=None, random_state=0)
        >>> reg.partial_fit(X, y).partial_fit(X, y).n_features_in_
        2
        """
        first = getattr(self, "_sgd_state", None) is None
        blocks = self._fit_blocks(X, y, sample_weight, reset=first)
        problem = self._problem(blocks.n_features)
        self._run(blocks, problem, partial=True)
        return self

    def predict(self, X: ArrayLike) -> Any:
        """The network's output.

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
        >>> from dml.neural_network import MLPRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 2)); y = X[:, 0] - X[:, 1]
        >>> reg = MLPRegressor((4,), max_iter=5, tol=None, random_state=0)
        >>> reg.fit(X, y).predict(X[:3]).shape
        (3,)
        """
        coefs, intercepts, activation, _, dtype = self._args()
        return self._blockwise(X, _regress_kernel, coefs, intercepts, activation, dtype,
                               dtype=np.float64)
