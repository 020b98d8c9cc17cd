"""Scalers and one-hot encoding whose statistics come from one reduction pass over all blocks.

:class:`StandardScaler`, :class:`MinMaxScaler` and :class:`OneHotEncoder` learn their statistics
with one :meth:`dml._blocks.Blocks.map_reduce` (per-block kernels, fixed-order tree combine) and
transform blockwise: NumPy/pandas in gives NumPy out, Dask in gives a lazy Dask array out. Fitted
attributes are named and valued as scikit-learn's (SPEC §9; where SPEC is silent they follow
scikit-learn 1.9).

One-pass fitting protocol
-------------------------
Every transformer here implements a small internal protocol so that a composite (for example
:class:`dml.compose.ColumnTransformer`) can fit several transformers with ONE pass over the data:

``_fit_overrides``
    :class:`~dml._blocks.BlockSpec` overrides the transformer's training blocks need
    (``{"allow_nan": True}`` for the scalers, ``{"numeric": False}`` for the encoder).
``_fit_delayed(blocks, reset=True) -> Delayed``
    Validate the hyper-parameters, record (``reset=True``) or check the feature layout of
    ``blocks`` and return the lazy reduction (``map_reduce(..., compute_now=False)``).
``_set_fitted(result, reset=True) -> self``
    Finish the fit from the computed reduction (with ``reset=False``: merge into the current
    state, as ``partial_fit`` does).
``_transform_plan(dtypes) -> TransformPlan``
    How to transform one already-extracted block: ``(kernel, args, overrides, dtype, n_out)``;
    ``dtypes`` are the column dtypes of the input (they decide e.g. float32 vs float64 output).

A composite computes the delayed results of all its parts with one :func:`dml._blocks.compute`
and hands each part its result.
"""
from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import dask.dataframe as dd
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils import check_array

from dml._blocks import Blocks, check_x_layout, compute, is_dask
from dml._param_validation import Integral, Interval, RealNotInt, StrOptions, invalid_parameter
from dml.base import DaskEstimatorMixin, check_is_fitted, fit_context

__all__ = ["StandardScaler", "MinMaxScaler", "OneHotEncoder", "TransformPlan"]


class TransformPlan(NamedTuple):
    """How a fitted dml transformer transforms one validated block.

    ``kernel(X_block, *args)`` returns an ``(n_rows, n_out)`` array of ``dtype``; the block must
    first be validated with ``extract_block`` and the transformer's ``_spec(**overrides)``.
    """

    kernel: Callable
    args: tuple
    overrides: dict
    dtype: Any
    n_out: int


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------

def _dtypes_of(X) -> list:
    """Column dtypes of a 2-D X (arrays: the array dtype for every column)."""
    if isinstance(X, (pd.DataFrame, dd.DataFrame)):
        return list(X.dtypes)
    return [X.dtype] * int(X.shape[1])


def _float_out_dtype(dtypes) -> np.dtype:
    """Float dtype a scaler returns for input columns of these dtypes (scikit-learn's rule:
    float32 stays float32 when every column is float32-compatible, otherwise float64)."""
    np_dtypes = []
    for t in dtypes:
        if isinstance(t, pd.api.extensions.ExtensionDtype):
            return np.dtype(np.float64)  # nullable / categorical columns become float64
        t = np.dtype(t)
        if t.kind in "bOSUa":
            return np.dtype(np.float64)  # pandas interleaves these to object, then float64
        np_dtypes.append(t)
    if not np_dtypes:
        return np.dtype(np.float64)
    rt = np.result_type(*np_dtypes)
    return rt if rt in (np.float32, np.float64) else np.dtype(np.float64)


class _OnePassTransformer(DaskEstimatorMixin):
    """The one-pass fitting protocol (see the module docstring) plus the plumbing around it."""

    _fit_overrides: dict = {}

    def _one_pass_fit(self, X, sample_weight=None, reset=True):
        blocks = self._fit_blocks(X, None, sample_weight, reset=reset, require_y=False,
                                  **self._fit_overrides)
        (result,) = compute(self._fit_delayed(blocks, reset=reset))
        return self._set_fitted(result, reset=reset)

    def _transform_checked(self, X):
        check_is_fitted(self, "n_features_in_")
        X = check_x_layout(X, type(self).__name__)  # type and shape; reads no data
        plan = self._transform_plan(_dtypes_of(X))
        return self._blockwise(X, plan.kernel, *plan.args, dtype=plan.dtype,
                               tail_shape=(plan.n_out,), **plan.overrides)


def _no_samples(name):
    return ValueError(f"{name}: Found array with 0 sample(s) (shape=(0, ...)) while a minimum "
                      "of 1 is required. Pass at least one row.")


# --------------------------------------------------------------------------------------------
# StandardScaler
# --------------------------------------------------------------------------------------------

