"""KNeighborsRegressor: (weighted) mean of the targets of the k nearest training rows."""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from dml._typing import Any, ArrayLike, Self
from dml.base import fit_context
from dml.neighbors._base import KNeighborsPredictorBase
from dml.neighbors import _knn_kernels as kern

__all__ = ["KNeighborsRegressor"]


class KNeighborsRegressor(KNeighborsPredictorBase, RegressorMixin, BaseEstimator):
    """Regressor averaging the targets of the k nearest training rows (exact brute force).

    The training rows and targets stay on the workers (see
    :class:`~dml.neighbors.NearestNeighbors`); predictions equal scikit-learn's
    ``KNeighborsRegressor(algorithm="brute")``.

    Parameters
    ----------
    n_neighbors : int, default=5
    weights : {"uniform", "distance"} or callable, default="uniform"
        ``"distance"``: weight 1/distance (a query that coincides with training rows takes the
        mean of their targets).
    metric : str, default="minkowski"
        Distance, as for :class:`~dml.neighbors.NearestNeighbors`.
    p : float, default=2

    Attributes
    ----------
    n_samples_fit_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
    effective_metric_ : str
    effective_metric_params_ : dict

    Examples
    --------
    >>> import numpy as np
    >>> from dml.neighbors import KNeighborsRegressor
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0.0, 1.0, 2.0, 3.0])
    >>> KNeighborsRegressor(n_neighbors=2).fit(X, y).predict([[1.4]])
    array([1.5])
    """

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Keep the training rows and targets on the workers.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : array-like, Dask array/Series or str of shape (n_samples,)
            Numeric targets.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neighbors import KNeighborsRegressor
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0.0, 1.0, 2.0, 3.0])
        >>> KNeighborsRegressor(n_neighbors=2).fit(X, y).n_samples_fit_
        4
        """
        self._fit_training(X, y, require_y=True, y_numeric=True)
        return self

    def predict(self, X: ArrayLike) -> Any:
        """Mean (or distance-weighted mean) target of the k nearest training rows.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_queries, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_queries,)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neighbors import KNeighborsRegressor
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0.0, 1.0, 2.0, 3.0])
        >>> KNeighborsRegressor(n_neighbors=2, weights="distance").fit(X, y).predict([[0.5]])
        array([0.5])
        """
        return self._predict_from_neighbours(X, "n_samples_fit_", kern.average, (), [()],
                                             [np.float64])

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """R² of ``predict(X)``, computed by :mod:`dml.metrics` (over the blocks for Dask input).

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
        >>> from dml.neighbors import KNeighborsRegressor
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0.0, 1.0, 2.0, 3.0])
        >>> KNeighborsRegressor(n_neighbors=1).fit(X, y).score(X, y)
        1.0
        """
        from dml.metrics import r2_score

        return self._score_with(r2_score, X, y, sample_weight)
