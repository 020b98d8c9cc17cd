"""k-means on sparse rows: the per-block maths for CSR blocks, never densifying a block.

Sparse training blocks are not centred (centring would fill every entry; scikit-learn centres
only dense X) and get no ones column: a prepared sparse block is the CSR matrix itself. The
squared distance to a centre is ``‖x‖² − 2 x·c + ‖c‖²``, with the products ``X·Cᵀ`` done by
the sparse matrix product (O(nnz · k)); centres stay dense, of shape (k, d). The per-cluster
sums of a Lloyd step are a sparse assignment matrix times the CSR block, kept sparse (a block
touches only the columns of its rows), and become dense only once reduced over all blocks.

The dense kernels of :mod:`._lloyd` and :mod:`._init` call the helpers here when a block (or a
set of candidate rows drawn from sparse blocks) is sparse, so both kinds of data share one
driver, one initialisation and one reduction order.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dml._block_checks import c_aligned

__all__ = ["issparse", "features", "take", "stack_rows", "row_sqnorms", "cross",
           "prepare_sparse_block", "sparse_stats", "sparse_labels", "sparse_cluster_sums",
           "dense_sums", "as_dense", "as_rows", "n_distinct_rows"]

issparse = sp.issparse


def features(xa):
    """The feature columns of a prepared block (dense blocks carry a trailing ones column)."""
    return xa if sp.issparse(xa) else xa[:, :-1]


def take(x, idx):
    """Rows ``idx`` of ``x`` as a new matrix (CSR stays CSR)."""
    return x[idx] if sp.issparse(x) else x[idx].copy()


def stack_rows(parts):
    """Rows of several matrices stacked; sparse when any of them is sparse."""
    parts = list(parts)
    if any(sp.issparse(p) for p in parts):
        return sp.vstack([sp.csr_matrix(p) for p in parts], format="csr")
    return np.concatenate(parts, axis=0)


def as_rows(x):
    """A row (1-D dense) or a matrix of rows as a 2-D matrix of rows."""
    return x if sp.issparse(x) or np.ndim(x) == 2 else np.asarray(x)[None, :]


def as_dense(x, dtype=np.float64):
    """``x`` as a dense ndarray (small matrices only: centres, candidates, reduced sums)."""
    return np.asarray(x.toarray() if sp.issparse(x) else x, dtype=dtype)


def row_sqnorms(x) -> np.ndarray:
    """``‖x_i‖²`` of every row, float64; O(nnz) for CSR."""
    if sp.issparse(x):
        x = sp.csr_matrix(x)
        sq = np.square(x.data, dtype=np.float64)
        out = np.zeros(x.shape[0])
        nz = np.diff(x.indptr) > 0
        if sq.size:
            out[nz] = np.add.reduceat(sq, x.indptr[:-1][nz])
        return out
    return np.einsum("ij,ij->i", x, x, dtype=np.float64)


def cross(x, c, dtype=None) -> np.ndarray:
    """Dense ``x · cᵀ`` (n, m) for any mix of sparse and dense ``x`` and ``c``."""
    out = x @ (c.T if sp.issparse(c) else np.ascontiguousarray(c.T))
    out = out.toarray() if sp.issparse(out) else np.asarray(out)
    return out if dtype is None else out.astype(dtype, copy=False)


def n_distinct_rows(x) -> int:
    """Number of distinct rows of a (small) dense or sparse matrix."""
    if not sp.issparse(x):
        return len(np.unique(x, axis=0))
    x = sp.csr_matrix(x, copy=True)
    x.eliminate_zeros()
    x.sort_indices()
    rows = {(x.indices[a:b].tobytes(), x.data[a:b].tobytes())
            for a, b in zip(x.indptr[:-1], x.indptr[1:])}
    return len(rows)


# --------------------------------------------------------------------------------------------
# Preparation and statistics
# --------------------------------------------------------------------------------------------

def prepare_sparse_block(xb, wb):
    """The prepared form of a CSR block: canonical CSR (no duplicates), not centred."""
    xs = sp.csr_matrix(xb, copy=True)
    xs.sum_duplicates()
    if wb is not None:
        wb = np.ascontiguousarray(wb, dtype=np.float64)
    return xs, None, wb


def _column_sums(xs, values):
    """Per-column sums of ``values`` (one per stored entry) as a sparse (1, d) row: O(nnz)."""
    # Copies: sum_duplicates works in place, and the block's arrays must stay as they are.
    row = sp.csr_matrix((np.array(values, dtype=np.float64), xs.indices.copy(),
                         [0, len(values)]), shape=(1, xs.shape[1]))
    row.sum_duplicates()
    return row


def sparse_stats(xs, wb):
    """:func:`._lloyd.prepared_stats` of a CSR block: the column sums and squares stay sparse
    (a block touches few of 2^20 columns) and there are no bounds (only the gap statistic
    uses them, and it takes dense X only)."""
    n = xs.shape[0]
    sq = row_sqnorms(xs)
    data = xs.data.astype(np.float64)
    out = {"sum": _column_sums(xs, data), "sumsq": _column_sums(xs, data * data),
           "lo": None, "hi": None}
    return with_weight_stats(out, n, sq, wb)


def with_weight_stats(out: dict, n: int, sq, wb) -> dict:
    """``out`` with the block's weight statistics: the weight sum, the smallest weight and the
    weighted sum of the rows' squared norms ``sq`` (dense and sparse blocks alike)."""
    if wb is None:
        out.update(wsum=float(n), wmin=1.0, wxsq=float(sq.sum()))
    else:
        # Aligned first: NumPy sums a misaligned array (one read back from a spill file) in
        # buffered pieces, with other last bits (see _lloyd.column_sums).
        wb = c_aligned(wb)
        out.update(wsum=float(wb.sum()), wmin=float(wb.min()) if len(wb) else np.inf,
                   wxsq=float(sq @ wb))
    return out


