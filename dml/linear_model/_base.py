"""Machinery shared by the linear estimators: labels, class weights, prediction, the SGD driver.

* :func:`discover_classes`: one pass that collects the labels of y (merged by value across
  blocks), their counts and weighted counts, before any training;
* :func:`compute_class_weight`: ``None``, ``"balanced"`` (n / (K · count)) or a dict;
* :class:`LinearClassifierMixin` / :class:`LinearRegressorMixin`: ``decision_function``,
  ``predict``, ``predict_proba`` computed blockwise (NumPy in → NumPy out, Dask in → lazy Dask);
* :class:`SGDMixin`: turns the shared SGD hyper-parameters into :mod:`dml.optim` configurations
  and runs the engine (fit, warm start, partial_fit, checkpoints, history).
"""
from __future__ import annotations

import warnings

import numpy as np

from dml._blocks import Blocks, is_dask, is_sparse, is_sparse_dask, seed_from
from dml._param_validation import invalid_parameter, validate
from dml._typing import Any, ArrayLike
from dml.base import check_is_fitted, check_weights_not_all_zero
from dml.linear_model._kernels import (_label_kernel, _labels_present, _merge_labels,
                                       _predict_kernel, _proba_kernel, _weight_sum_kernel)
from dml.linear_model._problem import decision_kernel
from dml.optim import checkpoint as ckpt
from dml.optim.data import prepare
from dml.optim.engine import SGDConfig, final_params, initial_state, train
from dml.optim.optimizers import OptimizerState, make_optimizer
from dml.optim.params import SGD, ParamTableMixin, keeps_alone, not_fingerprinted, passthrough
from dml.optim.penalties import make_penalty
from dml.optim.schedules import make_schedule
from dml.optim.state import TrainState
from dml.optim.training import TrainConfig

__all__ = ["discover_classes", "compute_class_weight", "LinearClassifierMixin",
           "LinearRegressorMixin", "SGDMixin", "LabelStats", "NotStackable"]


# ---------------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------------

def check_weights(blocks: Blocks, estimator: str) -> None:
    """One pass when sample weights were given: refuse all-zero weights."""
    if blocks.has_weight:
        check_weights_not_all_zero(blocks.map_reduce(_weight_sum_kernel), estimator)


class LabelStats:
    """Classes of y with their counts and weighted counts (from :func:`discover_classes`)."""

    def __init__(self, classes, counts, wsum):
        self.classes = classes
        self.counts = counts
        self.wsum = wsum

    @property
    def n_samples(self) -> int:
        return int(self.counts.sum())

    @property
    def weight_sum(self) -> float:
        return float(self.wsum.sum())


#: The classes pass's reduction (:func:`discover_classes`): given to ``hold(reduce=...)``, the
#: groups' tasks make it while they hold the blocks, and the pass then reads what they made.
LABELS = (_label_kernel, _merge_labels)


def discover_classes(blocks: Blocks) -> LabelStats:
    """One pass over y: the sorted labels, how often each occurs, their summed sample weights
    (made by the tasks holding the blocks when they were held with ``reduce=LABELS``)."""
    out = blocks.map_reduce(_label_kernel, combine=_merge_labels)
    return LabelStats(out["labels"], out["counts"], out["wsum"])


def check_classes(stats: LabelStats, estimator: str) -> None:
    classes = stats.classes
    if classes.dtype.kind == "f" and len(classes) and not np.all(classes == np.round(classes)):
        raise ValueError(f"{estimator}: Unknown label type: 'continuous'. y holds non-integer "
                         "numbers, like a regression target; a classifier needs class labels "
                         "(integers or strings). Use a regressor, or bin y first.")
    if len(stats.wsum):
        check_weights_not_all_zero(stats.weight_sum, estimator)
    if len(stats.classes) < 2:
        label = stats.classes[0].item() if len(stats.classes) and hasattr(
            stats.classes[0], "item") else (stats.classes[0] if len(stats.classes) else None)
        found = "no labels" if len(stats.classes) == 0 else f"only one class: {label!r}"
        raise ValueError(f"{estimator}: the training data must contain samples of at least 2 "
                         f"classes, but it contains {found}")


