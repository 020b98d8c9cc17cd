"""Estimator mixin: input validation at fit/predict time and blockwise outputs of the input's type.

Given NumPy/pandas input, dml estimators behave like scikit-learn estimators and return NumPy.
Given Dask input they return lazy Dask arrays from ``predict``/``transform``.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import dask.array as da
import numpy as np
import pandas as pd

from dml._blocks import (Blocks, BlockSpec, column_names, extract_block, as_blocks,
                         check_x_layout, is_dask, is_sparse, is_sparse_dask)
from dml._graph import fit_scope, frozen_heap
from dml._typing import Self

__all__ = ["DaskEstimatorMixin", "TransformOutputMixin", "check_is_fitted", "fit_context",
           "check_weights_not_all_zero", "ALL_ZERO_WEIGHTS"]


def fit_context(method):
    """Decorate ``fit``/``partial_fit``: check the hyper-parameters before the method runs.

    The one path of the parameter contract (:mod:`dml._param_validation`): the class's
    ``_parameter_constraints`` table, then its ``_validate_param_relations`` rules. Unlike
    scikit-learn's ``_fit_context`` it does not switch validation off for nested fits: the
    estimators a search or an ensemble fits are checked too.

    The method runs with the process's existing objects frozen (:func:`dml._graph.frozen_heap`:
    no full collection walks them while the fit builds its graphs; entered once, by the
    outermost of nested fits) and in a fit scope (:func:`dml._graph.fit_scope`: cluster facts
    such as the workers' memory limits are asked once per fit, each nested fit its own).
    """
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        self._validate_params()
        with frozen_heap(), fit_scope():
            return method(self, *args, **kwargs)

    return wrapper


def check_is_fitted(estimator, attribute: str) -> None:
    """Raise scikit-learn's ``NotFittedError`` with a clear message when not fitted."""
    if not hasattr(estimator, attribute):
        # Imported here: the workers' kernels import this module, and scikit-learn costs a
        # fresh worker about half a second of CPU (docs/cold_start.md).
        from sklearn.exceptions import NotFittedError

        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet. Call 'fit' with "
            "appropriate arguments before using this estimator.")


#: The message of an all-zero weight vector (every check of it says the same).
ALL_ZERO_WEIGHTS = ("{name}: Sample weights must contain at least one non-zero number; every "
                    "sample weight is zero, so no sample counts towards the fit.")


def check_weights_not_all_zero(weight_sum: float, name: str) -> None:
    """Raise the all-zero-weights error when the (reduced) weight sum is not positive.

    With every weight zero there is nothing to learn from: weighted means are 0/0 and a fit
    would silently return NaN or the initial parameters.
    """
    if not weight_sum > 0:
        raise ValueError(ALL_ZERO_WEIGHTS.format(name=name))


def _check_local_weights(sample_weight, name: str) -> None:
    """Reject all-zero local sample weights up front (a Dask vector is checked by the fit pass)."""
    if sample_weight is None or isinstance(sample_weight, str) or is_dask(sample_weight):
        return
    w = np.asarray(sample_weight)
    if w.dtype.kind in "biuf" and w.size and not np.any(w):
        check_weights_not_all_zero(0.0, name)


