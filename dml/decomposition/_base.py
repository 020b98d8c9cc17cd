"""What PCA, IncrementalPCA and TruncatedSVD share: the randomized range finder over blocks and
the projection side (transform, inverse_transform, the probabilistic-PCA likelihood)."""
from __future__ import annotations

import math

import dask.array as da
import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin

from dml._blocks import Blocks, block_rng, check_x_layout
from dml._typing import Any, ArrayLike
from dml.base import DaskEstimatorMixin, TransformOutputMixin, check_is_fitted
from dml.decomposition._pca_kernels import gram_product_kernel, merge_project, project_kernel
from dml.preprocessing._base import _dtypes_of, _float_out_dtype

__all__ = ["randomized_eigs", "ProjectionMixin", "LikelihoodMixin"]


def randomized_eigs(blocks: Blocks, k: int, n_oversamples: int, n_iter: int, seed: int,
                    centre: bool):
    """Top-``k`` eigenpairs of ``X.T @ X`` (``centre=False``) or of the centred scatter, by
    subspace iteration with QR normalisation and a final Rayleigh-Ritz step.

    Each pass over the blocks multiplies a d×l basis by the scatter (every block returns
    ``Xc.T @ (Xc @ Q)``; nothing of size n travels). ``n_iter`` power passes then one
    Rayleigh-Ritz pass: the same subspace, and the same number of data products, as
    scikit-learn's ``randomized_svd`` with ``n_iter`` power iterations.

    Returns
    -------
    n, mean, eigvals (descending, length k), V (d×k), stats
        ``stats`` holds the centred scatter projected on V (``V.T @ S @ V``) and its trace
        ``ss`` over all features (the total sum of squares about the mean).
    """
    d = blocks.n_features
    ell = min(k + n_oversamples, d)
    omega = block_rng(seed, "randomized-range").standard_normal((d, ell))
    Q = scipy.linalg.qr(omega, mode="economic")[0]
    if n_iter > 0:
        blocks = blocks.persist()  # several passes: keep the validated blocks in memory

    def centred_pass(Q):
        n, mean, p, M, ss = blocks.map_reduce(project_kernel, Q, combine=merge_project)
        # X.T X Q = S Q + n mean (Q.T mean).T: no raw sum of squares is formed.
        return n, mean, p, M, ss, (M if centre or n == 0 else M + n * np.outer(mean, p))

    # The first pass finds the mean; the middle ones multiply without centring a copy of the
    # block (two reads instead of five); the last one is centred again for exact statistics.
    n, mean, p, M, ss, CQ = centred_pass(Q)
    mu = mean if centre else np.zeros(d)
    for it in range(n_iter):
        Q = scipy.linalg.qr(CQ, mode="economic")[0]
        if it < n_iter - 1:
            CQ = blocks.map_reduce(gram_product_kernel, Q, mu)
        else:
            n, mean, p, M, ss, CQ = centred_pass(Q)
    T = Q.T @ CQ
    T = (T + T.T) / 2
    eigvals, U = np.linalg.eigh(T)
    eigvals, U = eigvals[::-1][:k], U[:, ::-1][:, :k]
    V = Q @ U
    SQ = Q.T @ M
    return n, mean, np.maximum(eigvals, 0.0), V, {"VSV": U.T @ ((SQ + SQ.T) / 2) @ U, "ss": ss}


def _transform_kernel(xb, mean, components, scale):
    comps = components.astype(xb.dtype, copy=False)
    out = xb @ comps.T
    if mean is not None:
        out -= (mean @ components.T).astype(xb.dtype)
    if scale is not None:
        out /= scale.astype(xb.dtype)
    return out


def _inverse_kernel(xb, mean, components):
    out = xb @ components.astype(xb.dtype, copy=False)
    if mean is not None:
        out += mean.astype(xb.dtype)
    return out


def _score_samples_kernel(xb, mean, precision, log_det):
    xr = np.asarray(xb, dtype=np.float64) - mean
    d = xr.shape[1]
    out = -0.5 * np.sum(xr * (xr @ precision), axis=1)
    return out - 0.5 * (d * math.log(2.0 * np.pi) - log_det)


