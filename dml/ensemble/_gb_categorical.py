"""Categorical features of the gradient-boosted trees: which columns, their categories, codes.

A categorical feature's bins are its categories: for a pandas ``category`` column the
category codes (the layout the forests use, :func:`dml.tree._model._categorical_layout`), for
a numeric column named in ``categorical_features`` the position of the value among the sorted
distinct values seen in training (scikit-learn's ordinal encoding). Predictions map the values
the same way; a value not seen in training (an unknown category) is treated as missing, as
scikit-learn does. The split search itself is
:func:`dml.ensemble._gb_kernels.best_split_categorical`.
"""
from __future__ import annotations

import numpy as np


def column_name(blocks, j):
    """The column's name for messages (its index when X has no column names)."""
    if blocks.dtypes is not None:
        return repr(str(blocks.dtypes.index[j]))
    return f"at index {j}"


def resolve(spec, blocks, categorical, name):
    """The boolean mask of the categorical features from ``categorical_features``.

    ``categorical`` marks the pandas ``category`` columns; "from_dtype" takes exactly those.
    """
    d = blocks.n_features
    if isinstance(spec, str):  # "from_dtype" (the only string the constraints accept)
        return categorical.copy()
    if spec is None:
        mask = np.zeros(d, dtype=bool)
    else:
        arr = np.asarray(spec)
        if arr.ndim != 1:
            raise ValueError(f"{name}: categorical_features must be 1-dimensional (a boolean "
                             f"mask, column indices or names); got shape {arr.shape}")
        mask = np.zeros(d, dtype=bool)
        if arr.size == 0:
            pass
        elif arr.dtype.kind == "b":
            if arr.size != d:
                raise ValueError(f"{name}: categorical_features as a boolean mask must have "
                                 f"one entry per feature ({d}); got {arr.size}")
            mask = arr.copy()
        elif arr.dtype.kind in "iu":
            if arr.min() < 0 or arr.max() >= d:
                raise ValueError(f"{name}: categorical_features as integer indices must be "
                                 f"in [0, {d - 1}] (X has {d} features); got {arr.tolist()}")
            mask[arr] = True
        elif arr.dtype.kind in "UO":
            if blocks.dtypes is None:
                raise ValueError(f"{name}: categorical_features names columns "
                                 f"{arr.tolist()}, but X has no column names; pass a "
                                 "dataframe, or give a boolean mask or column indices")
            names = [str(c) for c in blocks.dtypes.index]
            missing = [str(c) for c in arr if str(c) not in names]
            if missing:
                raise ValueError(f"{name}: categorical_features names {missing}, which are not "
                                 f"columns of X (its columns: {names})")
            mask[[names.index(str(c)) for c in arr]] = True
        else:
            raise TypeError(f"{name}: categorical_features must be 'from_dtype', None, a "
                            "boolean mask, integer indices or column names; got values of "
                            f"dtype {arr.dtype}")
    left_out = np.flatnonzero(categorical & ~mask)
    if left_out.size:
        cols = [str(blocks.dtypes.index[j]) for j in left_out]
        raise ValueError(f"{name}: columns {cols} have the pandas 'category' dtype but are not "
                         "in categorical_features; add them, use "
                         "categorical_features='from_dtype', or encode them as numbers")
    return mask


def coded_categories(values, max_bins, column, name):
    """The categories of a numerically coded categorical column from its distinct values
    (the exact sketch; a sketch that had to summarise has more than ``max_bins`` of them)."""
    if values.size > max_bins:
        size = f"{values.size}" if values.size < 2048 else "at least 2048"
        raise ValueError(f"{name}: categorical feature {column} has {size} distinct values, "
                         f"more than max_bins={max_bins}; a categorical feature may have at "
                         "most max_bins categories (raise max_bins up to 255, merge rare "
                         "categories, or treat the feature as numeric)")
    if values.size and values.min() < 0:
        raise ValueError(f"{name}: categorical feature {column} has negative values "
                         f"(min {values.min():g}); category codes must be non-negative "
                         "integers (mark missing values with NaN)")
    if not np.all(values == np.round(values)):
        bad = values[values != np.round(values)][0]
        raise ValueError(f"{name}: categorical feature {column} has non-integer values (e.g. "
                         f"{bad:g}); category codes must be non-negative integers (encode the "
                         "column, e.g. with OrdinalEncoder, or treat it as numeric)")
    return np.asarray(values, dtype=np.float64)


def encode_coded(x, is_cat, categorical, categories):
    """Numerically coded categorical columns of a float block replaced, in place, by their
    category positions; a value not seen in training becomes NaN (missing)."""
    for j in np.flatnonzero(is_cat & ~categorical):
        cats = categories[j]
        col = x[:, j]
        pos = np.minimum(np.searchsorted(cats, col), len(cats) - 1)
        x[:, j] = np.where(cats[pos] == col, pos, np.nan)
    return x
