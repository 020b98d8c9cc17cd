"""Per-block maths of brute-force nearest neighbours: the k nearest training rows of a query chunk.

Pure NumPy/numba code on one query chunk and one run of training blocks; no Dask here. The
drivers (:mod:`dml.neighbors._base`) run the task functions at the end of this module on the
workers: :func:`search_unit` (:func:`search` on one training unit), :func:`merge_results`
(:func:`merge` of the partial results in block order), then :func:`finish_kneighbors`,
:func:`vote` or :func:`average` per query chunk.

Distances are compared in a *reduced* form that orders rows the same way and is cheaper:
squared distances for euclidean, the sum of ``|x - y|**p`` for minkowski. :func:`finalize`
turns them into true distances once, after the merge, as scikit-learn's brute force does.

Ties
----
Each query row keeps its running k best as a list sorted by (reduced distance, training index).
Training rows are visited in increasing index order and a row replaces the current worst only
when it is strictly closer, so among equally distant rows the lower training index wins. The
merge of two partial lists keeps the same order (:func:`merge`), which makes the result
independent of how the training set is partitioned: it is the k smallest pairs (distance,
index). scikit-learn's brute force selects the same set for the metrics it runs through its
pairwise-distance reductions (all but cosine) but may list equally distant neighbours in another
order.

Euclidean distances use the expanded form ``‖x‖² − 2 x·y + ‖y‖²`` with the cross term from a
BLAS matrix product, added in scikit-learn's order and clipped at zero (rounding can make the
sum of a row with itself slightly negative), so the values agree with scikit-learn's to the last
few bits.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from dml._numba import kernel

__all__ = ["METRICS", "reduced_metric", "prepare", "search", "merge", "finalize",
           "QUERY_TILE", "TRAIN_TILE"]

#: Metric names accepted, mapped to the kernel that computes them.
METRICS = ("euclidean", "sqeuclidean", "manhattan", "chebyshev", "cosine", "minkowski")

#: Query rows times training rows of one distance tile: 256 × 2048 doubles (4 MiB) stays in the
#: processor's cache between the matrix product that writes it and the selection that reads it.
QUERY_TILE = 256
TRAIN_TILE = 2048

# kernel modes
_SQEUCLIDEAN, _COSINE = 0, 1
_MANHATTAN, _CHEBYSHEV, _MINKOWSKI = 0, 1, 2


def reduced_metric(metric: str, p: float) -> tuple[str, float]:
    """The metric actually computed, as scikit-learn's ``effective_metric_``: minkowski with
    p = 1, 2, inf is manhattan, euclidean, chebyshev."""
    if metric == "minkowski":
        if p == 1:
            return "manhattan", p
        if p == 2:
            return "euclidean", p
        if np.isinf(p):
            return "chebyshev", p
    return metric, p


def prepare(X: np.ndarray, metric: str) -> tuple:
    """What :func:`search` needs of a matrix of rows (queries or training rows).

    Euclidean: the rows and their squared norms (a BLAS dot product per row, as scikit-learn's
    ``_sqeuclidean_row_norms``); cosine: the rows scaled to unit norm (zero rows left as they
    are, as ``sklearn.preprocessing.normalize``); other metrics: the rows.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    if metric in ("euclidean", "sqeuclidean"):
        return X, _row_sqnorms(X)
    if metric == "cosine":
        norms = np.sqrt(np.einsum("ij,ij->i", X, X))
        norms[norms == 0.0] = 1.0
        return np.ascontiguousarray(X / norms[:, None]), None
    return X, None


@kernel(nogil=True)
def _row_sqnorms(X):
    out = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        out[i] = np.dot(X[i], X[i])
    return out


