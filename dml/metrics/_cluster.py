"""Silhouette coefficient computed blockwise (scikit-learn's definition; see docs/clustering.md).

For a row i of cluster A: ``a(i)`` is its mean Euclidean distance to the other rows of A,
``b(i)`` the smallest mean distance to the rows of another cluster, and
``s(i) = (b − a) / max(a, b)`` (0 when A has one row). The score is the mean of ``s(i)``.

Only per-cluster sums of distances travel: for a set of query rows each block returns, for every
query row, the sum of its distances to the block's rows of each cluster (a ``queries × clusters``
table), and the tables are added in the fixed tree order. Exact mode (``sample_size=None``) takes
every block in turn as the query set (block pairs, ``O(n²)`` distances: for small data). With
``sample_size`` the queries are a seeded sample of rows, keyed by the global row index so the
sample does not depend on the partitioning, and their ``a``/``b`` are computed against *all*
rows (scikit-learn's ``sample_size`` instead restricts the distances to the sample; the values
here are the exact silhouettes of the sampled rows).
"""
from __future__ import annotations

import functools

import numpy as np
from dask import delayed

from dml._blocks import BlockSpec, as_blocks, compute, seed_from, tree_add, tree_reduce

__all__ = ["silhouette_score"]

_NAME = "silhouette_score"
#: Elements of the (queries × rows) distance tile computed at once.
_TILE = 1 << 21


def _label_values(xb, yb, wb):
    values, counts = np.unique(yb, return_counts=True)
    return values, counts


def _merge_label_values(parts):
    parts = [p for p in parts if p is not None and len(p[0])]
    if not parts:
        return np.empty(0), np.empty(0, dtype=np.int64)
    values = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[1] for p in parts])
    uniq, inverse = np.unique(values, return_inverse=True)
    return uniq, np.bincount(inverse, weights=counts).astype(np.int64)


def _codes(yb, classes):
    return np.searchsorted(classes, yb).astype(np.intp)


