"""CategoricalNB's per-block kernels: encoding each feature's values as category codes, the
class × category counts of a block and their combine, and the joint log-likelihood.

Plain NumPy/pandas functions of one block (testable without a cluster), like the other naive
Bayes kernels in :mod:`dml.naive_bayes._kernels`, whose label bookkeeping they share.
"""
from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from dml.naive_bayes._kernels import _drop_none, _labels, _positions, _show, _union

def _feature_label(names, j):
    return f"{names[j]!r}" if names is not None else f"{j}"


def _column(X, j):
    return X.iloc[:, j] if isinstance(X, pd.DataFrame) else X[:, j]


def _numeric_values(col, est, feat):
    """A column of integer codes as int or float NumPy values (NaN = missing)."""
    if isinstance(col, pd.Series):
        if isinstance(col.dtype, np.dtype) and col.dtype.kind in "iu":
            return col.to_numpy()
        if isinstance(col.dtype, np.dtype) and col.dtype.kind == "b":
            return col.to_numpy().astype(np.int64)
        try:
            return col.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            pass
    else:
        a = np.asarray(col)
        if a.dtype.kind in "iu":
            return a
        if a.dtype.kind == "b":
            return a.astype(np.int64)
        try:
            return a.astype(np.float64)
        except (TypeError, ValueError):
            pass
    raise ValueError(f"{est}: feature {feat} was fitted as integer category codes but now holds "
                     "non-numeric values; pass the same kind of column as during fit.")


def _codes_from_numbers(v, est, feat, missing, index=None):
    """Validated integer codes (-1 = missing) from numeric values."""
    where = f" (row block {index})" if index is not None else ""
    if v.dtype.kind == "f":
        if np.isinf(v).any():
            raise ValueError(f"{est}: Input X contains infinity in feature {feat}{where}. "
                             "Replace or drop infinite values.")
        nan = np.isnan(v)
        if nan.any() and missing == "error":
            raise ValueError(f"{est}: Input X contains missing values (NaN) in feature "
                             f"{feat}{where}. Impute or drop them, or use missing='ignore'.")
        obs = v[~nan]
        if (obs != np.floor(obs)).any():
            bad = obs[obs != np.floor(obs)][0]
            raise ValueError(f"{est}: feature {feat} must hold integer category codes "
                             f"0, 1, 2, ...; got {_show(bad)}.")
        # Beyond 2**63 the cast to int64 wraps to a negative number, which would silently mark
        # the value as missing.
        huge = obs >= 2.0**63
        if huge.any():
            raise ValueError(f"{est}: feature {feat} holds {_show(obs[huge][0])}, too large for "
                             "an integer category code (codes must be 0, 1, 2, ...); encode the "
                             "column, e.g. with an OrdinalEncoder, or pass it as a "
                             "string/categorical column.")
        codes = np.full(v.shape, -1, dtype=np.int64)
        codes[~nan] = obs.astype(np.int64)
        if (obs < 0).any():
            bad = obs[obs < 0][0]
        else:
            return codes
    else:
        if v.dtype.kind == "u" and v.size and v.max() >= 2**63:
            raise ValueError(f"{est}: feature {feat} holds {_show(v.max())}, too large for an "
                             "integer category code (codes must be 0, 1, 2, ...); encode the "
                             "column, e.g. with an OrdinalEncoder.")
        codes = v.astype(np.int64)
        if not (codes < 0).any():
            return codes
        bad = codes[codes < 0][0]
    raise ValueError(f"{est}: feature {feat} has the negative value {_show(bad)}. Negative "
                     "values in data are not category codes, which must be 0, 1, 2, ... "
                     "(encode the column, e.g. with an OrdinalEncoder, or pass it as a "
                     "string/categorical column).")


def _object_values(col):
    if isinstance(col, pd.Series):
        return col.to_numpy(dtype=object)
    return np.asarray(col, dtype=object)


def _type_group(v):
    if isinstance(v, (str, np.str_)):
        return "str"
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, numbers.Number):
        return "number"
    return type(v).__name__


def _check_label_keys(keys, est, feat, index):
    groups = {_type_group(v) for v in keys.tolist()}
    if len(groups) > 1:
        raise TypeError(f"{est}: feature {feat} mixes values of different types "
                        f"({', '.join(sorted(groups))}) in row block {index}; categories must "
                        "be of one type to be sorted.")
    if groups == {"number"} and np.isinf(np.asarray(keys, dtype=np.float64)).any():
        raise ValueError(f"{est}: Input X contains infinity in feature {feat} (row block "
                         f"{index}). Replace or drop infinite values.")


