"""KNeighborsClassifier: majority (or distance-weighted) vote of the k nearest training rows."""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from dml._typing import Any, ArrayLike, Self
from dml.base import check_is_fitted, fit_context
from dml.neighbors._base import KNeighborsPredictorBase
from dml.neighbors import _knn_kernels as kern

__all__ = ["KNeighborsClassifier"]


class KNeighborsClassifier(KNeighborsPredictorBase, ClassifierMixin, BaseEstimator):
    """Classifier voting among the k nearest training rows (exact brute force on Dask).

    The training rows and labels stay on the workers; each query chunk collects the labels of
    its k nearest rows (see :class:`~dml.neighbors.NearestNeighbors`) and votes. Predictions
    and probabilities equal scikit-learn's ``KNeighborsClassifier(algorithm="brute")``.

    Parameters
    ----------
    n_neighbors : int, default=5
        Neighbours that vote.
    weights : {"uniform", "distance"} or callable, default="uniform"
        ``"uniform"``: one vote each; ``"distance"``: weight 1/distance (a query that coincides
        with training rows takes their labels only); a callable maps the distance array to
        weights of the same shape.
    metric : str, default="minkowski"
        Distance, as for :class:`~dml.neighbors.NearestNeighbors`.
    p : float, default=2
        Power of the Minkowski metric.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels (sorted; numbers or strings).
    n_samples_fit_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
    effective_metric_ : str
    effective_metric_params_ : dict
    outputs_2d_ : bool
        Always False: one target column.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.neighbors import KNeighborsClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array(["a", "a", "b", "b"])
    >>> clf = KNeighborsClassifier(n_neighbors=3).fit(X, y)
    >>> clf.predict([[1.1]]), clf.predict_proba([[1.1]]).round(3)
    (array(['a'], dtype='<U1'), array([[0.667, 0.333]]))
    """

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Keep the training rows and labels on the workers and record the classes.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : array-like, Dask array/Series or str of shape (n_samples,)
            Class labels.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neighbors import KNeighborsClassifier
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
        >>> KNeighborsClassifier(n_neighbors=1).fit(X, y).classes_
        array([0, 1])
        """
        classes = self._fit_training(X, y, require_y=True, labels=True)
        name = type(self).__name__
        if classes is None or len(classes) == 0:
            raise ValueError(f"{name}: y has no labels")
        if classes.dtype.kind == "f" and not np.all(classes == np.round(classes)):
            raise ValueError(f"{name}: Unknown label type: 'continuous'. y holds non-integer "
                             "numbers, like a regression target; a classifier needs class labels "
                             "(integers or strings). Use KNeighborsRegressor, or bin y first.")
        self.classes_ = classes
        self.outputs_2d_ = False
        return self

    def _vote(self, X, proba):
        check_is_fitted(self, "classes_")
        if proba:
            tails, dtypes = [(len(self.classes_),)], [np.float64]
        else:
            tails, dtypes = [()], [self.classes_.dtype]
        return self._predict_from_neighbours(X, "classes_", kern.vote, (self.classes_, proba),
                                             tails, dtypes)

    def predict(self, X: ArrayLike) -> Any:
        """Class of each query row: the vote of its k nearest training rows.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_queries, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_queries,)
            NumPy for local input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neighbors import KNeighborsClassifier
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
        >>> KNeighborsClassifier(n_neighbors=3).fit(X, y).predict(np.array([[0.2], [2.6]]))
        array([0, 1])
        """
        return self._vote(X, False)

    def predict_proba(self, X: ArrayLike) -> Any:
        """Share of the (weighted) votes of each class, per query row.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_queries, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_queries, n_classes)
            Columns in the order of ``classes_``.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neighbors import KNeighborsClassifier
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
        >>> clf = KNeighborsClassifier(n_neighbors=2, weights="distance").fit(X, y)
        >>> clf.predict_proba(np.array([[1.25]]))
        array([[0.75, 0.25]])
        """
        return self._vote(X, True)

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Mean (weighted) accuracy of ``predict(X)``, computed by :mod:`dml.metrics` (lazily
        over the blocks for Dask input).

        Parameters
        ----------
        X : array-like or Dask collection of shape (n_samples, n_features)
        y : array-like or Dask array/Series of shape (n_samples,)
        sample_weight : array-like or Dask array, default=None

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neighbors import KNeighborsClassifier
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
        >>> KNeighborsClassifier(n_neighbors=1).fit(X, y).score(X, y)
        1.0
        """
        from dml.metrics import accuracy_score

        return self._score_with(accuracy_score, X, y, sample_weight)