class DaskEstimatorMixin:
    """Shared validation for dml estimators (mix in before ``sklearn.base.BaseEstimator``)."""

    #: Default block validation; estimators override fields via :meth:`_spec`.
    _block_spec = BlockSpec()

    #: The hyper-parameters' constraints (see :mod:`dml._param_validation`); subclasses merge
    #: their base's table into theirs.
    _parameter_constraints: dict = {}

    # ---- hyper-parameters ----
    def _validate_params(self) -> None:
        """Check the hyper-parameters (called by :func:`fit_context`; scikit-learn's hook)."""
        # Imported here, as NotFittedError: it builds on scikit-learn's validation.
        from dml._param_validation import validate

        validate(self._parameter_constraints, self.get_params(deep=False), type(self).__name__)
        self._validate_param_relations()

    def _validate_param_relations(self) -> None:
        """Rules between hyper-parameters that the table cannot express (none by default).

        Raise :func:`dml._param_validation.invalid_parameter` errors, worded as the table's.
        """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Estimators that train on sparse X say so in their block spec (docs/sparse.md); a
        # scikit-learn base class that takes sparse X keeps its own tag.
        if self._block_spec.accept_sparse:
            tags.input_tags.sparse = True
        return tags

    def _spec(self, **overrides) -> BlockSpec:
        from dataclasses import replace

        return replace(self._block_spec, estimator=type(self).__name__, **overrides)

    # ---- fit ----
    def _fit_blocks(self, X, y=None, sample_weight=None, *, reset: bool = True,
                    require_y: bool = True, **spec_overrides) -> Blocks:
        """Validate training input into :class:`Blocks` and record the feature layout.

        With ``reset=False`` (``partial_fit`` after the first call) the feature layout must match
        the one recorded before.
        """
        blocks = as_blocks(X, y, sample_weight, spec=self._spec(**spec_overrides),
                           require_y=require_y)
        name = type(self).__name__
        # Row counts are free when they are already known (local input, Dask arrays with known
        # chunks); an empty training set otherwise fails deep inside a kernel or, worse, fits a
        # model of zeros.
        n_rows = (X.shape[0] if isinstance(X, (np.ndarray, pd.DataFrame))
                  else blocks.n_samples if blocks.known_lengths is not None else None)
        if n_rows == 0:
            raise ValueError(f"{name}: X has 0 rows (Found array with 0 sample(s), shape=(0, "
                             f"{blocks.n_features})) while a minimum of 1 is required; "
                             "pass at least one row of training data.")
        if reset:
            # (A later partial_fit batch of zero weight is valid: it changes nothing.)
            _check_local_weights(sample_weight, name)
        self._record_layout(blocks, reset)
        return blocks

    def _record_layout(self, blocks: Blocks, reset: bool) -> None:
        """Record ``n_features_in_``/``feature_names_in_`` (reset) or check them against X's."""
        if reset:
            self.n_features_in_ = blocks.n_features
            if blocks.feature_names is not None:
                self.feature_names_in_ = blocks.feature_names
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        else:
            self._check_features(blocks.n_features, blocks.feature_names)

    # ---- predict / transform ----
    def _check_features(self, n_features: int, names) -> None:
        expected = getattr(self, "n_features_in_", None)
        fitted_names = getattr(self, "feature_names_in_", None)
        if fitted_names is not None and names is not None:
            if list(names) != list(fitted_names):
                missing = [c for c in fitted_names if c not in set(names)]
                extra = [c for c in names if c not in set(fitted_names)]
                detail = (f" Missing: {missing}." if missing else "") + \
                         (f" Unexpected: {extra}." if extra else "")
                if not missing and not extra:
                    detail = " The columns are the same but in a different order."
                raise ValueError(
                    f"The feature names of X differ from those seen during fit.{detail} Pass the "
                    f"columns {list(fitted_names)} in that order.")
        if expected is not None and n_features != expected:
            raise ValueError(f"X has {n_features} features, but {type(self).__name__} is "
                             f"expecting {expected} features as input.")

    def _predict_input(self, X, *, check_features: bool = True, n_features: int | None = None,
                       **spec_overrides):
        """Validate X for prediction: a NumPy array for local input, :class:`Blocks` for Dask.

        ``check_features=False`` skips the comparison with the fitted feature layout (for
        ``inverse_transform`` and composites that select columns themselves); ``n_features``
        then still checks the column count.
        """
        spec = self._spec(**spec_overrides)
        if is_dask(X):
            data = as_blocks(X, spec=spec)
            n, names = data.n_features, data.feature_names
        else:
            # Local input is checked in place: no Dask graph (hashing a large array costs time).
            data = check_x_layout(X, spec.estimator, accept_sparse=spec.accept_sparse)
            n = data.shape[1]
            names = column_names(data.columns) if isinstance(data, pd.DataFrame) else None
        if check_features:
            self._check_features(n, names)
        elif n_features is not None and n != n_features:
            raise ValueError(f"X has {n} features, but {type(self).__name__} is expecting "
                             f"{n_features} features as input.")
        if isinstance(data, Blocks) or (isinstance(data, pd.DataFrame) and not spec.numeric):
            return data
        data, _, _ = extract_block(data, None, None, spec, 0)
        return data

    def _blockwise(self, X, kernel: Callable, *args, dtype, tail_shape: tuple = (),
                   check_features: bool = True, n_features: int | None = None, meta=None,
                   **spec_overrides):
        """Apply ``kernel(X_block, *args)``: NumPy in/out locally, a lazy Dask array for Dask.

        ``dtype``/``tail_shape`` describe the output (``meta`` its block type when not NumPy,
        e.g. CSR for a sparse transform); the input dtype rule is the estimator's
        ``_block_spec``. See :meth:`_predict_input` for the feature checks.
        """
        data = self._predict_input(X, check_features=check_features, n_features=n_features,
                                   **spec_overrides)
        if isinstance(data, Blocks):
            return data.map_blocks(kernel, *args, dtype=dtype, tail_shape=tail_shape, meta=meta)
        return kernel(data, *args)


