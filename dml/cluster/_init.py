"""Initial centres: a keyed random sample of rows, exact k-means++ and k-means|| (Bahmani et al.).

Each initialisation is built as one Dask graph over the prepared blocks (:mod:`._lloyd`) and
returns a Delayed, so the initialisations of several runs (``n_init``) or several data sets
(gap statistic) are computed together in one pass of the scheduler, with no round trip to the
client between the steps. Per-block state (each row's squared distance to the nearest centre
chosen so far) stays on the worker that holds the block, as an intermediate result of the graph.

Randomness is keyed by the *global row index*: the uniform number of row ``i`` for a given
(seed, purpose, step) is a hash of those values (:func:`row_uniforms`), not the next draw of a
per-block generator. Weighted choices use the Efraimidis–Spirakis keys ``log(u_i) / weight_i``
(the largest keys are a weighted sample without replacement) and the k-means|| oversampling
keeps row ``i`` when ``u_i < ℓ·w_i·D(x_i)²/φ``. So every choice depends on the data, the
weights and ``random_state`` only, not on how the rows are cut into blocks (up to floating-point
round-off in the distances), and the merge of per-block candidates (largest key first, ties by
lowest row) is deterministic.

On sparse blocks the chosen rows stay sparse (candidates of k-means||, the trial rows of
k-means++) until they become the k dense initial centres.
"""
from __future__ import annotations

import functools
import threading
import warnings

import numpy as np
from dask import delayed

from dml._blocks import block_rng, tree_reduce
from dml.cluster import _sparse
from dml.cluster._lloyd import chunk_rows, largest

__all__ = ["row_uniforms", "stream_key", "random_init", "kmeans_plusplus_init",
           "kmeans_parallel_candidates", "weighted_kmeans_plusplus"]

#: Serialises :func:`weighted_kmeans_plusplus`'s scikit-learn calls across threads (their
#: ``warnings.catch_warnings`` blocks must not overlap).
_WARNINGS_LOCK = threading.Lock()

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def stream_key(seed: int, purpose: str, *indices: int) -> int:
    """A 64-bit key for one (seed, purpose, step) stream of row-keyed uniforms."""
    return int(block_rng(seed, purpose, *indices).integers(0, 2**63))