def compute_class_weight(class_weight, classes, counts, estimator: str = "estimator"):
    """Per-class weights in the order of ``classes`` (None when all are 1).

    ``"balanced"``: ``Σ counts / (K · counts_k)``. scikit-learn passes the weighted counts (sum
    of sample weights per class) for LogisticRegression and LinearSVC and the plain counts for
    the SGD estimators; callers do the same.
    """
    if class_weight is None:
        return None
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"{estimator}: class_weight must be None, 'balanced' or a dict, got "
                             f"{class_weight!r}")
        counts = np.asarray(counts, dtype=np.float64)
        return counts.sum() / (len(classes) * np.where(counts > 0, counts, 1.0))
    if isinstance(class_weight, dict):
        unknown = [k for k in class_weight if not np.any(np.asarray(classes == k))]
        if unknown:
            raise ValueError(f"{estimator}: class_weight has labels {unknown} that are not "
                             f"classes of y {list(classes)}")
        return np.array([float(class_weight.get(c, 1.0)) for c in classes.tolist()])
    raise ValueError(f"{estimator}: class_weight must be None, 'balanced' or a dict, got "
                     f"{type(class_weight).__name__}")


# ---------------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------------

class LinearClassifierMixin:
    """decision_function / predict / predict_proba for ``coef_`` (K, d) and ``intercept_`` (K,)."""

    def decision_function(self, X: ArrayLike) -> Any:
        """Signed distances to the hyperplanes: ``X @ coef_.T + intercept_``.

        One column per class, or one vector for two classes (positive: ``classes_[1]``).

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        scores : ndarray or dask.array.Array of shape (n_samples,) or (n_samples, n_classes)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import LogisticRegression
        >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0]]); y = np.array([0, 0, 1, 1])
        >>> clf = LogisticRegression().fit(X, y)
        >>> clf.decision_function(np.array([[-1.5], [1.5]])).round(3)
        array([-1.51,  1.51])
        """
        check_is_fitted(self, "coef_")
        K = self.coef_.shape[0]
        return self._blockwise(X, decision_kernel, self.coef_, self.intercept_,
                               dtype=np.float64, tail_shape=() if K == 1 else (K,))

    def predict(self, X: ArrayLike) -> Any:
        """The class of largest decision value (of positive decision for two classes).

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
        >>> from dml.linear_model import LogisticRegression
        >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0]]); y = np.array([0, 0, 1, 1])
        >>> clf = LogisticRegression().fit(X, y)
        >>> clf.predict(np.array([[-1.5], [1.5]]))
        array([0, 1])
        """
        check_is_fitted(self, "coef_")
        return self._blockwise(X, _predict_kernel, self.coef_, self.intercept_, self.classes_,
                               dtype=self.classes_.dtype)

    def _predict_proba(self, X, kind=None):
        check_is_fitted(self, "coef_")
        if kind is None:
            kind = self._proba_kind()
        return self._blockwise(X, _proba_kernel, self.coef_, self.intercept_, kind,
                               dtype=np.float64, tail_shape=(len(self.classes_),))

    def _predict_log_proba(self, X, kind=None):
        p = self._predict_proba(X, kind)
        with np.errstate(divide="ignore"):
            return np.log(p)


