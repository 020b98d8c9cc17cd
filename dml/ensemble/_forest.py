"""Random forests of histogram trees, all trees grown in the same passes over the data.

Each tree's bootstrap is a per-row Poisson(1) multiplicity drawn from the tree's own generator
``block_rng(seed, "bootstrap", tree, block)``: nothing is resampled or moved, and the forest
depends only on the data, its partitioning and ``random_state`` (not on the cluster). Up to
``trees_per_pass`` trees grow together: one pass over the persisted binned blocks per level
computes the histograms of every open node of all of them; more trees take more rounds.

See docs/trees.md.
"""
from __future__ import annotations

from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from dml._param_validation import Integral, Interval, invalid_parameter
from dml._typing import ArrayLike, Self
from dml.base import fit_context
from dml.optim.progress import make_progress
from dml.tree._classes import _ClassifierOut, _HistTreeBase, _RegressorOut
from dml.tree._model import fit_trees

__all__ = ["RandomForestClassifier", "RandomForestRegressor"]


class _ForestBase(_HistTreeBase):
    _parameter_constraints = {
        **_HistTreeBase._parameter_constraints,
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "bootstrap": ["boolean"],
        "oob_score": ["boolean"],
        "trees_per_pass": [Interval(Integral, 1, None, closed="left"), None],
        "verbose": ["verbose"],
        "progress": "no_validation",  # checked by dml.optim.progress.make_progress
    }

    def _validate_param_relations(self):
        if self.oob_score and not self.bootstrap:
            raise invalid_parameter(self, "oob_score", "False unless bootstrap=True (out-of-bag "
                                    "estimation needs bootstrap samples)")

    def _fit(self, X, y, sample_weight, classify):
        progress = make_progress(self.progress, self.verbose)
        if progress is not None:
            progress.start(self.n_estimators, desc=type(self).__name__)
        try:
            return fit_trees(self, X, y, sample_weight, classify=classify,
                             n_trees=self.n_estimators, bootstrap=self.bootstrap,
                             max_features=self.max_features, oob=self.oob_score,
                             progress=progress)
        finally:
            if progress is not None:
                progress.close()


_FOREST_DOC = """
    Parameters
    ----------
    n_estimators : int, default 100
    criterion : str
    max_depth, min_samples_split, min_samples_leaf, min_impurity_decrease, max_bins
        As in :class:`dml.tree.DecisionTreeClassifier` (minimum counts are weighted by the
        bootstrap multiplicities).
    max_features : int, float, "sqrt", "log2" or None
        Features drawn per node from the node's own generator.
    bootstrap : bool, default True
        Per-row Poisson(1) weights per tree (the expected unique fraction is 1 − 1/e ≈ 0.632).
    oob_score : bool, default False
        Compute ``oob_score_`` (accuracy / R²) from each row's out-of-bag trees (one extra pass).
    trees_per_pass : int or None, default None (64)
        Trees grown together; more trees take several rounds over the data.
    random_state : None, int, RandomState or Generator
    verbose : int, default 0
        Above 0: a progress line on stderr after every level of the trees growing together and
        after every group of trees (plain lines when stderr is not a terminal). The levels are
        also logged at INFO on the ``dml.ensemble`` logger.
    progress : None, False, "text", "notebook", callable or object, default None
        Progress display (see :mod:`dml.optim.progress`); "notebook": an HTML bar in Jupyter.
        A callable gets the records ``{"epoch": trees finished, "unit": "tree", "detail":
        ...}``.

    Attributes
    ----------
    nodes_ : dict of ndarray
        All trees as flat arrays (``tree_start`` marks each tree's first node).
    feature_importances_ : ndarray
        Mean over the trees of the normalised impurity decrease per feature.
    oob_score_ : float
        When ``oob_score=True``.
"""


