"""Fit / partial_fit / predict machinery shared by the naive Bayes estimators."""
from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import unique_labels

from dml._blocks import BlockSpec, as_blocks, is_dask
from dml._param_validation import Interval, Real, StrOptions, invalid_parameter
from dml._typing import Any, ArrayLike, Self
from dml.base import DaskEstimatorMixin, check_is_fitted, check_weights_not_all_zero, fit_context
from dml.naive_bayes._predict import _nb_output, _nb_score


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------

_MISSING_OPTIONS = ("error", "ignore")


class _BaseNB(DaskEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Fit / partial_fit / predict machinery shared by the naive Bayes estimators.

    Subclasses provide the block kernel and its combine, the zero state for ``partial_fit`` and
    ``_finalise`` (raw statistics → scikit-learn's attributes). The raw statistics of everything
    seen so far are kept in ``_stats``; ``partial_fit`` merges a new pass into them with the same
    combine that the fit's reduction tree uses, which is why it equals one ``fit``.
    """

    _block_spec = BlockSpec(dtype=(np.float64,))
    _kind = ""  # key of the joint-log-likelihood kernel in _JLL
    _positive_only = False
    _poor_score = True

    _parameter_constraints = {"missing": [StrOptions(set(_MISSING_OPTIONS))]}

    # ---- hooks ----

    def _spec_overrides(self) -> dict:
        return {"allow_nan": self.missing == "ignore"}

    def _fit_spec_overrides(self) -> dict:
        """Block validation at fit time, on top of :meth:`_spec_overrides`."""
        return {}

    def _prepare(self, X, blocks, first: bool):
        """Client-side set-up before the pass (CategoricalNB decides each feature's kind)."""

    def _reduce(self, blocks):
        raise NotImplementedError

    def _combine(self, parts):
        raise NotImplementedError

    def _empty_stats(self, classes, n_features):
        raise NotImplementedError

    def _finalise(self, stats):
        raise NotImplementedError

    def _jll_params(self) -> tuple:
        raise NotImplementedError

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = getattr(self, "missing", "error") == "ignore"
        tags.input_tags.positive_only = self._positive_only
        tags.classifier_tags.poor_score = self._poor_score
        return tags

    # ---- fitting ----
    def _pass(self, X, y, sample_weight, first: bool):
        name = type(self).__name__
        blocks = self._fit_blocks(X, y, sample_weight, reset=first,
                                  **self._spec_overrides(), **self._fit_spec_overrides())
        self._prepare(X, blocks, first)
        stats = self._reduce(blocks)
        if stats is None:
            raise ValueError(f"{name}: X has 0 rows (found array with 0 sample(s)); at least "
                             "one sample is required.")
        weights = stats["wsum" if "wsum" in stats else "class_count"]
        if sample_weight is not None:
            check_weights_not_all_zero(float(np.sum(np.abs(weights))), name)
        return stats

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the model in one pass over the data.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : array-like, Dask array/Series or str of shape (n_samples,)
            Class labels (numbers or strings); a string names a column of X's dataframe.
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each sample (a column name of X's dataframe is accepted).

        Returns
        -------
        self : object
            Fitted estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.naive_bayes import GaussianNB
        >>> X, y = np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 0, 1, 1])
        >>> GaussianNB().fit(X, y).classes_
        array([0, 1])
        """
        stats = self._pass(X, y, sample_weight, first=True)
        self._set_stats(stats)
        return self

    @fit_context
    def partial_fit(self, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None,
                    sample_weight: ArrayLike | None = None) -> Self:
        """Update the model with one more batch (itself one pass over its blocks).

        Calling ``partial_fit`` on the pieces of a dataset gives the same model as one ``fit``
        on all of it (up to floating-point round-off).

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : array-like, Dask array/Series or str of shape (n_samples,)
            Class labels; every label must be one of ``classes``.
        classes : array-like of shape (n_classes,), default=None
            All the classes that can appear in y. Required on the first call, optional (and
            then checked) afterwards.
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each sample.

        Returns
        -------
        self : object
            Updated estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.naive_bayes import GaussianNB
        >>> X, y = np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 0, 1, 1])
        >>> nb = GaussianNB().partial_fit(X[:2], y[:2], classes=[0, 1])
        >>> nb.partial_fit(X[2:], y[2:]).predict([[0.2], [2.8]])
        array([0, 1])
        """
        name = type(self).__name__
        first = getattr(self, "_stats", None) is None
        if first:
            if classes is None:
                raise ValueError(f"{name}: classes must be passed on the first call to "
                                 "partial_fit (all labels that can appear in y).")
            known = unique_labels(classes)
        else:
            known = self.classes_
            if classes is not None and not np.array_equal(known, unique_labels(classes)):
                raise ValueError(f"{name}: classes={classes!r} is not the same as on the first "
                                 f"call to partial_fit, which was {known!r}.")
        stats = self._pass(X, y, sample_weight, first=first)
        unknown = stats["classes"][~np.isin(stats["classes"], known)]
        if len(unknown):
            raise ValueError(f"{name}: y contains the label(s) {unknown.tolist()} that are not "
                             f"in classes={np.asarray(known).tolist()} given to the first "
                             "partial_fit call.")
        base = self._empty_stats(known, self.n_features_in_) if first else self._stats
        merged = self._combine([base, stats])
        merged["classes"] = known
        self._set_stats(merged)
        return self

    def _set_stats(self, stats):
        self._finalise(stats)
        self.classes_ = stats["classes"]
        self._stats = stats

    # ---- prediction ----
    def _output(self, X, output):
        check_is_fitted(self, "classes_")
        kind_params = (self._kind, self._jll_params(), self.classes_, output)
        if output == "predict":
            return self._blockwise(X, _nb_output, *kind_params, dtype=self.classes_.dtype,
                                   **self._spec_overrides())
        return self._blockwise(X, _nb_output, *kind_params, dtype=np.float64,
                               tail_shape=(len(self.classes_),), **self._spec_overrides())

    def predict(self, X: ArrayLike) -> Any:
        """Predict the class of each sample.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples,)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.naive_bayes import GaussianNB
        >>> X, y = np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 0, 1, 1])
        >>> GaussianNB().fit(X, y).predict([[0.2], [2.8]])
        array([0, 1])
        """
        return self._output(X, "predict")

    def predict_joint_log_proba(self, X: ArrayLike) -> Any:
        """Joint log probability ``log P(c) + log P(x | c)`` of each sample and class.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.naive_bayes import GaussianNB
        >>> X, y = np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 0, 1, 1])
        >>> GaussianNB().fit(X, y).predict_joint_log_proba([[0.2]]).round(2)
        array([[ -1.1, -11.5]])
        """
        return self._output(X, "joint")

    def predict_log_proba(self, X: ArrayLike) -> Any:
        """Log of the posterior class probabilities.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.naive_bayes import GaussianNB
        >>> X, y = np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 0, 1, 1])
        >>> GaussianNB().fit(X, y).predict_log_proba([[1.2]]).round(2)
        array([[-0.09, -2.49]])
        """
        return self._output(X, "log_proba")

    def predict_proba(self, X: ArrayLike) -> Any:
        """Posterior class probabilities.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.naive_bayes import GaussianNB
        >>> X, y = np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 0, 1, 1])
        >>> GaussianNB().fit(X, y).predict_proba([[1.2]]).round(3)
        array([[0.917, 0.083]])
        """
        return self._output(X, "proba")

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Mean (weighted) accuracy of ``predict(X)`` against y.

        For Dask input (or y / sample_weight given as column names) the accuracy is a reduction
        over the blocks: only two numbers per block come back to the client.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : array-like, Dask array/Series or str of shape (n_samples,)
            True labels.
        sample_weight : array-like, Dask array/Series or str, default=None

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> from dml.naive_bayes import GaussianNB
        >>> X, y = np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 0, 1, 1])
        >>> import dask.array as da
        >>> GaussianNB().fit(X, y).score(da.from_array(X, chunks=2), da.from_array(y, chunks=2))
        1.0
        """
        check_is_fitted(self, "classes_")
        distributed = (is_dask(X) or is_dask(y) or is_dask(sample_weight)
                       or isinstance(y, str) or isinstance(sample_weight, str))
        if not distributed:
            return super().score(X, y, sample_weight=sample_weight)
        blocks = as_blocks(X, y, sample_weight, spec=self._spec(**self._spec_overrides()),
                           require_y=True)
        self._check_features(blocks.n_features, blocks.feature_names)
        correct, total = blocks.map_reduce(_nb_score, self._kind, self._jll_params(),
                                           self.classes_)
        return float(correct / total)