class LinearRegressorMixin:
    def predict(self, X: ArrayLike) -> Any:
        """``X @ coef_ + intercept_``.

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
        >>> from dml.linear_model import LinearRegression
        >>> X = np.array([[1.0], [2.0], [3.0]]); y = 2 * X[:, 0] + 1
        >>> LinearRegression().fit(X, y).predict(np.array([[4.0]])).round(6)
        array([9.])
        """
        check_is_fitted(self, "coef_")
        coef = np.atleast_2d(self.coef_)
        return self._blockwise(X, decision_kernel, coef, np.atleast_1d(self.intercept_),
                               dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# The SGD driver
# ---------------------------------------------------------------------------------------------

def state_to_dict(state: TrainState) -> dict:
    """A :class:`TrainState` as plain arrays and numbers (saved with the model by ``dml.save``)."""
    return {"params": state.params, "t": int(state.opt.t), "slots": dict(state.opt.slots),
            "seed": int(state.seed), "epoch": int(state.epoch), "lr_scale": float(state.lr_scale)}


def state_from_dict(d: dict) -> TrainState:
    return TrainState(params=np.array(d["params"], dtype=np.float64),
                      opt=OptimizerState(int(d["t"]), {k: np.array(v) for k, v in
                                                       d["slots"].items()}),
                      seed=int(d["seed"]), epoch=int(d["epoch"]),
                      lr_scale=float(d["lr_scale"]))


class SGDMixin(ParamTableMixin):
    """Runs :mod:`dml.optim` from the estimator's SGD hyper-parameters.

    The estimator's ``_params`` table (:mod:`dml.optim.params`) declares them; those of
    :data:`~dml.optim.params.SGD` an estimator does not take (e.g. LogisticRegression's alpha,
    which comes from C) are given as ``overrides`` by its ``fit``.
    """

    def _validate_param_relations(self):
        # (Estimators with exact solvers use the SGD knobs with solver="sgd" only.)
        sgd = getattr(self, "solver", "sgd") == "sgd"
        if sgd and self.eta0 == 0 and self.learning_rate != "optimal":
            raise invalid_parameter(self, "eta0", "> 0 unless learning_rate='optimal' (the "
                                    "other schedules start from eta0)")

    def _hyper(self, overrides: dict | None) -> dict:
        """The SGD hyper-parameters, with estimator-specific values (e.g. alpha from C)."""
        h = {n: getattr(self, n) for n in SGD if n not in (overrides or {})}
        h.update(overrides or {})
        return h

    def _sgd_config(self, problem, loss, overrides=None) -> SGDConfig:
        h = self._hyper(overrides)
        penalty = make_penalty(h["penalty"], h["alpha"], h["l1_ratio"], problem.penalised)
        schedule = make_schedule(h["learning_rate"], eta0=h["eta0"], power_t=h["power_t"],
                                 alpha=h["alpha"], loss=loss)
        optimizer = make_optimizer(h["optimizer"], momentum=h["momentum"])
        average = h["average"]
        if average is True:
            average = 0
        elif average is False or average is None:
            average = None
        return SGDConfig(optimizer=optimizer, schedule=schedule, penalty=penalty,
                         batch_size=h["batch_size"], shuffle=bool(h["shuffle"]), average=average,
                         **passthrough(self, "sgd", h))

    def _stream_shape(self) -> tuple:
        """(batch_size, stream_steps) of this estimator's SGD fit: the task groups its held
        blocks are grouped in (:func:`dml.optim.data.hold`)."""
        h = self._hyper(None)
        return h["batch_size"], passthrough(self, "sgd", h)["stream_steps"]

    def _train_config(self, *, early_stopping=None) -> TrainConfig:
        early = self.early_stopping if early_stopping is None else early_stopping
        return TrainConfig(
            max_iter=self.max_iter, tol=self.tol, early_stopping=bool(early),
            checkpoint_dir=self.checkpoint_dir, callbacks=tuple(self.callbacks or ()),
            name=type(self).__name__, **passthrough(self, "train"))

    def _fingerprint(self, blocks: Blocks, problem) -> dict:
        skip = not_fingerprinted(self)
        params = {k: repr(v) for k, v in sorted(self.get_params(deep=False).items())
                  if k not in skip}
        fp = {"estimator": type(self).__name__, "params": params,
              "lengths": [int(n) for n in blocks.lengths], "n_features": int(blocks.n_features)}
        classes = getattr(problem, "classes", None)
        if classes is not None:
            fp["classes"] = [str(c) for c in classes.tolist()]
        return fp

    def _fit_seed(self, fingerprint) -> int:
        """The seed of this fit: the checkpoint's when resuming (so the data split matches)."""
        if self.checkpoint_dir is not None:
            resumed = ckpt.load(self.checkpoint_dir, fingerprint)
            if resumed is not None:
                return resumed.seed
        return seed_from(self.random_state)

    # ---- stacked fits: several candidates of a search trained in the same passes ----
    #: Whether fits can be stacked at all. False: estimators whose fit does more than one SGD
    #: run (solver choice, C → alpha).
    _stacked_fits: bool = False

    def _stackable(self) -> set:
        """The parameters in which stacked fits may differ (per-model scalars of a step)."""
        return {n for n, p in self._params.items() if p.stackable}

    def _stack_key(self):
        """Fits with equal keys can be trained together (:mod:`dml.optim.stacked`); None: alone.

        Per-fit features (the table's ``alone`` parameters: early stopping, checkpoints,
        callbacks, progress, verbose, warm start) and random states that are objects (their
        repr is not their state) keep a fit alone.
        """
        if (not self._stacked_fits or keeps_alone(self)
                or not isinstance(self.random_state, (int, np.integer, type(None)))):
            return None
        stackable = self._stackable()
        rest = tuple(sorted((k, repr(v)) for k, v in self.get_params(deep=False).items()
                            if k not in stackable))
        return (type(self).__qualname__, rest)

    @classmethod
    def _fit_stacked(cls, estimators, X, y, sample_weight=None, *, train_indices=None):
        """Fit estimators with equal :meth:`_stack_key` in shared passes over (X, y).

        ``estimators`` is a list (every model trains on all of X), or with ``train_indices``
        (one array of row indices per fold) a list per fold: model ``estimators[f][j]`` trains on
        the rows ``train_indices[f]``, as if fitted on ``take_rows(X, train_indices[f])``; a
        fold given as None trains on X itself (as ``fit(X, y)``).

        Returns the same shape: per estimator the fitted estimator, or the exception its own
        ``fit`` would have raised (a bad hyper-parameter, divergence). An error of the data
        itself is raised; :class:`NotStackable` means the folds need separate problems (a fold
        without some class, or class weights from fold counts): fit per fold instead. Each
        model equals its own ``fit`` up to rounding (:mod:`dml.optim.stacked`).
        """
        from dml.optim.stacked import RowGroups, StreamMismatch, train_stacked

        grid = [list(estimators)] if train_indices is None else [list(r) for r in estimators]
        lead = grid[0][0]
        if train_indices is not None and isinstance(getattr(lead, "class_weight", None), str):
            raise NotStackable("class weights computed from each fold's class counts")
        if train_indices is not None and not is_dask(X):
            # A fold of local data is blocked anew by its own fit: no shared blocks.
            raise NotStackable("folds of local data; pass Dask collections")
        if is_sparse(X) or is_sparse_dask(X):
            # The stacked kernel gathers dense batch rows; sparse fits take O(nnz) steps alone.
            if train_indices is not None:
                raise NotStackable("sparse X")
            return [_fit_or_error(est, X, y, sample_weight) for est in grid[0]]
        # The parameters the fits share must be valid for the shared set-up; the stackable ones
        # are checked per fit below (a bad one fails its candidate only).
        stackable = lead._stackable()
        validate({k: c for k, c in lead._parameter_constraints.items() if k not in stackable},
                 lead.get_params(deep=False), cls.__name__)
        blocks, problem = lead._fit_setup(X, y, sample_weight)
        if blocks.n_samples == 0:
            raise ValueError(f"{cls.__name__}: the training data has 0 samples; at least one is "
                             "required")
        groups = None
        if train_indices is not None:
            import dask.array as da

            groups = RowGroups.from_indices(blocks.lengths, train_indices, persist=_persister(),
                                            drop_empty=isinstance(X, da.Array))
            classes = getattr(problem, "classes", None)
            if classes is not None and not _every_group_has(blocks, groups, classes):
                raise NotStackable("a fold's training rows lack one of the classes")
        fitted = [a for a in ("n_features_in_", "feature_names_in_", "classes_")
                  if hasattr(lead, a)]
        out = [[None] * len(row) for row in grid]
        configs, tcs, cells = [], [], []
        for g, row in enumerate(grid):
            configs.append([]), tcs.append([]), cells.append([])
            for j, est in enumerate(row):
                for a in fitted:
                    setattr(est, a, getattr(lead, a))
                try:
                    est._validate_params()
                    configs[g].append(est._sgd_config(problem, problem.loss))
                    tcs[g].append(est._train_config())
                    cells[g].append(j)
                except Exception as exc:  # noqa: BLE001 - reported as that candidate's failure
                    out[g][j] = exc
        # A bad hyper-parameter fails its candidate in every fold alike: the folds keep the
        # same members.
        if cells[0]:
            seed = seed_from(lead.random_state)
            states = [[initial_state(problem, c, seed) for c in row] for row in configs]
            data = prepare(problem, blocks, seed=seed, persist=lead.persist)
            try:
                results = train_stacked(problem, data, configs, tcs, states, row_groups=groups)
            except StreamMismatch as exc:
                raise NotStackable(str(exc)) from None
            for g, res_row in enumerate(results):
                for j, cfg, res in zip(cells[g], configs[g], res_row):
                    est = grid[g][j]
                    if isinstance(res, Exception):
                        out[g][j] = res
                        continue
                    est._set_coef(problem, est._finish_sgd(res, cfg))
                    out[g][j] = est
        return out[0] if train_indices is None else out

    def _run_sgd(self, blocks: Blocks, problem, loss, *, init_params=None, partial=False,
                 overrides=None):
        """Fit (or, with ``partial``, one more epoch of) ``problem`` on ``blocks``."""
        cfg = self._sgd_config(problem, loss, overrides)
        if blocks.n_samples == 0:
            raise ValueError(f"{type(self).__name__}: the training data has 0 samples; at least "
                             "one is required")
        previous = getattr(self, "_sgd_state", None)
        if partial and previous is not None:
            state = state_from_dict(previous)
            seed = state.seed
            fingerprint = None
            tc = self._train_config(early_stopping=False)
            tc.checkpoint_dir = None
            tc.tol = None
        else:
            fingerprint = self._fingerprint(blocks, problem)
            seed = self._fit_seed(fingerprint) if not partial else seed_from(self.random_state)
            state = initial_state(problem, cfg, seed, params=init_params)
            tc = self._train_config(early_stopping=False if partial else None)
            if partial:
                tc.checkpoint_dir = None
                tc.tol = None
        fraction = self.validation_fraction if (tc.early_stopping and not partial) else None
        data = prepare(problem, blocks, seed=seed, validation_fraction=fraction,
                       persist=self.persist, config=cfg)
        state = train(problem, data, cfg, tc, state, fingerprint=fingerprint,
                      max_epochs=1 if partial else None)
        return self._finish_sgd(state, cfg, partial=partial)

    def _finish_sgd(self, state, cfg, *, partial=False):
        """Record a finished SGD fit's state, history and counters; returns the parameters."""
        if not partial and state.stop_reason == "max_iter" and self.tol is not None:
            from sklearn.exceptions import ConvergenceWarning

            warnings.warn(f"{type(self).__name__}: maximum number of iterations ({self.max_iter}) "
                          "reached before convergence; consider increasing max_iter.",
                          ConvergenceWarning)
        self._sgd_state = state_to_dict(state)
        self.history_ = list(state.history) if not partial else \
            list(getattr(self, "history_", [])) + list(state.history[-1:])
        self.n_iter_ = int(state.epoch) if not partial else \
            int(getattr(self, "n_iter_", 0)) + 1
        self.t_ = int(state.opt.t)
        return final_params(state, cfg)


class NotStackable(Exception):
    """The fits cannot share their passes; fit them separately (see ``_fit_stacked``)."""


def _fit_or_error(est, X, y, sample_weight):
    """``est.fit``, or the exception it raised (the result contract of ``_fit_stacked``)."""
    try:
        return est.fit(X, y, sample_weight=sample_weight)
    except Exception as exc:  # noqa: BLE001 - reported as that candidate's failure
        return exc


def _persister():
    """``client.persist`` of the current distributed client, or None (local scheduler)."""
    from dml.runtime import active_client

    client = active_client()
    return None if client is None else client.persist


def _every_group_has(blocks, groups, classes) -> bool:
    """Whether every group's training rows contain every class (one pass over y)."""
    import dask
    from dask import delayed

    parts = [delayed(_labels_present, pure=True)(p, mk, classes)
             for p, mk in zip(blocks.parts, groups.masks)]
    present = np.logical_or.reduce(dask.compute(*parts))
    return bool(present.all())


# ---------------------------------------------------------------------------------------------
# The exact (second-order / quasi-Newton) driver
# ---------------------------------------------------------------------------------------------

#: Most parameters Newton's method takes: its Hessian is dense (2 GiB at this size).
NEWTON_LIMIT = 16384


def run_exact(estimator, blocks: Blocks, problem, penalty, normaliser: float, *, solver: str,
              tol: float, max_iter: int, init_params=None, callbacks=(), stages=None):
    """Minimise ``problem`` + ``penalty`` exactly with ``solver`` ("newton" or "lbfgs").

    ``stages`` (optional) is a list of problems solved in turn, each from the previous optimum
    (the continuation of a smoothed loss). Returns ``(params, n_iter, history)``.
    """
    from dml.optim.fullbatch import FullBatch, hessian_stride
    from dml.optim.lbfgs import fit_lbfgs
    from dml.optim.newton import newton_epoch_fn
    from dml.optim.training import run_epochs

    name = type(estimator).__name__
    if solver not in ("newton", "lbfgs"):
        raise ValueError(f"{name}: unknown exact solver {solver!r}")
    if solver == "newton" and problem.n_params > NEWTON_LIMIT:
        # Wide (typically sparse, hashed) X: the dense Hessian alone would not fit in memory.
        raise ValueError(f"{name}: solver='newton' needs a dense Hessian of {problem.n_params}"
                         f"² entries (more than {NEWTON_LIMIT} parameters); use "
                         "solver='sgd' (or 'lbfgs' where offered) for data this wide.")
    data = prepare(problem, blocks, persist=getattr(estimator, "persist", "auto"))
    params = (np.zeros(problem.n_params) if init_params is None
              else np.asarray(init_params, dtype=np.float64).copy())
    history, n_iter, stop = [], 0, None
    stages = stages or [problem]
    for i, stage in enumerate(stages):
        # Earlier stages only provide a warm start: a looser tolerance is enough.
        stage_tol = tol if i == len(stages) - 1 else max(10 * tol, 1e-3)
        fb = FullBatch(stage, data, penalty, normaliser,
                       hess_stride=hessian_stride(data.n_train, stage.n_params))
        remaining = max(int(max_iter) - n_iter, 1)
        tc = TrainConfig(max_iter=remaining, tol=None, verbose=getattr(estimator, "verbose", 0),
                         progress=getattr(estimator, "progress", None),
                         callbacks=tuple(callbacks or ()), name=name)
        if solver == "newton":
            state = run_epochs(TrainState(params=params), newton_epoch_fn(fb, stage_tol), tc)
        else:
            state = fit_lbfgs(fb, params, tc, tol=stage_tol)
        params = state.params
        for rec in state.history:
            rec = dict(rec)
            rec["epoch"] = n_iter + rec["epoch"]
            history.append(rec)
        n_iter += int(state.epoch)
        stop = state.stop_reason
        if stop == "callback":
            break
    if stop == "max_iter":
        # Imported here, as in _finish_sgd: the workers import this module for its kernels.
        from sklearn.exceptions import ConvergenceWarning

        warnings.warn(f"{name}: the {solver} solver did not converge within max_iter={max_iter} "
                      "iterations; increase max_iter or scale the features.", ConvergenceWarning)
    return params, n_iter, history
