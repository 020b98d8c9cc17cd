"""Histogram decision trees fitted across Dask workers (see docs/trees.md)."""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from dml._blocks import BlockSpec
from dml._param_validation import RANDOM_STATE, Integral, Interval, Real, RealNotInt, StrOptions
from dml._typing import Any, ArrayLike, Self
from dml.base import DaskEstimatorMixin, check_is_fitted, fit_context
from dml.tree._model import fit_trees, predict_kernel

__all__ = ["DecisionTreeClassifier", "DecisionTreeRegressor"]


class _HistTreeBase(DaskEstimatorMixin):
    """Prediction shared by the histogram trees and forests (fitted state in ``nodes_``)."""

    _block_spec = BlockSpec(numeric=False)
    _parameter_constraints = {
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "min_samples_split": [Interval(Integral, 2, None, closed="left"),
                              Interval(RealNotInt, 0, 1, closed="right")],
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left"),
                             Interval(RealNotInt, 0, 1, closed="neither")],
        "min_impurity_decrease": [Interval(Real, 0, None, closed="left")],
        "max_features": [Interval(Integral, 1, None, closed="left"),
                         Interval(RealNotInt, 0, 1, closed="right"),
                         StrOptions({"sqrt", "log2"}), None],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        # Bins are stored as uint8 and bin 255 is reserved for missing values.
        "max_bins": [Interval(Integral, 2, 255, closed="both")],
        "random_state": RANDOM_STATE,
    }
    #: The criteria of classification and regression trees.
    _CLASSIFICATION = [StrOptions({"gini", "entropy", "log_loss"})]
    _REGRESSION = [StrOptions({"squared_error"})]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # NaN is a missing value that follows each split's learned default direction.
        tags.input_tags.allow_nan = True
        return tags

    def _out(self, X, what, dtype, tail_shape=()):
        check_is_fitted(self, "nodes_")
        return self._blockwise(X, predict_kernel, self.nodes_, self.categorical_,
                               self.categories_, type(self).__name__, what, dtype=dtype,
                               tail_shape=tail_shape, numeric=False)

    def apply(self, X: ArrayLike) -> Any:
        """Index of the leaf (global node index) that each row reaches in each tree.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        leaves : ndarray or dask.array.Array of shape (n_samples, n_trees)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.tree import DecisionTreeClassifier
        >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([0, 0, 1, 1])
        >>> clf = DecisionTreeClassifier().fit(X, y)
        >>> clf.apply(np.array([[0.2], [2.7]]))
        array([[1],
               [2]])
        """
        return self._out(X, "apply", np.int64, (len(self.nodes_["tree_start"]) - 1,))

    @property
    def n_estimators_(self):
        check_is_fitted(self, "nodes_")
        return len(self.nodes_["tree_start"]) - 1


class _ClassifierOut:
    def predict_proba(self, X: ArrayLike) -> Any:
        """Mean leaf class distribution over the trees (soft vote).

        Columns in the order of ``classes_``.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        proba : ndarray or dask.array.Array of shape (n_samples, n_classes)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.tree import DecisionTreeClassifier
        >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([0, 0, 1, 1])
        >>> clf = DecisionTreeClassifier().fit(X, y)
        >>> clf.predict_proba(np.array([[0.2], [2.7]]))
        array([[1., 0.],
               [0., 1.]])
        """
        # Before reading classes_, so an unfitted model raises NotFittedError.
        check_is_fitted(self, "nodes_")
        return self._out(X, "proba", np.float64, (len(self.classes_),))

    def predict_log_proba(self, X: ArrayLike) -> Any:
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        log_proba : ndarray or dask.array.Array of shape (n_samples, n_classes)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.tree import DecisionTreeClassifier
        >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([0, 0, 1, 1])
        >>> clf = DecisionTreeClassifier().fit(X, y)
        >>> clf.predict_log_proba(np.array([[0.2]]))
        array([[  0., -inf]])
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: ArrayLike) -> Any:
        """The class of highest :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        labels : ndarray or dask.array.Array of shape (n_samples,)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.tree import DecisionTreeClassifier
        >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([0, 0, 1, 1])
        >>> clf = DecisionTreeClassifier().fit(X, y)
        >>> clf.predict(np.array([[0.2], [2.7]]))
        array([0, 1])
        """
        proba = self.predict_proba(X)
        idx = proba.argmax(axis=1)
        if isinstance(idx, np.ndarray):
            return self.classes_[idx]
        return idx.map_blocks(_take, self.classes_, dtype=self.classes_.dtype)


def _take(idx, classes):
    return classes[idx]


class _RegressorOut:
    def predict(self, X: ArrayLike) -> Any:
        """Mean of the leaf values over the trees.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        y_pred : ndarray or dask.array.Array of shape (n_samples,)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.tree import DecisionTreeRegressor
        >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([1., 1., 5., 5.])
        >>> DecisionTreeRegressor().fit(X, y).predict(np.array([[0.5], [3.0]]))
        array([1., 5.])
        """
        return self._out(X, "value", np.float64)


_TREE_PARAMS = """
    max_depth : int or None, default None
        Maximum depth (root = 0); None grows until the leaves are pure or too small.
    min_samples_split, min_samples_leaf : int or float
        As in scikit-learn, counted as weighted rows (sample_weight × bootstrap multiplicity;
        the row count when unweighted).
    min_impurity_decrease : float, default 0.0
        Split only when the weighted impurity decrease (scikit-learn's formula) reaches it.
    max_bins : int, default 255
        Bins per numeric feature (2..255): the exact thresholds (midpoints of adjacent
        distinct values) when a feature has at most ``max_bins`` distinct values, else quantiles
        of a distributed sketch. Bin 255 is reserved for missing values.
    random_state : None, int, RandomState or Generator
        Seeds the per-node feature sampling (and bootstraps in forests).
"""


