"""ColumnTransformer: one-hot the categorical columns and scale the numeric ones in one pass.

:class:`ColumnTransformer` fits every dml transformer on its columns with ONE pass over the data:
it cuts X into blocks once, hands each transformer a column subset of those blocks, collects the
transformers' lazy reductions (the one-pass protocol of :mod:`dml.preprocessing`) and computes
them together with :func:`dml._blocks.compute`, so every block of X is read once. ``transform``
is one blockwise map that applies all fitted transformers to each block and writes their outputs
side by side: NumPy for NumPy/pandas input, a lazy Dask array for Dask input.
"""
from __future__ import annotations

import numbers
from collections import defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import scipy.sparse as sp
from dask import delayed
from dask.delayed import Delayed
from sklearn.base import TransformerMixin, clone
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import Bunch, get_tags
from sklearn.utils.metaestimators import _BaseComposition

from dml._blocks import (Blocks, BlockSpec, extract_block, is_numeric_dtype, check_x_layout,
                         compute, is_dask)
from dml._param_validation import HasMethods, Interval, Real, StrOptions, invalid_parameter
from dml.base import DaskEstimatorMixin, TransformOutputMixin, check_is_fitted, fit_context
from dml.preprocessing._base import _dtypes_of, _feature_names_in

__all__ = ["ColumnTransformer", "make_column_transformer"]

#: Rows of the first block used to fit stateless scikit-learn transformers (and to learn their
#: output width and dtype) when X is a Dask collection.
SAMPLE_ROWS = 64


# --------------------------------------------------------------------------------------------
# Column selection
# --------------------------------------------------------------------------------------------

def _column_indices(key, columns, n_features: int, name: str) -> list[int]:
    """Positions selected by a column specifier (str, int, slice, list, boolean mask)."""
    def by_name(label):
        if columns is None:
            raise ValueError(f"ColumnTransformer: transformer {name!r} selects columns by name "
                             f"({label!r}) but X is not a DataFrame; select by position instead.")
        try:
            return columns.index(label)
        except ValueError:
            raise ValueError(f"ColumnTransformer: column {label!r} (transformer {name!r}) is not "
                             f"a column of X; available columns: {columns}") from None

    def by_pos(i):
        i = int(i)
        if not -n_features <= i < n_features:
            raise ValueError(f"ColumnTransformer: column index {i} (transformer {name!r}) is out "
                             f"of range for X with {n_features} columns")
        return i % n_features

    if isinstance(key, str):
        return [by_name(key)]
    if isinstance(key, (numbers.Integral, np.integer)) and not isinstance(key, (bool, np.bool_)):
        return [by_pos(key)]
    if isinstance(key, slice):
        if isinstance(key.start, str) or isinstance(key.stop, str):
            start = 0 if key.start is None else by_name(key.start)
            stop = n_features if key.stop is None else by_name(key.stop) + 1  # inclusive
            return list(range(start, stop))
        return list(range(n_features))[key]
    keys = list(np.asarray(key, dtype=object).ravel()) if not isinstance(key, list) else key
    if not keys:
        return []
    if all(isinstance(k, (bool, np.bool_)) for k in keys):
        if len(keys) != n_features:
            raise ValueError(f"ColumnTransformer: boolean mask of transformer {name!r} has "
                             f"{len(keys)} entries for {n_features} columns")
        return [i for i, k in enumerate(keys) if k]
    if all(isinstance(k, str) for k in keys):
        return [by_name(k) for k in keys]
    if all(isinstance(k, (numbers.Integral, np.integer)) and not isinstance(k, (bool, np.bool_))
           for k in keys):
        return [by_pos(k) for k in keys]
    raise ValueError(f"ColumnTransformer: columns of transformer {name!r} must be names, "
                     f"positions, a slice or a boolean mask; got {key!r}")


def _take(xb, key, by_name: bool):
    """Columns ``key`` of one local block."""
    if isinstance(xb, pd.DataFrame):
        return xb[list(key)] if by_name else xb.iloc[:, list(key)]
    return xb[:, list(key)]


