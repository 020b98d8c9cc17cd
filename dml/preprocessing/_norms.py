"""MaxAbsScaler and Normalizer, and the sparse-block kernels of StandardScaler.

The three scalers here never shift the data, so they keep zeros zero: a sparse X stays sparse
(CSR blocks in, CSR blocks out) and only its stored values are read or written.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.preprocessing import normalize

from dml._typing import Any, ArrayLike, Self
from dml._blocks import (SPARSE_META, Blocks, BlockSpec, check_x_layout, is_dask, is_sparse,
                         is_sparse_dask)
from dml._param_validation import StrOptions
from dml.base import DaskEstimatorMixin, TransformOutputMixin, check_is_fitted, fit_context
from dml.preprocessing._base import (TransformPlan, _dtypes_of, _float_out_dtype, _no_samples,
                                     _OnePassTransformer)

__all__ = ["MaxAbsScaler", "Normalizer", "sparse_moments", "scale_columns"]


# --------------------------------------------------------------------------------------------
# Sparse kernels (StandardScaler with_mean=False uses them too)
# --------------------------------------------------------------------------------------------

def _entry_rows(X) -> np.ndarray:
    """The row of every stored entry of a CSR block."""
    return np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))


def sparse_moments(X, wb):
    """StandardScaler's block moments ``(rows, count, n, shift, mean, M2)`` of a CSR block.

    The same statistics as the dense kernel, in O(nnz + d): every implicit zero is a value 0,
    NaN entries are ignored, and ``shift`` is 0 (the data of a sparse matrix sit around zero).
    """
    rows, d = X.shape
    data = np.asarray(X.data, dtype=np.float64)
    cols = X.indices
    w = (np.ones(rows) if wb is None else np.asarray(wb, dtype=np.float64))[_entry_rows(X)]
    nan = np.isnan(data)
    total = float(rows) if wb is None else float(np.sum(wb))
    count = rows - np.bincount(cols[nan], minlength=d)
    n = total - np.bincount(cols[nan], weights=w[nan], minlength=d)
    ok = ~nan
    cols, data, w = cols[ok], data[ok], w[ok]
    s = np.bincount(cols, weights=w * data, minlength=d)
    mean = np.divide(s, n, out=np.zeros(d), where=n > 0)
    dev = data - mean[cols]
    stored = np.bincount(cols, weights=w, minlength=d)
    # Stored values' squared deviations, plus those of the implicit zeros (weight n - stored).
    m2 = np.bincount(cols, weights=w * dev * dev, minlength=d) + (n - stored) * mean * mean
    return rows, count.astype(np.int64), n, np.zeros(d), mean, np.maximum(m2, 0.0)


def scale_columns(X, factor, dtype, divide: bool):
    """``X / factor`` (or ``X * factor``) per column of a CSR block, as a new CSR block."""
    out = X.astype(dtype, copy=True)
    f = np.asarray(factor, dtype=dtype)[out.indices]
    if divide:
        out.data /= f
    else:
        out.data *= f
    return out


def no_centering(name: str) -> ValueError:
    """scikit-learn's refusal to centre sparse data (it would make every entry non-zero)."""
    return ValueError(f"{name}: Cannot center sparse matrices: pass `with_mean=False` instead. "
                      "Centering would make every entry of a sparse matrix non-zero; scaling "
                      "alone keeps it sparse.")


# --------------------------------------------------------------------------------------------
# MaxAbsScaler
# --------------------------------------------------------------------------------------------

def _maxabs_kernel(xb, yb, wb):
    """(rows, per-feature max |x|) of one block, NaN ignored; None for an empty block."""
    rows = xb.shape[0]
    if rows == 0:
        return None
    if sp.issparse(xb):
        data = np.abs(xb.data)
        keep = ~np.isnan(data)
        out = np.zeros(xb.shape[1])  # implicit zeros; all-zero columns stay 0
        np.maximum.at(out, xb.indices[keep], data[keep])
        return rows, out
    a = np.abs(np.asarray(xb, dtype=np.float64))
    nan = np.isnan(a)
    out = np.where(nan, -np.inf, a).max(axis=0)
    return rows, np.where(nan.all(axis=0), np.nan, out)


def _merge_maxabs(parts):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    rows, m = parts[0]
    for r, m2 in parts[1:]:
        rows, m = rows + r, np.fmax(m, m2)
    return rows, m


def _maxabs_transform(xb, factor, dtype, divide):
    if sp.issparse(xb):
        return scale_columns(xb, factor, dtype, divide)
    x = np.array(xb, dtype=dtype, copy=True)
    return x / factor if divide else x * factor