def _encode_fit(col, kind, est, feat, missing, index):
    """(codes with -1 for missing, sorted keys) of one feature in one block."""
    if kind == "code":
        codes = _codes_from_numbers(_numeric_values(col, est, feat), est, feat, missing, index)
        obs = codes >= 0
        keys, inv = np.unique(codes[obs], return_inverse=True)
        out = np.full(codes.shape, -1, dtype=np.int64)
        out[obs] = inv.reshape(-1)
        return out, keys.astype(np.int64)
    if isinstance(col, pd.Series) and isinstance(col.dtype, pd.CategoricalDtype):
        # Keep every declared category (zero counts too): a Dask dataframe whose categories are
        # unknown on the client still learns them from the partitions.
        cats = np.asarray(col.cat.categories, dtype=object)
        _check_label_keys(cats, est, feat, index)
        perm = np.argsort(cats, kind="stable")
        rank = np.empty(len(cats), dtype=np.int64)
        rank[perm] = np.arange(len(cats))
        raw = col.cat.codes.to_numpy().astype(np.int64)
        codes = np.where(raw >= 0, rank[np.maximum(raw, 0)], -1)
        keys = cats[perm]
    else:
        values = _object_values(col)
        codes, keys = pd.factorize(values, sort=True, use_na_sentinel=True)
        keys = np.asarray(keys, dtype=object)
        _check_label_keys(keys, est, feat, index)
        codes = codes.astype(np.int64)
    if missing == "error" and (codes < 0).any():
        raise ValueError(f"{est}: Input X contains missing values (None/NaN/NA) in feature "
                         f"{feat} (row block {index}). Impute or drop them, or use "
                         "missing='ignore'.")
    return codes, keys


def _categorical_block(index, X, y, w, kinds, missing, names, est):
    n = X.shape[0]
    if n == 0:
        return None
    classes, inverse, _ = _labels(y, est, index)
    L = len(classes)
    wf = None if w is None else np.asarray(w, dtype=np.float64)
    class_count = np.bincount(inverse, weights=wf, minlength=L).astype(np.float64)
    features = []
    for j, kind in enumerate(kinds):
        codes, keys = _encode_fit(_column(X, j), kind, est, _feature_label(names, j), missing,
                                  index)
        K = len(keys)
        obs = codes >= 0
        flat = inverse[obs] * K + codes[obs]
        cnt = np.bincount(flat, weights=None if wf is None else wf[obs], minlength=L * K)
        features.append((keys, cnt.reshape(L, K).astype(np.float64)))
    return {"classes": classes, "class_count": class_count, "features": features}


def _categorical_combine(parts):
    parts = _drop_none(parts)
    if not parts:
        return None
    classes = _union([p["classes"] for p in parts], "y")
    L = len(classes)
    cidx = [_positions(classes, p["classes"]) for p in parts]
    class_count = np.zeros(L)
    for p, idx in zip(parts, cidx):
        class_count[idx] += p["class_count"]
    features = []
    for j in range(len(parts[0]["features"])):
        keys = _union([p["features"][j][0] for p in parts], f"feature {j}")
        counts = np.zeros((L, len(keys)))
        for p, idx in zip(parts, cidx):
            pk, pc = p["features"][j]
            counts[np.ix_(idx, _positions(keys, pk))] += pc
        features.append((keys, counts))
    return {"classes": classes, "class_count": class_count, "features": features}


def _encode_predict(col, kind, categories, est, feat, missing):
    """Column index into ``feature_log_prob_[j]`` per row; -1 where the value is missing."""
    if kind == "code":
        codes = _codes_from_numbers(_numeric_values(col, est, feat), est, feat, missing)
        unknown = codes >= len(categories)
        if unknown.any():
            raise ValueError(
                f"{est}: feature {feat} has the value {int(codes[unknown][0])!r}, which is not "
                f"one of the {len(categories)} categories seen during fit (codes 0 to "
                f"{len(categories) - 1}). Refit with these data or set min_categories.")
        return codes
    values = _object_values(col)
    na = pd.isna(values)
    if na.any() and missing == "error":
        raise ValueError(f"{est}: Input X contains missing values (None/NaN/NA) in feature "
                         f"{feat}. Impute or drop them, or use missing='ignore'.")
    idx = pd.Index(categories).get_indexer(values) if len(categories) else \
        np.full(len(values), -1)
    unknown = (idx < 0) & ~na
    if unknown.any():
        shown = list(categories[:10]) + (["..."] if len(categories) > 10 else [])
        raise ValueError(f"{est}: feature {feat} has the value {_show(values[unknown][0])}, which "
                         f"was not seen during fit (known categories: {shown}).")
    return np.where(na, -1, idx).astype(np.int64)


def _categorical_jll(X, feature_log_prob, class_log_prior, kinds, categories, missing, names,
                     est):
    n = X.shape[0]
    jll = np.zeros((n, len(class_log_prior)))
    for j, kind in enumerate(kinds):
        idx = _encode_predict(_column(X, j), kind, categories[j], est, _feature_label(names, j),
                              missing)
        miss = idx < 0
        if miss.any():
            contrib = feature_log_prob[j][:, np.maximum(idx, 0)].T
            contrib[miss] = 0.0  # a missing attribute is skipped in the product
            jll += contrib
        else:
            jll += feature_log_prob[j][:, idx].T
    return jll + class_log_prior
