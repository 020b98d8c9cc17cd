"""OneHotEncoder: categories learned from one pass of per-block value counts, encoded blockwise.

The kernels are in :mod:`dml.preprocessing._encoder_kernels`.
"""
from __future__ import annotations

import numbers

import dask.array as da
import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin

from dml._blocks import Blocks, check_x_layout, is_dask
from dml._param_validation import Integral, Interval, RealNotInt, StrOptions, invalid_parameter
from dml.base import check_is_fitted, fit_context
from dml.preprocessing._base import (TransformPlan, _dtypes_of, _feature_names_in, _no_samples,
                                     _OnePassTransformer)
from dml.preprocessing._encoder_kernels import (_as_object_if_list, _category_counts, _Coding,
                                                _column_name, _is_scalar_nan, _merge_value_counts,
                                                _nan_key, _onehot_inverse_kernel, _onehot_kernel,
                                                _sorted_categories, _value_counts_kernel)

__all__ = ["OneHotEncoder"]


def _dense_block(block):
    return block.toarray() if sp.issparse(block) else block


class OneHotEncoder(_OnePassTransformer, TransformerMixin, BaseEstimator):
    """Encode categorical features as a one-hot numeric array (dense, or sparse CSR blocks).

    Categories are learned across ALL blocks in one pass (the union of per-block value counts,
    sorted as scikit-learn sorts them: numbers/strings ascending, then ``None``, then NaN) and
    the encoding runs blockwise. Works on NumPy arrays, pandas DataFrames, Dask arrays and Dask
    DataFrames with string, categorical, object, boolean or integer columns. Behaves as
    scikit-learn's ``OneHotEncoder`` with these differences: ``sparse_output`` defaults to
    False (dense output), and pandas ``NA``/``NaT`` in object or string columns are treated as
    NaN (scikit-learn fails on them). With ``sparse_output=True`` local input gives a
    ``scipy.sparse`` CSR matrix and Dask input a Dask array of CSR blocks, entry for entry
    scikit-learn's sparse output; no block is made dense. Inside a dml ``ColumnTransformer``
    the encoder's columns are stacked densely (the column transformer's output is dense).

    Parameters
    ----------
    categories : 'auto' or list of array-like, default='auto'
        Categories per feature; 'auto' learns them from the data.
    drop : {'first', 'if_binary'}, array-like of shape (n_features,) or None, default=None
        Category to drop per feature (see scikit-learn).
    sparse_output : bool, default=False
        Return CSR matrices (a Dask array of CSR blocks for Dask input) instead of dense
        arrays: one stored 1 per feature and row, for many categories.
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
            The categorical data (strings, numbers, booleans or pandas categoricals).
        y : None
            Ignored.

        Returns
        -------
        self : OneHotEncoder
            The fitted encoder.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import OneHotEncoder
        >>> OneHotEncoder().fit(np.array([["b"], ["a"], ["b"]], dtype=object)).categories_
        [array(['a', 'b'], dtype=object)]
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
        # Stored 1s of the encoded training data: what a column transformer's sparse_threshold
        # compares (as scikit-learn measures the density of its fit_transform output).
        nnz = 0
        for c, cnt in zip(self._codings(), counts):
            nnz += int(cnt[c.col_map >= 0].sum())
            if c.unknown_col >= 0:
                nnz += int(n_samples - cnt.sum())
        self._n_samples_fit, self._fit_nnz = int(n_samples), nnz
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
        ``handle_unknown='error'`` (for Dask input: when the result is computed). After
        ``set_output(transform="pandas")``: a pandas DataFrame with X's index and the columns
        of :meth:`get_feature_names_out` (a Dask DataFrame for Dask input).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The categorical data to encode.

        Returns
        -------
        X_tr : ndarray, sparse matrix, Dask array or DataFrame of shape (n_samples, n_out)
            One column per output category (CSR matrix / CSR blocks with sparse_output).

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import OneHotEncoder
        >>> enc = OneHotEncoder().fit(np.array([["b"], ["a"]], dtype=object))
        >>> enc.transform(np.array([["b"]], dtype=object))
        array([[0., 1.]])
        """
        X = _as_object_if_list(X)
        if not self.sparse_output:
            return self._transform_checked(X)
        from sklearn.utils._set_output import _get_output_config

        if _get_output_config("transform", self)["dense"] == "pandas":
            raise ValueError("Pandas output does not support sparse data. Set "
                             "sparse_output=False to output pandas dataframes or disable Pandas "
                             "output via `ohe.set_output(transform='default')")
        check_is_fitted(self, "n_features_in_")
        X = check_x_layout(X, type(self).__name__)
        plan = self._transform_plan(_dtypes_of(X))
        out = self._blockwise(X, plan.kernel, *plan.args, True, dtype=plan.dtype,
                              tail_shape=(plan.n_out,), **plan.overrides)
        if isinstance(out, da.Array):
            # The blocks are CSR matrices: say so, so that Dask stacks them as sparse.
            out = da.Array(out.dask, out.name, out.chunks,
                           meta=sp.csr_matrix((0, plan.n_out), dtype=plan.dtype))
        return out

    def inverse_transform(self, X):
        """Convert one-hot encoded data back to categories (scikit-learn's rules).

        Rows of all zeros become the dropped category when one was dropped, else ``None``
        (with ``handle_unknown='ignore'``). For Dask input the output dtype is fixed up front:
        object when such ``None`` values can occur.

        Parameters
        ----------
        X : ndarray or Dask array of shape (n_samples, n_encoded_features)
            One-hot encoded data.

        Returns
        -------
        X_original : ndarray or Dask array of shape (n_samples, n_features)
            The categories.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import OneHotEncoder
        >>> enc = OneHotEncoder().fit(np.array([["b"], ["a"]], dtype=object))
        >>> enc.inverse_transform(np.array([[0.0, 1.0]]))
        array([['b']], dtype=object)
        """
        check_is_fitted(self, "categories_")
        if sp.issparse(X):  # the width of the codes: small next to the data
            X = X.toarray()
        elif isinstance(X, da.Array) and sp.issparse(X._meta):
            X = X.map_blocks(_dense_block, dtype=X.dtype,
                             meta=np.empty((0, 0), dtype=X.dtype))
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
        """Output feature names: ``<input feature>_<category>`` per output column.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Input feature names; default: ``feature_names_in_`` when fitted on a DataFrame,
            else ``x0, x1, ...``.

        Returns
        -------
        feature_names_out : ndarray of str objects
            One name per output column.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.preprocessing import OneHotEncoder
        >>> OneHotEncoder().fit(np.array([["b"], ["a"]], dtype=object)).get_feature_names_out()
        array(['x0_a', 'x0_b'], dtype=object)
        """
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
