"""Per-block kernels of :class:`dml.preprocessing.OneHotEncoder` and their combines.

Plain NumPy/pandas functions on one block (testable without a cluster): the value counts that
``fit`` reduces over all blocks, the category order, and the encode/decode kernels that
``transform``/``inverse_transform`` map over the blocks.
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd
from sklearn.utils import check_array


def _column_name(names, j) -> str:
    return repr(str(names[j])) if names is not None else f"#{j}"


def _column_values(xb, j: int, names, estimator: str) -> np.ndarray:
    """Column j of a block as scikit-learn's encoders see it (``check_array`` per column)."""
    col = xb.iloc[:, j] if isinstance(xb, pd.DataFrame) else xb[:, j]
    try:
        vals = check_array(col, ensure_2d=False, dtype=None, ensure_all_finite="allow-nan",
                           ensure_min_samples=0)
    except ValueError as exc:
        raise ValueError(f"{estimator}: column {_column_name(names, j)}: {exc} Replace or drop "
                         "infinite values first.") from None
    return vals


def _missing_masks(vals: np.ndarray):
    """(missing, none) masks: None is its own category; NaN (and pd.NA/NaT) is 'nan'."""
    if vals.dtype.kind == "f":
        return np.isnan(vals), None
    if vals.dtype.kind != "O":
        return None, None
    missing = pd.isna(vals)
    if not missing.any():
        return None, None
    none = np.zeros(len(vals), dtype=bool)
    none[missing] = [v is None for v in vals[missing]]
    return missing, none


def _value_counts_kernel(xb, yb, wb, names, estimator):
    """Per column: (dtype, non-missing uniques, their counts, #None, #NaN); plus the row count."""
    out = []
    for j in range(xb.shape[1]):
        vals = _column_values(xb, j, names, estimator)
        missing, none = _missing_masks(vals)
        n_none = n_nan = 0
        if missing is not None:
            n_none = int(none.sum()) if none is not None else 0
            n_nan = int(missing.sum()) - n_none
            vals = vals[~missing]
        if vals.dtype.kind == "O":
            vc = pd.Series(vals, dtype=object).value_counts(sort=False, dropna=False)
            uniq = vc.index.to_numpy(dtype=object)
            counts = vc.to_numpy(dtype=np.int64)
        else:
            uniq, counts = np.unique(vals, return_counts=True)
            counts = counts.astype(np.int64)
        out.append((vals.dtype, uniq, counts, n_none, n_nan))
    return xb.shape[0], out


def _common_dtype(dtypes) -> np.dtype:
    dtypes = [np.dtype(t) for t in dtypes]
    if all(t == dtypes[0] for t in dtypes):
        return dtypes[0]
    kinds = {t.kind for t in dtypes}
    if "O" in kinds or (kinds & set("US") and kinds - set("US")):
        return np.dtype(object)
    return np.result_type(*dtypes)


def _merge_feature_counts(feats):
    dtype = _common_dtype([f[0] for f in feats])
    n_none = sum(f[3] for f in feats)
    n_nan = sum(f[4] for f in feats)
    if dtype.kind == "O":
        acc: dict = {}
        for f in feats:
            for v, c in zip(f[1].tolist() if f[1].dtype.kind != "O" else f[1], f[2]):
                acc[v] = acc.get(v, 0) + int(c)
        uniq = np.empty(len(acc), dtype=object)
        uniq[:] = list(acc.keys())
        counts = np.fromiter(acc.values(), dtype=np.int64, count=len(acc))
        return dtype, uniq, counts, n_none, n_nan
    vals = np.concatenate([f[1].astype(dtype) for f in feats])
    counts = np.concatenate([f[2] for f in feats])
    uniq, inverse = np.unique(vals, return_inverse=True)
    return dtype, uniq, np.bincount(inverse.ravel(), weights=counts,
                                    minlength=len(uniq)).astype(np.int64), n_none, n_nan


def _merge_value_counts(parts):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    n = sum(p[0] for p in parts)
    feats = [_merge_feature_counts([p[1][j] for p in parts]) for j in range(len(parts[0][1]))]
    return n, feats


class _Coding(NamedTuple):
    """Everything the transform kernel needs for one input column."""

    index: pd.Index          # non-missing categories, code = position
    none_code: int           # code of None (-1: not a category)
    nan_code: int            # code of NaN (-1: not a category)
    col_map: np.ndarray      # code -> output column within this feature (-1: dropped)
    unknown_col: int         # output column for unknown values (-1: all zeros)
    offset: int              # first output column of this feature


def _encode_column(vals, c: _Coding):
    """Codes of the values and a mask of unknown ones."""
    missing, none = _missing_masks(vals)
    codes = np.full(len(vals), -1, dtype=np.int64)
    # A new Index per call: the worker threads of one process share the plan's Index, and
    # pandas < 3 builds its hash table lazily without a lock, so a thread could see a half-built
    # table ("Reindexing only valid with uniquely valued Index objects").
    index = pd.Index(c.index.to_numpy(), dtype=c.index.dtype) if len(c.index) else c.index
    if missing is None:
        codes[:] = index.get_indexer(vals) if len(index) else -1
    else:
        present = ~missing
        if present.any() and len(index):
            codes[present] = index.get_indexer(vals[present])
        if none is not None:
            codes[none] = c.none_code
            codes[missing & ~none] = c.nan_code
        else:
            codes[missing] = c.nan_code
    return codes, codes < 0