class TransformOutputMixin:
    """scikit-learn's ``set_output`` for dml transformers, lazy for Dask input.

    As in scikit-learn, ``transform`` and ``fit_transform`` return arrays by default and, after
    ``set_output(transform="pandas")`` (or ``sklearn.set_config(transform_output="pandas")``),
    a DataFrame that keeps the input DataFrame's index, with the columns named by
    ``get_feature_names_out()``. For Dask input the output is a lazy Dask DataFrame (with the
    input Dask DataFrame's index and partitions): scikit-learn's own wrapper would build a pandas
    DataFrame from the Dask result and so compute it on the client. ``"polars"`` works for
    local input.

    Mix in before ``TransformerMixin``: subclasses turn scikit-learn's wrapper off and have
    their own ``transform``/``fit_transform`` wrapped by :meth:`_wrap_output` instead.
    """

    def __init_subclass__(cls, **kwargs):
        from sklearn.utils._set_output import _SetOutputMixin

        if issubclass(cls, _SetOutputMixin):
            kwargs["auto_wrap_output_keys"] = None  # scikit-learn's wrapper off: ours instead
        super().__init_subclass__(**kwargs)
        for method in ("transform", "fit_transform"):
            f = cls.__dict__.get(method)
            if f is not None and not getattr(f, "_dml_wraps_output", False):
                setattr(cls, method, _wrap_output_method(f))

    def set_output(self, *, transform: str | None = None) -> Self:
        """Set the output container of ``transform`` and ``fit_transform``.

        Parameters
        ----------
        transform : {"default", "pandas", "polars"} or None, default=None
            ``"default"``: NumPy arrays (Dask arrays for Dask input); ``"pandas"``: pandas
            DataFrames (Dask DataFrames for Dask input); ``"polars"``: polars DataFrames (local
            input only); None: unchanged.

        Returns
        -------
        self : estimator
            The estimator, configured.

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.preprocessing import StandardScaler
        >>> df = pd.DataFrame({"a": [1.0, 3.0]}, index=[10, 20])
        >>> StandardScaler().set_output(transform="pandas").fit_transform(df)
              a
        10 -1.0
        20  1.0
        """
        if transform is None:
            return self
        from sklearn.utils._set_output import ADAPTERS_MANAGER

        allowed = sorted({"default", *ADAPTERS_MANAGER.adapters})
        if transform not in allowed:
            raise ValueError(f"{type(self).__name__}.set_output: transform must be one of "
                             f"{allowed} or None, got {transform!r}.")
        if not hasattr(self, "_sklearn_output_config"):
            self._sklearn_output_config = {}
        self._sklearn_output_config["transform"] = transform
        return self

    def _wrap_output(self, result, X):
        """``result`` of ``transform(X)`` in the configured container (see the class doc)."""
        from sklearn.utils._set_output import ADAPTERS_MANAGER, _get_output_config

        config = _get_output_config("transform", self)["dense"]
        if config != "default" and (is_sparse(result) or is_sparse_dask(result)):
            # As scikit-learn: a DataFrame cannot hold a sparse result.
            raise ValueError(f"{type(self).__name__}: set_output(transform={config!r}) cannot "
                             "hold a sparse result; use the default output for sparse X, or "
                             "densify X first.")
        if config == "default" or not isinstance(result, (np.ndarray, da.Array)):
            return result  # (already wrapped: fit_transform calls the wrapped transform)
        if not isinstance(result, da.Array):
            return ADAPTERS_MANAGER.adapters[config].create_container(
                result, X, columns=self.get_feature_names_out, inplace=False)
        if config != "pandas":
            raise ValueError(f"{type(self).__name__}: set_output(transform={config!r}) needs "
                             "local input; Dask input gives a Dask DataFrame with "
                             "set_output(transform='pandas').")
        import dask.dataframe as dd

        columns = [str(c) for c in self.get_feature_names_out()]
        frame = dd.from_dask_array(result, columns=columns)
        if not isinstance(X, dd.DataFrame):
            return frame
        if result.numblocks[0] != X.npartitions:
            raise AssertionError("a transform of a Dask DataFrame has one block per partition")
        # Partition i of the output is block i with the index of X's partition i (the
        # partitions pair up by position: from_dask_array's own index= loses the index of
        # repartitioned frames).
        meta = pd.DataFrame(np.empty((0, len(columns)), dtype=result.dtype), columns=columns,
                            index=X._meta.index)
        return dd.map_partitions(_with_index, X.index, frame, meta=meta, align_dataframes=False)


def _with_index(index, frame):
    """One output partition: the transformed block (a DataFrame) with its input's index."""
    frame = frame.copy(deep=False)
    frame.index = index
    return frame


def _wrap_output_method(f):
    @functools.wraps(f)
    def wrapped(self, X, *args, **kwargs):
        return self._wrap_output(f(self, X, *args, **kwargs), X)

    wrapped._dml_wraps_output = True
    return wrapped
