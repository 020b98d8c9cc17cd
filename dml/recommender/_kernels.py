"""Per-cell numba kernels: sequential SGD over one (user-block, item-block) cell, its squared
error, ALS Gram sums, the cell sort.

Updates within a cell conflict (two ratings of one user), so a vectorised NumPy step is not
sequential SGD; numba runs the exact per-rating loop.
"""
from __future__ import annotations

import numpy as np

from dml._numba import kernel


#: Ratings whose (u, i, r) :func:`sgd_cell` gathers ahead of their updates. A visiting order
#: is a random permutation of the cell, so each rating's three values sit on three cache lines
#: nowhere near the previous rating's; read inside the update loop they were fetched one after
#: another (about 150 ns per rating). A tight gather loop lets the CPU fetch many at once: the
#: same updates in the same order, four to six times faster.
GATHER = 256


@kernel(nogil=True)
def sgd_cell(u, i, r, order, P, Q, bu, bi, mu, lr, reg, use_bias, u0=0, i0=0):
    """SGD updates in ``order``; P/Q/bu/bi are modified in place. Returns Σ e² (pre-update).

    For rating t with error e = r − r̂: b_u += η (e − λ b_u), b_i += η (e − λ b_i),
    p_u += η (e q_i − λ p_u), q_i += η (e p_u − λ q_i) with the p_u of before its update.

    Rating t updates rows ``u[t] - u0`` of P, bu and ``i[t] - i0`` of Q, bi (the block's first
    user and item: offsetting here spares a task two index arrays the size of its cell).
    """
    k = P.shape[1]
    n = order.shape[0]
    ga = np.empty(GATHER, np.int64)
    gb = np.empty(GATHER, np.int64)
    gr = np.empty(GATHER, np.float64)
    sq = 0.0
    for start in range(0, n, GATHER):
        m = min(GATHER, n - start)
        for j in range(m):
            t = order[start + j]
            ga[j] = u[t] - u0
            gb[j] = i[t] - i0
            gr[j] = r[t]
        for j in range(m):
            a = ga[j]
            b = gb[j]
            pred = mu
            if use_bias:
                pred += bu[a] + bi[b]
            for f in range(k):
                pred += P[a, f] * Q[b, f]
            e = gr[j] - pred
            sq += e * e
            if use_bias:
                bu[a] += lr * (e - reg * bu[a])
                bi[b] += lr * (e - reg * bi[b])
            for f in range(k):
                pf = P[a, f]
                qf = Q[b, f]
                P[a, f] = pf + lr * (e * qf - reg * pf)
                # The old p_u in the q update.
                Q[b, f] = qf + lr * (e * pf - reg * qf)
    return sq


@kernel(nogil=True)
def sq_error_cell(u, i, r, P, Q, bu, bi, mu, u0, i0):
    """Σ (r − μ − b_u − b_i − p_u·q_i)² over a cell's ratings (dense indices, all known).

    Rating t reads rows ``u[t] - u0`` of P, bu and ``i[t] - i0`` of Q, bi (0, 0 for the
    whole factor matrices, the block's first user and item for its blocks). One pass without
    temporaries: NumPy's version gathers 2k floats per rating first and took longer than the
    SGD pass itself.
    """
    k = P.shape[1]
    sq = 0.0
    for t in range(r.shape[0]):
        a = u[t] - u0
        b = i[t] - i0
        dot = 0.0
        for f in range(k):
            dot += P[a, f] * Q[b, f]
        e = r[t] - (mu + bu[a] + bi[b] + dot)
        sq += e * e
    return sq


@kernel(nogil=True)
def als_gram_add(rows, cols, target, Z, A, rhs, cnt):
    """Adds each rating's z zᵀ, t z and 1 to A, rhs and cnt of its row (rows local to the block).

    Accumulating cell after cell performs the same additions in the same order as one call on
    the concatenated cells, so a block's Gram sums do not depend on whether its cells were in
    memory together or read from disk one at a time.
    """
    k1 = Z.shape[1]
    for t in range(rows.shape[0]):
        a = rows[t]
        z = Z[cols[t]]
        cnt[a] += 1.0
        for f in range(k1):
            rhs[a, f] += target[t] * z[f]
            for g in range(k1):
                A[a, f, g] += z[f] * z[g]


@kernel(nogil=True)
def _sort_short_runs(key, r, longest, start, pos, order, runs):
    """The stable counting sort of ``0..n-1`` by ``key``, each key's run then sorted stably by
    ``r`` when it holds at most ``longest`` entries (insertion sort). Writes the permutation
    into ``order`` (n,) and the ``(start, end)`` of the longer runs, left in index order for
    the caller to sort, into the first rows of ``runs`` (n_keys, 2); returns how many.
    ``start`` (n_keys + 1 zeros) and ``pos`` (n_keys) are scratch.

    The caller allocates every array: each ``np.zeros``/``np.empty``/``.copy()`` and the
    tuple returned made numba compile code of its own (0.7 → 0.35 CPU s on a worker's first
    matrix factorisation).
    """
    n = key.shape[0]
    n_keys = pos.shape[0]
    for t in range(n):
        start[key[t] + 1] += 1
    for k in range(n_keys):
        start[k + 1] += start[k]
        pos[k] = start[k]
    for t in range(n):
        k = key[t]
        order[pos[k]] = t
        pos[k] += 1
    n_runs = 0
    for k in range(n_keys):
        a = start[k]
        b = start[k + 1]
        if b - a <= longest:
            for x in range(a + 1, b):
                t = order[x]
                v = r[t]
                y = x - 1
                # Strictly greater: equal ratings keep their order (stable, like lexsort).
                while y >= a and r[order[y]] > v:
                    order[y + 1] = order[y]
                    y -= 1
                order[y + 1] = t
        else:
            runs[n_runs, 0] = a
            runs[n_runs, 1] = b
            n_runs += 1
    return n_runs


def sort_by_key_then_value(key, r, n_keys):
    """The permutation ``np.lexsort((r, key))`` returns, for keys in ``0..n_keys-1``.

    A stable counting sort by key, then a stable sort by r inside each key's run: insertion
    sort in :func:`_sort_short_runs` for the usual short runs, one NumPy ``lexsort`` (by run,
    then r) for all the long ones. A stable sort by (key, r) is one permutation, so this equals
    lexsort exactly, in O(n + n_keys) instead of two comparison sorts of the whole array. The
    long runs are sorted outside numba because compiling numba's own sort costs seconds on a
    worker's first fit. ``r`` is compared as float64 (exact for the integer indices sorted
    here), so the kernel compiles for one signature.
    """
    key = np.ascontiguousarray(key, dtype=np.int64)
    r = np.ascontiguousarray(r, dtype=np.float64)
    n_keys = int(n_keys)
    order = np.empty(len(key), np.int64)
    runs = np.empty((n_keys, 2), np.int64)
    n_runs = _sort_short_runs(key, r, np.int64(32), np.zeros(n_keys + 1, np.int64),
                              np.empty(n_keys, np.int64), order, runs)
    runs = runs[:n_runs]
    if len(runs):
        lengths = runs[:, 1] - runs[:, 0]
        run_of = np.repeat(np.arange(len(runs)), lengths)
        at = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        at += np.repeat(runs[:, 0], lengths)
        inner = order[at]
        order[at] = inner[np.lexsort((r[inner], run_of))]
    return order
