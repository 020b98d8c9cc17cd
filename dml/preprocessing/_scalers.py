"""StandardScaler and MinMaxScaler: per-feature statistics from one reduction over all blocks."""
from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin

import scipy.sparse as sp

from dml._blocks import SPARSE_META, Blocks, BlockSpec, check_x_layout, is_sparse, is_sparse_dask
from dml._param_validation import invalid_parameter
from dml._typing import Any, ArrayLike, Self
from dml.base import check_is_fitted, fit_context
from dml.preprocessing._base import (TransformPlan, _dtypes_of, _float_out_dtype, _no_samples,
                                     _OnePassTransformer)
from dml.preprocessing._norms import no_centering, scale_columns, sparse_moments

__all__ = ["StandardScaler", "MinMaxScaler"]


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
    if sp.issparse(xb):
        return sparse_moments(xb, wb)
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
    if sp.issparse(xb):  # with_mean=False (checked before): scaling keeps it sparse
        return xb.astype(dtype) if scale is None else scale_columns(xb, scale, dtype, True)
    x = np.array(xb, dtype=dtype, copy=True)
    if mean is not None:
        x -= mean
    if scale is not None:
        x /= scale
    return x


def _standard_inverse_kernel(xb, mean, scale, dtype):
    if sp.issparse(xb):
        return xb.astype(dtype) if scale is None else scale_columns(xb, scale, dtype, False)
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
    scikit-learn's ``StandardScaler`` (see docs/preprocessing.md). Mean and variance come from one
    pass over all blocks: each block reports (count, mean, M2) and the blocks are merged with Chan,
    Golub and LeVeque's pairwise formula in a fixed tree order, so the result equals scikit-learn's
    to round-off whatever the partitioning. NaN is ignored in ``fit`` and kept in ``transform``.
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

    # Sparse X with with_mean=False: the moments of the stored values and the implicit zeros,
    # the output sparse (docs/sparse.md).
    _block_spec = BlockSpec(accept_sparse=True)
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
    def fit(self, X: ArrayLike, y: ArrayLike | None = None,
            sample_weight: ArrayLike | None = None) -> Self:
        """Compute the mean and standard deviation of X in one pass over its blocks.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The data; NaN values are ignored.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), Dask array/Series or column name
            Individual weights for each sample.

        Returns
        -------
        self : StandardScaler
            The fitted scaler.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import StandardScaler
        >>> StandardScaler().fit(np.array([[0.0], [2.0]])).scale_
        array([1.])
        """
        self._reset()
        return self.partial_fit(X, y, sample_weight)

    @fit_context
    def partial_fit(self, X: ArrayLike, y: ArrayLike | None = None,
                    sample_weight: ArrayLike | None = None) -> Self:
        """Update the mean and variance with X (one pass over X's blocks).

        Several ``partial_fit`` calls give the same statistics as one ``fit`` on all the data
        (to round-off): the stored state is merged with Chan's formula.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            A batch of data; NaN values are ignored.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), Dask array/Series or column name
            Individual weights for each sample.

        Returns
        -------
        self : StandardScaler
            The updated scaler.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import StandardScaler
        >>> scaler = StandardScaler().partial_fit(np.array([[0.0]]))
        >>> scaler.partial_fit(np.array([[2.0]])).mean_
        array([1.])
        """
        first = not hasattr(self, "n_samples_seen_")
        self._check_sparse(X)
        return self._one_pass_fit(X, sample_weight, reset=first)

    def _check_sparse(self, X):
        if self.with_mean and (is_sparse(X) or is_sparse_dask(X)):
            raise no_centering(type(self).__name__)

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
    def transform(self, X: ArrayLike, copy: bool | None = None) -> Any:
        """Standardize X: NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        After ``set_output(transform="pandas")``: a pandas DataFrame with X's index (a Dask
        DataFrame for Dask input).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The data to scale; NaN values stay NaN.
        copy : bool, default=None
            Accepted for compatibility; a new array is always returned.

        Returns
        -------
        X_tr : ndarray, Dask array or DataFrame of shape (n_samples, n_features)
            ``(X - mean_) / scale_``.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import StandardScaler
        >>> StandardScaler().fit(np.array([[0.0], [2.0]])).transform(np.array([[4.0]]))
        array([[3.]])
        """
        self._check_sparse(X)
        return self._transform_checked(X)

    def inverse_transform(self, X: ArrayLike, copy: bool | None = None) -> Any:
        """Scale back to the original representation (``X * scale_ + mean_``).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Standardized data.
        copy : bool, default=None
            Accepted for compatibility; a new array is always returned.

        Returns
        -------
        X_original : ndarray or Dask array of shape (n_samples, n_features)
            The data in the original units.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import StandardScaler
        >>> StandardScaler().fit(np.array([[0.0], [2.0]])).inverse_transform(np.array([[3.0]]))
        array([[4.]])
        """
        check_is_fitted(self, "n_samples_seen_")
        X = check_x_layout(X, type(self).__name__, accept_sparse=True)
        self._check_sparse(X)
        dtype = _float_out_dtype(_dtypes_of(X))
        mean = self.mean_.astype(dtype) if self.with_mean else None
        scale = self.scale_.astype(dtype) if self.with_std else None
        meta = SPARSE_META if is_sparse(X) or is_sparse_dask(X) else None
        return self._blockwise(X, _standard_inverse_kernel, mean, scale, dtype, dtype=dtype,
                               tail_shape=(self.n_features_in_,), check_features=False, meta=meta,
                               n_features=self.n_features_in_, allow_nan=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = not self.with_mean  # centring would densify
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
    scikit-learn's ``MinMaxScaler`` (docs/preprocessing.md). The per-feature minimum and
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
    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Compute the per-feature minimum and maximum in one pass over X's blocks.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The data; NaN values are ignored.
        y : None
            Ignored.

        Returns
        -------
        self : MinMaxScaler
            The fitted scaler.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import MinMaxScaler
        >>> MinMaxScaler().fit(np.array([[1.0], [5.0]])).data_range_
        array([4.])
        """
        self._reset()
        return self.partial_fit(X, y)

    @fit_context
    def partial_fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Update the minimum and maximum with X (one pass over X's blocks).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            A batch of data; NaN values are ignored.
        y : None
            Ignored.

        Returns
        -------
        self : MinMaxScaler
            The updated scaler.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import MinMaxScaler
        >>> scaler = MinMaxScaler().partial_fit(np.array([[1.0]]))
        >>> scaler.partial_fit(np.array([[5.0]])).data_max_
        array([5.])
        """
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

    def transform(self, X: ArrayLike) -> Any:
        """Scale X: NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        After ``set_output(transform="pandas")``: a pandas DataFrame with X's index (a Dask
        DataFrame for Dask input).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The data to scale; NaN values stay NaN.

        Returns
        -------
        X_tr : ndarray, Dask array or DataFrame of shape (n_samples, n_features)
            ``X * scale_ + min_`` (clipped to ``feature_range`` with ``clip=True``).

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import MinMaxScaler
        >>> MinMaxScaler().fit(np.array([[1.0], [5.0]])).transform(np.array([[2.0]]))
        array([[0.25]])
        """
        return self._transform_checked(X)

    def inverse_transform(self, X: ArrayLike) -> Any:
        """Undo the scaling of X (``(X - min_) / scale_``).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Scaled data.

        Returns
        -------
        X_original : ndarray or Dask array of shape (n_samples, n_features)
            The data in the original units.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import MinMaxScaler
        >>> MinMaxScaler().fit(np.array([[1.0], [5.0]])).inverse_transform(np.array([[0.25]]))
        array([[2.]])
        """
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
