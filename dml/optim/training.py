"""The epoch loop shared by every iterative solver: stopping, history, divergence, checkpoints.

:func:`run_epochs` knows nothing about *how* an epoch is computed. It receives an
``epoch_fn(state) -> EpochResult`` that advances ``state.params`` / ``state.opt`` (or the
solver's own ``state.arrays``) by one pass over the data and reports the epoch objective and,
optionally, a validation score. Around it the loop

* resumes from ``checkpoint_dir`` when a checkpoint of the same fit is there, and writes one
  every ``checkpoint_every`` epochs and at the end;
* appends a history record per epoch (epoch, objective, validation_score, learning_rate,
  seconds, plus the epoch function's extra fields);
* detects divergence (a non-finite objective, or one that explodes far above the starting
  objective) and raises :class:`DivergedError` with the learning-rate settings to lower;
* applies scikit-learn's stopping rule: ``tol`` + ``n_iter_no_change`` on the training
  objective, or on the validation score with ``early_stopping``; with an adaptive schedule a
  plateau divides the learning rate by 5 instead, until it falls below 1e-6;
* logs a line per epoch (``verbose``), drives a progress display and calls user callbacks,
  which may stop training (return True) or interrupt it (raise).

The local-SGD engine (:mod:`dml.optim.engine`) and the matrix-factorisation solvers use it as it
is; they differ only in their ``epoch_fn``.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence

import numpy as np

from dml.optim import checkpoint as ckpt
from dml.optim.progress import log_epoch, make_progress
from dml.optim.state import TrainState

__all__ = ["TrainConfig", "EpochResult", "run_epochs", "close_epoch", "DivergedError",
           "check_diverged", "StopTraining"]

#: The adaptive schedule stops once η₀ · scale falls below this (scikit-learn's rule).
MIN_ADAPTIVE_LR = 1e-6


class DivergedError(ValueError, ArithmeticError):
    """The training objective became non-finite or exploded."""


class StopTraining(Exception):
    """Raise from a callback to stop training cleanly (the state so far is kept)."""


@dataclass
class TrainConfig:
    """How the loop stops, reports and checkpoints (see the module docstring)."""

    max_iter: int = 1000
    tol: float | None = 1e-3
    n_iter_no_change: int = 5
    #: Apply the tol rule to the validation score (higher is better) instead of the objective.
    early_stopping: bool = False
    #: With early_stopping, end with the parameters of the best validation score.
    restore_best: bool = False
    checkpoint_dir: str | None = None
    checkpoint_every: int = 1
    verbose: int = 0
    progress: object = None
    callbacks: Sequence[Callable] = ()
    #: Objective / reference objective above which the fit counts as diverged.
    divergence_factor: float = 1e8
    #: Name in log lines and errors (the estimator's class name).
    name: str = "SGD"
    #: How to describe the learning rate in a divergence error ("learning_rate='constant', ...").
    lr_hint: str = ""
    #: Base learning rate, for the adaptive schedule's lower bound (None: not adaptive).
    adaptive_eta0: float | None = None

    def validate(self) -> None:
        if not (isinstance(self.max_iter, (int, np.integer)) and self.max_iter >= 1):
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}")
        if self.tol is not None and not (np.isfinite(self.tol)):
            raise ValueError(f"tol must be a finite number or None, got {self.tol!r}")
        if not (isinstance(self.n_iter_no_change, (int, np.integer))
                and self.n_iter_no_change >= 1):
            raise ValueError("n_iter_no_change must be a positive integer, got "
                             f"{self.n_iter_no_change!r}")
        if not (isinstance(self.checkpoint_every, (int, np.integer))
                and self.checkpoint_every >= 1):
            raise ValueError("checkpoint_every must be a positive integer, got "
                             f"{self.checkpoint_every!r}")


@dataclass
class EpochResult:
    #: Training objective of the epoch (mean loss + penalty).
    objective: float
    #: Validation score (higher is better), when the fit holds out a validation part.
    score: float | None = None
    #: Learning rate at the end of the epoch (for the history).
    learning_rate: float | None = None
    #: Estimate of the objective at the start of training, for the divergence test.
    reference: float | None = None
    #: Extra fields for the history record.
    info: dict = field(default_factory=dict)
    #: The solver's own convergence test passed (exact solvers: gradient below tol).
    converged: bool = False


def diverged_message(name: str, epoch: int, objective: float, lr_hint: str) -> str:
    hint = f"; lower the learning rate ({lr_hint})" if lr_hint else "; lower the learning rate"
    return (f"{name}: the loss diverged at epoch {epoch} (objective {objective:.6g}){hint}, or "
            "scale the features (e.g. dml.preprocessing.StandardScaler)")


def check_diverged(value: float, epoch: int, config: TrainConfig,
                   reference: float | None = None) -> None:
    """Raise :class:`DivergedError` when ``value`` is non-finite or exploded past the reference."""
    bad = not math.isfinite(value)
    if not bad and reference is not None and math.isfinite(reference):
        # A floor of 1: a zero starting loss (the perceptron at w = 0) is no scale.
        bad = value > config.divergence_factor * max(abs(reference), 1.0)
    if bad:
        raise DivergedError(diverged_message(config.name, epoch, value, config.lr_hint))


def _update_stopping(state: TrainState, res: EpochResult, config: TrainConfig) -> None:
    """scikit-learn's rule: count epochs that fail to improve the best value by tol."""
    if config.early_stopping and res.score is not None:
        improved = res.score > state.best_score + (config.tol or 0.0)
        if res.score > state.best_score:
            state.best_score = float(res.score)
            if config.restore_best:
                state.best_params = state.params.copy()
    else:
        improved = res.objective < state.best_objective - (config.tol or 0.0)
    if res.objective < state.best_objective:
        state.best_objective = float(res.objective)
    if config.tol is None:
        return
    state.no_improvement = 0 if improved else state.no_improvement + 1
    if state.no_improvement >= config.n_iter_no_change:
        eta0 = config.adaptive_eta0
        if eta0 is not None and eta0 * state.lr_scale / 5.0 >= MIN_ADAPTIVE_LR:
            state.lr_scale /= 5.0
            state.no_improvement = 0
        else:
            state.stop_reason = "converged"