def _onehot_kernel(xb, codings, names, handle_unknown, warn_unknown, dtype, n_out, estimator,
                   sparse=False):
    """One-hot codes of a block: a dense array, or with ``sparse`` a CSR matrix built directly
    from the output columns (scikit-learn's layout: per row, the features' columns in order)."""
    n = xb.shape[0]
    out = None if sparse else np.zeros((n, n_out), dtype=dtype)
    hits = np.full((n, len(codings)), -1, dtype=np.int64) if sparse else None
    rows = np.arange(n)
    with_unknown = []
    for j, c in enumerate(codings):
        vals = _column_values(xb, j, names, estimator)
        codes, unknown = _encode_column(vals, c)
        if unknown.any():
            if handle_unknown == "error":
                seen = list(dict.fromkeys(vals[unknown].tolist()))
                shown = seen[:5] + (["..."] if len(seen) > 5 else [])
                raise ValueError(
                    f"{estimator}: Found unknown categories {shown} in column "
                    f"{_column_name(names, j)} during transform; they were not seen during "
                    "fit. Pass handle_unknown='ignore' to encode unknown categories as all "
                    "zeros.")
            with_unknown.append(j)
        cols = c.col_map[np.where(unknown, 0, codes)] if len(c.col_map) else codes
        cols = np.where(unknown, c.unknown_col, cols)
        hit = cols >= 0
        if sparse:
            hits[rows[hit], j] = c.offset + cols[hit]
        else:
            out[rows[hit], c.offset + cols[hit]] = 1
    if warn_unknown and with_unknown:
        where = "the infrequent category" if handle_unknown in ("infrequent_if_exist", "warn") \
            else "all zeros"
        warnings.warn(f"Found unknown categories in columns {with_unknown} during transform. "
                      f"These unknown categories will be encoded as {where}", UserWarning)
    if sparse:
        import scipy.sparse as sp

        present = hits >= 0
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(present.sum(axis=1), out=indptr[1:])
        indices = hits[present]  # row-major: each row's columns in feature order, increasing
        return sp.csr_matrix((np.ones(indices.size, dtype=dtype), indices, indptr),
                             shape=(n, n_out))
    return out


def _is_scalar_nan(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)) and math.isnan(x)


def _sorted_categories(dtype, uniq, n_none, n_nan, j, names, estimator):
    """The sorted categories of one column, scikit-learn's order (None, then NaN, last)."""
    if dtype.kind == "O":
        try:
            ordered = sorted(uniq.tolist())
        except TypeError:
            types = sorted({type(v).__qualname__ for v in uniq})
            raise TypeError(
                f"{estimator}: column {_column_name(names, j)} mixes value types: Encoders "
                f"require their input argument must be uniformly strings or numbers. Got "
                f"{types}. Convert the column to one type first (e.g. astype(str)).") from None
        if n_none:
            ordered.append(None)
        if n_nan:
            ordered.append(np.nan)
        cats = np.empty(len(ordered), dtype=object)
        cats[:] = ordered
        return cats
    cats = np.sort(uniq)
    if n_nan:
        cats = np.concatenate([cats, np.array([np.nan], dtype=dtype)])
    return cats


def _category_counts(cats, uniq, counts, n_none, n_nan) -> np.ndarray:
    """Counts aligned with ``cats`` (0 for categories never seen)."""
    lookup = {}
    for v, c in zip(uniq.tolist(), counts):
        lookup[v] = int(c)
    out = np.zeros(len(cats), dtype=np.int64)
    for i, v in enumerate(cats.tolist()):
        if v is None:
            out[i] = n_none
        elif _is_scalar_nan(v):
            out[i] = n_nan
        else:
            out[i] = lookup.get(v, 0)
    return out


def _onehot_inverse_kernel(xb, state, out_dtype):
    handle_unknown, features, dt = state
    n = xb.shape[0]
    X_tr = np.empty((n, len(features)), dtype=dt)
    found_unknown = {}
    j = 0
    for i, (cats, transformed, kept, d, infrequent) in enumerate(features):
        k = kept.shape[0]
        if k == 0:
            X_tr[:, i] = cats[d]
            continue
        sub = xb[:, j:j + k]
        X_tr[:, i] = kept[sub.argmax(axis=1)]
        zero = sub.sum(axis=1) == 0
        if handle_unknown == "ignore" or (handle_unknown in ("infrequent_if_exist", "warn")
                                          and not infrequent):
            if zero.any():
                if d is None:
                    found_unknown[i] = zero
                else:
                    X_tr[zero, i] = cats[d]
        elif zero.any():
            if d is None:
                raise ValueError(f"Samples {np.flatnonzero(zero)} can not be inverted when "
                                 "drop=None and handle_unknown='error' because they contain all "
                                 "zeros")
            X_tr[zero, i] = transformed[d]
        j += k
    if found_unknown:
        X_tr = X_tr.astype(object)
        for i, mask in found_unknown.items():
            X_tr[mask, i] = None
    if out_dtype is not None and X_tr.dtype != out_dtype:
        X_tr = X_tr.astype(out_dtype)
    return X_tr


def _nan_key(v):
    return "__nan__" if _is_scalar_nan(v) else v


def _as_object_if_list(X):
    # scikit-learn encodes a list of strings as object (not fixed-width '<U') categories.
    if isinstance(X, (list, tuple)):
        arr = np.asarray(X)
        return arr.astype(object) if arr.dtype.kind in "US" else arr
    return X
