"""The one-pass fitting protocol shared by dml's transformers, and small helpers around it.

See :mod:`dml.preprocessing` for the protocol itself; :class:`_OnePassTransformer` is the mixin
that implements ``fit``/``transform`` plumbing on top of it for every transformer here.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import dask.dataframe as dd
import numpy as np
import pandas as pd

from dml._blocks import SPARSE_META, check_x_layout, compute, is_sparse, is_sparse_dask
from dml.base import DaskEstimatorMixin, TransformOutputMixin, check_is_fitted

__all__ = ["TransformPlan"]


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


class _OnePassTransformer(TransformOutputMixin, DaskEstimatorMixin):
    """The one-pass fitting protocol (see the module docstring) plus the plumbing around it."""

    _fit_overrides: dict = {}

    def _one_pass_fit(self, X, sample_weight=None, reset=True):
        blocks = self._fit_blocks(X, None, sample_weight, reset=reset, require_y=False,
                                  **self._fit_overrides)
        (result,) = compute(self._fit_delayed(blocks, reset=reset))
        return self._set_fitted(result, reset=reset)

    def _transform_checked(self, X):
        check_is_fitted(self, "n_features_in_")
        # type and shape; reads no data
        X = check_x_layout(X, type(self).__name__, accept_sparse=self._block_spec.accept_sparse)
        plan = self._transform_plan(_dtypes_of(X))
        # The transformers that take sparse X give sparse X back (CSR blocks).
        meta = SPARSE_META if is_sparse(X) or is_sparse_dask(X) else None
        return self._blockwise(X, plan.kernel, *plan.args, dtype=plan.dtype,
                               tail_shape=(plan.n_out,), meta=meta, **plan.overrides)


def _no_samples(name):
    return ValueError(f"{name}: Found array with 0 sample(s) (shape=(0, ...)) while a minimum "
                      "of 1 is required. Pass at least one row.")


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