class ProjectionMixin(TransformOutputMixin, DaskEstimatorMixin, ClassNamePrefixFeaturesOutMixin,
                      TransformerMixin, BaseEstimator):
    """transform / inverse_transform / likelihood of a fitted linear projection.

    Subclasses set ``components_``, ``mean_`` (None: no centring, TruncatedSVD) and, for the
    PCAs, ``explained_variance_``, ``noise_variance_`` and ``whiten``.
    """

    _centred = True

    @property
    def _n_features_out(self):
        return self.components_.shape[0]

    def _out_dtype(self, X):
        return _float_out_dtype(_dtypes_of(check_x_layout(
            X, type(self).__name__, accept_sparse=self._block_spec.accept_sparse)))

    def _whiten_scale(self):
        if not getattr(self, "whiten", False):
            return None
        scale = np.sqrt(self.explained_variance_)
        eps = np.finfo(scale.dtype).eps
        return np.where(scale < eps, eps, scale)

    def transform(self, X: ArrayLike) -> Any:
        """Project X on the components: NumPy for NumPy/pandas input, lazy Dask for Dask input.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        X_new : ndarray or dask.array.Array of shape (n_samples, n_components)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import PCA
        >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 2.5]])
        >>> PCA(1).fit(X).transform(X[:2]).round(4)
        array([[-1.3984],
               [-1.2577]])
        """
        check_is_fitted(self, "components_")
        mean = self.mean_ if self._centred else None
        return self._blockwise(X, _transform_kernel, mean, self.components_,
                               self._whiten_scale(), dtype=self._out_dtype(X),
                               tail_shape=(self.components_.shape[0],))

    def inverse_transform(self, X: ArrayLike) -> Any:
        """Map projected data back to feature space (exact inverse of whitening too).

        Parameters
        ----------
        X : ndarray or Dask array of shape (n_samples, n_components)

        Returns
        -------
        X_original : ndarray or dask.array.Array of shape (n_samples, n_features)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import PCA
        >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 2.5]])
        >>> pca = PCA(2).fit(X)
        >>> bool(np.allclose(pca.inverse_transform(pca.transform(X)), X))
        True
        """
        check_is_fitted(self, "components_")
        comps = self.components_
        scale = self._whiten_scale()
        if scale is not None:
            comps = scale[:, None] * comps
        mean = self.mean_ if self._centred else None
        return self._blockwise(X, _inverse_kernel, mean, comps, dtype=self._out_dtype(X),
                               tail_shape=(comps.shape[1],), check_features=False,
                               n_features=comps.shape[0])



class LikelihoodMixin:
    """The probabilistic PCA model (Tipping & Bishop) of a fitted PCA, as scikit-learn's:
    covariance, precision and log-likelihood of rows."""

    def get_covariance(self) -> np.ndarray:
        """Data covariance of the fitted probabilistic model:
        ``components_.T @ diag(explained_variance_ - noise) @ components_ + noise * I``.

        Returns
        -------
        cov : ndarray of shape (n_features, n_features)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import PCA
        >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 2.5]])
        >>> PCA(2).fit(X).get_covariance().shape
        (2, 2)
        """
        check_is_fitted(self, "components_")
        comps, exp_var = self._unwhitened()
        diff = np.where(exp_var > self.noise_variance_, exp_var - self.noise_variance_, 0.0)
        cov = (comps.T * diff) @ comps
        cov.flat[::cov.shape[0] + 1] += self.noise_variance_
        return cov

    def get_precision(self) -> np.ndarray:
        """Inverse of :meth:`get_covariance` (by the matrix inversion lemma).

        Returns
        -------
        precision : ndarray of shape (n_features, n_features)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import PCA
        >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 2.5]])
        >>> pca = PCA(1).fit(X)
        >>> bool(np.allclose(pca.get_precision() @ pca.get_covariance(), np.eye(2)))
        True
        """
        check_is_fitted(self, "components_")
        d = self.components_.shape[1]
        if self.n_components_ == 0:
            return np.eye(d) / self.noise_variance_
        if self.noise_variance_ == 0.0:
            return scipy.linalg.inv(self.get_covariance())
        comps, exp_var = self._unwhitened()
        diff = np.where(exp_var > self.noise_variance_, exp_var - self.noise_variance_, 0.0)
        precision = comps @ comps.T / self.noise_variance_
        precision.flat[::precision.shape[0] + 1] += 1.0 / diff
        precision = comps.T @ scipy.linalg.inv(precision) @ comps
        precision /= -(self.noise_variance_ ** 2)
        precision.flat[::d + 1] += 1.0 / self.noise_variance_
        return precision

    def _unwhitened(self):
        comps = self.components_.astype(np.float64)
        exp_var = self.explained_variance_.astype(np.float64)
        if getattr(self, "whiten", False):
            comps = comps * np.sqrt(exp_var[:, None])
        return comps, exp_var

    def score_samples(self, X: ArrayLike) -> Any:
        """Log-likelihood of each row under the probabilistic PCA model.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ll : ndarray or dask.array.Array of shape (n_samples,)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import PCA
        >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 2.5]])
        >>> PCA(1).fit(X).score_samples(X).shape
        (4,)
        """
        precision = self.get_precision()
        log_det = np.linalg.slogdet(precision)[1]
        return self._blockwise(X, _score_samples_kernel, self.mean_.astype(np.float64),
                               precision, log_det, dtype=np.float64)

    def score(self, X: ArrayLike, y: ArrayLike | None = None) -> float:
        """Average log-likelihood of the rows of X (a float, computed for Dask input).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        ll : float

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import PCA
        >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 2.5]])
        >>> round(PCA(1).fit(X).score(X), 4)
        -2.5211
        """
        ll = self.score_samples(X)
        if isinstance(ll, da.Array):
            return float(ll.mean().compute())
        return float(np.mean(ll))
