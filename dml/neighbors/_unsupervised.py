"""NearestNeighbors: neighbour queries, no targets."""
from __future__ import annotations

from sklearn.base import BaseEstimator

from dml._typing import ArrayLike, Self
from dml.base import fit_context
from dml.neighbors._base import KNeighborsMixin, NeighborsBase

__all__ = ["NearestNeighbors"]


class NearestNeighbors(KNeighborsMixin, NeighborsBase, BaseEstimator):
    """Exact k-nearest-neighbour queries over a training set kept on the Dask workers.

    ``fit`` keeps the training rows in worker memory; :meth:`kneighbors` is brute force, one
    task per (query chunk, training group), and returns what scikit-learn's
    ``NearestNeighbors(algorithm="brute")`` returns, whatever the partitioning (equally distant
    neighbours are listed in increasing training index). See ``docs/neighbors.md``.

    Parameters
    ----------
    n_neighbors : int, default=5
        Neighbours returned by :meth:`kneighbors` when it is not given one.
    metric : str, default="minkowski"
        Distance: "minkowski", "euclidean", "sqeuclidean", "manhattan", "chebyshev" or
        "cosine" (also the aliases "l2", "l1", "cityblock", "infinity"); see
        ``docs/neighbors.md``.
    p : float, default=2
        Power of the Minkowski metric (p = 1: manhattan, 2: euclidean, inf: chebyshev).

    Attributes
    ----------
    n_samples_fit_ : int
        Training rows.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Column names, when X was a dataframe with string column names.
    effective_metric_ : str
        The metric computed (minkowski with p = 1/2/inf becomes manhattan/euclidean/chebyshev).
    effective_metric_params_ : dict
        ``{"p": p}`` for minkowski, else empty.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.neighbors import NearestNeighbors
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
    >>> nn = NearestNeighbors(n_neighbors=2).fit(X)
    >>> nn.kneighbors([[0.0, 0.2]], return_distance=False)
    array([[0, 1]])
    """

    def __init__(self, n_neighbors=5, *, metric="minkowski", p=2):
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.p = p

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Keep the training rows on the workers.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neighbors import NearestNeighbors
        >>> NearestNeighbors().fit(np.zeros((6, 2))).n_samples_fit_
        6
        """
        self._fit_training(X)
        return self