def _select_extract(part, idx, spec: BlockSpec, index: int):
    xb, yb, wb = part
    return extract_block(_take(xb, idx, False), yb, wb, spec, index)


def _head(part, k: int):
    xb = part[0]
    return xb.iloc[:k] if isinstance(xb, pd.DataFrame) else xb[:k]


def _dense(out) -> np.ndarray:
    if hasattr(out, "toarray"):
        out = out.toarray()
    return np.asarray(out)


# --------------------------------------------------------------------------------------------
# Blockwise transform
# --------------------------------------------------------------------------------------------

class _Part(NamedTuple):
    """One fitted transformer as the transform kernel applies it to a block."""

    name: str
    key: list                 # column positions, or names when by_name
    kernel: Callable | None   # dml transformers: TransformPlan kernel ...
    args: tuple               # ... and its arguments
    spec: BlockSpec | None    # ... and the block validation
    transformer: Any          # stateless scikit-learn transformers: the fitted object
    start: int
    stop: int
    weight: float | None


def _column_transform_kernel(xb, parts, by_name, dtype, n_out, sparse=False):
    n = xb.shape[0]
    out = None if sparse else np.empty((n, n_out), dtype=dtype)
    pieces = []
    for p in parts:
        sub = _take(xb, p.key, by_name)
        if p.kernel is not None:
            xs, _, _ = extract_block(sub, None, None, p.spec, 0)
            res = p.kernel(xs, *p.args)
        else:
            res = _dense(p.transformer.transform(sub))
        width = p.stop - p.start
        if res.ndim != 2 or res.shape != (n, width):
            raise ValueError(f"ColumnTransformer: transformer {p.name!r} returned shape "
                             f"{res.shape} for a block of {n} rows; expected ({n}, {width}) as "
                             "during fit. Its output width must not depend on the data.")
        if p.weight is not None:
            res = res * p.weight
        if sparse:
            pieces.append(res if sp.issparse(res) else sp.csr_matrix(res))
        else:
            out[:, p.start:p.stop] = res
    if sparse:
        if not pieces:
            return sp.csr_matrix((n, 0), dtype=dtype)
        return sp.hstack(pieces, format="csr", dtype=dtype)
    return out


# --------------------------------------------------------------------------------------------
# ColumnTransformer
# --------------------------------------------------------------------------------------------

def _is_dml_transformer(t) -> bool:
    return all(hasattr(t, a) for a in ("_fit_delayed", "_set_fitted", "_transform_plan",
                                       "_fit_overrides"))


def _is_stateless(t) -> bool:
    try:
        return not get_tags(t).requires_fit
    except Exception:  # noqa: BLE001 - third-party objects without tags
        return False


