"""Exact least squares and ridge regression from one reduction of second moments.

One pass computes, per block, the weighted count, mean and centred scatter matrix of
``Z = [X, y]``; blocks are merged in a fixed tree order with the pairwise update of Chan et al.
(``S = S_a + S_b + δδᵀ n_a n_b / n``), which is as accurate as centring with the global means
but needs no second pass. With ``A`` = the X-part and ``b`` = the X–y part of the centred
scatter,

* ``Ridge``: ``(A + αI) w = b`` (Cholesky);
* ``LinearRegression``: the least-norm solution ``w = A⁺ b`` from the eigendecomposition of
  ``A`` (eigenvalues below ``n_features · ε · λ_max`` count as zero), which equals
  ``lstsq(X_c, y_c)`` when X is rank-deficient;

and the unpenalised intercept is ``ȳ − x̄·w``. Without an intercept the moments are not centred.

Sparse X (CSR blocks) gives the same moments from sparse products, ``XᵀWX`` and ``XᵀWy``, centred
afterwards (``S − n x̄x̄ᵀ``) so that no block is densified; the d × d matrix itself is dense, so
sparse X is taken up to :data:`SPARSE_MAX_FEATURES` columns. See docs/linear_models.md.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin

from dml._blocks import BlockSpec, is_sparse, is_sparse_dask
from dml._param_validation import Interval, Real
from dml._typing import ArrayLike, Self
from dml.base import ALL_ZERO_WEIGHTS, DaskEstimatorMixin, fit_context
from dml.linear_model._base import LinearRegressorMixin

__all__ = ["LinearRegression", "Ridge", "moments", "SPARSE_MAX_FEATURES"]

#: Most columns of sparse X for the normal equations: their d × d matrix (dense) is 128 MiB.
SPARSE_MAX_FEATURES = 4096


def _sparse_moments(X, y, w, center):
    """:func:`_moments_kernel` of a CSR block, from sparse products."""
    d = X.shape[1]
    ww = np.ones(X.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    sw = float(ww.sum())
    if center and sw <= 0:
        return None
    y = np.asarray(y, dtype=np.float64)
    Xw = sp.csr_matrix(X.multiply(ww[:, None]))
    S = np.empty((d + 1, d + 1))
    S[:d, :d] = (X.T @ Xw).toarray()
    S[:d, d] = S[d, :d] = Xw.T @ y
    S[d, d] = float(ww @ (y * y))
    if not center:
        return sw, np.zeros(d + 1), S
    mean = np.append(np.asarray(Xw.sum(axis=0)).ravel(), ww @ y) / sw
    S -= sw * np.outer(mean, mean)
    return sw, mean, S


def _moments_kernel(X, y, w, center):
    if X.shape[0] == 0:
        return None
    if sp.issparse(X):
        return _sparse_moments(X, y, w, center)
    Z = np.column_stack([X, np.asarray(y, dtype=np.float64)])
    ww = np.ones(len(Z)) if w is None else np.asarray(w, dtype=np.float64)
    sw = float(ww.sum())
    if center:
        if sw <= 0:
            return None
        mean = (ww @ Z) / sw
        Zc = Z - mean
    else:
        mean = np.zeros(Z.shape[1])
        Zc = Z
    return sw, mean, Zc.T @ (Zc * ww[:, None])


def _merge_moments(parts):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    sw, mean, S = parts[0]
    S = S.copy()
    for sb, mb, Sb in parts[1:]:
        total = sw + sb
        if total <= 0:
            continue
        delta = mb - mean
        S = S + Sb + np.outer(delta, delta) * (sw * sb / total)
        mean = mean + delta * (sb / total)
        sw = total
    return sw, mean, S


def _merge_raw(parts):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    return (sum(p[0] for p in parts), parts[0][1],
            sum((p[2] for p in parts[1:]), parts[0][2].copy()))


def moments(blocks, center: bool):
    """(weight sum, mean of [X, y], scatter of [X, y]) in one pass."""
    out = blocks.map_reduce(_moments_kernel, center,
                            combine=_merge_moments if center else _merge_raw)
    if out is None and not blocks.has_weight:
        raise ValueError(f"{blocks.spec.estimator}: the training data has no rows")
    if out is None or not out[0] > 0:
        raise ValueError(ALL_ZERO_WEIGHTS.format(name=blocks.spec.estimator))
    return out


class _LeastSquaresBase(LinearRegressorMixin, DaskEstimatorMixin, RegressorMixin,
                        BaseEstimator):
    _block_spec = BlockSpec(y_numeric=True, accept_sparse=True)

    def _solve(self, A, b):
        raise NotImplementedError

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit from one pass over the data.

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame, shape (n_samples, n_features)
        y : array-like, dask array/Series or column name, shape (n_samples,)
        sample_weight : array-like, dask array/Series or column name, optional

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import LinearRegression
        >>> X = np.array([[1.0], [2.0], [3.0]]); y = 2 * X[:, 0] + 1
        >>> LinearRegression().fit(X, y).coef_.round(6)
        array([2.])
        """
        if (is_sparse(X) or is_sparse_dask(X)) and X.shape[1] > SPARSE_MAX_FEATURES:
            raise ValueError(
                f"{type(self).__name__}: sparse X with {X.shape[1]} columns; the normal "
                f"equations need a dense {X.shape[1]} x {X.shape[1]} matrix (up to "
                f"{SPARSE_MAX_FEATURES} columns are accepted). Use SGDRegressor, which trains "
                "on sparse X at any width, or reduce the columns first (e.g. TruncatedSVD).")
        blocks = self._fit_blocks(X, y, sample_weight)
        d = blocks.n_features
        sw, mean, S = moments(blocks, bool(self.fit_intercept))
        A, b = S[:d, :d], S[:d, d]
        coef = self._solve(A, b)
        self.coef_ = coef
        self.intercept_ = float(mean[d] - mean[:d] @ coef) if self.fit_intercept else 0.0
        return self


