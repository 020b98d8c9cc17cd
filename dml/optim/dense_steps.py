"""Mini-batch SGD steps of a one-output linear model on dense rows, compiled.

A step of :func:`dml.optim._round_kernels.local_sgd_steps` in NumPy is about twenty small array
calls on a batch of 32 rows: 25-35 µs a step, almost all of it per-call overhead, so an epoch of
240,000 rows took 0.17-0.26 s where the arithmetic needs a tenth of that. For the models the SGD
estimators fit most — binary classification and regression with plain SGD (no momentum, no
Adam), any of the compiled losses and penalties, with or without iterate averaging — the steps
run here in one compiled call per block and round instead: the stacked search's kernel
(:func:`dml.optim._stacked_kernels.sgd_segment`) for one group of one model. It is the same
arithmetic in the same order (gather the batch, decision values, loss derivative, gradient
divided by the batch size, the l2 term added to the penalised entries, the step, the l1
soft-threshold, the iterate average), so the model agrees with the NumPy steps up to the
rounding of the products and of ``exp``/``log1p``; the batches, step numbers and step sizes are
the same.

It is the same engine, not a second one: :func:`local_sgd_steps` hands a block here when
:func:`applies`; multinomial and multi-output models, momentum, Adam, networks, stochastic
problems and rows that are not float64 keep the NumPy steps.
"""
from __future__ import annotations

import math

import numpy as np

from dml.optim.optimizers import SGD

__all__ = ["applies", "compiled_sgd_steps"]


def _penalised_prefix(penalty, n_params: int) -> int | None:
    """How many leading entries the penalty covers (the kernel penalises a prefix), or None when
    its selection is not a prefix."""
    sel = penalty.penalised
    if sel is None:
        return n_params
    if isinstance(sel, slice) and sel.start in (None, 0) and sel.step in (None, 1):
        return n_params if sel.stop is None else min(int(sel.stop), n_params)
    return None


def applies(problem, X, params, cfg) -> bool:
    """Whether the steps on block X run compiled (see the module docstring)."""
    if type(cfg.optimizer) is not SGD or getattr(problem, "stochastic", False):
        return False
    if getattr(problem, "K", None) != 1 or getattr(problem, "task", None) == "multinomial":
        return False
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64
            and params.dtype == np.float64 and params.ndim == 1 and params.flags.c_contiguous):
        return False
    terms = getattr(problem, "sparse_kernel_terms", None)
    if terms is None or getattr(problem, "stacked_width", None) != params.shape[0]:
        return False
    return _penalised_prefix(cfg.penalty, params.shape[0]) is not None


def compiled_sgd_steps(problem, params, slots, X, Y, w, order, first, last, t0, plan,
                       loss_start: float = 0.0):
    """:func:`dml.optim._round_kernels.local_sgd_steps` for a block where :func:`applies`:
    steps ``first..last-1``, in place on ``params`` (and the ``"average"`` slot). Returns
    (loss_sum, first_loss, finite)."""
    from dml.optim._stacked_kernels import sgd_segment

    cfg = plan.config
    B = cfg.batch_size
    code, param, T = problem.sparse_kernel_terms(Y)
    n = X.shape[0] if order is None else len(order)
    lo, hi = first * B, min(last * B, n)
    if hi <= lo:
        return float(loss_start), None, True
    # A block's order is read-only (dml.optim.streams.block_order keeps it per worker); numba
    # types read-only arrays apart, so a writable copy keeps the kernel's one warmed signature.
    rows = (np.arange(lo, hi, dtype=np.int64) if order is None
            else np.require(order[lo:hi], np.int64, ["C", "W"]))[None, :]
    S = last - first
    t_seg = (t0 + np.arange(1, S + 1, dtype=np.int64))[:, None]
    lr = np.array([cfg.schedule(int(t), plan.lr_scale) for t in t_seg[:, 0]],
                  dtype=np.float64).reshape(S, 1, 1)
    p = params.shape[0]
    P = params.reshape(1, 1, p)  # a view: the steps update params in place
    avg_start = int(cfg.average) if cfg.averaging else -1
    avg = slots.get("average") if avg_start >= 0 else None
    avg = np.zeros((1, 1, 1)) if avg is None else avg.reshape(1, 1, p)
    penalty = cfg.penalty
    # The losses are added row by row to the running sum the caller passes: a stream walked in
    # pieces (block by block) then sums them in the same order as in one piece.
    acc, fl = np.full((1, 1), float(loss_start)), np.zeros((1, 1))
    # Held blocks are C-ordered already (dml.optim.data); a block read from storage for this
    # pass may not be (a DataFrame's values are column-major), and is copied once per call.
    sgd_segment(P, np.ascontiguousarray(X), np.ascontiguousarray(T[:, 0]),
                np.empty(0) if w is None else np.ascontiguousarray(w, dtype=np.float64),
                rows, np.array([hi - lo], dtype=np.int64), 0, S, int(B), lr, t_seg, int(code),
                float(param), np.full((1, 1), float(penalty.l2)),
                np.full((1, 1), float(penalty.l1)), int(_penalised_prefix(penalty, p)), avg,
                avg_start, acc, fl)
    loss_sum = float(acc[0, 0])
    finite = math.isfinite(loss_sum) and bool(np.isfinite(params).all())
    return loss_sum, float(fl[0, 0]), finite
