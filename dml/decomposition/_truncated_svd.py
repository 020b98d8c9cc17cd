"""TruncatedSVD over row blocks: the top singular triplets of X itself (no centring)."""
from __future__ import annotations

from numbers import Integral

import numpy as np

from dml._blocks import BlockSpec, seed_from
from dml._param_validation import RANDOM_STATE, Interval, StrOptions
from dml._typing import Any, ArrayLike, Self
from dml.base import fit_context
from dml.decomposition._base import ProjectionMixin, randomized_eigs
from dml.decomposition._pca_kernels import merge_scatter, scatter_kernel, svd_flip_v

__all__ = ["TruncatedSVD"]


class TruncatedSVD(ProjectionMixin):
    """Dimensionality reduction by a truncated SVD of X, without centring (latent semantic
    analysis on term counts, for example).

    ``"randomized"`` runs subspace iteration over the blocks: each pass every block returns
    ``X.T @ (X @ Q)`` for a d×(k + n_oversamples) basis Q, and only that small matrix travels;
    a final Rayleigh-Ritz step gives the singular values. The blocks are only ever multiplied
    by dense matrices (``X @ A``, ``X.T @ B``), the form that sparse blocks also support.
    ``"gram_eigh"`` is exact: one pass computes ``X.T @ X`` (through centred block scatters,
    which keep full precision) and the client solves the d×d eigenproblem; it is the faster
    choice up to a few thousand features. ``"arpack"`` is accepted for scikit-learn
    compatibility and runs ``"gram_eigh"`` (ARPACK converges to the same exact answer).

    Parameters
    ----------
    n_components : int, default=2
        Number of singular triplets to keep (at most n_features).
    algorithm : {"randomized", "gram_eigh", "arpack"}, default="randomized"
    n_iter : int, default=5
        Power passes of the randomized solver.
    n_oversamples : int, default=10
    random_state : int, RandomState, Generator or None, default=None
        Seed of the randomized solver's test matrix (independent of the partitioning).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Right singular vectors, with scikit-learn's sign convention.
    singular_values_ : ndarray of shape (n_components,)
    explained_variance_ : ndarray of shape (n_components,)
        Variance (ddof=0) of each column of the projection ``X @ components_.T``.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Those variances over the total variance of X's columns.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.decomposition import TruncatedSVD
    >>> X = np.array([[3.0, 0.0], [0.0, 1.0], [3.0, 0.0]])
    >>> svd = TruncatedSVD(n_components=1, algorithm="gram_eigh").fit(X)
    >>> svd.singular_values_.round(4), svd.components_
    (array([4.2426]), array([[1., 0.]]))
    """

    # Sparse X (CSR blocks): the kernels only multiply blocks by dense matrices (docs/sparse.md).
    _block_spec = BlockSpec(accept_sparse=True)

    _centred = False

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "algorithm": [StrOptions({"randomized", "gram_eigh", "arpack"})],
        "n_iter": [Interval(Integral, 0, None, closed="left")],
        "n_oversamples": [Interval(Integral, 1, None, closed="left")],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, n_components=2, *, algorithm="randomized", n_iter=5, n_oversamples=10,
                 random_state=None):
        self.n_components = n_components
        self.algorithm = algorithm
        self.n_iter = n_iter
        self.n_oversamples = n_oversamples
        self.random_state = random_state

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Fit the model on X.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : None or str
            Ignored (a column name of X's dataframe is left out of the features).

        Returns
        -------
        self : TruncatedSVD

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import TruncatedSVD
        >>> X = np.array([[1.0, 1.0], [2.0, 2.0], [0.0, 1.0]])
        >>> TruncatedSVD(1, random_state=0).fit(X).explained_variance_ratio_.round(4)
        array([0.8483])
        """
        name = type(self).__name__
        blocks = self._fit_blocks(X, y if isinstance(y, str) else None, None, require_y=False)
        d = blocks.n_features
        k = self.n_components
        if k > d:
            raise ValueError(f"{name}: n_components={k} must be <= n_features={d}; ask for "
                             "fewer components")
        if self.algorithm == "randomized":
            n, mean, lam, V, stats = randomized_eigs(blocks, k, self.n_oversamples, self.n_iter,
                                                     seed_from(self.random_state), centre=False)
            Vt, vsv, ss = V.T, stats["VSV"], stats["ss"]
        else:
            n, mean, S = blocks.map_reduce(scatter_kernel, combine=merge_scatter)
            C = S + n * np.outer(mean, mean)
            lam, vecs = np.linalg.eigh((C + C.T) / 2)
            lam, Vt = np.maximum(lam[::-1][:k], 0.0), vecs[:, ::-1][:, :k].T
            vsv, ss = Vt @ S @ Vt.T, float(np.trace(S))
        if n == 0:
            raise ValueError(f"{name}: X has 0 rows (Found array with 0 sample(s)); pass at "
                             "least one row of training data.")
        dtype = np.float32 if self._out_dtype(X) == np.float32 else np.float64
        self.components_ = np.ascontiguousarray(svd_flip_v(Vt)).astype(dtype)
        self.singular_values_ = np.sqrt(lam).astype(dtype)
        exp_var = np.maximum(np.diag(vsv), 0.0) / n
        self.explained_variance_ = exp_var.astype(dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.explained_variance_ratio_ = (exp_var / (ss / n)).astype(dtype)
        return self

    def fit_transform(self, X: ArrayLike, y: ArrayLike | None = None) -> Any:
        """Fit on X and return ``X @ components_.T`` (lazy for Dask input).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        X_new : ndarray or dask.array.Array of shape (n_samples, n_components)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import TruncatedSVD
        >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 2.5]])
        >>> TruncatedSVD(1, random_state=0).fit_transform(X).shape
        (4, 1)
        """
        return self.fit(X, y).transform(X)