def _validate_priors(priors, n_classes, name):
    priors = np.asarray(priors, dtype=np.float64)
    if priors.ndim != 1 or priors.shape[0] != n_classes:
        raise ValueError(f"{name}: number of priors ({priors.size}) must match the number of "
                         f"classes ({n_classes}).")
    if not np.isclose(priors.sum(), 1.0):
        raise ValueError(f"{name}: the sum of the priors should be 1, got {priors.sum()}.")
    if (priors < 0).any():
        raise ValueError(f"{name}: priors must be non-negative.")
    return priors


class _BaseDiscreteNB(_BaseNB):
    """Shared parameters and prior handling of the count-based estimators."""

    _parameter_constraints = {**_BaseNB._parameter_constraints,
                              "alpha": [Interval(Real, 0, None, closed="left"), "array-like"],
                              "force_alpha": ["boolean"], "fit_prior": ["boolean"],
                              "class_prior": ["array-like", None]}

    def _validate_param_relations(self):
        if isinstance(self.alpha, Real):
            return
        arr = np.asarray(self.alpha)
        if not self._array_alpha or arr.ndim != 1 or arr.dtype.kind not in "iuf":
            raise invalid_parameter(self, "alpha", "a non-negative float" + (
                " or a 1-D array of floats" if self._array_alpha else ""))

    _array_alpha = True

    def _check_alpha(self):
        # scikit-learn's _BaseDiscreteNB._check_alpha
        alpha = np.asarray(self.alpha) if not isinstance(self.alpha, numbers.Real) else \
            self.alpha
        alpha_min = np.min(alpha)
        if isinstance(alpha, np.ndarray):
            if not alpha.shape[0] == self.n_features_in_:
                raise ValueError(
                    f"{type(self).__name__}: when alpha is an array, it should contain "
                    f"n_features ({self.n_features_in_}) elements; got {alpha.shape[0]}.")
            if alpha_min < 0:
                raise ValueError(f"{type(self).__name__}: all values in alpha must be "
                                 "greater than 0.")
        alpha_lower_bound = 1e-10
        if alpha_min < alpha_lower_bound and not self.force_alpha:
            warnings.warn(
                "alpha too small will result in numeric errors, setting alpha ="
                f" {alpha_lower_bound:.1e}. Use `force_alpha=True` to keep alpha"
                " unchanged.")
            return np.maximum(alpha, alpha_lower_bound)
        return alpha

    def _class_log_prior(self, class_count):
        n_classes = len(class_count)
        if self.class_prior is not None:
            if len(self.class_prior) != n_classes:
                raise ValueError(f"{type(self).__name__}: number of priors "
                                 f"({len(self.class_prior)}) must match number of classes "
                                 f"({n_classes}).")
            return np.log(self.class_prior)
        if self.fit_prior:
            with np.errstate(divide="ignore"):
                return np.log(class_count) - np.log(class_count.sum())
        return np.full(n_classes, -np.log(n_classes))