def _moments_kernel(xb, yb, wb):
    """Moments of one block in float64, NaN ignored: (rows, count, n, shift, mean, M2).

    ``count`` is the number of non-NaN values per feature, ``n`` their weight sum (= count
    without weights), the block mean is ``shift + mean`` and ``M2`` the sum of weighted squared
    deviations from it. ``shift`` is a value of the block, so ``mean`` is small compared with
    the data when the data sit far from zero; merging then stays accurate.
    """
    x = np.asarray(xb, dtype=np.float64)
    nan = np.isnan(x)
    any_nan = bool(nan.any())
    rows = x.shape[0]
    count = rows - nan.sum(axis=0)
    if rows:
        first = np.argmax(~nan, axis=0)  # first non-NaN row per feature
        shift = x[first, np.arange(x.shape[1])]
        shift = np.where(count > 0, shift, 0.0)
    else:
        shift = np.zeros(x.shape[1])
    d = x - shift
    if any_nan:
        d[nan] = 0.0
    if wb is None:
        n = count.astype(np.float64)
        s = d.sum(axis=0)
    else:
        w = np.asarray(wb, dtype=np.float64)
        n = w @ (~nan).astype(np.float64)
        s = w @ d
    mean = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
    # Corrected two-pass algorithm within the block (Chan, Golub & LeVeque), as scikit-learn.
    d -= mean
    if any_nan:
        d[nan] = 0.0
    if wb is None:
        corr = d.sum(axis=0)
        m2 = (d * d).sum(axis=0)
    else:
        corr = w @ d
        m2 = w @ (d * d)
    m2 -= np.divide(corr * corr, n, out=np.zeros_like(corr), where=n > 0)
    return rows, count.astype(np.int64), n, shift, mean, np.maximum(m2, 0.0)


def _merge_moments(parts):
    """Chan et al.'s pairwise merge of block moments (see :func:`_moments_kernel`).

    Associative up to round-off; the means are merged as offsets from the first block's shift,
    so data far from zero (mean/std ~ 1e8) keep full precision in the variance.
    """
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    rows, count, n, shift, mean, m2 = parts[0]
    for rows2, c2, n2, shift2, mean2, m22 in parts[1:]:
        total = n + n2
        frac = np.divide(n2, total, out=np.zeros_like(total), where=total > 0)
        delta = (shift2 - shift) + (mean2 - mean)
        delta = np.where(n2 > 0, delta, 0.0)
        merged_mean = mean + delta * frac
        merged_m2 = m2 + m22 + delta * delta * n * frac
        empty = n <= 0  # nothing seen yet in this feature: take the other side as it is
        shift = np.where(empty, shift2, shift)
        mean = np.where(empty, mean2, merged_mean)
        m2 = np.where(empty, m22, merged_m2)
        n = total
        count = count + c2
        rows = rows + rows2
    return rows, count, n, shift, mean, m2


def _standard_kernel(xb, mean, scale, dtype):
    x = np.array(xb, dtype=dtype, copy=True)
    if mean is not None:
        x -= mean
    if scale is not None:
        x /= scale
    return x


def _standard_inverse_kernel(xb, mean, scale, dtype):
    x = np.array(xb, dtype=dtype, copy=True)
    if scale is not None:
        x *= scale
    if mean is not None:
        x += mean
    return x


def _is_constant_feature(var, mean, n_samples):
    # scikit-learn's bound on the error of the two-pass variance (float64 accumulators).
    eps = np.finfo(np.float64).eps
    upper_bound = n_samples * eps * var + (n_samples * mean * eps) ** 2
    return var <= upper_bound


def _scalar_if_constant(n):
    """scikit-learn keeps n_samples_seen_ an integer-like scalar when no feature had NaN."""
    n = np.asarray(n)
    if n.size and n.max() == n.min():
        return n[0]
    return n