class ColumnTransformer(TransformOutputMixin, DaskEstimatorMixin, TransformerMixin,
                        _BaseComposition):
    """Apply transformers to columns of a DataFrame or array and stack their outputs.

    As scikit-learn's ``ColumnTransformer``, for NumPy arrays, pandas DataFrames, Dask arrays
    and Dask DataFrames. The output is dense unless a ``OneHotEncoder(sparse_output=True)`` makes
    it sparse as scikit-learn decides (``sparse_threshold``): then CSR (a Dask array of CSR
    blocks for Dask input). All dml transformers (e.g.
    :class:`dml.preprocessing.OneHotEncoder` and :class:`dml.preprocessing.StandardScaler`) are
    fitted together in ONE pass over the data. scikit-learn transformers are accepted when they
    are stateless (``requires_fit`` tag False, e.g. ``FunctionTransformer``); for Dask input they
    are fitted on the first rows of the first block. A transformer that learns from the data and
    is not a dml transformer is rejected, since fitting it would need all the data in one place.

    Parameters
    ----------
    transformers : list of (name, transformer, columns) tuples
        ``transformer`` is a dml transformer, a stateless scikit-learn transformer,
        ``"passthrough"`` or ``"drop"``. ``columns`` is a column name or position, a list of
        them, a slice, a boolean mask, or a callable taking X (for a Dask DataFrame: its empty
        pandas ``_meta``, so ``sklearn.compose.make_column_selector`` works) and returning one of
        those. A single name or position is treated as a list of one.
    remainder : {'drop', 'passthrough'} or transformer, default='drop'
        What to do with the columns no transformer selected.
    sparse_threshold : float, default=0.3
        When a transformer's output is sparse (an encoder with ``sparse_output=True``), the
        stacked output is sparse if the density of the training output is below this value.
    transformer_weights : dict, default=None
        Multiplicative weight per transformer name.
    verbose_feature_names_out : bool, str or callable, default=True
        Prefix output feature names with the transformer name (``name__feature``); a str is a
        format with ``{transformer_name}`` and ``{feature_name}``.

    Attributes
    ----------
    transformers_ : list of (name, fitted_transformer, columns)
        Includes ``('remainder', ..., columns)`` when columns remain; ``"passthrough"`` appears
        as a fitted ``FunctionTransformer``, as in scikit-learn.
    named_transformers_ : Bunch
    output_indices_ : dict of str -> slice
        Output columns of each transformer.
    sparse_output_ : bool
        Whether ``transform`` returns sparse output (see ``sparse_threshold``).
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Examples
    --------
    >>> import pandas as pd
    >>> from dml.compose import ColumnTransformer
    >>> from dml.preprocessing import OneHotEncoder, StandardScaler
    >>> df = pd.DataFrame({"age": [20.0, 40.0, 60.0], "sex": ["F", "M", "F"]})
    >>> ct = ColumnTransformer([("num", StandardScaler(), ["age"]),
    ...                         ("cat", OneHotEncoder(), ["sex"])])
    >>> ct.fit_transform(df).round(3)
    array([[-1.225,  1.   ,  0.   ],
           [ 0.   ,  0.   ,  1.   ],
           [ 1.225,  1.   ,  0.   ]])
    >>> ct.get_feature_names_out()
    array(['num__age', 'cat__sex_F', 'cat__sex_M'], dtype=object)
    """

    def __init__(self, transformers, *, remainder="drop", sparse_threshold=0.3,
                 transformer_weights=None, verbose_feature_names_out=True):
        self.transformers = transformers
        self.remainder = remainder
        self.sparse_threshold = sparse_threshold
        self.transformer_weights = transformer_weights
        self.verbose_feature_names_out = verbose_feature_names_out

    # ---- parameters (nested get/set_params as scikit-learn's compositions) ----
    @property
    def _transformers(self):
        try:
            return [(name, trans) for name, trans, _ in self.transformers]
        except (TypeError, ValueError):
            return self.transformers

    @_transformers.setter
    def _transformers(self, value):
        try:
            self.transformers = [(name, trans, col) for ((name, trans), (_, _, col))
                                 in zip(value, self.transformers)]
        except (TypeError, ValueError):
            self.transformers = value

    def set_output(self, *, transform=None):
        """Set the output container of this transformer and of its transformers.

        As scikit-learn's ``ColumnTransformer.set_output``: the setting reaches every
        transformer (the unfitted ones, the fitted ``transformers_`` and an estimator
        ``remainder``), so their outputs are stacked as the same kind of container.

        Parameters
        ----------
        transform : {"default", "pandas", "polars"} or None, default=None
            See :meth:`dml.base.TransformOutputMixin.set_output`.

        Returns
        -------
        self : estimator
            The estimator, configured.

        Examples
        --------
        >>> from dml.preprocessing import StandardScaler
        >>> ct = ColumnTransformer([("s", StandardScaler(), ["a"])]).set_output(transform="pandas")
        >>> ct.transformers[0][1]._sklearn_output_config["transform"]
        'pandas'
        """
        from sklearn.utils._set_output import _safe_set_output

        super().set_output(transform=transform)
        subs = [t for _, t, _ in list(self.transformers) + list(getattr(self, "transformers_", []))
                if t not in ("passthrough", "drop")]
        if self.remainder not in ("passthrough", "drop"):
            subs.append(self.remainder)
        for t in subs:
            _safe_set_output(t, transform=transform)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Values are checked by each transformer for its own columns; "passthrough" columns are
        # passed on as they are (NaN included), as scikit-learn's ColumnTransformer does.
        tags.input_tags.allow_nan = True
        return tags

    def get_params(self, deep=True):
        """Parameters of this estimator and, with ``deep``, of its transformers.

        Parameters
        ----------
        deep : bool, default=True
            Also return every transformer (by its name) and its parameters as
            ``<transformer name>__<parameter>``.

        Returns
        -------
        params : dict
            Parameter names mapped to their values.

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.compose import ColumnTransformer
        >>> from dml.preprocessing import OneHotEncoder, StandardScaler
        >>> df = pd.DataFrame({"age": [20.0, 40.0, 60.0], "sex": ["F", "M", "F"]})
        >>> ct = ColumnTransformer([("num", StandardScaler(), ["age"]),
        ...                         ("cat", OneHotEncoder(), ["sex"])])
        >>> ct.get_params()["num__with_mean"]
        True
        """
        return self._get_params("_transformers", deep=deep)

    def set_params(self, **kwargs):
        """Set parameters of this estimator or of its transformers.

        Parameters
        ----------
        **kwargs : dict
            ``<parameter>=value`` or ``<transformer name>__<parameter>=value``; a transformer's name
            alone replaces that transformer.

        Returns
        -------
        self : ColumnTransformer
            This estimator.

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.compose import ColumnTransformer
        >>> from dml.preprocessing import OneHotEncoder, StandardScaler
        >>> df = pd.DataFrame({"age": [20.0, 40.0, 60.0], "sex": ["F", "M", "F"]})
        >>> ct = ColumnTransformer([("num", StandardScaler(), ["age"]),
        ...                         ("cat", OneHotEncoder(), ["sex"])])
        >>> ct.set_params(num__with_mean=False).get_params()["num__with_mean"]
        False
        """
        self._set_params("_transformers", **kwargs)
        return self

    _parameter_constraints = {
        "transformers": [list, tuple],
        "remainder": [StrOptions({"drop", "passthrough"}), HasMethods(["fit", "transform"])],
        "sparse_threshold": [Interval(Real, 0, 1, closed="both")],
        "transformer_weights": [dict, None],
        "verbose_feature_names_out": ["boolean"],
    }

    def _validate_param_relations(self):
        if not all(isinstance(t, (list, tuple)) and len(t) == 3 for t in self.transformers):
            raise invalid_parameter(self, "transformers",
                                    "a list of (name, transformer, columns) tuples")
        names = [t[0] for t in self.transformers]
        self._validate_names(names)
        if "remainder" in names:
            raise invalid_parameter(self, "transformers", "a list whose names are not "
                                    "'remainder' (reserved for the remainder; rename that "
                                    "transformer)", names)
        for name, t, _ in self.transformers:
            self._check_transformer(name, t, "transformers")
        if not isinstance(self.remainder, str):
            self._check_transformer("remainder", self.remainder, "remainder")
        if self.transformer_weights is not None:
            unknown = set(self.transformer_weights) - set(names) - {"remainder"}
            if unknown:
                raise invalid_parameter(self, "transformer_weights", "a dict whose keys are "
                                        f"transformer names; {sorted(unknown)} are not")

    def _check_transformer(self, name, t, param):
        if isinstance(t, str):
            if t not in ("drop", "passthrough"):
                raise invalid_parameter(self, param, f"a list whose transformer {name!r} is a "
                                        "transformer, 'drop' or 'passthrough'", t)
            return
        if not (hasattr(t, "fit") and hasattr(t, "transform")):
            raise invalid_parameter(self, param, f"a list whose transformer {name!r} implements "
                                    "fit and transform, or is 'drop' or 'passthrough'", t)
        if not _is_dml_transformer(t) and not _is_stateless(t):
            raise invalid_parameter(
                self, param, f"a list of dml or stateless transformers; {name!r} "
                f"({type(t).__module__}.{type(t).__name__}) learns from the data but is not a dml "
                "transformer, and fitting it would need all the data in one process. Use the dml "
                "equivalent (e.g. dml.preprocessing.StandardScaler / OneHotEncoder / "
                "MinMaxScaler) or a stateless transformer such as sklearn's FunctionTransformer",
                t)

    # ---- fit ----
    @fit_context
    def fit(self, X, y=None):
        """Fit all transformers on their columns in one pass over X.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None
            Ignored (the transformers are unsupervised).

        Returns
        -------
        self

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.compose import ColumnTransformer
        >>> from dml.preprocessing import OneHotEncoder, StandardScaler
        >>> df = pd.DataFrame({"age": [20.0, 40.0, 60.0], "sex": ["F", "M", "F"]})
        >>> ct = ColumnTransformer([("num", StandardScaler(), ["age"]),
        ...                         ("cat", OneHotEncoder(), ["sex"])])
        >>> list(ct.fit(df).named_transformers_)
        ['num', 'cat']
        """
        X = check_x_layout(X, type(self).__name__)
        blocks = self._fit_blocks(X, None, None, require_y=False, numeric=False)
        columns = list(X.columns) if isinstance(X, (pd.DataFrame, dd.DataFrame)) else None
        d = blocks.n_features
        dtypes = _dtypes_of(X)

        # Resolve column specifiers (callables see pandas data: Dask DataFrames pass _meta).
        resolved, indices = [], {}
        for name, _, cols in self.transformers:
            if callable(cols):
                cols = cols(X._meta if isinstance(X, dd.DataFrame) else X)
            resolved.append(cols)
            indices[name] = _column_indices(cols, columns, d, name)
        used = set(i for idx in indices.values() for i in idx)
        remaining = [i for i in range(d) if i not in used]
        indices["remainder"] = remaining
        self._columns = resolved
        self._transformer_to_input_indices = indices

        entries = [(name, t, cols) for (name, t, _), cols in zip(self.transformers, resolved)]
        if remaining:
            entries.append(("remainder", self.remainder,
                            self._remainder_columns(remaining, columns)))

        # Collect every dml transformer's lazy reduction; compute them in one pass.
        jobs, fitted, stateless = [], [], []
        for name, t, cols in entries:
            idx = indices[name]
            if isinstance(t, str) and t == "drop":
                fitted.append((name, "drop", cols))
                continue
            if not idx:
                fitted.append((name, t, cols))
                continue
            if isinstance(t, str):  # passthrough, as scikit-learn does it
                t = FunctionTransformer(accept_sparse=True, check_inverse=False,
                                        feature_names_out="one-to-one")
            else:
                t = clone(t)
            if _is_dml_transformer(t):
                t._validate_params()  # its fit_context, as its own fit would
                sub = self._sub_blocks(blocks, idx, t, name)
                jobs.append((t, t._fit_delayed(sub)))
            else:
                stateless.append((t, idx))
            fitted.append((name, t, cols))
        sample = self._sample(X, blocks) if stateless else None
        lazy_sample = isinstance(sample, Delayed)
        results = compute(*[j for _, j in jobs], *([sample] if lazy_sample else []))
        if lazy_sample:
            sample = results[-1]
        for (t, _), r in zip(jobs, results):
            t._set_fitted(r)
        for t, idx in stateless:
            t.fit(_take(sample, idx, False))
        self.transformers_ = fitted
        self.sparse_output_ = False

        # Output layout: widths from the fitted transformers.
        self._stateless_out = {}
        for name, t, _ in fitted:
            if _is_dml_transformer(t) or isinstance(t, str) or not indices[name]:
                continue
            out = _dense(t.transform(_take(sample, indices[name], False)))
            if out.ndim != 2:
                raise ValueError(f"ColumnTransformer: the output of the {name!r} transformer "
                                 "should be 2D (numpy array, scipy sparse array, dataframe).")
            self._stateless_out[name] = (out.shape[1], out.dtype)
        self.output_indices_ = {}
        start = 0
        for name, _, width, _ in self._layout(dtypes):
            self.output_indices_[name] = slice(start, start + width)
            start += width
        for name in [t[0] for t in self.transformers] + ["remainder"]:
            self.output_indices_.setdefault(name, slice(0, 0))
        self.sparse_output_ = self._sparse_decision(fitted, start)
        return self

    def _sparse_decision(self, fitted, width: int) -> bool:
        """scikit-learn's rule: sparse output when a transformer's output is sparse and the
        stacked training output's density (stored entries of the sparse parts, every entry of
        the dense ones) is below ``sparse_threshold``. The sparse parts' counts come from their
        fit (no pass over the data)."""
        sparse = [t for _, t, _ in fitted if _is_dml_transformer(t)
                  and getattr(t, "sparse_output", False) and hasattr(t, "_fit_nnz")]
        if not sparse or width == 0:
            return False
        n = sparse[0]._n_samples_fit
        if n == 0:
            return False
        sparse_width = sum(int(sum(t._n_features_outs)) for t in sparse)
        nnz = sum(t._fit_nnz for t in sparse) + n * (width - sparse_width)
        return nnz / (n * width) < self.sparse_threshold

    def _remainder_columns(self, remaining, columns):
        # scikit-learn's rule: names when every transformer selected its columns by name.
        def by_name(c):
            return isinstance(c, str) or (isinstance(c, (list, tuple)) and len(c) > 0 and
                                          all(isinstance(v, str) for v in c))
        if columns is not None and self._columns and all(by_name(c) for c in self._columns):
            return [columns[i] for i in remaining]
        return remaining

    def _sub_blocks(self, blocks: Blocks, idx, t, name) -> Blocks:
        """The blocks of columns ``idx``, validated as transformer ``t`` needs them."""
        spec = t._spec(**t._fit_overrides)
        sub_dtypes = None if blocks.dtypes is None else blocks.dtypes.iloc[idx]
        if spec.numeric and sub_dtypes is not None:
            bad = [c for c, dt in sub_dtypes.items() if not is_numeric_dtype(dt)]
            if bad:
                raise TypeError(f"ColumnTransformer: transformer {name!r} "
                                f"({type(t).__name__}) got non-numeric columns {bad}; select "
                                "numeric columns for it, or encode these with "
                                "dml.preprocessing.OneHotEncoder")
        parts = [delayed(_select_extract, pure=True)(p, idx, spec, i)
                 for i, p in enumerate(blocks.parts)]
        names = None if blocks.feature_names is None else blocks.feature_names[idx]
        return Blocks(parts, len(idx), names, blocks.local, spec, dtypes=sub_dtypes,
                      known_lengths=blocks.known_lengths)

    @staticmethod
    def _sample(X, blocks: Blocks):
        """First rows of X (a Delayed for Dask input) for stateless transformers."""
        if is_dask(X):
            return delayed(_head, pure=True)(blocks.parts[0], SAMPLE_ROWS)
        return X.iloc[:SAMPLE_ROWS] if isinstance(X, pd.DataFrame) else X[:SAMPLE_ROWS]

    def _layout(self, dtypes):
        """(name, transformer, width, TransformPlan or output dtype) of every fitted transformer
        that produces columns, in output order."""
        out = []
        for name, t, _ in self.transformers_:
            idx = self._transformer_to_input_indices[name]
            if (isinstance(t, str) and t == "drop") or not idx:
                continue
            if _is_dml_transformer(t):
                plan = t._transform_plan([dtypes[i] for i in idx])
                out.append((name, t, plan.n_out, plan))
            else:
                width, dt = self._stateless_out[name]
                out.append((name, t, width, dt))
        return out

    # ---- transform ----
    def transform(self, X):
        """Transform X by each transformer and stack the outputs side by side.

        When fitted on a DataFrame and given a DataFrame, columns are selected by name (extra
        columns are ignored, missing ones raise), as scikit-learn does; otherwise by position.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The data to transform.

        Returns
        -------
        Xt : ndarray or dask.array.Array of shape (n_samples, n_output_features)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.compose import ColumnTransformer
        >>> from dml.preprocessing import OneHotEncoder, StandardScaler
        >>> df = pd.DataFrame({"age": [20.0, 40.0, 60.0], "sex": ["F", "M", "F"]})
        >>> ct = ColumnTransformer([("num", StandardScaler(), ["age"]),
        ...                         ("cat", OneHotEncoder(), ["sex"])])
        >>> ct.fit(df).transform(df.iloc[:1]).round(3)
        array([[-1.225,  1.   ,  0.   ]])
        """
        check_is_fitted(self, "transformers_")
        X = check_x_layout(X, type(self).__name__)  # type and shape; reads no data
        fitted_names = getattr(self, "feature_names_in_", None)
        by_name = fitted_names is not None and isinstance(X, (pd.DataFrame, dd.DataFrame))
        if by_name:
            idx_of = self._transformer_to_input_indices
            need = sorted({i for name, t, _ in self.transformers_ if not
                           (isinstance(t, str) and t == "drop") for i in idx_of[name]})
            names = [fitted_names[i] for i in need]
            missing = [c for c in names if c not in set(X.columns)]
            if missing:
                raise ValueError(f"ColumnTransformer: columns are missing: {missing}. X must "
                                 "contain every column the transformers were fitted on.")
            if names:  # (with nothing to select, keep X: the output has 0 columns)
                X = X[names]
            by_col = dict(zip(names, _dtypes_of(X[names])))
            dtypes = [by_col.get(c) for c in fitted_names]
        else:
            n = len(X.columns) if isinstance(X, (pd.DataFrame, dd.DataFrame)) else X.shape[1]
            if n != self.n_features_in_:
                raise ValueError(f"X has {n} features, but ColumnTransformer is expecting "
                                 f"{self.n_features_in_} features as input.")
            dtypes = _dtypes_of(X)
        parts, dts, start = [], [], 0
        weights = self.transformer_weights or {}
        for name, t, width, plan in self._layout(dtypes):
            idx = self._transformer_to_input_indices[name]
            key = [fitted_names[i] for i in idx] if by_name else idx
            if _is_dml_transformer(t):
                args = plan.args
                if self.sparse_output_ and getattr(t, "sparse_output", False):
                    args = (*args, True)  # the encoder's CSR output, not a dense block
                parts.append(_Part(name, key, plan.kernel, args, t._spec(**plan.overrides),
                                   None, start, start + width, weights.get(name)))
                dts.append(plan.dtype)
            else:
                parts.append(_Part(name, key, None, (), None, t, start, start + width,
                                   weights.get(name)))
                dts.append(plan)
            start += width
        dtype = np.result_type(*dts) if dts else np.dtype(np.float64)
        sparse = bool(getattr(self, "sparse_output_", False))
        if sparse:
            from sklearn.utils._set_output import _get_output_config

            if _get_output_config("transform", self)["dense"] == "pandas":
                raise ValueError("ColumnTransformer: pandas output does not support sparse "
                                 "data; set sparse_threshold=0 (dense output) or disable "
                                 "pandas output with set_output(transform='default')")
        out = self._blockwise(X, _column_transform_kernel, parts, by_name, dtype, start, sparse,
                              dtype=dtype, tail_shape=(start,), check_features=False,
                              n_features=None if by_name else self.n_features_in_,
                              numeric=False)
        if sparse and isinstance(out, da.Array):
            # The blocks are CSR matrices: say so, so that Dask stacks them as sparse.
            out = da.Array(out.dask, out.name, out.chunks,
                           meta=sp.csr_matrix((0, start), dtype=dtype))
        return out

    def fit_transform(self, X, y=None):
        """Fit (one pass over X), then transform X (lazily for Dask input).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The data to fit on and transform.
        y : None
            Ignored (the transformers are unsupervised).

        Returns
        -------
        Xt : ndarray or dask.array.Array of shape (n_samples, n_output_features)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.compose import ColumnTransformer
        >>> from dml.preprocessing import OneHotEncoder, StandardScaler
        >>> df = pd.DataFrame({"age": [20.0, 40.0, 60.0], "sex": ["F", "M", "F"]})
        >>> ct = ColumnTransformer([("num", StandardScaler(), ["age"]),
        ...                         ("cat", OneHotEncoder(), ["sex"])])
        >>> ct.fit_transform(df).shape
        (3, 3)
        """
        return self.fit(X, y).transform(X)

    # ---- introspection ----
    @property
    def named_transformers_(self):
        """The fitted transformers by name."""
        return Bunch(**{name: trans for name, trans, _ in self.transformers_})

    def get_feature_names_out(self, input_features=None):
        """Output feature names, ``<transformer name>__<feature>`` by default.

        Parameters
        ----------
        input_features : array-like of str, default=None
            Names of the input features; by default ``feature_names_in_`` (``x0``, ``x1``, ... when
            fitted without names).

        Returns
        -------
        feature_names_out : ndarray of str objects
            One name per output column, in the order of :meth:`transform`'s columns.

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.compose import ColumnTransformer
        >>> from dml.preprocessing import OneHotEncoder, StandardScaler
        >>> df = pd.DataFrame({"age": [20.0, 40.0, 60.0], "sex": ["F", "M", "F"]})
        >>> ct = ColumnTransformer([("num", StandardScaler(), ["age"]),
        ...                         ("cat", OneHotEncoder(), ["sex"])])
        >>> ct.fit(df).get_feature_names_out()
        array(['num__age', 'cat__sex_F', 'cat__sex_M'], dtype=object)
        """
        check_is_fitted(self, "transformers_")
        input_features = _feature_names_in(self, input_features)
        pairs = []
        for name, t, _ in self.transformers_:
            idx = self._transformer_to_input_indices[name]
            if (isinstance(t, str) and t == "drop") or not idx:
                continue
            if not hasattr(t, "get_feature_names_out"):
                raise AttributeError(f"Transformer {name} (type {type(t).__name__}) does not "
                                     "provide get_feature_names_out.")
            pairs.append((name, t.get_feature_names_out(input_features[idx])))
        if not pairs:
            return np.array([], dtype=object)
        v = self.verbose_feature_names_out
        if v is True or isinstance(v, str) or callable(v):
            if v is True:
                def fmt(tn, fn):
                    return f"{tn}__{fn}"
            elif isinstance(v, str):
                def fmt(tn, fn):
                    return v.format(transformer_name=tn, feature_name=fn)
            else:
                fmt = v
            return np.asarray([fmt(name, f) for name, fo in pairs for f in fo], dtype=object)
        counts = defaultdict(int)
        for _, fo in pairs:
            for f in fo:
                counts[f] += 1
        overlap = sorted(f for f, c in counts.items() if c > 1)
        if overlap:
            shown = str(overlap[:5])[:-1] + ", ...]" if len(overlap) > 5 else str(overlap)
            raise ValueError(f"Output feature names: {shown} are not unique. Please set "
                             "verbose_feature_names_out=True to add prefixes to feature names")
        return np.concatenate([np.asarray(fo, dtype=object) for _, fo in pairs])