class RandomForestClassifier(_ClassifierOut, _ForestBase, ClassifierMixin, BaseEstimator):
    """Random forest classifier: soft vote of histogram trees on Poisson bootstraps.

    ``max_features="sqrt"`` by default (scikit-learn's). See :mod:`dml.ensemble._forest`.
%(params)s
    Examples
    --------
    >>> import numpy as np
    >>> from dml.ensemble import RandomForestClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=10, random_state=0).fit(X, y)
    >>> bool(rf.score(X, y) > 0.9), rf.n_estimators_
    (True, 10)
    """

    _parameter_constraints = {**_ForestBase._parameter_constraints,
                              "criterion": _HistTreeBase._CLASSIFICATION}

    def __init__(self, n_estimators=100, criterion="gini", max_depth=None, min_samples_split=2,
                 min_samples_leaf=1, min_impurity_decrease=0.0, max_features="sqrt",
                 bootstrap=True, oob_score=False, class_weight=None, max_bins=255,
                 trees_per_pass=None, random_state=None, verbose=0, progress=None):
        self.n_estimators = n_estimators
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_impurity_decrease = min_impurity_decrease
        self.max_features = max_features
        self.bootstrap = bootstrap
        self.oob_score = oob_score
        self.class_weight = class_weight
        self.max_bins = max_bins
        self.trees_per_pass = trees_per_pass
        self.random_state = random_state
        self.verbose = verbose
        self.progress = progress

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Grow the trees on X, y (see :meth:`dml.tree.DecisionTreeClassifier.fit`).

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
            The training data.
        y : array-like, dask array/Series or column name of shape (n_samples,)
            The targets.
        sample_weight : array-like, dask array/Series or column name, optional
            Row weights (multiplied by the bootstrap multiplicities).

        Returns
        -------
        self : object
            The fitted forest.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import RandomForestClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 4)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
        >>> RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y).n_estimators_
        5
        """
        return self._fit(X, y, sample_weight, classify=True)


class RandomForestRegressor(_RegressorOut, _ForestBase, RegressorMixin, BaseEstimator):
    """Random forest regressor: mean of histogram regression trees on Poisson bootstraps.

    ``max_features=1.0`` (all features) by default, as scikit-learn >= 1.1.
%(params)s
    Examples
    --------
    >>> import numpy as np
    >>> from dml.ensemble import RandomForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = 2 * X[:, 0] + X[:, 1]
    >>> rf = RandomForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    >>> bool(rf.score(X, y) > 0.8)
    True
    """

    _parameter_constraints = {**_ForestBase._parameter_constraints,
                              "criterion": _HistTreeBase._REGRESSION}

    def __init__(self, n_estimators=100, criterion="squared_error", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, min_impurity_decrease=0.0,
                 max_features=1.0, bootstrap=True, oob_score=False, max_bins=255,
                 trees_per_pass=None, random_state=None, verbose=0, progress=None):
        self.n_estimators = n_estimators
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_impurity_decrease = min_impurity_decrease
        self.max_features = max_features
        self.bootstrap = bootstrap
        self.oob_score = oob_score
        self.max_bins = max_bins
        self.trees_per_pass = trees_per_pass
        self.random_state = random_state
        self.verbose = verbose
        self.progress = progress

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Grow the trees on X, y (see :meth:`dml.tree.DecisionTreeClassifier.fit`).

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
            The training data.
        y : array-like, dask array/Series or column name of shape (n_samples,)
            The targets.
        sample_weight : array-like, dask array/Series or column name, optional
            Row weights (multiplied by the bootstrap multiplicities).

        Returns
        -------
        self : object
            The fitted forest.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import RandomForestRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 3)); y = 2 * X[:, 0] + X[:, 1]
        >>> RandomForestRegressor(n_estimators=5, random_state=0).fit(X, y).n_estimators_
        5
        """
        return self._fit(X, y, sample_weight, classify=False)


_CLASS_WEIGHT_DOC = """    class_weight : dict, "balanced" or None, default None
        Weights of the classes ("balanced": n / (K · weighted count)).
    random_state :"""
RandomForestClassifier.__doc__ = RandomForestClassifier.__doc__.replace(
    "%(params)s", _FOREST_DOC.replace("    random_state :", _CLASS_WEIGHT_DOC))
RandomForestRegressor.__doc__ = RandomForestRegressor.__doc__.replace("%(params)s", _FOREST_DOC)
