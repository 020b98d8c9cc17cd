"""L-BFGS (scipy's L-BFGS-B) over reduced loss/gradient evaluations: one pass per evaluation.

For models with many parameters, where a Hessian pass would be too expensive. scipy drives the
iterations on the client; every function evaluation is one ``map_reduce`` over the blocks
(:class:`~dml.optim.fullbatch.FullBatch`). The tolerances follow scikit-learn's
``LogisticRegression(solver="lbfgs")``: ``gtol = tol`` on the gradient of the mean objective,
``ftol = 64 · machine epsilon``, at most 50 line-search steps.

The history, verbose lines, progress display and callbacks of :mod:`dml.optim.training` are
driven from scipy's per-iteration callback (a callback returning True stops the solver).
"""
from __future__ import annotations

import time

import numpy as np
import scipy.optimize

from dml.optim.fullbatch import FullBatch
from dml.optim.progress import log_epoch, make_progress
from dml.optim.state import TrainState
from dml.optim.training import StopTraining, TrainConfig, check_diverged

__all__ = ["fit_lbfgs"]


def fit_lbfgs(fb: FullBatch, x0: np.ndarray, config: TrainConfig, *, tol: float,
              seed: int = 0) -> TrainState:
    """Minimise ``fb``'s objective from ``x0``; returns the final :class:`TrainState`.

    ``state.epoch`` is the number of L-BFGS iterations, ``state.stop_reason`` "converged" or
    "max_iter", ``state.history`` one record per iteration.
    """
    config.validate()
    state = TrainState(params=np.asarray(x0, dtype=np.float64).copy(), seed=seed)
    progress = make_progress(config.progress, config.verbose)
    if progress is not None:
        progress.start(config.max_iter, 0, config.name)
    t_last = [time.perf_counter()]

    def callback(intermediate_result):
        state.epoch += 1
        check_diverged(float(intermediate_result.fun), state.epoch, config)
        now = time.perf_counter()
        record = {"epoch": state.epoch, "objective": float(intermediate_result.fun),
                  "passes": fb.n_passes, "seconds": now - t_last[0]}
        t_last[0] = now
        state.history.append(record)
        state.params = np.array(intermediate_result.x, copy=True)
        if config.verbose:
            log_epoch(config.name, record)
        if progress is not None:
            progress.update(record)
        try:
            stop = any([bool(cb(state, record)) for cb in config.callbacks])
        except StopTraining:
            stop = True
        if stop:
            state.stop_reason = "callback"
            raise StopIteration

    try:
        res = scipy.optimize.minimize(
            fb.loss_grad, state.params, jac=True, method="L-BFGS-B", callback=callback,
            options={"maxiter": int(config.max_iter), "gtol": float(tol),
                     "ftol": 64 * np.finfo(float).eps, "maxls": 50})
    finally:
        if progress is not None:
            progress.close()
    state.params = np.asarray(res.x, dtype=np.float64)
    if state.stop_reason is None:
        # An abnormal line-search stop means no further decrease is possible: count it as
        # converged, like scikit-learn does; only the iteration limit is "max_iter".
        state.stop_reason = "max_iter" if "ITERATIONS" in str(res.message).upper() else \
            "converged"
    state.extra["message"] = str(res.message)
    state.extra["passes"] = fb.n_passes
    return state