class StandardScaler(_OnePassTransformer, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Standardize features by removing the mean and scaling to unit variance.

    ``z = (x - mean_) / scale_`` with the population standard deviation (ddof = 0), as
    scikit-learn's ``StandardScaler`` (SPEC §9). Mean and variance come from one pass over all
    blocks: each block reports (count, mean, M2) and the blocks are merged with Chan, Golub and
    LeVeque's pairwise formula in a fixed tree order, so the result equals scikit-learn's to
    round-off whatever the partitioning. NaN is ignored in ``fit`` and kept in ``transform``.
    Near-constant features get ``scale_ = 1`` (scikit-learn's rule).

    Parameters
    ----------
    copy : bool, default=True
        Accepted for compatibility; dml always returns a new array (blocks of a Dask collection
        may be shared and must not be modified in place).
    with_mean : bool, default=True
        Center the data before scaling.
    with_std : bool, default=True
        Scale the data to unit variance.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,) or None
        Per-feature mean (None when ``with_mean=False`` and ``with_std=False``).
    var_ : ndarray of shape (n_features,) or None
        Per-feature population variance (None when ``with_std=False``).
    scale_ : ndarray of shape (n_features,) or None
        ``sqrt(var_)`` with near-constant features set to 1 (None when ``with_std=False``).
    n_samples_seen_ : int, float or ndarray of shape (n_features,)
        Number (or weight sum) of non-NaN samples per feature; a scalar when equal for all
        features.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.preprocessing import StandardScaler
    >>> X = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    >>> scaler = StandardScaler().fit(X)
    >>> scaler.mean_, scaler.scale_
    (array([0.5, 0.5]), array([0.5, 0.5]))
    >>> scaler.transform(np.array([[2.0, 2.0]]))
    array([[3., 3.]])
    """

    _fit_overrides = {"allow_nan": True}

    def __init__(self, *, copy=True, with_mean=True, with_std=True):
        self.copy = copy
        self.with_mean = with_mean
        self.with_std = with_std

    def _reset(self):
        for attr in ("mean_", "var_", "scale_", "n_samples_seen_", "_weighted", "_moments"):
            if hasattr(self, attr):
                delattr(self, attr)

    _parameter_constraints = {"copy": ["boolean"], "with_mean": ["boolean"],
                              "with_std": ["boolean"]}

    @fit_context
    def fit(self, X, y=None, sample_weight=None):
        """Compute the mean and standard deviation of X in one pass over its blocks.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), Dask array/Series or column name
            Individual weights for each sample.

        Returns
        -------
        self
        """
        self._reset()
        return self.partial_fit(X, y, sample_weight)

    @fit_context
    def partial_fit(self, X, y=None, sample_weight=None):
        """Update the mean and variance with X (one pass over X's blocks).

        Several ``partial_fit`` calls give the same statistics as one ``fit`` on all the data
        (to round-off): the stored state is merged with Chan's formula.
        """
        first = not hasattr(self, "n_samples_seen_")
        return self._one_pass_fit(X, sample_weight, reset=first)

    # ---- one-pass protocol ----
    def _fit_delayed(self, blocks: Blocks, reset: bool = True):
        self._record_layout(blocks, reset)
        self._fit_weighted = bool(blocks.has_weight)
        return blocks.map_reduce(_moments_kernel, combine=_merge_moments, compute_now=False)

    def _set_fitted(self, result, reset: bool = True):
        name = type(self).__name__
        weighted = getattr(self, "_fit_weighted", False)
        if result is None or (result[0] == 0 and reset):
            raise _no_samples(name)
        rows, count, n, shift, mean, m2 = result
        if not reset and hasattr(self, "_moments"):
            # Merge with the exact state of earlier calls (not the rounded mean_/var_), so that
            # partial_fit over pieces equals one fit over all of them.
            _, count, n, shift, mean, m2 = _merge_moments([(0, *self._moments),
                                                           (rows, count, n, shift, mean, m2)])
            weighted = weighted or getattr(self, "_weighted", False)
        self._weighted = weighted
        self._moments = (count, n, shift, mean, m2)
        if not self.with_mean and not self.with_std:
            self.mean_ = None
            self.var_ = None
            # scikit-learn counts rows here, even with sample weights.
            self.n_samples_seen_ = _scalar_if_constant(
                count.astype(np.float64) if weighted else count.astype(np.int64))
            self.scale_ = None
            return self
        with np.errstate(invalid="ignore", divide="ignore"):
            self.mean_ = np.where(n > 0, shift + mean, np.nan)
            var = np.where(n > 0, m2 / np.where(n > 0, n, 1.0), np.nan)
        self.var_ = var if self.with_std else None
        self.n_samples_seen_ = _scalar_if_constant(n)
        if self.with_std:
            constant = _is_constant_feature(self.var_, self.mean_, self.n_samples_seen_)
            scale = np.sqrt(self.var_)
            scale[constant] = 1.0
            self.scale_ = scale
        else:
            self.scale_ = None
        return self

    def _transform_plan(self, dtypes) -> TransformPlan:
        check_is_fitted(self, "n_samples_seen_")
        dtype = _float_out_dtype(dtypes)
        mean = self.mean_.astype(dtype) if self.with_mean else None
        scale = self.scale_.astype(dtype) if self.with_std else None
        return TransformPlan(_standard_kernel, (mean, scale, dtype), {"allow_nan": True},
                             dtype, self.n_features_in_)

    # ---- transform ----
    def transform(self, X, copy=None):
        """Standardize X: NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        ``copy`` is accepted for compatibility; a new array is always returned.
        """
        return self._transform_checked(X)

    def inverse_transform(self, X, copy=None):
        """Scale back to the original representation (``X * scale_ + mean_``)."""
        check_is_fitted(self, "n_samples_seen_")
        X = check_x_layout(X, type(self).__name__)
        dtype = _float_out_dtype(_dtypes_of(X))
        mean = self.mean_.astype(dtype) if self.with_mean else None
        scale = self.scale_.astype(dtype) if self.with_std else None
        return self._blockwise(X, _standard_inverse_kernel, mean, scale, dtype, dtype=dtype,
                               tail_shape=(self.n_features_in_,), check_features=False,
                               n_features=self.n_features_in_, allow_nan=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


# --------------------------------------------------------------------------------------------
# MinMaxScaler
# --------------------------------------------------------------------------------------------

def _minmax_kernel(xb, yb, wb):
    if xb.shape[0] == 0:
        return None
    # fmin/fmax ignore NaN unless a whole column is NaN (then NaN, as scikit-learn's nanmin).
    return xb.shape[0], np.fmin.reduce(xb, axis=0), np.fmax.reduce(xb, axis=0)


def _merge_minmax(parts):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    n, lo, hi = parts[0]
    for n2, lo2, hi2 in parts[1:]:
        n, lo, hi = n + n2, np.fmin(lo, lo2), np.fmax(hi, hi2)
    return n, lo, hi


def _minmax_kernel_transform(xb, scale, min_, clip, lo, hi, dtype):
    x = np.array(xb, dtype=dtype, copy=True)
    x *= scale
    x += min_
    if clip:
        np.clip(x, dtype.type(lo), dtype.type(hi), out=x)
    return x


def _minmax_inverse_kernel(xb, scale, min_, dtype):
    x = np.array(xb, dtype=dtype, copy=True)
    x -= min_
    x /= scale
    return x


class MinMaxScaler(_OnePassTransformer, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Scale each feature to ``feature_range`` from its minimum and maximum.

    ``x_scaled = x * scale_ + min_`` with ``scale_ = (hi - lo) / (data_max_ - data_min_)``, as
    scikit-learn's ``MinMaxScaler`` (SPEC §9: min-max scaling). The per-feature minimum and
    maximum come from one pass over all blocks. NaN is ignored in ``fit`` and kept in
    ``transform``; constant features get a range of 1 (scikit-learn's rule). Statistics keep
    the input's float dtype (float32 stays float32).

    Parameters
    ----------
    feature_range : tuple (min, max), default=(0, 1)
        Desired range of the transformed data.
    copy : bool, default=True
        Accepted for compatibility; dml always returns a new array.
    clip : bool, default=False
        Clip transformed values of held-out data to ``feature_range``.

    Attributes
    ----------
    min_ : ndarray of shape (n_features,)
        Per-feature adjustment for the minimum.
    scale_ : ndarray of shape (n_features,)
        Per-feature relative scaling of the data.
    data_min_, data_max_, data_range_ : ndarray of shape (n_features,)
        Per-feature minimum, maximum and range seen in the data.
    n_samples_seen_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Examples
    --------
    >>> import numpy as np
    >>> from dml.preprocessing import MinMaxScaler
    >>> X = np.array([[-1.0, 2.0], [-0.5, 6.0], [0.0, 10.0], [1.0, 18.0]])
    >>> scaler = MinMaxScaler().fit(X)
    >>> scaler.data_max_
    array([ 1., 18.])
    >>> scaler.transform(np.array([[2.0, 2.0]]))
    array([[1.5, 0. ]])
    """

    _fit_overrides = {"allow_nan": True}

    def __init__(self, feature_range=(0, 1), *, copy=True, clip=False):
        self.feature_range = feature_range
        self.copy = copy
        self.clip = clip

    def _reset(self):
        for attr in ("scale_", "min_", "n_samples_seen_", "data_min_", "data_max_",
                     "data_range_"):
            if hasattr(self, attr):
                delattr(self, attr)

    _parameter_constraints = {"feature_range": [tuple, list], "copy": ["boolean"],
                              "clip": ["boolean"]}

    def _validate_param_relations(self):
        fr = self.feature_range
        if not (len(fr) == 2 and all(isinstance(v, numbers.Real) for v in fr) and fr[0] < fr[1]):
            raise invalid_parameter(self, "feature_range", "a tuple (min, max) of two numbers "
                                    "with min < max")

    @fit_context
    def fit(self, X, y=None):
        """Compute the per-feature minimum and maximum in one pass over X's blocks."""
        self._reset()
        return self.partial_fit(X, y)

    @fit_context
    def partial_fit(self, X, y=None):
        """Update the minimum and maximum with X (one pass over X's blocks)."""
        first = not hasattr(self, "n_samples_seen_")
        return self._one_pass_fit(X, None, reset=first)

    # ---- one-pass protocol ----
    def _fit_delayed(self, blocks: Blocks, reset: bool = True):
        if blocks.has_weight:
            raise TypeError("MinMaxScaler does not support sample_weight")
        self._record_layout(blocks, reset)
        return blocks.map_reduce(_minmax_kernel, combine=_merge_minmax, compute_now=False)

    def _set_fitted(self, result, reset: bool = True):
        if result is None:
            if reset or not hasattr(self, "n_samples_seen_"):
                raise _no_samples(type(self).__name__)
            return self
        n, data_min, data_max = result
        if not reset and hasattr(self, "n_samples_seen_"):
            data_min = np.fmin(self.data_min_, data_min)
            data_max = np.fmax(self.data_max_, data_max)
            n = self.n_samples_seen_ + n
        dtype = data_min.dtype
        lo, hi = np.asarray(self.feature_range[0], dtype), np.asarray(self.feature_range[1],
                                                                      dtype)
        data_range = data_max - data_min
        handled = data_range.copy()
        handled[handled < 10 * np.finfo(dtype).eps] = 1.0
        self.scale_ = (hi - lo) / handled
        self.min_ = lo - data_min * self.scale_
        self.data_min_ = data_min
        self.data_max_ = data_max
        self.data_range_ = data_range
        self.n_samples_seen_ = int(n)
        return self

    def _transform_plan(self, dtypes) -> TransformPlan:
        check_is_fitted(self, "scale_")
        dtype = _float_out_dtype(dtypes)
        lo, hi = self.feature_range
        return TransformPlan(_minmax_kernel_transform,
                             (self.scale_, self.min_, bool(self.clip), lo, hi, dtype),
                             {"allow_nan": True}, dtype, self.n_features_in_)

    def transform(self, X):
        """Scale X: NumPy for NumPy/pandas input, a lazy Dask array for Dask input."""
        return self._transform_checked(X)

    def inverse_transform(self, X):
        """Undo the scaling of X (``(X - min_) / scale_``)."""
        check_is_fitted(self, "scale_")
        X = check_x_layout(X, type(self).__name__)
        dtype = _float_out_dtype(_dtypes_of(X))
        return self._blockwise(X, _minmax_inverse_kernel, self.scale_, self.min_, dtype,
                               dtype=dtype, tail_shape=(self.n_features_in_,), check_features=False,
                               n_features=self.n_features_in_, allow_nan=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


# --------------------------------------------------------------------------------------------
# OneHotEncoder
# --------------------------------------------------------------------------------------------

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
    if missing is None:
        codes[:] = c.index.get_indexer(vals) if len(c.index) else -1
    else:
        present = ~missing
        if present.any() and len(c.index):
            codes[present] = c.index.get_indexer(vals[present])
        if none is not None:
            codes[none] = c.none_code
            codes[missing & ~none] = c.nan_code
        else:
            codes[missing] = c.nan_code
    return codes, codes < 0


def _onehot_kernel(xb, codings, names, handle_unknown, warn_unknown, dtype, n_out, estimator):
    n = xb.shape[0]
    out = np.zeros((n, n_out), dtype=dtype)
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
        out[rows[hit], c.offset + cols[hit]] = 1
    if warn_unknown and with_unknown:
        where = "the infrequent category" if handle_unknown in ("infrequent_if_exist", "warn") \
            else "all zeros"
        warnings.warn(f"Found unknown categories in columns {with_unknown} during transform. "
                      f"These unknown categories will be encoded as {where}", UserWarning)
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


class OneHotEncoder(_OnePassTransformer, TransformerMixin, BaseEstimator):
    """Encode categorical features as a dense one-hot numeric array.

    Categories are learned across ALL blocks in one pass (the union of per-block value counts,
    sorted as scikit-learn sorts them: numbers/strings ascending, then ``None``, then NaN) and
    the encoding runs blockwise. Works on NumPy arrays, pandas DataFrames, Dask arrays and Dask
    DataFrames with string, categorical, object, boolean or integer columns. Behaves as
    scikit-learn's ``OneHotEncoder`` (SPEC §9) with these differences: the output is always
    dense (``sparse_output=True`` is rejected), and pandas ``NA``/``NaT`` in object or string
    columns are treated as NaN (scikit-learn fails on them).

    Parameters
    ----------
    categories : 'auto' or list of array-like, default='auto'
        Categories per feature; 'auto' learns them from the data.
    drop : {'first', 'if_binary'}, array-like of shape (n_features,) or None, default=None
        Category to drop per feature (see scikit-learn).
    sparse_output : bool, default=False
        Only False is supported: dml returns dense NumPy or Dask arrays.
    dtype : numeric dtype, default=np.float64
        Dtype of the output.
    handle_unknown : {'error', 'ignore', 'infrequent_if_exist', 'warn'}, default='error'
        Unknown category at transform: raise a ``ValueError`` naming the column and value, or
        encode it as all zeros ('ignore'), or as the infrequent category when there is one
        ('infrequent_if_exist'; 'warn' also warns).
    min_frequency : int or float, default=None
        Categories rarer than this (count, or fraction of samples) are grouped as infrequent.
    max_categories : int, default=None
        Upper limit of output categories per feature, the infrequent one included.
    feature_name_combiner : 'concat' or callable, default='concat'
        ``callable(input_feature, category) -> str`` for :meth:`get_feature_names_out`.

    Attributes
    ----------
    categories_ : list of ndarray
        Categories of each feature, in output order.
    drop_idx_ : ndarray of object or None
        Index in ``categories_[i]`` of the dropped category per feature (None: none dropped).
    infrequent_categories_ : list of ndarray or None
        Defined only when ``min_frequency`` or ``max_categories`` is set.
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Examples
    --------
    >>> import numpy as np
    >>> from dml.preprocessing import OneHotEncoder
    >>> X = np.array([["Male", 1], ["Female", 3], ["Female", 2]], dtype=object)
    >>> enc = OneHotEncoder(handle_unknown="ignore").fit(X)
    >>> enc.categories_
    [array(['Female', 'Male'], dtype=object), array([1, 2, 3], dtype=object)]
    >>> enc.transform(np.array([["Female", 1], ["Male", 4]], dtype=object))
    array([[1., 0., 1., 0., 0.],
           [0., 1., 0., 0., 0.]])
    >>> enc.get_feature_names_out(["gender", "group"])
    array(['gender_Female', 'gender_Male', 'group_1', 'group_2', 'group_3'], dtype=object)
    """

    _fit_overrides = {"numeric": False}

    def __init__(self, *, categories="auto", drop=None, sparse_output=False, dtype=np.float64,
                 handle_unknown="error", min_frequency=None, max_categories=None,
                 feature_name_combiner="concat"):
        self.categories = categories
        self.drop = drop
        self.sparse_output = sparse_output
        self.dtype = dtype
        self.handle_unknown = handle_unknown
        self.min_frequency = min_frequency
        self.max_categories = max_categories
        self.feature_name_combiner = feature_name_combiner

    # ---- parameters ----
    _parameter_constraints = {
        "categories": [StrOptions({"auto"}), list, tuple],
        "drop": [StrOptions({"first", "if_binary"}), "array-like", None],
        "sparse_output": ["boolean"],
        "dtype": "no_validation",  # a numeric dtype: see _validate_param_relations
        "handle_unknown": [StrOptions({"error", "ignore", "infrequent_if_exist", "warn"})],
        "min_frequency": [Interval(Integral, 1, None, closed="left"),
                          Interval(RealNotInt, 0, 1, closed="neither"), None],
        "max_categories": [Interval(Integral, 1, None, closed="left"), None],
        "feature_name_combiner": [StrOptions({"concat"}), callable],
    }

    def _validate_param_relations(self):
        if self.sparse_output:
            raise invalid_parameter(self, "sparse_output", "False (dml returns dense arrays: a "
                                    "lazy Dask array for Dask input)")
        try:
            kind = np.dtype(self.dtype).kind
        except TypeError:
            kind = None
        if kind is None or kind not in "biuf":
            raise invalid_parameter(self, "dtype", "a numeric dtype such as np.float64")

    # ---- fit ----
    @fit_context
    def fit(self, X, y=None):
        """Learn the categories of every feature in one pass over X's blocks.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self
        """
        return self._one_pass_fit(_as_object_if_list(X), None, reset=True)

    def _fit_delayed(self, blocks: Blocks, reset: bool = True):
        self._infrequent_enabled = (self.max_categories is not None
                                    or self.min_frequency is not None)
        if blocks.has_weight:
            raise TypeError(f"{type(self).__name__} does not support sample_weight")
        self._record_layout(blocks, True)
        names = getattr(self, "feature_names_in_", None)
        return blocks.map_reduce(_value_counts_kernel, names, type(self).__name__,
                                 combine=_merge_value_counts, compute_now=False)

    def _set_fitted(self, result, reset: bool = True):
        name = type(self).__name__
        if result is None or result[0] == 0:
            raise _no_samples(name)
        n_samples, feats = result
        names = getattr(self, "feature_names_in_", None)
        if self.categories != "auto" and len(self.categories) != len(feats):
            raise ValueError("Shape mismatch: if categories is an array, it has to be of shape "
                             f"(n_features,); got {len(self.categories)} lists of categories "
                             f"for {len(feats)} features.")
        categories, counts = [], []
        for j, (dtype, uniq, cnt, n_none, n_nan) in enumerate(feats):
            if self.categories == "auto":
                cats = _sorted_categories(dtype, uniq, n_none, n_nan, j, names, name)
            else:
                cats = self._given_categories(j, dtype, uniq, n_none, n_nan, names)
            categories.append(cats)
            counts.append(_category_counts(cats, uniq, cnt, n_none, n_nan))
        self.categories_ = categories
        if self._infrequent_enabled:
            self._fit_infrequent(n_samples, counts)
        self._set_drop_idx()
        self._n_features_outs = self._compute_n_features_outs()
        return self

    def _given_categories(self, j, dtype, uniq, n_none, n_nan, names):
        given = self.categories[j]
        cats = np.array(given, dtype=object if dtype.kind in "US" else dtype)
        if cats.ndim != 1 or cats.size == 0:
            raise ValueError(f"{type(self).__name__}: categories[{j}] must be a non-empty list of "
                             "categories")
        for c in cats[:-1]:
            if _is_scalar_nan(c):
                raise ValueError("Nan should be the last element in user provided categories, "
                                 f"see categories {cats} in column #{j}")
        if len(set(_nan_key(c) for c in cats.tolist())) != cats.size:
            raise ValueError(f"In column {j}, the predefined categories contain duplicate "
                             "elements.")
        if cats.dtype.kind not in "OUS":
            stop = -1 if np.isnan(np.sort(cats)[-1]) else None
            if np.any(np.sort(cats)[:stop] != cats[:stop]):
                raise ValueError("Unsorted categories are not supported for numerical "
                                 "categories")
        if self.handle_unknown == "error":
            known = {_nan_key(c) for c in cats.tolist()}
            diff = [v for v in uniq.tolist() if _nan_key(v) not in known]
            if n_none and None not in known:
                diff.append(None)
            if n_nan and "__nan__" not in known:
                diff.append(np.nan)
            if diff:
                raise ValueError(f"Found unknown categories {diff} in column "
                                 f"{_column_name(names, j)} during fit; add them to "
                                 "categories or pass handle_unknown='ignore'.")
        return cats

    def _identify_infrequent(self, category_count, n_samples):
        # scikit-learn's rule, including its stable sort for max_categories.
        if isinstance(self.min_frequency, numbers.Integral):
            infrequent_mask = category_count < self.min_frequency
        elif isinstance(self.min_frequency, numbers.Real):
            infrequent_mask = category_count < n_samples * self.min_frequency
        else:
            infrequent_mask = np.zeros(category_count.shape[0], dtype=bool)
        n_current = category_count.size - infrequent_mask.sum() + 1
        if self.max_categories is not None and self.max_categories < n_current:
            frequent_count = self.max_categories - 1
            if frequent_count == 0:
                infrequent_mask[:] = True
            else:
                smallest = np.argsort(category_count, kind="mergesort")[:-frequent_count]
                infrequent_mask[smallest] = True
        out = np.flatnonzero(infrequent_mask)
        return out if out.size > 0 else None

    def _fit_infrequent(self, n_samples, counts):
        self._infrequent_indices = [self._identify_infrequent(c, n_samples) for c in counts]
        self._default_to_infrequent_mappings = []
        for cats, infreq in zip(self.categories_, self._infrequent_indices):
            if infreq is None:
                self._default_to_infrequent_mappings.append(None)
                continue
            n_cats = len(cats)
            mapping = np.empty(n_cats, dtype=np.int64)
            n_frequent = n_cats - infreq.size
            mapping[infreq] = n_frequent
            mapping[np.setdiff1d(np.arange(n_cats), infreq)] = np.arange(n_frequent)
            self._default_to_infrequent_mappings.append(mapping)

    @property
    def infrequent_categories_(self):
        """Infrequent categories for each feature (needs min_frequency or max_categories)."""
        infrequent_indices = self._infrequent_indices
        return [None if idx is None else cats[idx]
                for cats, idx in zip(self.categories_, infrequent_indices)]

    def _mapping(self, i):
        if not self._infrequent_enabled:
            return None
        return self._default_to_infrequent_mappings[i]

    def _set_drop_idx(self):
        drop = self.drop
        if drop is None:
            after = None
        elif isinstance(drop, str) and drop == "first":
            after = np.zeros(len(self.categories_), dtype=object)
        elif isinstance(drop, str):  # if_binary
            n_out = [len(c) for c in self.categories_]
            if self._infrequent_enabled:
                for i, infreq in enumerate(self._infrequent_indices):
                    if infreq is not None:
                        n_out[i] -= infreq.size - 1
            after = np.array([0 if k == 2 else None for k in n_out], dtype=object)
        else:
            drop_array = np.asarray(drop, dtype=object)
            if drop_array.ndim != 1 or len(drop_array) != len(self.categories_):
                raise ValueError(f"`drop` should have length equal to the number of features "
                                 f"({len(self.categories_)}), got {drop_array.size}")
            missing, indices = [], []
            for i, (val, cats) in enumerate(zip(drop_array, self.categories_)):
                if not _is_scalar_nan(val):
                    hit = np.flatnonzero(np.array([_nan_key(c) == _nan_key(val)
                                                   for c in cats.tolist()], dtype=bool))
                    if hit.size:
                        indices.append(self._drop_to_grouped(i, int(hit[0])))
                    else:
                        missing.append((i, val))
                elif len(cats) and _is_scalar_nan(cats[-1]):
                    indices.append(self._drop_to_grouped(i, len(cats) - 1))
                else:
                    missing.append((i, val))
            if missing:
                lines = "\n".join(f"Category: {v}, Feature: {i}" for i, v in missing)
                raise ValueError("The following categories were supposed to be dropped, but "
                                 f"were not found in the training data.\n{lines}")
            after = np.array(indices, dtype=object)
        self._drop_idx_after_grouping = after
        if after is None or not self._infrequent_enabled:
            self.drop_idx_ = after
        else:
            public = []
            for i, d in enumerate(after):
                mapping = self._mapping(i)
                public.append(d if d is None or mapping is None
                              else int(np.flatnonzero(mapping == d)[0]))
            self.drop_idx_ = np.asarray(public, dtype=object)

    def _drop_to_grouped(self, i, idx):
        mapping = self._mapping(i)
        if mapping is None:
            return idx
        infreq = self._infrequent_indices[i]
        if infreq is not None and idx in infreq:
            raise ValueError(f"Unable to drop category {self.categories_[i][idx]!r} from feature "
                             f"{i} because it is infrequent")
        return int(mapping[idx])

    def _compute_n_features_outs(self):
        out = [len(c) for c in self.categories_]
        if self._drop_idx_after_grouping is not None:
            for i, d in enumerate(self._drop_idx_after_grouping):
                if d is not None:
                    out[i] -= 1
        if self._infrequent_enabled:
            for i, infreq in enumerate(self._infrequent_indices):
                if infreq is not None:
                    out[i] -= infreq.size - 1
        return out

    def _transformed_categories(self, i, remove_dropped=True):
        cats = self.categories_[i]
        mapping = self._mapping(i)
        if mapping is not None:
            frequent = mapping < mapping.max()
            cats = np.concatenate((cats[frequent], np.array(["infrequent_sklearn"],
                                                            dtype=object)))
        if remove_dropped and self._drop_idx_after_grouping is not None and \
                self._drop_idx_after_grouping[i] is not None:
            cats = np.delete(cats, self._drop_idx_after_grouping[i])
        return cats

    def _codings(self) -> list[_Coding]:
        codings, offset = [], 0
        for i, cats in enumerate(self.categories_):
            mapping = self._mapping(i)
            n_cats = len(cats)
            grouped = np.arange(n_cats) if mapping is None else mapping
            d = None if self._drop_idx_after_grouping is None else \
                self._drop_idx_after_grouping[i]
            if d is None:
                col_map = grouped.astype(np.int64)
            else:
                col_map = np.where(grouped == d, -1, grouped - (grouped > d)).astype(np.int64)
            infreq = self._infrequent_indices[i] if self._infrequent_enabled else None
            unknown_col = -1
            if infreq is not None and self.handle_unknown in ("infrequent_if_exist", "warn"):
                unknown_col = int(col_map[infreq[0]])
            values = cats.tolist()
            plain = [k for k, v in enumerate(values) if v is not None and not _is_scalar_nan(v)]
            none_code = next((k for k, v in enumerate(values) if v is None), -1)
            nan_code = next((k for k, v in enumerate(values) if _is_scalar_nan(v)), -1)
            if len(plain) == n_cats:
                index = pd.Index(cats, dtype=object if cats.dtype.kind in "OUS" else None)
            else:
                index = pd.Index(cats[plain],
                                 dtype=object if cats.dtype.kind in "OUS" else None)
                if plain != list(range(len(plain))):  # missing categories are always last
                    raise AssertionError("missing-value categories must come last")
            codings.append(_Coding(index, none_code, nan_code, col_map, unknown_col, offset))
            offset += self._n_features_outs[i]
        return codings

    # ---- transform ----
    def _transform_plan(self, dtypes) -> TransformPlan:
        check_is_fitted(self, "categories_")
        if self.handle_unknown == "warn":
            warn = True
        else:
            warn = self.drop is not None and self.handle_unknown in ("ignore",
                                                                     "infrequent_if_exist")
        n_out = int(sum(self._n_features_outs))
        dtype = np.dtype(self.dtype)
        args = (self._codings(), getattr(self, "feature_names_in_", None), self.handle_unknown,
                warn, dtype, n_out, type(self).__name__)
        return TransformPlan(_onehot_kernel, args, {"numeric": False}, dtype, n_out)

    def transform(self, X):
        """One-hot encode X: NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        An unknown category raises a ``ValueError`` naming the column and the value with
        ``handle_unknown='error'`` (for Dask input: when the result is computed).
        """
        return self._transform_checked(_as_object_if_list(X))

    def inverse_transform(self, X):
        """Convert one-hot encoded data back to categories (scikit-learn's rules).

        Rows of all zeros become the dropped category when one was dropped, else ``None``
        (with ``handle_unknown='ignore'``). For Dask input the output dtype is fixed up front:
        object when such ``None`` values can occur.
        """
        check_is_fitted(self, "categories_")
        n_out = int(sum(self._n_features_outs))
        transformed = [self._transformed_categories(i, remove_dropped=False)
                       for i in range(len(self.categories_))]
        dt = np.result_type(*[c.dtype for c in transformed])
        may_be_none = self.handle_unknown == "ignore" or (
            self.handle_unknown in ("infrequent_if_exist", "warn") and
            any(self._mapping(i) is None for i in range(len(self.categories_))))
        out_dtype = np.dtype(object) if (is_dask(X) and may_be_none) else None
        result_dtype = out_dtype if out_dtype is not None else dt
        return self._blockwise(X, _onehot_inverse_kernel, self._inverse_state(transformed),
                               out_dtype, dtype=result_dtype, tail_shape=(len(self.categories_),),
                               check_features=False, n_features=n_out)

    def _inverse_state(self, transformed):
        state = []
        for i, cats in enumerate(self.categories_):
            d = None if self._drop_idx_after_grouping is None else \
                self._drop_idx_after_grouping[i]
            kept = transformed[i] if d is None else np.delete(transformed[i], d)
            infrequent = self._mapping(i) is not None
            state.append((cats, transformed[i], kept, d, infrequent))
        return self.handle_unknown, state, np.result_type(*[t.dtype for t in transformed])

    def get_feature_names_out(self, input_features=None):
        """Output feature names: ``<input feature>_<category>`` per output column."""
        check_is_fitted(self, "categories_")
        input_features = _feature_names_in(self, input_features)
        if self.feature_name_combiner == "concat":
            def combine(feature, category):
                return feature + "_" + str(category)
        else:
            combine = self.feature_name_combiner
            if not isinstance(combine("feature", "category"), str):
                raise TypeError("When `feature_name_combiner` is a callable, it should return a "
                                "Python string.")
        names = []
        for i in range(len(self.categories_)):
            names.extend(combine(input_features[i], t)
                         for t in self._transformed_categories(i))
        return np.array(names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        return tags


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


def _feature_names_in(est, input_features):
    """scikit-learn's input-feature-name rule: fitted names, given names, or x0, x1, ..."""
    fitted = getattr(est, "feature_names_in_", None)
    n = est.n_features_in_
    if input_features is None:
        if fitted is not None:
            return fitted
        return np.asarray([f"x{i}" for i in range(n)], dtype=object)
    input_features = np.asarray(input_features, dtype=object)
    if fitted is not None and not np.array_equal(fitted, input_features):
        raise ValueError("input_features is not equal to feature_names_in_")
    if len(input_features) != n:
        raise ValueError(f"input_features should have length equal to number of features "
                         f"({n}), got {len(input_features)}")
    return input_features
