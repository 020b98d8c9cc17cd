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
:func:`terms` allows it; multinomial and multi-output models, momentum, Adam, networks, stochastic
problems and rows that are not float64 keep the NumPy steps.
"""
from __future__ import annotations

import collections
import math
import threading
import weakref

import numpy as np

from dml.optim.optimizers import SGD

__all__ = ["terms", "kernel_terms", "compiled_sgd_steps"]


def kernel_terms(problem, cfg, penalty, width: int, X):
    """``(loss code, loss parameter, penalised entries)`` when the compiled SGD kernel
    (:mod:`dml.optim._stacked_kernels`) runs models of ``width`` parameters on rows X, else
    None: one output, a loss it knows, plain SGD, float64 rows, penalised entries ``[0, n)``.
    The one test for both its users, this module and the stacked search."""
    sel = penalty.penalised
    if (getattr(problem, "K", None) != 1 or type(cfg.optimizer) is not SGD
            or X.dtype != np.float64 or getattr(problem, "stacked_width", None) != width
            or not (sel is None or (isinstance(sel, slice) and sel.start in (None, 0)
                                    and sel.step in (None, 1)))):
        return None
    from dml.optim._stacked_kernels import loss_code

    code = loss_code(problem.loss)
    if code is None:
        return None
    n_pen = width if sel is None or sel.stop is None else min(int(sel.stop), width)
    return code[0], code[1], n_pen


def terms(problem, X, params, cfg):
    """:func:`kernel_terms` of one model's steps on block X, or None when they keep the NumPy
    steps (see the module docstring)."""
    # The targets come from the problem's sparse_kernel_terms (one output, not softmax).
    if (getattr(problem, "stochastic", False) or not hasattr(problem, "sparse_kernel_terms")
            or getattr(problem, "task", None) == "multinomial" or not (
                isinstance(X, np.ndarray) and X.ndim == 2 and params.dtype == np.float64
                and params.ndim == 1 and params.flags.c_contiguous)):
        return None
    return kernel_terms(problem, cfg, cfg.penalty, params.shape[0], X)


#: Rows of targets :func:`stream_targets` keeps per worker process (8 bytes each).
TARGET_CACHE_ROWS = 2**21
_targets: collections.OrderedDict = collections.OrderedDict()
_targets_rows = [0]
_targets_lock = threading.Lock()


def stream_targets(problem, Y) -> np.ndarray:
    """The targets of rows ``Y`` in the loss's convention (``problem.sparse_kernel_terms``),
    as one contiguous float64 vector.

    A stream's rows are joined once per fit (:func:`dml.optim.streams.join_streams`), and
    every round of every stream called the kernel with that stream's whole ``Y``: its targets
    (``2 Y - 1`` for a binary model) were made again each time, about 30 µs for a stream of
    4,000 rows, some 1,300 times in a 5-epoch fit on 1,024 blocks, for a quarter of the rows
    used each time. So the worker process keeps the targets of the arrays it saw last (up to
    :data:`TARGET_CACHE_ROWS` rows, least recently used out first), by the array's identity:
    a held ``Y`` is never written, and an entry is used only while that very array is alive
    (a weak reference), so a kept vector is the one the call would make. For a one-output
    problem the targets depend on ``Y`` and the problem's ``task`` only. The vector stays
    writable although nothing writes it: numba types a read-only array apart, and the kernel
    keeps the one signature the workers' warm-up compiles."""
    key = (id(Y), getattr(problem, "task", None))
    with _targets_lock:
        hit = _targets.get(key)
        if hit is not None and hit[0]() is Y:
            _targets.move_to_end(key)
            return hit[1]
    T = np.ascontiguousarray(problem.sparse_kernel_terms(Y)[2][:, 0])
    if np.may_share_memory(T, Y):  # Y's own values (regression): nothing made, nothing kept
        return T
    try:
        ref = weakref.ref(Y)
    except TypeError:  # not an ndarray (nothing to key on): made for this call only
        return T
    n = len(T)
    if n <= TARGET_CACHE_ROWS // 4:
        with _targets_lock:
            old = _targets.pop(key, None)
            if old is not None:
                _targets_rows[0] -= len(old[1])
            _targets[key] = (ref, T)
            _targets_rows[0] += n
            while _targets_rows[0] > TARGET_CACHE_ROWS:
                _, (_, gone) = _targets.popitem(last=False)
                _targets_rows[0] -= len(gone)
    return T


def compiled_sgd_steps(problem, params, slots, X, Y, w, order, first, last, t0, plan,
                       loss_start: float, kernel: tuple):
    """:func:`dml.optim._round_kernels.local_sgd_steps` for a block whose :func:`terms` are
    ``kernel``: steps ``first..last-1``, in place on ``params`` (and the ``"average"`` slot).
    Returns (loss_sum, first_loss, finite)."""
    from dml.optim._stacked_kernels import sgd_segment

    cfg = plan.config
    B = cfg.batch_size
    code, param, n_pen = kernel
    T = stream_targets(problem, Y)  # the targets in the loss's convention, (n,)
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
    sgd_segment(P, np.ascontiguousarray(X), T,
                np.empty(0) if w is None else np.ascontiguousarray(w, dtype=np.float64),
                rows, np.array([hi - lo], dtype=np.int64), 0, S, int(B), lr, t_seg, int(code),
                float(param), np.full((1, 1), float(penalty.l2)),
                np.full((1, 1), float(penalty.l1)), int(n_pen), avg,
                avg_start, acc, fl)
    loss_sum = float(acc[0, 0])
    finite = math.isfinite(loss_sum) and bool(np.isfinite(params).all())
    return loss_sum, float(fl[0, 0]), finite