class MaxAbsScaler(_OnePassTransformer, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Scale each feature by its maximum absolute value, so that it lies in [-1, 1].

    The per-feature maxima come from one pass over all blocks (exactly scikit-learn's values,
    whatever the partitioning). Nothing is shifted, so zeros stay zeros: sparse X (scipy
    matrices or Dask arrays of sparse blocks) gives sparse output. NaN is ignored in ``fit``
    and kept in ``transform``.

    Parameters
    ----------
    copy : bool, default=True
        Accepted for compatibility; a new array is always returned.

    Attributes
    ----------
    scale_ : ndarray of shape (n_features,)
        ``max_abs_`` with zeros replaced by 1.
    max_abs_ : ndarray of shape (n_features,)
        Per-feature maximum absolute value.
    n_samples_seen_ : int
        Number of rows seen.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X had string column names.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from dml.preprocessing import MaxAbsScaler
    >>> X = np.array([[1.0, -4.0], [-2.0, 2.0]])
    >>> MaxAbsScaler().fit(X).transform(X)
    array([[ 0.5, -1. ],
           [-1. ,  0.5]])
    >>> MaxAbsScaler().fit_transform(sp.csr_matrix(X)).format
    'csr'
    """

    _block_spec = BlockSpec(accept_sparse=True)
    _fit_overrides = {"allow_nan": True}
    _parameter_constraints = {"copy": ["boolean"]}

    def __init__(self, *, copy=True):
        self.copy = copy

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Compute the per-feature maximum absolute value in one pass over X's blocks.

        Parameters
        ----------
        X : ndarray, sparse matrix, DataFrame, Dask array or Dask DataFrame
            The data, shape (n_samples, n_features); NaN values are ignored.
        y : None
            Ignored.

        Returns
        -------
        self : MaxAbsScaler

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import MaxAbsScaler
        >>> MaxAbsScaler().fit(np.array([[1.0], [-3.0]])).max_abs_
        array([3.])
        """
        for attr in ("max_abs_", "scale_", "n_samples_seen_"):
            self.__dict__.pop(attr, None)
        return self.partial_fit(X, y)

    @fit_context
    def partial_fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Update the maxima with the batch X (one pass over its blocks).

        Parameters
        ----------
        X : ndarray, sparse matrix, DataFrame, Dask array or Dask DataFrame
            A batch of data; NaN values are ignored.
        y : None
            Ignored.

        Returns
        -------
        self : MaxAbsScaler

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import MaxAbsScaler
        >>> s = MaxAbsScaler().partial_fit(np.array([[1.0]]))
        >>> s.partial_fit(np.array([[-2.0]])).scale_
        array([2.])
        """
        return self._one_pass_fit(X, None, reset=not hasattr(self, "n_samples_seen_"))

    def _fit_delayed(self, blocks: Blocks, reset: bool = True):
        self._record_layout(blocks, reset)
        return blocks.map_reduce(_maxabs_kernel, combine=_merge_maxabs, compute_now=False)

    def _set_fitted(self, result, reset: bool = True):
        if result is None:
            raise _no_samples(type(self).__name__)
        rows, max_abs = result
        if not reset and hasattr(self, "max_abs_"):
            rows, max_abs = rows + self.n_samples_seen_, np.fmax(self.max_abs_, max_abs)
        self.n_samples_seen_ = int(rows)
        self.max_abs_ = max_abs
        # scikit-learn's _handle_zeros_in_scale: a feature that is all zero is left as it is.
        self.scale_ = np.where(max_abs == 0.0, 1.0, max_abs)
        return self

    def _transform_plan(self, dtypes) -> TransformPlan:
        check_is_fitted(self, "scale_")
        dtype = _float_out_dtype(dtypes)
        return TransformPlan(_maxabs_transform, (self.scale_.astype(dtype), dtype, True),
                             {"allow_nan": True}, dtype, self.n_features_in_)

    def transform(self, X: ArrayLike) -> Any:
        """Divide each feature by its maximum absolute value.

        Parameters
        ----------
        X : ndarray, sparse matrix, DataFrame, Dask array or Dask DataFrame

        Returns
        -------
        X_tr : ndarray, sparse CSR matrix or Dask array of shape (n_samples, n_features)
            Sparse for sparse input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import MaxAbsScaler
        >>> MaxAbsScaler().fit(np.array([[2.0], [-4.0]])).transform(np.array([[1.0]]))
        array([[0.25]])
        """
        return self._transform_checked(X)

    def inverse_transform(self, X: ArrayLike) -> Any:
        """Multiply each feature back by its maximum absolute value.

        Parameters
        ----------
        X : ndarray, sparse matrix, Dask array of shape (n_samples, n_features)

        Returns
        -------
        X_original : ndarray, sparse CSR matrix or Dask array

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import MaxAbsScaler
        >>> MaxAbsScaler().fit(np.array([[2.0], [-4.0]])).inverse_transform(np.array([[0.5]]))
        array([[2.]])
        """
        check_is_fitted(self, "scale_")
        X = check_x_layout(X, type(self).__name__, accept_sparse=True)
        dtype = _float_out_dtype(_dtypes_of(X))
        meta = SPARSE_META if is_sparse(X) or is_sparse_dask(X) else None
        return self._blockwise(X, _maxabs_transform, self.scale_.astype(dtype), dtype, False,
                               dtype=dtype, tail_shape=(self.n_features_in_,), meta=meta,
                               check_features=False, n_features=self.n_features_in_,
                               allow_nan=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


# --------------------------------------------------------------------------------------------
# Normalizer
# --------------------------------------------------------------------------------------------

def _normalize_kernel(xb, norm, dtype):
    """scikit-learn's ``normalize`` of one block's rows (each row on its own)."""
    x = xb.astype(dtype, copy=True) if sp.issparse(xb) else np.array(xb, dtype=dtype, copy=True)
    return normalize(x, norm=norm, copy=False)


class Normalizer(TransformOutputMixin, OneToOneFeatureMixin, DaskEstimatorMixin,
                 TransformerMixin, BaseEstimator):
    """Scale each sample (row) to unit norm, block by block.

    Each row is scaled on its own (``l1``: sum of absolute values, ``l2``: Euclidean length,
    ``max``: largest absolute value; all-zero rows are left as they are), so there is nothing to
    learn and nothing to reduce: ``transform`` maps scikit-learn's ``normalize`` over the
    blocks. Sparse X gives sparse output.

    Parameters
    ----------
    norm : {"l1", "l2", "max"}, default="l2"
        The norm each row is scaled to one in.
    copy : bool, default=True
        Accepted for compatibility; a new array is always returned.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.preprocessing import Normalizer
    >>> Normalizer().fit_transform(np.array([[3.0, 4.0], [0.0, 0.0]]))
    array([[0.6, 0.8],
           [0. , 0. ]])
    """

    _block_spec = BlockSpec(accept_sparse=True)
    _parameter_constraints = {"norm": [StrOptions({"l1", "l2", "max"})], "copy": ["boolean"]}

    def __init__(self, norm="l2", *, copy=True):
        self.norm = norm
        self.copy = copy

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Record the number (and names) of X's features (and check local X's values).

        Dask X is not read: its values are checked when it is transformed.

        Parameters
        ----------
        X : ndarray, sparse matrix, DataFrame, Dask array or Dask DataFrame
        y : None
            Ignored.

        Returns
        -------
        self : Normalizer

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import Normalizer
        >>> Normalizer().fit(np.ones((2, 3))).n_features_in_
        3
        """
        self._fit_blocks(X, None, None, require_y=False)
        if not is_dask(X):
            self._predict_input(X)  # NaN, infinity, strings: scikit-learn checks them in fit
        return self

    def transform(self, X: ArrayLike, copy: bool | None = None) -> Any:
        """Scale every row of X to unit norm.

        Parameters
        ----------
        X : ndarray, sparse matrix, DataFrame, Dask array or Dask DataFrame
        copy : bool, default=None
            Accepted for compatibility; a new array is always returned.

        Returns
        -------
        X_tr : ndarray, sparse CSR matrix or Dask array of shape (n_samples, n_features)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import Normalizer
        >>> Normalizer(norm="l1").fit(np.ones((1, 2))).transform(np.array([[1.0, 3.0]]))
        array([[0.25, 0.75]])
        """
        X = check_x_layout(X, type(self).__name__, accept_sparse=True)
        dtype = _float_out_dtype(_dtypes_of(X))
        meta = SPARSE_META if is_sparse(X) or is_sparse_dask(X) else None
        # Stateless: an unfitted Normalizer transforms too (scikit-learn's requires_fit=False).
        fitted = hasattr(self, "n_features_in_")
        return self._blockwise(X, _normalize_kernel, self.norm, dtype, dtype=dtype,
                               tail_shape=(X.shape[1],), meta=meta, check_features=fitted)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
