"""Mini-batch SGD steps on a CSR block at O(nnz) a step: the L2 decay kept as a scale factor.

A step of :func:`dml.optim._round_kernels.local_sgd_steps` on dense rows costs O(d): the L2 part
of the gradient, ``l2 · w``, touches every weight. On sparse rows (text hashed to 2^20 columns, a
batch touching a few thousand of them) that is almost all of the time. As scikit-learn does, the
weights are stored here as ``w = scale · v``: the decay ``w ← (1 − η l2) w`` becomes
``scale ← (1 − η l2) scale`` and the data part of the step only changes the columns the batch
holds, ``v[cols] −= η g[cols] / scale``. The arithmetic is that of the dense step (the same
batches, step numbers, step sizes and loss), only rounded differently, so a fit on sparse X
equals the fit on the same X densified to rounding.

It is the same engine, not a second one: :func:`dml.optim._round_kernels.local_sgd_steps` hands
a block here when :func:`applies`, i.e. for plain SGD (no momentum/Adam), no l1 part and no iterate
averaging (their updates touch every weight each step, so there is nothing to save), on a
problem that provides ``sparse_batch_grad`` (the linear models). Anything else on sparse X takes
the ordinary path, whose products are sparse too but whose steps cost O(d).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from dml.optim.optimizers import SGD

__all__ = ["applies", "lazy_sgd_steps", "batch_entries", "RESCALE_BELOW"]

#: When |scale| falls below this, it is folded into the weights (one O(d) pass), as
#: scikit-learn does, so that ``g / scale`` never loses precision or overflows.
RESCALE_BELOW = 1e-9


def applies(problem, X, cfg) -> bool:
    """Whether the steps on block X can use the scale-factor form (see the module docstring)."""
    return (sp.issparse(X) and type(cfg.optimizer) is SGD and cfg.penalty.l1 == 0.0
            and not cfg.averaging and not getattr(problem, "stochastic", False)
            and hasattr(problem, "sparse_batch_grad"))


def batch_entries(indptr, rows):
    """The stored entries of some rows of a CSR matrix: ``(row in the batch, position)``.

    Gathering with plain index arithmetic instead of building a scipy matrix per batch (whose
    checks cost more than the step itself at a few hundred entries).
    """
    starts = indptr[rows]
    lens = indptr[rows + 1] - starts
    first = np.cumsum(lens) - lens  # where each row's entries start in the batch
    pos = np.arange(int(lens.sum())) + np.repeat(starts - first, lens)
    return np.repeat(np.arange(len(rows)), lens), pos


def lazy_sgd_steps(problem, params, X, Y, w, order, first, last, t0, plan):
    """:func:`dml.optim._round_kernels.local_sgd_steps` for a CSR block, O(nnz) per step.

    ``params`` is updated in place and is exact (the scale folded in) when this returns.
    Returns (loss_sum, first_loss, finite). The steps run compiled
    (:func:`dml.optim._stacked_kernels.sparse_sgd_steps`) when the problem's loss treats its
    outputs one by one (not softmax), else in NumPy (:func:`_numpy_steps`): the same arithmetic.
    """
    cfg = plan.config
    terms = getattr(problem, "sparse_kernel_terms", None)
    compiled = None if terms is None else terms(Y)
    if compiled is None:
        return _numpy_steps(problem, params, X, Y, w, order, first, last, t0, plan)
    from dml.optim._stacked_kernels import sparse_sgd_steps

    code, param, T = compiled
    W, b = problem.unpack_views(params)
    n = X.shape[0]
    # A block's order is read-only (dml.optim.streams.block_order keeps it per worker); numba
    # types read-only arrays apart, so a writable copy keeps the kernel's one warmed signature.
    order = (np.arange(n, dtype=np.int64) if order is None
             else np.require(order, np.int64, ["C", "W"]))
    lr = np.array([cfg.schedule(t0 + k + 1, plan.lr_scale) for k in range(last - first)],
                  dtype=np.float64)
    out = np.zeros(3)
    sparse_sgd_steps(W, np.empty(0) if b is None else b, X.indptr, X.indices,
                     np.asarray(X.data, dtype=np.float64), T,
                     np.empty(0) if w is None else np.asarray(w, dtype=np.float64), order,
                     int(first), int(last), int(cfg.batch_size), lr, float(cfg.penalty.l2),
                     int(code), float(param), RESCALE_BELOW, out)
    return float(out[0]), float(out[1]) if last > first else None, bool(out[2])


def _numpy_steps(problem, params, X, Y, w, order, first, last, t0, plan):
    """The steps of :func:`lazy_sgd_steps` in NumPy, a batch at a time (losses that couple the
    outputs, e.g. softmax); the problem computes each batch's gradient on its columns."""
    cfg = plan.config
    B = cfg.batch_size
    n = X.shape[0] if order is None else len(order)
    indptr, indices, values = X.indptr, X.indices, X.data
    W, b = problem.unpack_views(params)
    l2 = cfg.penalty.l2
    scale = 1.0
    loss_sum = 0.0
    first_loss = None
    finite = True
    for k, s in enumerate(range(first, last)):
        lo, hi = s * B, min((s + 1) * B, n)
        idx = order[lo:hi] if order is not None else slice(lo, hi)
        wb = None if w is None else w[idx]
        rows, pos = batch_entries(indptr, idx if order is not None else np.arange(lo, hi))
        loss, cols, gW, gb = problem.sparse_batch_grad(W, scale, b, hi - lo, rows, indices[pos],
                                                       values[pos], Y[idx], wb)
        if first_loss is None:
            first_loss = float(loss) / (hi - lo)
        loss_sum += float(loss)
        if not math.isfinite(loss_sum):
            finite = False
            break
        gW /= (hi - lo)
        t = t0 + k + 1
        lr = cfg.schedule(t, plan.lr_scale)
        decay = 1.0 - lr * l2
        if abs(scale * decay) < RESCALE_BELOW:
            # Fold the scale in and take this step as the dense path does.
            W *= scale * decay
            scale = 1.0
        else:
            scale *= decay
        W[:, cols] -= (lr / scale) * gW
        if b is not None:
            b -= lr * (gb / (hi - lo))
    W *= scale
    return loss_sum, first_loss, finite