class DecisionTreeClassifier(_ClassifierOut, _HistTreeBase, ClassifierMixin, BaseEstimator):
    """A decision tree classifier grown level by level from distributed histograms.

    Features are binned once (see ``max_bins``); every level is one pass over the persisted,
    uint8-binned blocks. With few distinct values per feature the bins are the exact thresholds
    and the tree is scikit-learn's (same criterion), up to ties.

    Missing values (NaN, pd.NA, unseen categories) follow each split's *learned default
    direction*: both directions are scored and the missing rows go to the child with the higher
    gain; without missing values at that node (or on a tie), to the heavier child. Categorical
    columns of (Dask) dataframes (``category`` dtype, at most ``max_bins`` categories) are split
    into two sets of categories ordered by the node's target frequency.

    Parameters
    ----------
    criterion : {"gini", "entropy", "log_loss"}, default "gini"
    max_features : int, float, "sqrt", "log2" or None, default None
        Features drawn per node (from the node's own generator).
    class_weight : dict, "balanced" or None
%(params)s
    Attributes
    ----------
    classes_, n_classes_, n_features_in_, feature_names_in_ : as scikit-learn
    nodes_ : dict of ndarray
        The tree as flat arrays (``children_left``, ``children_right``, ``feature``,
        ``threshold``, ``missing_left``, ``value``, ...; see :mod:`dml.tree._model`).
    feature_importances_ : ndarray
        Normalised total impurity decrease per feature.
    bin_edges_, n_bins_, categorical_, categories_ : binning of each feature.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.tree import DecisionTreeClassifier
    >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([0, 0, 1, 1])
    >>> clf = DecisionTreeClassifier().fit(X, y)
    >>> clf.predict(np.array([[0.2], [2.7]])).tolist(), float(clf.nodes_["threshold"][0])
    ([0, 1], 1.5)
    """

    _parameter_constraints = {**_HistTreeBase._parameter_constraints,
                              "criterion": _HistTreeBase._CLASSIFICATION}

    def __init__(self, criterion="gini", max_depth=None, min_samples_split=2,
                 min_samples_leaf=1, min_impurity_decrease=0.0, max_features=None,
                 class_weight=None, max_bins=255, random_state=None):
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_impurity_decrease = min_impurity_decrease
        self.max_features = max_features
        self.class_weight = class_weight
        self.max_bins = max_bins
        self.random_state = random_state

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Grow the tree on X, y (NumPy, pandas, Dask array or dataframe; y may be a column name).

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
            The training data; categorical columns of dataframes are split as categories.
        y : array-like, dask array/Series or column name of shape (n_samples,)
            The targets.
        sample_weight : array-like, dask array/Series or column name, optional
            Row weights.

        Returns
        -------
        self : object
            The fitted tree.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.tree import DecisionTreeClassifier
        >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([0, 0, 1, 1])
        >>> DecisionTreeClassifier().fit(X, y).classes_
        array([0, 1])
        """
        return fit_trees(self, X, y, sample_weight, classify=True, n_trees=1, bootstrap=False,
                         max_features=self.max_features)


class DecisionTreeRegressor(_RegressorOut, _HistTreeBase, RegressorMixin, BaseEstimator):
    """A decision tree regressor (squared error) grown level by level from distributed histograms.

    See :class:`DecisionTreeClassifier` for binning, missing values and categorical columns;
    histograms hold (Σw, Σw·y, Σw·y²) per bin.

    Parameters
    ----------
    criterion : {"squared_error"}
    max_features : int, float, "sqrt", "log2" or None, default None
%(params)s
    Examples
    --------
    >>> import numpy as np
    >>> from dml.tree import DecisionTreeRegressor
    >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([1., 1., 5., 5.])
    >>> DecisionTreeRegressor().fit(X, y).predict(np.array([[0.5], [3.0]])).tolist()
    [1.0, 5.0]
    """

    _parameter_constraints = {**_HistTreeBase._parameter_constraints,
                              "criterion": _HistTreeBase._REGRESSION}

    def __init__(self, criterion="squared_error", max_depth=None, min_samples_split=2,
                 min_samples_leaf=1, min_impurity_decrease=0.0, max_features=None,
                 max_bins=255, random_state=None):
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_impurity_decrease = min_impurity_decrease
        self.max_features = max_features
        self.max_bins = max_bins
        self.random_state = random_state

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Grow the tree on X, y (NumPy, pandas, Dask array or dataframe; y may be a column name).

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
            The training data; categorical columns of dataframes are split as categories.
        y : array-like, dask array/Series or column name of shape (n_samples,)
            The targets.
        sample_weight : array-like, dask array/Series or column name, optional
            Row weights.

        Returns
        -------
        self : object
            The fitted tree.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.tree import DecisionTreeRegressor
        >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([1., 1., 5., 5.])
        >>> DecisionTreeRegressor().fit(X, y).n_estimators_
        1
        """
        return fit_trees(self, X, y, sample_weight, classify=False, n_trees=1, bootstrap=False,
                         max_features=self.max_features)


for _cls in (DecisionTreeClassifier, DecisionTreeRegressor):
    _cls.__doc__ = _cls.__doc__.replace("%(params)s", _TREE_PARAMS)