def _name_estimators(estimators):
    """scikit-learn's automatic names: lower-case class names, numbered when repeated."""
    names = [e if isinstance(e, str) else type(e).__name__.lower() for e in estimators]
    count = defaultdict(int)
    for n in names:
        count[n] += 1
    count = {k: v for k, v in count.items() if v > 1}
    for i in reversed(range(len(estimators))):
        if names[i] in count:
            n = names[i]
            names[i] += f"-{count[n]}"
            count[n] -= 1
    return names


def make_column_transformer(*transformers, remainder="drop", transformer_weights=None,
                            verbose_feature_names_out=True):
    """Build a :class:`ColumnTransformer` from ``(transformer, columns)`` pairs, naming them.

    Names are the lower-case class names (numbered when repeated), as scikit-learn's
    ``make_column_transformer``.

    Examples
    --------
    >>> from dml.compose import make_column_transformer
    >>> from dml.preprocessing import OneHotEncoder, StandardScaler
    >>> ct = make_column_transformer((StandardScaler(), ["age"]), (OneHotEncoder(), ["sex"]))
    >>> [name for name, _, _ in ct.transformers]
    ['standardscaler', 'onehotencoder']
    """
    trans, cols = zip(*transformers) if transformers else ((), ())
    names = _name_estimators(list(trans))
    return ColumnTransformer(list(zip(names, trans, cols)), remainder=remainder,
                             transformer_weights=transformer_weights,
                             verbose_feature_names_out=verbose_feature_names_out)
