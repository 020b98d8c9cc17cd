"""The compiled inner loop of stacked SGD (:mod:`dml.optim.stacked`) for one-output linear models.

A stacked step for G·m models is a handful of tiny matrix products and element-wise updates;
written with NumPy it costs ~90 µs for 48 models, almost all of it the per-call overhead of ~25
NumPy calls, plus the copies that gather each group's batches (`benchmarks` workload ``cv``).
This kernel runs all the steps of a round segment in one call: per step and group it gathers the
batch rows into a small buffer, makes two BLAS products (decision values, gradient) and loops for
the loss, the penalty, the plain-SGD update, the soft-threshold and the iterate average — the
same arithmetic as the NumPy path, in the same order, so the models agree with it up to the
rounding of ``exp``/``log1p`` and of the products.

It covers what the SGD estimators use for binary classification and regression: one output
(``K = 1``), the losses below, plain SGD (momentum and Adam keep the NumPy path), any penalty and
schedule (the step sizes come precomputed).

:func:`sparse_sgd_steps` is the CSR variant of one model's plain-SGD steps (the per-row loss
above, the L2 decay as a scale factor): what :mod:`dml.optim.sparse_steps` runs on sparse blocks.
"""
from __future__ import annotations

import math

import numpy as np
from numba.core import cgutils, types
from numba.extending import intrinsic

from dml._numba import kernel

try:  # numba's own BLAS calls for np.dot (internal API; np.dot itself below if it moves)
    from numba.np.linalg import call_xxdot, call_xxgemm, call_xxgemv, ensure_blas
except ImportError:  # pragma: no cover - depends on the numba version
    call_xxgemm = None

#: Loss name → code of :func:`_loss_grad`.
LOSS_CODES = {"squared_error": 0, "huber": 1, "epsilon_insensitive": 2,
              "squared_epsilon_insensitive": 3, "log_loss": 4, "hinge": 5, "perceptron": 6,
              "squared_hinge": 7, "modified_huber": 8}


def loss_code(loss):
    """``(code, parameter)`` of a :mod:`dml.optim.losses` loss, or None if not compiled here."""
    code = LOSS_CODES.get(loss.name)
    if code is None:
        return None
    param = getattr(loss, "epsilon", getattr(loss, "threshold", 0.0))
    return code, float(param)


@intrinsic
def _blas_dot_into(typingctx, x, y, out):
    """``np.dot(x, y, out)`` for C/F float64 matrices, less what numba compiles around it.

    The BLAS call is numba's own for ``np.dot(x, y, out)`` (``dot_3_mm``: dot, gemv or gemm by
    shape, with the same arguments), so the products are bit for bit NumPy's, but the shape and
    size checks (a compiled function each, with their exceptions) and the copy of non-contiguous
    operands are left out: the callers pass contiguous operands of matching shapes, sizes far
    below 2**31. The products write into buffers the kernel allocated once (``np.dot(x, y)``
    also compiled an allocation and a zero fill). Measured alone in fresh processes after numba's
    initialisation, :func:`sgd_segment` compiles in ~1.25 CPU s with it, ~1.5 s with
    ``np.dot(x, y, out)`` and ~1.85 s with ``np.dot(x, y)``; the same results bit for bit.
    """
    if not all(isinstance(t, types.Array) and t.ndim == 2 and t.layout in "CF"
               and t.dtype == types.float64 for t in (x, y, out)) or out.layout != "C":
        return None
    sig = types.none(x, y, out)

    def codegen(context, builder, sig, args):
        ensure_blas()
        xty, yty, oty = sig.args
        xa, ya, oa = (context.make_array(t)(context, builder, v) for t, v in zip(sig.args, args))
        xs = cgutils.unpack_tuple(builder, xa.shape)
        ys = cgutils.unpack_tuple(builder, ya.shape)
        os_ = cgutils.unpack_tuple(builder, oa.shape)
        m, k = xs
        n = ys[1]
        zero = context.get_constant(types.intp, 0)
        one = context.get_constant(types.intp, 1)
        empty = builder.or_(builder.icmp_signed("==", k, zero),
                            builder.or_(builder.icmp_signed("==", m, zero),
                                        builder.icmp_signed("==", n, zero)))
        with builder.if_else(empty, likely=False) as (is_empty, nonempty):
            with is_empty:
                cgutils.memset(builder, oa.data, builder.mul(oa.itemsize, oa.nitems), 0)
            with nonempty:
                left_vec = builder.icmp_signed("==", m, one)
                with builder.if_else(builder.icmp_signed("==", n, one)) as (r_vec, r_mat):
                    with r_vec:
                        with builder.if_else(left_vec) as (v_v, m_v):
                            with v_v:
                                call_xxdot(context, builder, False, types.float64, k,
                                           xa.data, ya.data, oa.data)
                            with m_v:
                                call_xxgemv(context, builder, xty.layout == oty.layout, xty, xs,
                                            xa.data, ya.data, oa.data)
                    with r_mat:
                        with builder.if_else(left_vec) as (v_m, m_m):
                            with v_m:
                                call_xxgemv(context, builder, yty.layout != oty.layout, yty, ys,
                                            ya.data, xa.data, oa.data)
                            with m_m:
                                call_xxgemm(context, builder, xty, xs, xa.data, yty, ys, ya.data,
                                            oty, os_, oa.data)
        return context.get_dummy_value()

    return sig, codegen