def _distance_sums(q, q_rows, x, codes, start, n_labels):
    """Σ of Euclidean distances from each query row to the rows of ``x`` of each cluster.

    ``q_rows``: global row numbers of the queries, so that a query's distance to itself is
    exactly 0 (the expansion formula would leave round-off there), as in scikit-learn.
    """
    from sklearn.metrics.pairwise import euclidean_distances

    out = np.zeros((len(q), n_labels))
    if len(x) == 0 or len(q) == 0:
        return out
    step = max(1, _TILE // max(len(q), 1))
    for s in range(0, len(x), step):
        xs = x[s:s + step]
        dist = euclidean_distances(q, xs)
        self_hit = (q_rows >= start + s) & (q_rows < start + s + len(xs))
        if self_hit.any():
            idx = np.flatnonzero(self_hit)
            dist[idx, q_rows[idx] - start - s] = 0.0
        onehot = np.zeros((len(xs), n_labels))
        onehot[np.arange(len(xs)), codes[s:s + step]] = 1.0
        out += dist @ onehot
    return out


def _sums_against_block(index, xb, yb, wb, queries, q_rows, classes, offsets):
    return _distance_sums(queries, q_rows, xb, _codes(yb, classes), int(offsets[index]),
                          len(classes))


def _pair_sums(part_q, part_x, start_q, start_x, classes):
    xq, _, _ = part_q
    xx, yx, _ = part_x
    q_rows = np.arange(start_q, start_q + len(xq))
    return _distance_sums(xq, q_rows, xx, _codes(yx, classes), start_x, len(classes))


def _silhouettes(sums, codes, counts):
    """s(i) of each query row from its per-cluster distance sums."""
    n_q = len(codes)
    own = counts[codes]
    with np.errstate(divide="ignore", invalid="ignore"):
        a = sums[np.arange(n_q), codes] / (own - 1)
        means = sums / counts
    means[np.arange(n_q), codes] = np.inf
    b = means.min(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (b - a) / np.maximum(a, b)
    s = np.nan_to_num(s)
    s[own == 1] = 0.0
    return s


def _block_silhouette_sum(sums, part, classes, counts):
    _, yb, _ = part
    return float(_silhouettes(sums, _codes(yb, classes), counts).sum())


def _top_sample(index, xb, yb, wb, key, m, offsets):
    from dml.cluster._init import row_uniforms

    from dml.cluster._lloyd import largest

    start = int(offsets[index])
    u = row_uniforms(key, start, len(xb))
    top = largest(-u, m)
    return {"u": u[top], "row": top.astype(np.int64) + start, "x": np.asarray(xb)[top],
            "y": np.asarray(yb)[top]}


def _merge_sample(parts, m):
    parts = [p for p in parts if p is not None]
    u = np.concatenate([p["u"] for p in parts])
    rows = np.concatenate([p["row"] for p in parts])
    order = np.lexsort((rows, u))[:m]
    order = order[np.argsort(rows[order], kind="stable")]
    return {"row": rows[order], "x": np.concatenate([p["x"] for p in parts])[order],
            "y": np.concatenate([p["y"] for p in parts])[order]}


def sample_rows(blocks, sample_size: int, seed: int):
    """The seeded sample of rows (by global row order): dict of ``row``, ``x``, ``y``."""
    from dml.cluster._init import stream_key

    offsets = np.concatenate([[0], np.cumsum(blocks.lengths)])
    return blocks.map_reduce(_top_sample, stream_key(seed, "silhouette"), sample_size, offsets,
                             combine=functools.partial(_merge_sample, m=sample_size),
                             with_index=True)


def silhouette_score(X, labels, *, metric="euclidean", sample_size=None, random_state=None):
    """Mean silhouette coefficient of all rows, or of a seeded sample of rows.

    Parameters
    ----------
    X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
    labels : array-like, Dask array/Series or column name of X's dataframe, shape (n_samples,)
        Cluster label of each row (any sortable values).
    metric : {"euclidean"}, default="euclidean"
        Only the Euclidean distance is supported.
    sample_size : int, optional
        Average the silhouettes of this many rows, drawn without replacement (seeded by
        ``random_state``); each one is computed exactly against all rows. ``None``: all rows,
        exactly (``O(n²)`` distance evaluations, computed over pairs of blocks).
    random_state : int, RandomState, Generator or None
        Seed of the sample.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [10.0], [11.0]])
    >>> round(silhouette_score(X, [0, 0, 1, 1]), 6)
    0.9
    """
    if metric != "euclidean":
        raise ValueError(f"{_NAME}: only metric='euclidean' is supported, got {metric!r}")
    blocks = as_blocks(X, labels, spec=BlockSpec(estimator=_NAME), require_y=True)
    n = blocks.n_samples
    classes, counts = blocks.map_reduce(_label_values, combine=_merge_label_values)
    if not 2 <= len(classes) <= n - 1:
        raise ValueError(f"Number of labels is {len(classes)}. Valid values are 2 to "
                         f"n_samples - 1 (inclusive)")
    offsets = np.concatenate([[0], np.cumsum(blocks.lengths)])
    if sample_size is not None:
        if isinstance(sample_size, bool) or not isinstance(sample_size, (int, np.integer)) \
                or sample_size < 1:
            raise ValueError(f"{_NAME}: sample_size must be a positive integer or None, got "
                             f"{sample_size!r}")
        sample = sample_rows(blocks, int(min(sample_size, n)), seed_from(random_state))
        q = np.ascontiguousarray(sample["x"], dtype=np.float64)
        sums = blocks.map_reduce(_sums_against_block, q, sample["row"], classes, offsets,
                                 with_index=True)
        return float(_silhouettes(sums, _codes(sample["y"], classes), counts).mean())
    parts = blocks.parts
    totals = []
    for i, pq in enumerate(parts):
        pair = [delayed(_pair_sums, pure=True)(pq, px, int(offsets[i]), int(offsets[j]), classes)
                for j, px in enumerate(parts)]
        sums = tree_reduce(pair)
        totals.append(delayed(_block_silhouette_sum, pure=True)(sums, pq, classes, counts))
    (total,) = compute(tree_reduce(totals, tree_add))
    return float(total / n)