class LinearRegression(_LeastSquaresBase):
    """Ordinary least squares, exact, from one pass (least-norm when X is rank-deficient).

    Parameters
    ----------
    fit_intercept : bool, default True

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    rank_ : int
        Rank of the centred (weighted) X.
    singular_ : ndarray of shape (n_features,)
        Singular values of the centred (weighted) X.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.linear_model import LinearRegression
    >>> X = np.array([[1.0, 1.0], [1.0, 2.0], [2.0, 2.0], [2.0, 3.0]])
    >>> y = X @ np.array([1.0, 2.0]) + 3.0
    >>> reg = LinearRegression().fit(X, y)
    >>> reg.coef_.round(12), round(reg.intercept_, 12)
    (array([1., 2.]), 3.0)
    """

    _parameter_constraints = {"fit_intercept": ["boolean"]}

    def __init__(self, *, fit_intercept=True):
        self.fit_intercept = fit_intercept

    def _solve(self, A, b):
        lam, V = np.linalg.eigh(A)
        lam_max = max(float(lam.max()), 0.0) if lam.size else 0.0
        keep = lam > max(A.shape[0], 1) * np.finfo(float).eps * lam_max * 10
        self.rank_ = int(keep.sum())
        self.singular_ = np.sqrt(np.clip(lam[::-1], 0.0, None))
        return V[:, keep] @ ((V[:, keep].T @ b) / lam[keep])


class Ridge(_LeastSquaresBase):
    """Ridge regression ``‖y − Xw − b‖² + alpha ‖w‖²``, exact, from one pass.

    Parameters
    ----------
    alpha : float, default 1.0
    fit_intercept : bool, default True
        The intercept is not penalised.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float

    Examples
    --------
    >>> import numpy as np
    >>> from dml.linear_model import Ridge
    >>> from sklearn.linear_model import Ridge as SkRidge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 3)); y = X @ [1.0, 2.0, 0.0] + rng.normal(size=50)
    >>> bool(np.allclose(Ridge(alpha=3.0).fit(X, y).coef_, SkRidge(alpha=3.0).fit(X, y).coef_))
    True
    """

    _parameter_constraints = {"alpha": [Interval(Real, 0, None, closed="left")],
                              "fit_intercept": ["boolean"]}

    def __init__(self, alpha=1.0, *, fit_intercept=True):
        self.alpha = alpha
        self.fit_intercept = fit_intercept

    def _solve(self, A, b):
        if self.alpha == 0:
            return LinearRegression._solve(self, A, b)
        M = A + self.alpha * np.eye(A.shape[0])
        try:
            return scipy.linalg.cho_solve(scipy.linalg.cho_factor(M), b)
        except np.linalg.LinAlgError:
            return np.linalg.lstsq(M, b, rcond=None)[0]
