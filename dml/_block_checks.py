"""Validation of one row block of (X, y, sample_weight), run on the worker that holds it.

:func:`extract_block` is what every block task of :func:`dml._blocks.as_blocks` runs, and what
estimators call directly on local data, so that local and Dask input pass the same checks:
X becomes a 2-D numeric array (or stays a DataFrame when the estimator checks its own values),
NaN and infinity are refused unless :class:`BlockSpec` allows them, and y / sample_weight must
have one entry per row of the block (:class:`MisalignedBlocksError` otherwise). Sparse blocks
(scipy.sparse, or pydata ``sparse`` arrays) become scipy CSR matrices for the estimators that take
them (``BlockSpec.accept_sparse``); only their stored values are checked, nothing is densified.
:func:`check_x_layout` makes the checks that need no look at the values, on the client.
"""
from __future__ import annotations

from dataclasses import dataclass

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = ["BlockSpec", "MisalignedBlocksError", "extract_block", "extract_frame",
           "check_x_layout", "is_numeric_dtype", "non_numeric_message", "is_sparse",
           "is_sparse_dask", "to_csr", "sparse_message", "c_aligned"]


def c_aligned(a):
    """``a`` as an aligned C-ordered array (a copy only when it is not one already).

    For reductions whose last bits must not depend on how a block sits in memory: NumPy and BLAS
    add a Fortran-ordered array in another order than a C-ordered one, and an unaligned array
    (a block a worker read back from its spill file, or rebuilt from a network message) in
    buffered pieces or after a copy. Anything that is not a NumPy array is returned as it is.
    """
    if isinstance(a, np.ndarray) and not (a.flags.c_contiguous and a.flags.aligned):
        return np.require(a, requirements=["C", "A"])
    return a


@dataclass(frozen=True)
class BlockSpec:
    """What a block must look like once extracted; checked on the worker that holds it.

    Parameters
    ----------
    numeric : bool
        Convert X to a 2-D NumPy array of a numeric dtype. When False, X blocks are passed as they
        are (pandas DataFrame for dataframe input, NumPy array otherwise) and the estimator's
        kernels check their values: the NaN/inf checks below apply to numeric X only.
    dtype : tuple of dtypes or None
        Accepted float dtypes; other numeric input is cast to the first. ``None`` keeps the dtype.
    allow_nan : bool
        Accept NaN in X (estimators that implement a missing-value rule). inf is never accepted.
    y_numeric : bool
        y must be numeric and finite (regression targets).
    estimator : str
        Name used in error messages.
    accept_sparse : bool
        Sparse X (scipy.sparse or pydata ``sparse``, local or as the blocks of a Dask array) is
        accepted and handed to the kernels as scipy CSR blocks. When False, sparse X is refused
        with a TypeError saying what to do instead.
    check_finite : bool
        Check a dense float X block for NaN/infinity here (one pass over it). False hands the
        block on unchecked: for a kernel that makes the same check from statistics it computes
        in its own pass anyway (raising the same errors). Sparse blocks are always checked.
    """

    numeric: bool = True
    dtype: tuple | None = (np.float64, np.float32)
    allow_nan: bool = False
    y_numeric: bool = False
    estimator: str = "estimator"
    accept_sparse: bool = False
    check_finite: bool = True


# --------------------------------------------------------------------------------------------
# Sparse X
# --------------------------------------------------------------------------------------------

def is_sparse(x) -> bool:
    """True for a scipy.sparse matrix/array or a pydata ``sparse`` array.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> is_sparse(sp.eye(2, format="csr")), is_sparse(np.eye(2))
    (True, False)
    """
    if sp.issparse(x):
        return True
    # pydata/sparse is optional: recognise its arrays by their module, without importing it.
    return type(x).__module__.split(".")[0] == "sparse" and hasattr(x, "nnz")


def is_sparse_dask(X) -> bool:
    """True for a Dask array whose blocks are sparse (as its meta says)."""
    return isinstance(X, da.Array) and is_sparse(getattr(X, "_meta", None))