def search(query: tuple, train: list, offsets, k: int, metric: str, p: float = 2.0):
    """The k nearest rows of ``train`` (several blocks, in order) for every query row.

    Parameters
    ----------
    query : tuple
        :func:`prepare` of the query chunk.
    train : list of tuple
        :func:`prepare` of each training block, in training-row order.
    offsets : sequence of int
        Global index of the first row of each training block.
    k : int
        Neighbours wanted; fewer are returned when the blocks hold fewer rows.
    metric : str
        One of :data:`METRICS` (after :func:`reduced_metric`).
    p : float
        Minkowski's power.

    Returns
    -------
    rdist : ndarray of float64, shape (n_queries, m)
        Reduced distances (see the module docstring), ascending per row; m = min(k, rows).
    ind : ndarray of int64, shape (n_queries, m)
        Global training indices, ties in increasing index order.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [1.0], [3.0]])
    >>> q = prepare(np.array([[1.2]]), "euclidean")
    >>> rd, ind = search(q, [prepare(X[:2], "euclidean"), prepare(X[2:], "euclidean")],
    ...                  [0, 2], 3, "euclidean")
    >>> ind
    array([[1, 2, 0]])
    >>> np.round(finalize(rd, "euclidean"), 6)
    array([[0.2, 0.2, 1.2]])
    """
    Q, qn = query
    n_rows = sum(len(t[0]) for t in train)
    m = min(k, n_rows)
    rdist = np.full((len(Q), max(m, 1)), np.inf)
    ind = np.full((len(Q), max(m, 1)), -1, dtype=np.int64)
    count = np.zeros(len(Q), dtype=np.int64)
    for (T, tn), offset in zip(train, offsets):
        if len(T) == 0 or len(Q) == 0:
            continue
        if metric in ("euclidean", "sqeuclidean", "cosine"):
            mode = _COSINE if metric == "cosine" else _SQEUCLIDEAN
            tn = tn if tn is not None else np.zeros(0)
            qn_ = qn if qn is not None else np.zeros(0)
            _dot_topk(Q, qn_, T, tn, int(offset), mode, rdist, ind, count, QUERY_TILE,
                      TRAIN_TILE)
        else:
            mode = {"manhattan": _MANHATTAN, "chebyshev": _CHEBYSHEV,
                    "minkowski": _MINKOWSKI}[metric]
            _pair_topk(Q, T, int(offset), mode, float(p), rdist, ind, count, TRAIN_TILE // 8)
    return rdist[:, :m], ind[:, :m]


@kernel(nogil=True)
def _insert(rdist, ind, row, c, k, v, j):
    """Put (v, j) into row ``row``'s sorted list of ``c`` entries (capacity k): after every
    entry with a value <= v, dropping the last one when the list is full."""
    pos = c if c < k else k - 1
    while pos > 0 and rdist[row, pos - 1] > v:
        rdist[row, pos] = rdist[row, pos - 1]
        ind[row, pos] = ind[row, pos - 1]
        pos -= 1
    rdist[row, pos] = v
    ind[row, pos] = j
    return c + 1 if c < k else k


@kernel(nogil=True)
def _dot_topk(Q, qn, T, tn, offset, mode, rdist, ind, count, qtile, ttile):
    """Euclidean (mode 0) or cosine (mode 1) selection from BLAS cross products, tile by tile."""
    nq, nt = Q.shape[0], T.shape[0]
    k = rdist.shape[1]
    # One buffer for every tile: a fresh 4 MiB array per tile is an mmap and page faults each
    # time when malloc's thresholds are fixed (Dask's nannies set MALLOC_TRIM_THRESHOLD_),
    # which tripled the time of a search.
    buf = np.empty(min(qtile, nq) * min(ttile, nt))
    for t0 in range(0, nt, ttile):
        t1 = min(t0 + ttile, nt)
        Tt = T[t0:t1].T
        for q0 in range(0, nq, qtile):
            q1 = min(q0 + qtile, nq)
            M = buf[:(q1 - q0) * (t1 - t0)].reshape((q1 - q0, t1 - t0))
            np.dot(Q[q0:q1], Tt, M)
            for i in range(q1 - q0):
                row = q0 + i
                c = count[row]
                worst = rdist[row, k - 1] if c == k else np.inf
                x = qn[row] if mode == 0 else 0.0
                for j in range(t1 - t0):
                    if mode == 0:
                        # scikit-learn's order of operations: ‖x‖² + (−2 x·y) + ‖y‖²
                        v = x + (-2.0 * M[i, j]) + tn[t0 + j]
                        if not v > 0.0:
                            v = 0.0
                    else:
                        v = 1.0 - M[i, j]
                        if not v > 0.0:
                            v = 0.0
                        elif v > 2.0:
                            v = 2.0
                    if c < k or v < worst:
                        c = _insert(rdist, ind, row, c, k, v, offset + t0 + j)
                        if c == k:
                            worst = rdist[row, k - 1]
                count[row] = c


@kernel(nogil=True)
def _pair_topk(Q, T, offset, mode, p, rdist, ind, count, ttile):
    """Manhattan (0), Chebyshev (1) or Minkowski-p (2) selection, pair by pair."""
    nq, nt, d = Q.shape[0], T.shape[0], Q.shape[1]
    k = rdist.shape[1]
    for t0 in range(0, nt, ttile):
        t1 = min(t0 + ttile, nt)
        for row in range(nq):
            c = count[row]
            worst = rdist[row, k - 1] if c == k else np.inf
            for j in range(t0, t1):
                acc = 0.0
                if mode == 0:
                    for f in range(d):
                        acc += abs(Q[row, f] - T[j, f])
                elif mode == 1:
                    for f in range(d):
                        acc = max(acc, abs(Q[row, f] - T[j, f]))
                else:
                    for f in range(d):
                        acc += abs(Q[row, f] - T[j, f]) ** p
                if c < k or acc < worst:
                    c = _insert(rdist, ind, row, c, k, acc, offset + j)
                    if c == k:
                        worst = rdist[row, k - 1]
            count[row] = c


def merge(parts: list) -> tuple:
    """Combine partial results of consecutive training runs, given in training-row order.

    Each part is ``(rdist, ind, *extra)`` sorted by (distance, index), where ``extra`` are
    arrays aligned with ``ind`` (the neighbours' targets). A stable sort of the concatenation
    keeps equal distances in index order, so the k smallest (distance, index) pairs win
    whatever the partitioning.

    Examples
    --------
    >>> a = (np.array([[1.0, 2.0]]), np.array([[0, 1]]))
    >>> b = (np.array([[1.0, 1.5]]), np.array([[5, 6]]))
    >>> merge([a, b])[1]
    array([[0, 5]])
    """
    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    k = max(p[0].shape[1] for p in parts)
    joined = [np.concatenate([p[i] for p in parts], axis=1) for i in range(len(parts[0]))]
    order = np.argsort(joined[0], axis=1, kind="stable")[:, :k]
    return tuple(np.take_along_axis(a, order, axis=1) for a in joined)


def finalize(rdist: np.ndarray, metric: str, p: float = 2.0) -> np.ndarray:
    """True distances from reduced ones (scikit-learn's ``_rdist_to_dist``)."""
    if metric == "euclidean":
        return np.sqrt(rdist)
    if metric == "minkowski":
        return np.power(rdist, 1.0 / p)
    return rdist


# --------------------------------------------------------------------------------------------
# Task functions (run on the workers; here, not in the estimators' modules, so that a worker
# running them imports no scikit-learn)
# --------------------------------------------------------------------------------------------

_BLAS = {"controller": None, "limiter": None, "depth": 0}
_BLAS_LOCK = threading.Lock()


@contextlib.contextmanager
def _one_blas_thread():
    """BLAS limited to one thread while searches run: the tasks are the parallelism (as
    scikit-learn's brute force limits BLAS inside its own threads).

    The limit is process-wide, so concurrent searches (worker threads of one process) share it:
    the first sets it, the last restores what was there before.
    """
    from threadpoolctl import ThreadpoolController

    with _BLAS_LOCK:
        if _BLAS["controller"] is None:
            _BLAS["controller"] = ThreadpoolController()
        if _BLAS["depth"] == 0:
            _BLAS["limiter"] = _BLAS["controller"].limit(limits=1, user_api="blas")
        _BLAS["depth"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS["depth"] -= 1
            if _BLAS["depth"] == 0:
                _BLAS["limiter"].restore_original_limits()
                _BLAS["limiter"] = None


def search_unit(query, unit, is_group, offsets, k, metric, p, with_y):
    """The k nearest rows of one training unit (a block or a group of blocks) per query row.

    ``query`` is a query chunk (an array) or a validated block ``(X, y, w)``. Returns
    ``(rdist, ind)`` or, with ``with_y``, ``(rdist, ind, y_of_neighbours)``.
    """
    Q = query[0] if isinstance(query, tuple) else query
    blocks = unit if is_group else (unit,)
    with _one_blas_thread():
        rdist, ind = search(prepare(Q, metric), [prepare(b[0], metric) for b in blocks],
                                 offsets, k, metric, p)
    if not with_y:
        return rdist, ind
    y = np.concatenate([np.asarray(b[1]) for b in blocks]) if len(blocks) > 1 else \
        np.asarray(blocks[0][1])
    return rdist, ind, y[ind - offsets[0]]


def fit_stats(xb, yb, wb, labels):
    """Rows of a training block (and the labels in it)."""
    return np.array([len(xb)], dtype=np.int64), (np.unique(np.asarray(yb)) if labels else None)


def combine_fit_stats(parts):
    """Row counts in block order (the tree combines consecutive results), labels united."""
    lengths = np.concatenate([p[0] for p in parts])
    found = [p[1] for p in parts if p[1] is not None and len(p[1])]
    return lengths, (np.unique(np.concatenate(found)) if found else None)


def merge_results(parts):
    """Tree combine of :func:`search_unit` results in training order (see :func:`merge`)."""
    return merge(list(parts))


def finish_kneighbors(res, metric, p, return_distance, self_start):
    """Distances and indices of one query chunk; with ``self_start`` (queries are the training
    rows from that index on) each row's own index is dropped, as scikit-learn does."""
    rdist, ind = res[0], res[1]
    if self_start is not None:
        rdist, ind = _drop_self(rdist, ind, self_start)
    if return_distance:
        return finalize(rdist, metric, p), ind
    return ind


def _drop_self(rdist, ind, start):
    """scikit-learn's rule: remove the query's own index; when it is not among the neighbours
    (more duplicates than neighbours), remove the first one."""
    own = start + np.arange(len(ind))[:, None]
    keep = ind != own
    no_self = np.all(keep, axis=1)
    keep[no_self, 0] = False
    shape = (len(ind), ind.shape[1] - 1)
    return rdist[keep].reshape(shape), ind[keep].reshape(shape)


def neighbour_weights(dist, weights):
    """scikit-learn's ``_get_weights``: None (uniform), 1/d, or the user's function.

    With ``"distance"``, a query at distance zero of some training rows gives those rows weight 1
    and the others 0.
    """
    if weights in (None, "uniform"):
        return None
    if weights == "distance":
        with np.errstate(divide="ignore"):
            w = 1.0 / dist
        inf_mask = np.isinf(w)
        inf_row = np.any(inf_mask, axis=1)
        w[inf_row] = inf_mask[inf_row]
        return w
    return np.asarray(weights(dist))


def vote(res, metric, p, weights, classes, proba):
    """Class probabilities (or labels) of one query chunk from its neighbours' labels.

    As scikit-learn's ``predict_proba``: each neighbour adds its weight to its class, rows are
    normalised; the label is the class of largest total, the first class on ties.
    """
    rdist, labels = res[0], res[2]
    w = neighbour_weights(finalize(rdist, metric, p), weights)
    codes = np.searchsorted(classes, labels)
    n_q, k = codes.shape
    votes = np.zeros((n_q, len(classes)))
    rows = np.arange(n_q)
    for i in range(k):
        votes[rows, codes[:, i]] += 1.0 if w is None else w[:, i]
    if proba:
        return votes / votes.sum(axis=1)[:, None]
    return classes[np.argmax(votes, axis=1)]


def average(res, metric, p, weights):
    """Prediction of one query chunk, as scikit-learn's: the mean of the neighbours' targets,
    or their weighted sum over the sum of the weights."""
    rdist, y = res[0], np.asarray(res[2], dtype=np.float64)
    w = neighbour_weights(finalize(rdist, metric, p), weights)
    if w is None:
        return np.mean(y, axis=1)
    return np.sum(y * w, axis=1) / np.sum(w, axis=1)