def row_uniforms(key: int, start: int, n: int) -> np.ndarray:
    """Uniform numbers in (0, 1) for global rows ``start .. start + n − 1`` of stream ``key``.

    SplitMix64 of ``row · φ64 + key``: a counter-based generator, so a row's number does not
    depend on which block holds it.

    Examples
    --------
    >>> a = row_uniforms(7, 0, 10)
    >>> bool(np.all(row_uniforms(7, 4, 3) == a[4:7])), bool(np.all((a > 0) & (a < 1)))
    (True, True)
    """
    z = np.arange(start, start + n, dtype=np.uint64) * _M1 + np.uint64(key)
    z ^= z >> np.uint64(30)
    z *= _M2
    z ^= z >> np.uint64(27)
    z *= _M3
    z ^= z >> np.uint64(31)
    return ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def _keys(u: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
    """Efraimidis–Spirakis keys: the largest keys are a sample with probability ∝ weight."""
    logu = np.log(u)
    if weight is None:
        return logu
    with np.errstate(divide="ignore", invalid="ignore"):
        keys = logu / weight
    keys[~(weight > 0)] = -np.inf
    return keys


# --------------------------------------------------------------------------------------------
# Per-block kernels (parts are prepared blocks: (X − mean | 1, None, w))
# --------------------------------------------------------------------------------------------

def _top_rows(part, d2, key: int, start: int, m: int):
    """The ``m`` rows of this block with the largest keys for weights ``w·d2``."""
    xa, _, wb = part
    n = xa.shape[0]
    weight = wb
    if d2 is not None:
        weight = d2 if wb is None else d2 * wb
    keys = _keys(row_uniforms(key, start, n), weight)
    top = largest(keys, m)
    return {"key": keys[top], "row": top.astype(np.int64) + start,
            "x": _sparse.take(_sparse.features(xa), top)}


def _merge_top(parts, m: int):
    keys = np.concatenate([p["key"] for p in parts])
    rows = np.concatenate([p["row"] for p in parts])
    order = np.lexsort((rows, -keys))[:m]
    return {"key": keys[order], "row": rows[order],
            "x": _sparse.stack_rows([p["x"] for p in parts])[order]}


def _sq_dist_min(x: np.ndarray, centres: np.ndarray, d2_prev) -> np.ndarray:
    """``min(d2_prev, min_c ‖x − c‖²)`` per row, in float64, chunked (no n × k temporary)."""
    n = x.shape[0]
    out = np.empty(n, dtype=np.float64) if d2_prev is None else d2_prev.copy()
    if centres.shape[0] == 0:
        if d2_prev is None:
            out[:] = np.inf
        return out
    if _sparse.issparse(x) or _sparse.issparse(centres):
        # ‖x‖² − 2x·c + ‖c‖² from the sparse products: no dense difference of a sparse row.
        cn = _sparse.row_sqnorms(centres)
        xn = _sparse.row_sqnorms(x)
        rows = chunk_rows(centres.shape[0], 0)
        for s in range(0, n, rows):
            dist = _sparse.cross(x[s:s + rows], centres, np.float64) * -2.0
            dist += cn
            sq = dist.min(axis=1) + xn[s:s + rows]
            np.maximum(sq, 0.0, out=sq)
            out[s:s + rows] = sq if d2_prev is None else np.minimum(out[s:s + rows], sq)
        return out
    c = np.asarray(centres, dtype=np.float64)
    rows = chunk_rows(len(c), x.shape[1])
    if len(c) == 1:
        for s in range(0, n, rows):
            diff = x[s:s + rows] - c[0]
            sq = np.einsum("ij,ij->i", diff, diff, dtype=np.float64)
            out[s:s + rows] = sq if d2_prev is None else np.minimum(out[s:s + rows], sq)
        return out
    cn = np.einsum("ij,ij->i", c, c)
    ct = np.ascontiguousarray(-2.0 * c.T)
    for s in range(0, n, rows):
        xc = x[s:s + rows].astype(np.float64, copy=False)
        dist = xc @ ct
        dist += cn
        sq = dist.min(axis=1) + np.einsum("ij,ij->i", xc, xc)
        np.maximum(sq, 0.0, out=sq)
        out[s:s + rows] = sq if d2_prev is None else np.minimum(out[s:s + rows], sq)
    return out


def _update(part, d2_prev, centres):
    """New squared distances to the nearest centre and this block's ``φ = Σ w·D²``."""
    xa, _, wb = part
    d2 = _sq_dist_min(_sparse.features(xa), centres, d2_prev)
    phi = float(d2.sum()) if wb is None else float(d2 @ wb)
    return d2, phi


def _update_and_pick(part, d2_prev, centre, key: int, start: int, trials: int):
    """k-means++ step: fold the newest centre into D², then this block's candidates for the next."""
    d2, _ = _update(part, d2_prev, _sparse.as_rows(centre))
    return d2, _top_rows(part, d2, key, start, trials)


def _potentials(part, d2, candidates):
    """``Σ w·min(D², ‖x − c‖²)`` for each candidate c (greedy k-means++ trials)."""
    xa, _, wb = part
    x = _sparse.features(xa)
    out = np.empty(candidates.shape[0])
    for t in range(candidates.shape[0]):
        new = _sq_dist_min(x, candidates[t:t + 1], d2)
        out[t] = new.sum() if wb is None else new @ wb
    return out


def _best_candidate(candidates, potentials):
    return candidates[int(np.argmin(potentials))]


def _first_row(candidates):
    return candidates[0]


def _oversample(part, d2, phi: float, ell: float, key: int, start: int):
    """k-means|| round: keep row i with probability ``min(1, ℓ·w_i·D_i²/φ)``."""
    xa, _, wb = part
    x = _sparse.features(xa)
    if not phi > 0:
        return x[:0].copy()
    p = ell * d2 / phi
    if wb is not None:
        p = p * wb
    keep = row_uniforms(key, start, xa.shape[0]) < p
    return _sparse.take(x, np.flatnonzero(keep))


def _nearest_weights(part, candidates):
    """Weight of the rows whose nearest candidate is each candidate (ties: lowest index)."""
    from dml.cluster._lloyd import assign

    xa, _, wb = part
    labels = assign(_sparse.features(xa), candidates)
    return np.bincount(labels, weights=wb, minlength=candidates.shape[0]).astype(np.float64)


def _concat_rows(parts):
    return _sparse.stack_rows(parts)


def _first_x(top):
    return top["x"][0]


def _stack(rows):
    rows = list(rows)
    return _sparse.stack_rows(rows) if _sparse.issparse(rows[0]) else np.stack(rows, axis=0)


def _x_of(top):
    return top["x"]


def _as_matrix(row):
    return _sparse.as_rows(row)


def _pair(a, b):
    return a, b


# --------------------------------------------------------------------------------------------
# Graph builders (return Delayed)
# --------------------------------------------------------------------------------------------

def _merge(parts, m):
    return tree_reduce(parts, functools.partial(_merge_top, m=m))


def random_init(parts, offsets, k: int, seed: int):
    """``k`` distinct rows, a weighted sample without replacement keyed by row (Delayed (k, d))."""
    key = stream_key(seed, "kmeans-random")
    tops = [delayed(_top_rows, pure=True)(p, None, key, int(offsets[i]), k)
            for i, p in enumerate(parts)]
    return delayed(_x_of, pure=True)(_merge(tops, k))


def _first_centre(parts, offsets, key: int):
    tops = [delayed(_top_rows, pure=True)(p, None, key, int(offsets[i]), 1)
            for i, p in enumerate(parts)]
    return delayed(_first_x, pure=True)(_merge(tops, 1))


def kmeans_plusplus_init(parts, offsets, k: int, seed: int, n_local_trials: int | None = None):
    """Exact greedy k-means++ as one graph of ``k`` steps (Delayed (k, d)).

    First centre: a row drawn with probability ∝ w. Each next centre: ``n_local_trials`` rows
    drawn with probability ∝ w·D(x)² (D: distance to the nearest centre chosen so far), and the
    one that lowers ``Σ w·D²`` most is kept: scikit-learn's greedy k-means++ with its default
    ``2 + ⌊ln k⌋`` trials (``n_local_trials=1`` is the plain k-means++ of docs/clustering.md). Each
    step is two layers of block tasks; D² stays on the workers between steps.
    """
    trials = n_local_trials or 2 + int(np.log(k))
    centre = _first_centre(parts, offsets, stream_key(seed, "kmeans++", 0))
    centres = [centre]
    d2 = [None] * len(parts)
    for j in range(1, k):
        key = stream_key(seed, "kmeans++", j)
        picks = []
        for i, p in enumerate(parts):
            d2[i], pick = delayed(_update_and_pick, pure=True, nout=2)(
                p, d2[i], centre, key, int(offsets[i]), trials)
            picks.append(pick)
        candidates = delayed(_x_of, pure=True)(_merge(picks, trials))
        if trials > 1:
            pots = tree_reduce([delayed(_potentials, pure=True)(p, d2[i], candidates)
                                for i, p in enumerate(parts)])
            centre = delayed(_best_candidate, pure=True)(candidates, pots)
        else:
            centre = delayed(_first_row, pure=True)(candidates)
        centres.append(centre)
    return delayed(_stack, pure=True)(centres)


def kmeans_parallel_candidates(parts, offsets, ell: float, rounds: int, seed: int):
    """k-means|| oversampling as one graph: Delayed ``(candidates (m, d), weights (m,))``.

    The first candidate is a row drawn with probability ∝ w; then ``rounds`` rounds each keep
    every row independently with probability ``min(1, ℓ·w·D²/φ)`` (``φ = Σ w·D²`` over all
    blocks). Candidates are weighted by the total weight of the rows nearest to them.
    """
    first = delayed(_as_matrix, pure=True)(
        _first_centre(parts, offsets, stream_key(seed, "kmeans||", 0)))
    chosen = [first]
    state = [delayed(_update, pure=True, nout=2)(p, None, first) for p in parts]
    for r in range(1, rounds + 1):
        phi = tree_reduce([s[1] for s in state])
        key = stream_key(seed, "kmeans||", r)
        sampled = [delayed(_oversample, pure=True)(p, state[i][0], phi, ell, key, int(offsets[i]))
                   for i, p in enumerate(parts)]
        new = tree_reduce(sampled, _concat_rows)
        chosen.append(new)
        if r < rounds:
            state = [delayed(_update, pure=True, nout=2)(p, state[i][0], new)
                     for i, p in enumerate(parts)]
    candidates = delayed(_concat_rows, pure=True)(chosen)
    weights = tree_reduce([delayed(_nearest_weights, pure=True)(p, candidates) for p in parts])
    return delayed(_pair, pure=True)(candidates, weights)


def weighted_kmeans_plusplus(candidates: np.ndarray, weights: np.ndarray, k: int, seed: int,
                             purpose: str = "kmeans||-reduce") -> np.ndarray:
    """k centres from the weighted candidates (client side; the candidates are few).

    scikit-learn's greedy k-means++ with sample weights, then a weighted Lloyd refinement on the
    candidates (Bahmani et al. recluster the weighted candidates into k centres).
    """
    from sklearn.cluster import KMeans as _SkKMeans
    from sklearn.cluster import kmeans_plusplus

    rs = np.random.RandomState(int(block_rng(seed, purpose).integers(0, 2**31 - 1)))
    if candidates.shape[0] <= k:
        # Oversampling stops when every row sits on a candidate (D² = 0 everywhere): the data
        # has at most this many distinct rows, so they all are centres (repeated up to k).
        return np.resize(_sparse.as_dense(candidates), (k, candidates.shape[1]))
    keep = np.flatnonzero(weights > 0)
    cand, wts = candidates[keep].astype(np.float64), weights[keep]
    few_distinct = _sparse.n_distinct_rows(cand) < k
    if few_distinct:
        # Fewer distinct candidates than clusters: take them all (duplicates included, like
        # scikit-learn on data with fewer distinct points than clusters).
        cand, wts = candidates.astype(np.float64), np.where(weights > 0, weights, 1e-12)
    # scikit-learn's validation wraps every call in ``warnings.catch_warnings``, which saves and
    # restores the process-wide filter list: calls overlapping in several threads (fits run
    # side by side) restore each other's filters and can leave one behind for good
    # (tests/test_concurrency.py). So the whole reduction runs one call at a time; it is small
    # (a few hundred weighted candidates).
    with _WARNINGS_LOCK:
        # (scikit-learn's k-means++ and Lloyd take sparse candidates as they are.)
        init, _ = kmeans_plusplus(cand, k, sample_weight=wts, random_state=rs)
        if cand.shape[0] == k or few_distinct:
            # With fewer distinct candidates than clusters k-means++ has taken every distinct
            # one; Lloyd would only shuffle the duplicates (and warn about them here, where
            # the user's data is not involved: the fit's own Lloyd warns on the data).
            return init
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rare empty cluster among the candidates
            km = _SkKMeans(k, init=init, n_init=1, random_state=rs).fit(cand, sample_weight=wts)
    return km.cluster_centers_
