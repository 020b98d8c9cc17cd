"""Feature binning for the histogram trees: a mergeable quantile sketch and the uint8 bin kernel.

One pass over the blocks computes, per numeric feature, a summary of its values (exact distinct
values with counts while there are at most :data:`SKETCH_SIZE` of them, else an equal-weight
quantile summary of that size) and the set of class labels. Summaries of blocks are merged in the
fixed reduction order, so the bin edges depend on the data and its partitioning only.

Bins of a numeric feature: with at most ``max_bins`` distinct values, the edges are the midpoints
between adjacent distinct values (the exact thresholds of scikit-learn's trees); otherwise they
are ``max_bins - 1`` quantiles of the sketch. A value ``x`` falls in bin
``b = #{edges < x}``, so ``bin <= b`` is exactly ``x <= edges[b]``. Categorical columns (pandas
``category`` dtype) use their category codes as bins. Missing values (NaN, pd.NA, unknown
categories) get the reserved bin :data:`MISSING` = 255.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from dml._numba import kernel

#: Bin code of a missing value (never a real bin: ``max_bins <= 255``).
MISSING = 255
#: Size of one feature's quantile summary in the sketch (per block and after each merge).
SKETCH_SIZE = 2048


def _runs(v: np.ndarray):
    """Distinct values of a sorted, NaN-free array and the first position of each (what
    ``np.unique(v, return_index=True)`` gives, without sorting ``v`` again)."""
    first = np.empty(v.size, dtype=bool)
    first[:1] = True
    np.not_equal(v[1:], v[:-1], out=first[1:])
    start = np.flatnonzero(first)
    return v[start], start


@kernel(nogil=True)
def sort_values(keys, tmp, count):
    """Sorts float64 values without NaN in place, given as their bits (``keys``: the array
    viewed as uint64; ``tmp`` as long, ``count`` 2048 int64): a least-significant-digit radix
    sort, 11 bits a pass, passes whose digit is the same for every value skipped.

    The values come out in ``np.sort``'s order (equal values are equal bits, but for -0.0,
    which comes before 0.0 here), in about half its time on a block's column: the quantile
    sketch sorts every column of every block."""
    n = keys.shape[0]
    sign = np.uint64(1) << np.uint64(63)
    for i in range(n):  # the float order as the unsigned order of the keys
        k = keys[i]
        keys[i] = ~k if k & sign else k | sign
    src, dst = keys, tmp
    for p in range(6):
        shift = np.uint64(11 * p)
        count[:] = 0
        for i in range(n):
            count[(src[i] >> shift) & np.uint64(2047)] += 1
        if n == 0 or count[(src[0] >> shift) & np.uint64(2047)] == n:
            continue
        total = 0
        for q in range(2048):
            c = count[q]
            count[q] = total
            total += c
        for i in range(n):
            digit = (src[i] >> shift) & np.uint64(2047)
            dst[count[digit]] = src[i]
            count[digit] += 1
        src, dst = dst, src
    for i in range(n):
        k = src[i]
        keys[i] = k ^ sign if k & sign else ~k


def _sorted(values: np.ndarray) -> np.ndarray:
    """A sorted copy of float64 ``values`` (no NaN), by :func:`sort_values`."""
    out = np.array(values, dtype=np.float64, order="C")
    sort_values(out.view(np.uint64), np.empty(out.size, dtype=np.uint64),
                np.zeros(2048, dtype=np.int64))
    return out


def _compress(values: np.ndarray, weights: np.ndarray | None, k: int = SKETCH_SIZE):
    """Exact (distinct values, weights) when at most ``k`` distinct values, else ``k`` quantiles.
    ``weights=None``: every value weighs 1 (a plain sort then does: the weights of equal values
    are counts, whatever their order). ``values`` hold no NaN."""
    if values.size == 0:
        return values.astype(np.float64), np.zeros(0)
    if weights is None:
        uniq, start = _runs(_sorted(values))
        wsum = np.diff(start, append=values.size).astype(np.float64)
    else:
        # Stable: equal values' weights are added in their order in ``values``.
        order = np.argsort(values, kind="stable")
        v, w = values[order], weights[order]
        uniq, start = _runs(v)
        wsum = np.add.reduceat(w, start)
    if uniq.size <= k:
        return uniq, wsum
    cum = np.cumsum(wsum)
    total = cum[-1]
    # k points at the centres of k equal-weight slices; each carries total/k.
    targets = (np.arange(k) + 0.5) * (total / k)
    idx = np.minimum(np.searchsorted(cum, targets, side="left"), uniq.size - 1)
    return uniq[idx], np.full(k, total / k)


def as_float_block(xb, categorical: np.ndarray, categories: list, estimator: str) -> np.ndarray:
    """A block of X as a float64 array; categorical columns become codes (missing/unknown: NaN)."""
    if isinstance(xb, pd.DataFrame):
        cols = []
        for j, (name, col) in enumerate(xb.items()):
            if categorical[j]:
                cats = categories[j]
                index = pd.Index(cats)
                if isinstance(col.dtype, pd.CategoricalDtype):
                    own = index.get_indexer(col.cat.categories)
                    raw = np.asarray(col.cat.codes)
                    codes = np.where(raw >= 0, own[raw], -1)
                else:
                    codes = index.get_indexer(col.astype(object))
                c = codes.astype(np.float64)
                c[codes < 0] = np.nan
                cols.append(c)
            else:
                if not (pd.api.types.is_numeric_dtype(col.dtype)
                        or pd.api.types.is_bool_dtype(col.dtype)):
                    raise TypeError(f"{estimator}: column {name!r} is not numeric; give it the "
                                    "pandas 'category' dtype (astype('category')) or encode it")
                cols.append(col.to_numpy(dtype=np.float64, na_value=np.nan))
        x = np.column_stack(cols) if cols else np.empty((len(xb), 0))
    else:
        x = np.asarray(xb)
        if x.dtype.kind not in "biuf":
            try:
                x = x.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"{estimator}: X contains non-numeric values ({exc}); encode "
                                "them or pass a dataframe with 'category' columns") from None
        x = x.astype(np.float64, copy=False)
    if np.isinf(x).any():
        raise ValueError(f"{estimator}: Input X contains infinity; replace or drop infinite "
                         "values (NaN is accepted: missing values follow the learned default "
                         "direction of each split).")
    return x


def sketch_kernel(xb, yb, wb, categorical, categories, classify, estimator):
    """Per block: per-feature value summaries, the labels present and the row count."""
    x = as_float_block(xb, categorical, categories, estimator)
    sketches = []
    for j in range(x.shape[1]):
        if categorical[j]:
            sketches.append(None)
            continue
        col = x[:, j]
        col = col[~np.isnan(col)]
        sketches.append(_compress(col, None))
    labels = None
    if classify and yb is not None:
        labels = np.unique(yb)
    return {"sketch": sketches, "labels": labels, "n": x.shape[0]}


def combine_sketches(parts):
    parts = [p for p in parts if p is not None]
    first = parts[0]
    sketches = []
    for j in range(len(first["sketch"])):
        if first["sketch"][j] is None:
            sketches.append(None)
            continue
        v = np.concatenate([p["sketch"][j][0] for p in parts])
        w = np.concatenate([p["sketch"][j][1] for p in parts])
        sketches.append(_compress(v, w))
    labels = [p["labels"] for p in parts if p["labels"] is not None]
    return {"sketch": sketches,
            "labels": np.unique(np.concatenate(labels)) if labels else None,
            "n": sum(p["n"] for p in parts)}


def edges_from_sketch(values: np.ndarray, weights: np.ndarray, max_bins: int) -> np.ndarray:
    """Bin edges of one numeric feature (see the module docstring)."""
    if values.size <= 1:
        return np.empty(0)
    if values.size <= max_bins:
        return (values[:-1] + values[1:]) / 2.0
    cum = np.cumsum(weights)
    targets = np.arange(1, max_bins) * (cum[-1] / max_bins)
    idx = np.minimum(np.searchsorted(cum, targets, side="left"), values.size - 2)
    # An edge between two summary points keeps both sides non-empty.
    edges = np.unique((values[idx] + values[idx + 1]) / 2.0)
    return edges


#: Cells of the table that gives the binning kernel a first guess of a value's bin: the range
#: between a feature's first and last edge cut into this many equal cells.
HINT_CELLS = 1024


@kernel(nogil=True)
def bin_numeric(x, edges, starts, columns, low, scale, hint, out):
    """Bins of the numeric ``columns`` of ``x``: ``out[i, j]`` is the number of edges below
    ``x[i, j]`` (``np.searchsorted(edges_j, x[i, j], side="left")``), :data:`MISSING` for NaN.
    ``edges[starts[j]:starts[j + 1]]`` are column ``j``'s sorted edges.

    A binary search costs a chain of dependent loads per value (``np.searchsorted`` about
    50 ns). Instead the value's cell in an equal-width grid over the edges (``low[c]``,
    ``scale[c]`` cells per unit) gives a first guess, ``hint[c, cell]`` (the bin of the
    cell's left end), which is then moved up or down while an edge says it is wrong: the
    result is the exact count whatever the guess (rounding in the cell only costs steps), and
    with quantile edges a guess is off by a step or two at most. Rows in memory order."""
    n = x.shape[0]
    cells = hint.shape[1]
    for i in range(n):
        for c in range(columns.shape[0]):
            j = columns[c]
            v = x[i, j]
            if np.isnan(v):
                out[i, j] = MISSING  # numba freezes the global as a constant
                continue
            s = starts[j]
            m = starts[j + 1] - s
            t = (v - low[c]) * scale[c]
            if not t >= 0.0:
                k = 0
            elif t >= cells:
                k = m
            else:
                k = np.int64(hint[c, int(t)])
            while k < m and edges[s + k] < v:
                k += 1
            while k > 0 and not edges[s + k - 1] < v:
                k -= 1
            out[i, j] = k


def _hints(edges, numeric):
    """The grid of :func:`bin_numeric`: per numeric column its first edge, cells per unit
    and the bin of every cell's left end (at most 254, so uint8)."""
    low = np.zeros(numeric.size)
    scale = np.zeros(numeric.size)
    hint = np.zeros((numeric.size, HINT_CELLS), dtype=np.uint8)
    for c, j in enumerate(numeric):
        e = np.asarray(edges[j], dtype=np.float64)
        if e.size < 2:
            continue
        span = e[-1] - e[0]
        with np.errstate(over="ignore", divide="ignore"):
            per = HINT_CELLS / span
        if not (np.isfinite(span) and np.isfinite(per) and per > 0):
            continue  # every guess 0: still exact, by steps
        low[c], scale[c] = e[0], per
        hint[c] = np.searchsorted(e, e[0] + np.arange(HINT_CELLS) / per, side="left")
    return low, scale, hint


def bin_kernel(xb, yb, wb, edges, categorical, categories, classes, class_weight, estimator):
    """Per block: uint8 bins, encoded y (class index or float) and row weights (float64)."""
    x = as_float_block(xb, categorical, categories, estimator)
    if not (x.flags.c_contiguous and x.flags.writeable):
        # The kernel's warmed types: a C-ordered, writeable array (a read-only one, e.g. a
        # block received from another worker, would be compiled again on first use).
        x = np.array(x, order="C")
    n, d = x.shape
    out = np.empty((n, d), dtype=np.uint8)
    numeric = np.flatnonzero(~np.asarray(categorical, dtype=bool)).astype(np.int64)
    starts = np.zeros(d + 1, dtype=np.int64)
    np.cumsum([0 if categorical[j] else len(edges[j]) for j in range(d)], out=starts[1:])
    flat = np.concatenate([np.asarray(edges[j], dtype=np.float64) for j in numeric]) \
        if numeric.size else np.empty(0)
    bin_numeric(x, flat, starts, numeric, *_hints(edges, numeric), out)
    for j in np.flatnonzero(categorical):
        col = x[:, j]
        out[:, j] = np.where(np.isnan(col), MISSING, np.nan_to_num(col)).astype(np.uint8)
    w = np.ones(n) if wb is None else np.asarray(wb, dtype=np.float64)
    if classes is not None:
        yi = np.searchsorted(classes, yb)
        yi = np.minimum(yi, len(classes) - 1)
        if class_weight is not None:
            w = w * class_weight[yi]
        y = yi.astype(np.intp)
    else:
        y = np.asarray(yb, dtype=np.float64)
    if (w < 0).any():
        raise ValueError(f"{estimator}: sample_weight must be non-negative")
    return out, y, w