def close_epoch(state: TrainState, res: EpochResult, config: TrainConfig, *, limit: int,
                max_epochs: int | None, seconds: float) -> dict:
    """Count the epoch whose result is ``res``: divergence test, history record, stopping rule.

    Raises :class:`DivergedError`; returns the history record. Shared by :func:`run_epochs` and
    the stacked trainer (:mod:`dml.optim.stacked`), which closes each model's epoch with it.
    """
    state.epoch += 1
    if res.reference is not None and "reference_objective" not in state.extra:
        state.extra["reference_objective"] = float(res.reference)
    check_diverged(res.objective, state.epoch, config, state.extra.get("reference_objective"))
    record = {"epoch": state.epoch, "objective": float(res.objective)}
    if res.score is not None:
        record["validation_score"] = float(res.score)
    if res.learning_rate is not None:
        record["learning_rate"] = float(res.learning_rate)
    record.update(res.info)
    record["seconds"] = seconds
    state.history.append(record)
    _update_stopping(state, res, config)
    if res.converged:
        state.stop_reason = "converged"
    if state.stop_reason is None and state.epoch >= limit and max_epochs is None:
        state.stop_reason = "max_iter"
    return record


def run_epochs(state: TrainState, epoch_fn: Callable[[TrainState], EpochResult],
               config: TrainConfig, *, fingerprint: dict | None = None,
               max_epochs: int | None = None) -> TrainState:
    """Run epochs until a stopping rule fires; returns the final state.

    Parameters
    ----------
    state : TrainState
        Where to start (ignored when ``config.checkpoint_dir`` holds a checkpoint of this fit).
    epoch_fn : callable
        ``epoch_fn(state) -> EpochResult``; advances the state by one epoch.
    config : TrainConfig
    fingerprint : dict, optional
        Identifies the fit in checkpoints (a checkpoint with another fingerprint is refused).
    max_epochs : int, optional
        Run at most this many epochs in this call, whatever ``state.epoch`` is (``partial_fit``).
    """
    config.validate()
    if config.checkpoint_dir is not None:
        resumed = ckpt.load(config.checkpoint_dir, fingerprint)
        if resumed is not None:
            state = resumed
            logging.getLogger("dml.optim").info(
                "%s: resuming from the checkpoint of epoch %d in %s", config.name,
                state.epoch, config.checkpoint_dir)
    if state.stop_reason != "converged":
        state.stop_reason = None
    limit = config.max_iter if max_epochs is None else state.epoch + max_epochs
    progress = make_progress(config.progress, config.verbose)
    if progress is not None:
        progress.start(limit, state.epoch, config.name)
    try:
        while state.epoch < limit and state.stop_reason is None:
            t0 = time.perf_counter()
            res = epoch_fn(state)
            record = close_epoch(state, res, config, limit=limit, max_epochs=max_epochs,
                                 seconds=time.perf_counter() - t0)
            due = state.epoch % config.checkpoint_every == 0 or state.stop_reason is not None
            if config.checkpoint_dir is not None and due:
                ckpt.save(config.checkpoint_dir, state, fingerprint)
            if config.verbose:
                log_epoch(config.name, record)
            if progress is not None:
                progress.update(record)
            try:
                stop = any([bool(cb(state, record)) for cb in config.callbacks])
            except StopTraining:
                stop = True
            if stop and state.stop_reason is None:
                state.stop_reason = "callback"
                if config.checkpoint_dir is not None and not due:
                    ckpt.save(config.checkpoint_dir, state, fingerprint)
    finally:
        if progress is not None:
            progress.close()
    if config.restore_best and state.best_params is not None:
        state.params = state.best_params.copy()
    return state