@kernel(inline="always")
def _numpy_dot_into(x, y, out):
    np.dot(x, y, out)


_dot_into = _numpy_dot_into if call_xxgemm is None else _blas_dot_into


@kernel(inline="always")
def _sign(x):
    return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)


@kernel(inline="always")
def _loss_grad(code, f, y, param):
    """Loss and dL/df of one decision value, as :mod:`dml.optim.losses` computes them."""
    if code == 0:  # squared_error
        r = f - y
        return 0.5 * r * r, r
    if code == 1:  # huber
        r = f - y
        a = abs(r)
        if a <= param:
            return 0.5 * r * r, r
        return param * (a - 0.5 * param), param * _sign(r)
    if code == 2:  # epsilon_insensitive
        r = y - f
        excess = abs(r) - param
        if excess > 0:
            return excess, -_sign(r)
        return 0.0, 0.0
    if code == 3:  # squared_epsilon_insensitive
        r = y - f
        excess = max(abs(r) - param, 0.0)
        return excess * excess, -2.0 * _sign(r) * excess
    if code == 4:  # log_loss
        z = y * f
        e = math.exp(-abs(z))
        loss = math.log1p(e) + max(-z, 0.0)
        inv = 1.0 / (1.0 + e)
        sig = e * inv if z >= 0 else inv
        return loss, -y * sig
    if code == 5:  # hinge (threshold = param)
        z = y * f
        if z < param:
            return param - z, -y
        return 0.0, 0.0
    if code == 6:  # perceptron
        z = y * f
        return max(-z, 0.0), (-y if z <= 0.0 else 0.0)
    if code == 7:  # squared_hinge
        m = max(1.0 - y * f, 0.0)
        return m * m, -2.0 * y * m
    # modified_huber
    z = y * f
    m = max(1.0 - z, 0.0)
    if z >= -1.0:
        return m * m, -2.0 * y * m
    return -4.0 * z, -4.0 * y


@kernel
def sgd_segment(P, X, T, w, rows, lens, first_k, last_k, B, lr, t_seg, code, param, l2, l1,
                n_pen, avg, avg_start, loss_acc, first_loss):
    """Steps ``first_k..last_k-1`` of a round for every group, gathering each batch itself.

    P : (G, m, p) parameters, ``p`` = d (+1 with an intercept: the last entry multiplies a
    column of ones); X : (n, d) the block; T, w : (n,) targets and row weights (``w`` empty:
    every row weighs 1); rows : (G, L) each group's rows in its epoch order from the round's
    first step on; lens : (G,) how many of them; lr : (S, G, m) step sizes and t_seg : (S, G)
    step numbers of the S = last_k − first_k steps; l2, l1 : (G, m) penalty weights on the
    first ``n_pen`` entries; avg : (G, m, p) iterate averages (``avg_start < 0``: none). The
    losses of the round's first step (``first_k == 0``) go to ``first_loss`` (divided by the
    batch size, as the NumPy path reports them).
    """
    G, m, p = P.shape
    d = X.shape[1]
    # np.empty of the shape ``D`` has, not np.zeros: one allocation variant fewer for numba to
    # compile (0.3 s of a fresh worker's first search). Rows are filled before they are read;
    # the intercept column holds ones.
    Xb = np.empty((B, p))
    if p > d:
        for b in range(B):
            Xb[b, d] = 1.0
    yb = np.empty(B)
    wb = np.empty(B)
    D = np.empty((B, m))
    Fb = np.empty((B, m))
    grad = np.empty((m, p))
    weighted = w.shape[0] > 0
    for s in range(first_k, last_k):
        i = s - first_k
        lo = s * B
        for g in range(G):
            n = min(B, lens[g] - lo)
            for b in range(n):
                r = rows[g, lo + b]
                for k in range(d):
                    Xb[b, k] = X[r, k]
                yb[b] = T[r]
                wb[b] = w[r] if weighted else 1.0
            Xn = Xb[:n]
            F = Fb[:n]
            _dot_into(Xn, P[g].T, F)
            for b in range(n):
                for j in range(m):
                    loss, dl = _loss_grad(code, F[b, j], yb[b], param)
                    loss_acc[g, j] += wb[b] * loss
                    if s == 0:
                        first_loss[g, j] += wb[b] * loss
                    D[b, j] = wb[b] * dl
            _dot_into(D[:n].T, Xn, grad)
            for j in range(m):
                rate = lr[i, g, j]
                for k in range(p):
                    gk = grad[j, k] / n
                    if k < n_pen:
                        gk += l2[g, j] * P[g, j, k]
                    P[g, j, k] -= rate * gk
                if l1[g, j] != 0.0:
                    thr = rate * l1[g, j]
                    for k in range(n_pen):
                        v = P[g, j, k]
                        P[g, j, k] = _sign(v) * max(abs(v) - thr, 0.0)
                if avg_start >= 0:
                    count = t_seg[i, g] - avg_start
                    for k in range(p):
                        if count <= 0:
                            avg[g, j, k] = P[g, j, k]
                        else:
                            avg[g, j, k] += (P[g, j, k] - avg[g, j, k]) / count
            if s == 0:
                for j in range(m):
                    first_loss[g, j] /= n