def to_csr(x):
    """A sparse array or matrix as scipy CSR (pydata ``sparse`` arrays are converted).

    scipy's sparse *arrays* stay arrays (``csr_array``) and sparse *matrices* stay matrices, so
    an estimator's sparse output has the container type of its input, as in scikit-learn.
    """
    if sp.issparse(x):
        return x if x.format == "csr" else x.tocsr()
    if hasattr(x, "to_scipy_sparse"):  # pydata sparse (COO, GCXS, DOK)
        return x.to_scipy_sparse().tocsr()
    raise TypeError(f"expected a sparse matrix, got {type(x).__name__}")


def sparse_message(name: str) -> str:
    """The error for sparse X given to an estimator that needs dense X."""
    return (f"{name} does not accept sparse X (a scipy.sparse matrix or a Dask array of sparse "
            "blocks). Reduce the columns first (e.g. with TruncatedSVD) or, when the data fits "
            "in memory densely, densify it: X.toarray() for a scipy matrix, "
            "X.map_blocks(lambda b: b.toarray()) for a Dask array. docs/sparse.md lists the "
            "estimators that train on sparse X.")


def _as_sparse_block(xb, spec: BlockSpec, index: int):
    """A sparse block as scipy CSR of an accepted dtype; only the stored values are checked."""
    if not spec.accept_sparse:
        raise TypeError(sparse_message(spec.estimator))
    if getattr(xb, "ndim", 2) != 2:
        raise ValueError(f"{spec.estimator}: expected a 2-D block of X, got {xb.ndim}-D")
    xb = to_csr(xb)
    kind = xb.dtype.kind
    if kind == "c":
        raise ValueError(f"{spec.estimator}: Complex data not supported; pass the real part "
                         "(X.real) or split real and imaginary parts into separate features")
    if kind not in "iufb":
        raise TypeError(f"{spec.estimator}: X has dtype {xb.dtype}, expected numbers")
    if spec.dtype is not None and xb.dtype not in spec.dtype:
        xb = xb.astype(spec.dtype[0])
    elif kind == "b":
        xb = xb.astype(np.float64)
    if xb.dtype.kind == "f" and spec.check_finite:
        _check_finite(xb.data, "X", spec, index)
    return xb


def _as_numeric_block(xb, spec: BlockSpec, index: int) -> np.ndarray:
    if is_sparse(xb):
        return _as_sparse_block(xb, spec, index)
    if isinstance(xb, pd.DataFrame):
        bad = [c for c, t in xb.dtypes.items() if not is_numeric_dtype(t)]
        if bad:
            raise TypeError(non_numeric_message(bad, spec))
        if any(_is_nullable(t) for t in xb.dtypes):
            # Nullable pandas dtypes: pd.NA becomes NaN so the NaN rule below applies.
            xb = xb.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            xb = xb.to_numpy()
    xb = np.asarray(xb)
    if xb.dtype.kind in "OSUa":
        try:
            xb = xb.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{spec.estimator}: X contains non-numeric values ({exc}); encode categorical "
                "features first, e.g. with dml.preprocessing.OneHotEncoder") from None
    if xb.dtype.kind == "b":
        xb = xb.astype(np.float64)
    if xb.dtype.kind == "c":
        raise ValueError(f"{spec.estimator}: Complex data not supported; pass the real part "
                         "(X.real) or split real and imaginary parts into separate features")
    if xb.dtype.kind not in "iuf":
        raise TypeError(f"{spec.estimator}: X has dtype {xb.dtype}, expected numbers")
    if spec.dtype is not None and xb.dtype not in spec.dtype:
        xb = xb.astype(spec.dtype[0])
    if xb.ndim != 2:
        raise ValueError(f"{spec.estimator}: expected a 2-D block of X, got {xb.ndim}-D")
    if xb.dtype.kind == "f" and spec.check_finite:
        _check_finite(xb, "X", spec, index)
    return xb


def is_numeric_dtype(t) -> bool:
    """True for a numeric pandas/NumPy dtype that dml can use as a feature (not categorical).

    Examples
    --------
    >>> import pandas as pd
    >>> is_numeric_dtype(pd.Int64Dtype()), is_numeric_dtype(pd.CategoricalDtype([1, 2]))
    (True, False)
    """
    return pd.api.types.is_numeric_dtype(t) and not isinstance(t, pd.CategoricalDtype)


