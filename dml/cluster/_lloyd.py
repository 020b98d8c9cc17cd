"""Per-block k-means kernels: the fused Lloyd step, the final assignment, relocation candidates.

Training blocks are prepared once (:func:`prepare_block`): centred on the data mean, as
scikit-learn does for accuracy, and *augmented* with a trailing column of ones, so that one BLAS
product gives ``‖c‖² − 2 x·c`` for every centre (the ``‖c‖²`` row rides on the ones column), and
the product that accumulates the cluster sums gives the cluster weights in its last column.

A Lloyd step on a dense block (:func:`lloyd_block`) works chunk by chunk (cache-sized chunks:
the only temporary is ``chunk × k``, nothing of size ``n × k`` is allocated, no per-row
Python): one BLAS product gives the distances, then one compiled pass
(:func:`._kernels.argmin_sums`) takes each row's nearest centre and adds the row to that
centre's sums while the chunk is still in the cache. The inertia of the step needs no
per-row work: it follows from the sums (:func:`step_inertia`).

Ties between equally distant centres go to the lowest centre index, as in scikit-learn.

Sparse (CSR) blocks are prepared and processed by the kernels of :mod:`._sparse`, which the
functions here call when a block is sparse: no centring, no ones column, nothing densified.
"""
from __future__ import annotations

import numpy as np

from dml.cluster import _sparse

__all__ = ["prepare_block", "lloyd_block", "step_inertia", "final_block", "relocation_block",
           "average_centres", "assign", "labels_of", "cluster_sums", "chunk_rows",
           "augmented_centres", "largest", "stats_of_group", "labels_in_group", "combine_final",
           "predict_block", "transform_block", "score_block"]

#: Bytes of the per-chunk working set the chunk length is derived from (about one L2 cache).
CHUNK_BYTES = 512 * 1024


def chunk_rows(k: int, d: int) -> int:
    """Rows per chunk: the chunk's rows and its distances to the centres fit in
    :data:`CHUNK_BYTES`."""
    rows = CHUNK_BYTES // (8 * (k + d + 1))
    return int(min(8192, max(256, rows)))


def augmented_centres(centres: np.ndarray, dtype) -> np.ndarray:
    """``[−2 Cᵀ ; ‖c‖²]``, shape (d + 1, k): augmented rows times it give ``‖c‖² − 2 x·c``."""
    c = np.asarray(centres, dtype=np.float64)
    out = np.empty((c.shape[1] + 1, c.shape[0]), dtype=dtype)
    out[:-1] = -2.0 * c.T
    out[-1] = np.einsum("ij,ij->i", c, c)
    return out


# --------------------------------------------------------------------------------------------
# Preparation (once per fit)
# --------------------------------------------------------------------------------------------

#: Elements per row chunk of :func:`column_sums` (a 256 KiB buffer).
SUM_CHUNK_ELEMENTS = 1 << 15