# --------------------------------------------------------------------------------------------
# Lloyd step
# --------------------------------------------------------------------------------------------

def sparse_labels(xs, caug, rows: int, with_distance: bool = False):
    """Nearest centre of every CSR row from ``caug = [−2Cᵀ ; ‖c‖²]`` (ties: lowest index).

    With ``with_distance`` also each row's squared distance to it, ``‖x‖² + min(‖c‖² − 2x·c)``
    (clipped at 0), in float64.
    """
    ct, cn = caug[:-1], caug[-1]
    return nearest_by_norms(xs, lambda x: np.asarray(x @ ct), cn, rows, with_distance)


def nearest_by_norms(x, cross_m2, cn, rows: int, with_distance: bool):
    """Nearest centre of every row of ``x`` from ``cross_m2(rows) + ‖c‖²`` (``cross_m2`` gives
    ``−2 x·c``), ``rows`` rows at a time (ties: lowest index); with ``with_distance`` also the
    squared distances ``‖x‖² + min(‖c‖² − 2x·c)``, clipped at 0, in float64."""
    n = x.shape[0]
    labels = np.empty(n, dtype=np.int32)
    sq = np.empty(n) if with_distance else None
    for s in range(0, n, rows):
        dm = cross_m2(x[s:s + rows])
        dm += cn
        lab = np.argmin(dm, axis=1)
        labels[s:s + rows] = lab
        if with_distance:
            sq[s:s + rows] = dm[np.arange(len(lab)), lab]
    if with_distance:
        sq += row_sqnorms(x)
        np.maximum(sq, 0.0, out=sq)
        return labels, sq
    return labels


def sparse_cluster_sums(xs, wb, labels, k: int, sum_rows: int):
    """Weighted per-cluster sums of CSR rows as a sparse (k, d + 1) float64 CSR matrix, the
    cluster weights in the last column (the dense kernel's layout)."""
    n, d = xs.shape
    sums = sp.csr_matrix((k, d), dtype=np.float64)
    weights = np.zeros(k)
    for s in range(0, n, sum_rows):
        m = min(sum_rows, n - s)
        data = np.ones(m, dtype=xs.dtype) if wb is None else wb[s:s + m].astype(xs.dtype)
        assign = sp.csr_matrix((data, labels[s:s + m], np.arange(m + 1, dtype=np.int32)),
                               shape=(m, k)).T.tocsr()
        sums = sums + (assign @ xs[s:s + m]).astype(np.float64)
        weights += np.bincount(labels[s:s + m], weights=None if wb is None else wb[s:s + m],
                               minlength=k)
    return sp.hstack([sums, sp.csr_matrix(weights[:, None])], format="csr")


def dense_sums(per_run):
    """Reduced per-run sums as dense float64 arrays (sparse blocks reduce to sparse sums)."""
    return [as_dense(s) for s in per_run]