def _is_nullable(t) -> bool:
    return (isinstance(t, pd.api.extensions.ExtensionDtype)
            and not isinstance(t, pd.CategoricalDtype))


def non_numeric_message(columns, spec: BlockSpec) -> str:
    return (f"{spec.estimator}: X has non-numeric columns {list(columns)}; encode them first "
            "(for example with dml.preprocessing.OneHotEncoder) or drop them")


def _check_finite(a: np.ndarray, what: str, spec: BlockSpec, index: int, allow_nan=None) -> None:
    allow_nan = spec.allow_nan if allow_nan is None else allow_nan
    if a.size == 0:
        return
    # One sum is far cheaper than isfinite over the block; only look closer when it is not finite.
    s = np.sum(a, dtype=np.float64) if a.dtype.kind == "f" else 0.0
    if np.isfinite(s):
        return
    if np.isinf(a).any():
        raise ValueError(f"{spec.estimator}: Input {what} contains infinity (row block {index}). "
                         "Replace or drop infinite values before fitting.")
    if not allow_nan and np.isnan(a).any():
        hint = ("" if what != "X" else
                " Impute or drop missing values first, or use an estimator that handles them"
                " (e.g. naive Bayes with missing='ignore').")
        raise ValueError(f"{spec.estimator}: Input {what} contains NaN (row block {index}).{hint}")
    # Otherwise: allowed NaN, or finite values whose float64 sum overflowed.


class MisalignedBlocksError(ValueError):
    """A block of y or sample_weight does not have as many rows as the matching block of X."""


def _as_vector(vb, what: str, n: int, spec: BlockSpec, index: int, numeric: bool):
    if vb is None:
        return None
    if isinstance(vb, (pd.Series, pd.DataFrame, pd.Index)):
        vb = vb.to_numpy()
    vb = np.asarray(vb)
    if vb.ndim == 2 and vb.shape[1] == 1:
        vb = vb.ravel()
    if vb.ndim != 1:
        raise ValueError(f"{spec.estimator}: {what} must be 1-D, got shape {vb.shape}")
    if len(vb) != n:
        raise MisalignedBlocksError(
            f"{spec.estimator}: row block {index} of X has {n} rows but the matching block of "
            f"{what} has {len(vb)}; {what} is not aligned with X. Pass {what} with the same "
            "partitioning as X (or as a column name of X's dataframe).")
    if numeric:
        if vb.dtype.kind in "OSU":
            try:
                vb = vb.astype(np.float64)
            except (TypeError, ValueError):
                raise TypeError(f"{spec.estimator}: {what} must be numeric") from None
        if vb.dtype.kind == "f":
            _check_finite(vb, what, spec, index, allow_nan=False)
    else:
        if vb.dtype.kind == "f" and not np.isfinite(vb).all():
            bad = "NaN" if np.isnan(vb).any() else "infinity"
            raise ValueError(f"{spec.estimator}: Input {what} contains {bad} (row block {index}); "
                             f"every row needs a finite {what} value.")
        if vb.dtype.kind == "O" and pd.isna(vb).any():
            raise ValueError(f"{spec.estimator}: Input {what} contains missing values (row block "
                             f"{index}); every row needs a {what} value.")
    return vb