def column_sums(x) -> np.ndarray:
    """Float64 column sums of a dense block, the same bits whatever its memory layout.

    For the same values NumPy's ``x.sum(axis=0)`` adds differently by layout: row after row
    in C order, pairwise down each column in Fortran order (a pandas frame's ``to_numpy()``),
    and in buffered pieces of 8,192 when the block is not aligned (as a block read back from a
    worker's spill file can be). So the rows are summed chunk by chunk, each chunk an aligned,
    C-ordered float64 array: the block's own rows when it is one, else a copy in one buffer.
    The additions are then the same for every layout (the data mean decides the centres'
    last bits, which must not depend on where a block lived).
    """
    n, d = x.shape
    out = np.zeros(d)
    rows = max(1, min(n, SUM_CHUNK_ELEMENTS // max(d, 1)))
    direct = x.dtype == np.float64 and x.flags.c_contiguous and x.flags.aligned
    buf = None if direct else np.empty((rows, d))
    for s in range(0, n, rows):
        m = min(rows, n - s)
        if direct:
            chunk = x[s:s + m]
        else:
            chunk = buf[:m]
            np.copyto(chunk, x[s:s + m])
        out += chunk.sum(axis=0)
    return out


def block_sums(xb, yb, wb):
    """Row count and column sums of a validated block (for the data mean)."""
    return {"n": xb.shape[0], "sum": column_sums(xb)}


def prepare_block(part, mean: np.ndarray):
    """``(X − mean | 1, None, w)``: the centred, augmented block the Lloyd kernels use.

    A sparse block is kept sparse and not centred (:func:`._sparse.prepare_sparse_block`).
    """
    xb, _, wb = part
    if _sparse.issparse(xb):
        return _sparse.prepare_sparse_block(xb, wb)
    n, d = xb.shape
    xa = np.empty((n, d + 1), dtype=xb.dtype)
    np.subtract(xb, mean.astype(xb.dtype), out=xa[:, :d])
    xa[:, d] = 1
    if wb is not None:
        wb = np.ascontiguousarray(wb, dtype=np.float64)
    return xa, None, wb


def prepared_stats(xa, yb, wb):
    """Statistics of a prepared block: squares (variance), bounds, weights, ``Σ w‖x‖²``."""
    if _sparse.issparse(xa):
        return _sparse.sparse_stats(xa, wb)
    from dml.cluster._kernels import column_stats

    n, d1 = xa.shape
    colsum, colsumsq, sq = np.zeros(d1 - 1), np.zeros(d1 - 1), np.empty(n)
    lo, hi = np.full(d1 - 1, np.inf), np.full(d1 - 1, -np.inf)
    column_stats(np.ascontiguousarray(xa), colsum, colsumsq, lo, hi, sq)  # one pass
    out = {"sum": colsum, "sumsq": colsumsq, "lo": lo, "hi": hi}
    return _sparse.with_weight_stats(out, n, sq, wb)


def mean_variance(stats, n: int) -> float:
    """Mean over the features of the (unweighted) variance: scikit-learn's ``tol`` scale."""
    mean = _sparse.as_dense(stats["sum"]).ravel() / n
    sumsq = _sparse.as_dense(stats["sumsq"]).ravel()
    return float(np.mean(np.maximum(sumsq / n - mean * mean, 0.0)))


def combine_prepared_stats(parts):
    parts = [p for p in parts if p is not None]
    return {"sum": sum(p["sum"] for p in parts[1:]) + parts[0]["sum"],
            "sumsq": sum(p["sumsq"] for p in parts[1:]) + parts[0]["sumsq"],
            "lo": None if parts[0]["lo"] is None else np.minimum.reduce([p["lo"] for p in parts]),
            "hi": None if parts[0]["hi"] is None else np.maximum.reduce([p["hi"] for p in parts]),
            "wsum": sum(p["wsum"] for p in parts),
            "wmin": min(p["wmin"] for p in parts),
            "wxsq": sum(p["wxsq"] for p in parts)}


# --------------------------------------------------------------------------------------------
# The fused Lloyd step
# --------------------------------------------------------------------------------------------

#: Rows per sparse accumulation: partial sums in X's dtype over at most this many rows, then
#: added in float64 (keeps float32 sums accurate).
SUM_ROWS = 16384


def labels_of(xa, caug, chunk=None, out=None):
    """Nearest centre of every row of a prepared block, chunk by chunk (int32).

    One BLAS product per chunk gives ``‖c‖² − 2 x·c`` (the ones column carries ``‖c‖²``), then
    ``argmin`` takes the first minimum: ties go to the lowest index, as in scikit-learn.
    """
    n = xa.shape[0]
    k = caug.shape[1]
    if _sparse.issparse(xa):
        return _sparse.sparse_labels(xa, caug, chunk or chunk_rows(k, 0))
    rows = chunk or chunk_rows(k, xa.shape[1] - 1)
    labels = np.empty(n, dtype=np.intp)
    dist = np.empty((min(rows, max(n, 1)), k), dtype=xa.dtype)
    for s in range(0, n, rows):
        dm = dist[:min(rows, n - s)]
        np.dot(xa[s:s + rows], caug, out=dm)
        np.argmin(dm, axis=1, out=labels[s:s + rows])
    return labels.astype(np.int32)


def cluster_sums(xa, wb, labels, k):
    """Weighted per-cluster sums of the rows (float64, (k, d + 1); weights in the last column).

    A sparse ``k × n`` assignment matrix (one weight per column) times the block: one compiled
    pass over the rows, no ``n × k`` one-hot matrix.
    """
    import scipy.sparse as sp

    if sp.issparse(xa):
        return _sparse.sparse_cluster_sums(xa, wb, labels, k, SUM_ROWS)
    n, d1 = xa.shape
    sums = np.zeros((k, d1), dtype=np.float64)
    for s in range(0, n, SUM_ROWS):
        m = min(SUM_ROWS, n - s)
        data = np.ones(m, dtype=xa.dtype) if wb is None else wb[s:s + m].astype(xa.dtype)
        assign = sp.csc_matrix((data, labels[s:s + m], np.arange(m + 1, dtype=np.int32)),
                               shape=(k, m))
        sums += assign @ xa[s:s + m]
    return sums


def lloyd_block(xa, yb, wb, centres_list, chunk=None):
    """One Lloyd step of several runs on one prepared block.

    Parameters
    ----------
    xa : ndarray (n, d + 1)
        Prepared block (:func:`prepare_block`).
    centres_list : list of ndarray (k_r, d)
        The current centres of every run (centred coordinates).

    Returns
    -------
    list of ndarray (k_r, d + 1), float64
        Per run: weighted per-cluster sums of the rows, the cluster weights in the last column
        (a sparse matrix for a sparse block: :func:`._sparse.dense_sums` after the reduction).
        The inertia of the step follows from them (:func:`step_inertia`).
    """
    if _sparse.issparse(xa):
        return [cluster_sums(xa, wb, labels_of(xa, augmented_centres(c, xa.dtype), chunk),
                             len(c)) for c in centres_list]
    return [_dense_step(xa, wb, augmented_centres(c, xa.dtype), chunk) for c in centres_list]


def _dense_step(xa, wb, caug, chunk=None):
    """The Lloyd step on a dense prepared block: per chunk, the distances by one BLAS product,
    then the nearest centres and the weighted sums in one compiled pass
    (:func:`._kernels.argmin_sums`)."""
    from dml.cluster._kernels import argmin_sums

    n, d1 = xa.shape
    k = caug.shape[1]
    rows = chunk or chunk_rows(k, d1 - 1)
    labels = np.empty(n, dtype=np.int32)
    sums = np.zeros((k, d1), dtype=np.float64)
    dist = np.empty((min(rows, max(n, 1)), k), dtype=xa.dtype)
    xa = np.ascontiguousarray(xa)
    w = _NO_WEIGHTS if wb is None else np.ascontiguousarray(wb, dtype=np.float64)
    for s in range(0, n, rows):
        dm = dist[:min(rows, n - s)]
        np.dot(xa[s:s + rows], caug, out=dm)
        argmin_sums(dm, xa, w, wb is not None, labels, sums, s)
    return sums


_NO_WEIGHTS = np.empty(0, dtype=np.float64)


def step_inertia(sums, centres, wxsq: float) -> float:
    """Inertia of an assignment from its cluster sums: ``Σw‖x‖² + Σ_k (W_k‖c_k‖² − 2 c_k·S_k)``.

    ``centres`` are those the rows were assigned to, ``wxsq`` is ``Σ w‖x‖²`` of the data.
    """
    c = np.asarray(centres, dtype=np.float64)
    d = c.shape[1]
    return float(wxsq + sums[:, d] @ np.einsum("ij,ij->i", c, c)
                 - 2.0 * np.einsum("ij,ij->", c, sums[:, :d]))


def average_centres(sums, wsum, d):
    """scikit-learn's ``_average_centers``: empty clusters sit on the heaviest one."""
    centres = sums[:, :d].copy()
    heaviest = int(np.argmax(wsum))
    for j in range(len(centres)):
        if wsum[j] > 0:
            centres[j] *= 1.0 / wsum[j]
        else:
            centres[j] = centres[heaviest]
    return centres


def combine_lloyd(parts):
    """Add per-run results of several blocks (fixed order, see :func:`dml._blocks.tree_reduce`)."""
    parts = [p for p in parts if p is not None]
    return [sum((p[r] for p in parts[1:]), parts[0][r].copy()) for r in range(len(parts[0]))]


# --------------------------------------------------------------------------------------------
# Assignment, exact inertia, relocation candidates
# --------------------------------------------------------------------------------------------

def assign(x, centres, chunk=None, with_distance=False):
    """Labels (int32) of the rows of ``x`` (raw rows, no ones column): scikit-learn's E-step.

    With ``with_distance`` also the exact squared distance of each row to its centre, computed
    from the differences as scikit-learn computes inertia.
    """
    n, d = x.shape
    k = centres.shape[0]
    if _sparse.issparse(x) or _sparse.issparse(centres):
        return _assign_sparse(x, centres, chunk or chunk_rows(k, 0), with_distance)
    cdt = np.asarray(centres, dtype=x.dtype)
    c2t = np.ascontiguousarray(-2.0 * cdt.T)
    cn = np.einsum("ij,ij->i", cdt, cdt)
    rows = chunk or chunk_rows(k, d)
    labels = np.empty(n, dtype=np.int32)
    dist = np.empty((min(rows, max(n, 1)), k), dtype=x.dtype)
    sq = np.empty(n, dtype=np.float64) if with_distance else None
    for s in range(0, n, rows):
        xc = x[s:s + rows]
        m = xc.shape[0]
        dm = dist[:m]
        np.dot(xc, c2t, out=dm)
        dm += cn
        lab = dm.argmin(axis=1)
        labels[s:s + m] = lab
        if with_distance:
            sq[s:s + m] = _sq_to(xc, cdt, lab)
    return (labels, sq) if with_distance else labels


def _assign_sparse(x, centres, rows, with_distance):
    """:func:`assign` when the rows or the centres are sparse (distances from norms)."""
    cn = _sparse.row_sqnorms(centres)
    dtype = np.float64 if _sparse.issparse(centres) else x.dtype
    return _sparse.nearest_by_norms(x, lambda xc: _sparse.cross(xc, centres, dtype) * -2.0,
                                    cn, rows, with_distance)


def _sq_to(x, centres, labels):
    diff = x - centres[labels]
    return np.einsum("ij,ij->i", diff, diff, dtype=np.float64)


def _labels_and_distances(xa, centres, chunk=None):
    """Labels as in the Lloyd step and each row's exact squared distance to its centre."""
    if _sparse.issparse(xa):
        # No differences without densifying: ‖x‖² − 2x·c + ‖c‖², as scikit-learn on sparse X.
        return _sparse.sparse_labels(xa, augmented_centres(centres, xa.dtype),
                                     chunk or chunk_rows(len(centres), 0), with_distance=True)
    from dml.cluster._kernels import argmin_sqdist

    n, d1 = xa.shape
    k = len(centres)
    c = np.ascontiguousarray(centres, dtype=xa.dtype)
    caug = augmented_centres(centres, xa.dtype)
    rows = chunk or chunk_rows(k, d1 - 1)
    labels = np.empty(n, dtype=np.int32)
    sq = np.empty(n, dtype=np.float64)
    dist = np.empty((min(rows, max(n, 1)), k), dtype=xa.dtype)
    xa = np.ascontiguousarray(xa)
    for s in range(0, n, rows):
        dm = dist[:min(rows, n - s)]
        np.dot(xa[s:s + rows], caug, out=dm)
        argmin_sqdist(dm, xa, c, labels, sq, s)
    return labels, sq


def final_block(xa, yb, wb, centres_list):
    """Final E-step of several runs.

    Returns labels (n_runs, n) int32, exact inertias (n_runs,) and per run the number of rows
    of each cluster.
    """
    labels = np.empty((len(centres_list), xa.shape[0]), dtype=np.int32)
    inertia = np.zeros(len(centres_list))
    counts = []
    for r, centres in enumerate(centres_list):
        lab, sq = _labels_and_distances(xa, centres)
        labels[r] = lab
        inertia[r] = float(sq.sum()) if wb is None else float(sq @ wb)
        counts.append(np.bincount(lab, minlength=len(centres)))
    return labels, inertia, counts


def final_stats_block(xa, yb, wb, centres_list):
    """:func:`final_block` without the labels: exact inertias and cluster sizes per run."""
    _, inertia, counts = final_block(xa, yb, wb, centres_list)
    return inertia, counts


def relocation_block(index, xa, yb, wb, centres_list, n_far, offsets):
    """Candidates for empty-cluster relocation: the rows farthest from their centres.

    For every run that lost a cluster, the ``n_far[r]`` rows of this block with the largest
    squared distance to their (old) centre, as ``(distance, global row, row, weight, label)``
    sorted by distance descending then row ascending, so merging blocks gives the global top
    rows whatever the partitioning.
    """
    x = _sparse.features(xa)
    out = []
    start = int(offsets[index])
    for centres, m in zip(centres_list, n_far):
        lab, sq = _labels_and_distances(xa, centres)
        m = min(int(m), len(sq))
        if m == 0:
            out.append(_empty_candidates(x))
            continue
        top = largest(sq, m)
        out.append({"dist": sq[top], "row": top.astype(np.int64) + start,
                    "x": _sparse.take(x, top),
                    "w": (np.ones(m) if wb is None else wb[top].astype(np.float64)),
                    "label": lab[top]})
    return out


def largest(values: np.ndarray, m: int) -> np.ndarray:
    """Indices of the ``m`` largest values, largest first, ties by lowest index.

    Unlike a bare ``argpartition``, ties at the cut are resolved by index, so the selection
    is the same however the rows are split into blocks (per-block selections merge exactly).
    """
    n = len(values)
    m = min(int(m), n)
    if m <= 0:
        return np.empty(0, dtype=np.intp)
    if m < n:
        cut = np.partition(values, n - m)[n - m]
        idx = np.flatnonzero(values >= cut)
    else:
        idx = np.arange(n)
    return idx[np.lexsort((idx, -values[idx]))][:m]


def _empty_candidates(x):
    return {"dist": np.empty(0), "row": np.empty(0, np.int64), "x": x[:0].copy(),
            "w": np.empty(0), "label": np.empty(0, np.int32)}


def merge_candidates(parts, n_far):  # used as functools.partial(merge_candidates, n_far=...)
    """Global top rows per run from per-block candidate lists (distance desc, row asc)."""
    parts = [p for p in parts if p is not None]
    out = []
    for r, m in enumerate(n_far):
        cand = {key: (_sparse.stack_rows if key == "x" else np.concatenate)(
            [p[r][key] for p in parts]) for key in parts[0][r]}
        order = np.lexsort((cand["row"], -cand["dist"]))[:m]
        out.append({key: v[order] for key, v in cand.items()})
    return out


# --------------------------------------------------------------------------------------------
# The estimator's other tasks (here, not in dml.cluster._kmeans: a worker that runs them then
# imports no scikit-learn)
# --------------------------------------------------------------------------------------------

def stats_of_group(results):
    """``(inertia, counts)`` of each block of a :func:`final_block` group task's results."""
    return [(inertia, counts) for _, inertia, counts in results]


def labels_in_group(results, j, r):
    """Run ``r``'s labels of block ``j`` of a :func:`final_block` group task's results."""
    return results[j][0][r]


def combine_final(parts):
    """Sum of :func:`final_stats_block` results (inertias, and cluster sizes per run)."""
    parts = [p for p in parts if p is not None]
    inertia = sum((p[0] for p in parts[1:]), parts[0][0].copy())
    counts = [sum((p[1][r] for p in parts[1:]), parts[0][1][r].copy())
              for r in range(len(parts[0][1]))]
    return inertia, counts


def predict_block(xb, centres):
    """Index of each row's nearest centre (``KMeans.predict`` of one block)."""
    if not _sparse.issparse(xb):
        xb = np.ascontiguousarray(xb)
    return assign(xb, centres.astype(xb.dtype))


def transform_block(xb, centres):
    """Distances of each row to every centre (``KMeans.transform`` of one block)."""
    # scikit-learn's own (imported when first transforming, as its results are the reference).
    from sklearn.metrics.pairwise import euclidean_distances

    return euclidean_distances(xb, centres.astype(xb.dtype))


def score_block(xb, yb, wb, centres):
    """Weighted sum of squared distances to the nearest centres (``KMeans.score``, negated)."""
    _, sq = assign(xb, centres.astype(xb.dtype), with_distance=True)
    return float(sq.sum()) if wb is None else float(sq @ wb)