@kernel
def sparse_sgd_steps(W, b, indptr, indices, data, T, w, order, first, last, B, lr, l2, code,
                     param, rescale_below, out):
    """Steps ``first..last-1`` of one model on a CSR block at O(nnz) each (no stacking).

    The CSR variant of the plain-SGD step of :mod:`dml.optim.engine`, used by
    :mod:`dml.optim.sparse_steps`: the weights are kept as ``scale · W`` so that the L2 decay
    is one multiplication and a step only touches the columns its rows hold.

    W : (K, d) weights, updated in place (exact again on return); b : (K,) intercepts (empty:
    none); indptr, indices, data : the CSR block; T : (n, K) targets in the loss's convention;
    w : (n,) row weights (empty: every row weighs 1); order : (n,) the rows in epoch order;
    lr : (S,) the step sizes of the S = last − first steps; l2 : the L2 weight; out : (3,)
    receives the loss sum, the mean loss of the first step and 1.0 when everything stayed
    finite (0.0: the loss overflowed and the steps stopped there).
    """
    K = W.shape[0]
    d = W.shape[1]
    n = order.shape[0]
    has_b = b.shape[0] > 0
    weighted = w.shape[0] > 0
    D = np.empty((B, K))
    scale = 1.0
    loss_sum = 0.0
    first_loss = 0.0
    finite = True
    for s in range(first, last):
        lo = s * B
        m = min(B, n - lo)
        step_loss = 0.0
        for i in range(m):
            r = order[lo + i]
            wr = w[r] if weighted else 1.0
            for k in range(K):
                f = 0.0
                for p in range(indptr[r], indptr[r + 1]):
                    f += data[p] * W[k, indices[p]]
                f *= scale
                if has_b:
                    f += b[k]
                loss, dl = _loss_grad(code, f, T[r, k], param)
                step_loss += wr * loss
                D[i, k] = wr * dl
        if s == first:
            first_loss = step_loss / m
        loss_sum += step_loss
        if not math.isfinite(loss_sum):
            finite = False
            break
        rate = lr[s - first]
        decay = 1.0 - rate * l2
        if abs(scale * decay) < rescale_below:
            # Fold the scale in and take this step as the dense path does.
            for k in range(K):
                for j in range(d):
                    W[k, j] *= scale * decay
            scale = 1.0
        else:
            scale *= decay
        c = rate / (scale * m)
        for i in range(m):
            r = order[lo + i]
            for k in range(K):
                g = D[i, k] * c
                if g != 0.0:
                    for p in range(indptr[r], indptr[r + 1]):
                        W[k, indices[p]] -= g * data[p]
        if has_b:
            for k in range(K):
                acc = 0.0
                for i in range(m):
                    acc += D[i, k]
                b[k] -= rate * (acc / m)
    if scale != 1.0:
        for k in range(K):
            for j in range(d):
                W[k, j] *= scale
    out[0] = loss_sum
    out[1] = first_loss
    out[2] = 1.0 if finite else 0.0