def extract_block(xb, yb, wb, spec: BlockSpec, index: int):
    """Validate one block of (X, y, sample_weight) and return the ``(X, y, w)`` tuple.

    This is what every block task of :func:`as_blocks` runs on the worker that holds the block,
    and what estimators call directly on local data (one block, ``index=0``) so that local and
    Dask input pass the same checks.

    Parameters
    ----------
    xb : ndarray or DataFrame
        The rows of X.
    yb, wb : array-like or None
        The matching rows of y and sample_weight.
    spec : BlockSpec
        What the block must look like.
    index : int
        Block index, quoted in error messages.

    Returns
    -------
    tuple
        ``(X, y, w)``; X a 2-D NumPy array when ``spec.numeric``, y and w 1-D arrays or None.

    Raises
    ------
    MisalignedBlocksError
        When y or w does not have as many rows as X.

    Examples
    --------
    >>> import numpy as np
    >>> xb, yb, wb = extract_block(np.ones((2, 3), dtype=np.int64), [0, 1], None, BlockSpec(), 0)
    >>> xb.dtype, yb.tolist(), wb
    (dtype('float64'), [0, 1], None)
    """
    if spec.numeric:
        xb = _as_numeric_block(xb, spec, index)
    elif not isinstance(xb, pd.DataFrame):
        if is_sparse(xb):
            raise TypeError(sparse_message(spec.estimator))
        xb = np.asarray(xb)
        if xb.ndim != 2:
            raise ValueError(f"{spec.estimator}: expected a 2-D block of X, got {xb.ndim}-D")
        if xb.dtype.kind == "c":
            # Estimators with their own value checks (trees, categorical NB) would otherwise
            # drop the imaginary part silently or report a misleading error.
            raise ValueError(f"{spec.estimator}: Complex data not supported; pass the real part "
                             "(X.real) or split real and imaginary parts into separate features")
    n = xb.shape[0]
    yb = _as_vector(yb, "y", n, spec, index, numeric=spec.y_numeric)
    wb = _as_vector(wb, "sample_weight", n, spec, index, numeric=True)
    return xb, yb, wb


def extract_frame(part: pd.DataFrame, features, ycol, wcol, spec: BlockSpec, index: int,
                  yb=None, wb=None):
    """:func:`extract_block` of a dataframe partition: y/w from its columns or given."""
    if ycol is not None:
        yb = part[ycol]
    if wcol is not None:
        wb = part[wcol]
    return extract_block(part[features], yb, wb, spec, index)


def check_x_layout(X, name: str = "estimator", accept_sparse: bool = False):
    """Client-side checks of X's type and shape (no data is read); returns X, array-likes as NumPy.

    Raises the errors that need no look at the values: wrong type, 1-D/3-D X, no features,
    sparse X for an estimator that needs dense X. With ``accept_sparse`` a local sparse X is
    returned as scipy CSR and a Dask array of sparse blocks as it is.
    """
    if is_sparse(X) or is_sparse_dask(X):
        if not accept_sparse:
            raise TypeError(sparse_message(name))
        if X.ndim != 2:
            raise ValueError(f"{name}: expected a 2-D X, got a {X.ndim}-D sparse array of "
                             f"shape {X.shape}")
        if X.shape[1] == 0:
            raise ValueError(f"{name}: Found array with 0 feature(s) (shape={tuple(X.shape)}) "
                             "while a minimum of 1 is required.")
        return X if is_sparse_dask(X) else to_csr(X)
    if isinstance(X, (list, tuple)) or (
            not isinstance(X, (np.ndarray, pd.DataFrame, da.Array, dd.DataFrame, pd.Series,
                               dd.Series)) and hasattr(X, "__array__")
            and not hasattr(X, "tocsr")):
        X = np.asarray(X)
    if not isinstance(X, (np.ndarray, pd.DataFrame, da.Array, dd.DataFrame)):
        if isinstance(X, (pd.Series, dd.Series)):
            raise ValueError(f"{name}: expected 2-D X (one row per sample), got a Series. Pass a "
                             "one-column DataFrame instead, e.g. X.to_frame().")
        raise TypeError(f"{name}: X must be a NumPy array, pandas DataFrame, Dask array or Dask "
                        f"DataFrame, got {type(X).__name__}")
    if isinstance(X, (np.ndarray, da.Array)):
        if X.ndim == 1:
            raise ValueError(
                f"{name}: expected a 2-D X, got a 1-D array of shape {X.shape}. Reshape your "
                "data with X.reshape(-1, 1) if it has a single feature or X.reshape(1, -1) if it "
                "is a single sample.")
        if X.ndim != 2:
            raise ValueError(f"{name}: expected a 2-D X, got a {X.ndim}-D array of shape "
                             f"{X.shape}")
    n_features = len(X.columns) if isinstance(X, (pd.DataFrame, dd.DataFrame)) else X.shape[1]
    if n_features == 0:
        # scikit-learn's wording, which its estimator checks look for.
        raise ValueError(f"{name}: Found array with 0 feature(s) (shape={tuple(X.shape)}) while "
                         "a minimum of 1 is required.")
    return X

