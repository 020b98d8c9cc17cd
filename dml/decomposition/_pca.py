"""PCA over row blocks: exact from one reduction (covariance or TSQR), or randomized."""
from __future__ import annotations

import warnings
from numbers import Integral

import numpy as np
import scipy.linalg

from dml._blocks import compute, seed_from
from dml._param_validation import RANDOM_STATE, Interval, RealNotInt, StrOptions
from dml.base import check_is_fitted, fit_context
from dml.decomposition._base import (LikelihoodMixin, ProjectionMixin, _transform_kernel,
                                     randomized_eigs)
from dml.decomposition._pca_kernels import (merge_qr, merge_scatter, qr_kernel, scatter_kernel,
                                            svd_flip_v)
from dml.preprocessing._base import TransformPlan, _float_out_dtype

__all__ = ["PCA"]


def _too_few_rows(name, n):
    return ValueError(f"{name}: n_samples={n}, but at least 2 rows are needed (variances divide "
                      "by n_samples - 1); pass more rows.")


def _infer_dimension(spectrum, n_samples):
    """Minka's MLE of the dimension (scikit-learn's ``_infer_dimension``)."""
    from sklearn.decomposition._pca import _infer_dimension as infer

    return int(infer(spectrum, n_samples))


def _float_dtype(blocks_dtype):
    return np.float32 if blocks_dtype == np.float32 else np.float64


class PCA(LikelihoodMixin, ProjectionMixin):
    """Principal component analysis over the row blocks of a (Dask) array or dataframe.

    The data are centred (not scaled) and projected on the directions of largest variance. The
    exact solvers read the data once: every block returns its row count, mean and either its
    centred scatter matrix ``Xc.T @ Xc`` (``"covariance_eigh"``) or the triangular factor of a
    QR decomposition of its centred rows (``"tsqr"``); the blocks' results are merged in a fixed
    tree, with the between-block correction of the means, and the small d×d problem is solved on
    the client. The result equals scikit-learn's full-SVD PCA to round-off, with its sign
    convention (the largest entry of each component is positive). ``docs/decomposition.md``
    explains the maths.

    Parameters
    ----------
    n_components : int, float in (0, 1), "mle" or None, default=None
        Components to keep: a number; the smallest number whose explained variance exceeds the
        fraction; Minka's MLE (exact solvers, ``n_samples >= n_features``); or all
        ``min(n_samples, n_features)``.
    copy : bool, default=True
        Accepted for compatibility; the input is never modified.
    whiten : bool, default=False
        Scale the projections to unit variance.
    svd_solver : {"auto", "covariance_eigh", "tsqr", "full", "randomized"}, default="auto"
        ``"covariance_eigh"``: eigen-decomposition of the d×d covariance (one pass, fastest for
        d up to a few thousand). ``"tsqr"`` (``"full"`` is the same): SVD of the merged R
        factor, one pass; accurate also when small singular values matter (it never squares
        the data). ``"randomized"``: subspace iteration with ``iterated_power`` passes plus one
        (Halko et al.), for large d and few components. ``"auto"`` follows scikit-learn's
        rule: ``"covariance_eigh"`` when ``n_features <= 1000`` and ``n_samples >= 10 *
        n_features`` (Dask input of unknown length counts as tall), else ``"randomized"`` for
        an int ``n_components`` below 80% of ``min(n_samples, n_features)`` on data with more
        than 500 rows or columns, else ``"tsqr"``.
    iterated_power : int or "auto", default="auto"
        Power passes of the randomized solver; "auto": 7 when ``n_components`` is below 10% of
        ``min(n_samples, n_features)``, else 4 (scikit-learn's rule).
    n_oversamples : int, default=10
        Extra basis vectors of the randomized solver.
    random_state : int, RandomState, Generator or None, default=None
        Seed of the randomized solver's test matrix (independent of the partitioning).

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, n_features)
    explained_variance_ : ndarray of shape (n_components_,)
        Variance along each component: ``singular_values_**2 / (n_samples - 1)``, the
        eigenvalues of the sample covariance matrix.
    explained_variance_ratio_ : ndarray of shape (n_components_,)
    singular_values_ : ndarray of shape (n_components_,)
        Singular values of the centred data matrix.
    mean_ : ndarray of shape (n_features,)
    n_components_ : int
    n_samples_ : int
    noise_variance_ : float
        Mean of the variances not kept (probabilistic PCA's noise level).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.decomposition import PCA
    >>> X = np.array([[-1, -1], [-2, -1], [-3, -2], [1, 1], [2, 1], [3, 2]], dtype=float)
    >>> pca = PCA(n_components=2).fit(X)
    >>> pca.explained_variance_ratio_.round(4)
    array([0.9924, 0.0076])
    >>> pca.singular_values_.round(4)
    array([6.3006, 0.5498])
    """

    _parameter_constraints = {
        "n_components": [Interval(Integral, 0, None, closed="left"),
                         Interval(RealNotInt, 0, 1, closed="neither"), StrOptions({"mle"}),
                         None],
        "copy": ["boolean"],
        "whiten": ["boolean"],
        "svd_solver": [StrOptions({"auto", "covariance_eigh", "tsqr", "full", "randomized"})],
        "iterated_power": [StrOptions({"auto"}), Interval(Integral, 0, None, closed="left")],
        "n_oversamples": [Interval(Integral, 1, None, closed="left")],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, n_components=None, *, copy=True, whiten=False, svd_solver="auto",
                 iterated_power="auto", n_oversamples=10, random_state=None):
        self.n_components = n_components
        self.copy = copy
        self.whiten = whiten
        self.svd_solver = svd_solver
        self.iterated_power = iterated_power
        self.n_oversamples = n_oversamples
        self.random_state = random_state

    # ---- fit ----
    @fit_context
    def fit(self, X, y=None):
        """Fit the model on X (one pass over its blocks for the exact solvers).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : None or str
            Ignored (a column name of X's dataframe is left out of the features).

        Returns
        -------
        self : PCA

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import PCA
        >>> PCA(1).fit(np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])).components_.round(4)
        array([[0.7071, 0.7071]])
        """
        blocks = self._fit_blocks(X, y if isinstance(y, str) else None, None, require_y=False)
        self._fit_dtype = _float_dtype(self._out_dtype(X))
        solver = self._choose_solver(blocks)
        if solver != "randomized":
            (result,) = compute(self._fit_delayed(blocks, solver=solver))
            return self._set_fitted(result)
        self._fit_svd_solver = solver
        self._fit_randomized(blocks, blocks.n_features)
        return self._cast()

    # ---- the one-pass protocol (dml.preprocessing): a ColumnTransformer fits PCA in its pass ----
    _fit_overrides: dict = {}

    def _fit_delayed(self, blocks, reset: bool = True, solver: str | None = None):
        self._record_layout(blocks, reset)
        if solver is None:
            # Inside a column transformer's single pass only the exact solvers can run.
            solver = self._choose_solver(blocks, exact=True)
            if solver == "randomized":
                raise ValueError(f"{type(self).__name__}: svd_solver='randomized' needs several "
                                 "passes over the data and cannot run inside a column "
                                 "transformer's single pass; use an exact svd_solver "
                                 "('covariance_eigh' or 'tsqr') there")
            self._fit_dtype = (np.float64 if blocks.dtypes is None else
                               _float_dtype(_float_out_dtype(list(blocks.dtypes))))
        self._fit_svd_solver = solver
        self._fit_d = blocks.n_features
        if solver == "covariance_eigh":
            return blocks.map_reduce(scatter_kernel, combine=merge_scatter, compute_now=False)
        return blocks.map_reduce(qr_kernel, combine=merge_qr, compute_now=False)

    def _set_fitted(self, result, reset: bool = True):
        d = self._fit_d
        if self._fit_svd_solver == "covariance_eigh":
            n, mean, S = result
            self._check_rows(n)
            r = min(n, d)
            k = self.n_components
            total = None
            if isinstance(k, Integral) and 0 <= k < r and 2 * k < d:
                # Only the kept eigenpairs (LAPACK's MRRR on a subset: about twice as fast at
                # d = 1000, k = 10); the total variance is the trace.
                eigvals, eigvecs = scipy.linalg.eigh(S, subset_by_index=[d - max(k, 1), d - 1],
                                                     driver="evr", check_finite=False)
                total = max(float(np.trace(S)), 0.0) / (n - 1)
            else:
                eigvals, eigvecs = np.linalg.eigh(S)
            eigvals, Vt = np.maximum(eigvals[::-1], 0.0), eigvecs[:, ::-1].T
            ev = eigvals[:r] / (n - 1)
            s = np.sqrt(ev * (n - 1))
            Vt = Vt[:r]
            if total is not None:
                self._set_full(n, d, mean, s, ev, svd_flip_v(Vt), total=total)
                return self._cast()
        else:
            n, mean, R = result
            self._check_rows(n)
            _, s, Vt = scipy.linalg.svd(R, full_matrices=False, check_finite=False)
            ev = s ** 2 / (n - 1)
        self._set_full(n, d, mean, s, ev, svd_flip_v(Vt))
        return self._cast()

    def _transform_plan(self, dtypes) -> TransformPlan:
        check_is_fitted(self, "components_")
        dtype = _float_out_dtype(dtypes)
        return TransformPlan(_transform_kernel, (self.mean_, self.components_,
                                                 self._whiten_scale()), {}, dtype,
                             self.components_.shape[0])

    def _cast(self):
        """Fitted arrays in the input's float dtype (float32 stays float32, as scikit-learn)."""
        dtype = getattr(self, "_fit_dtype", np.float64)
        for attr in ("components_", "explained_variance_", "explained_variance_ratio_",
                     "singular_values_", "mean_"):
            setattr(self, attr, getattr(self, attr).astype(dtype))
        if dtype == np.float32:
            self.noise_variance_ = np.float32(self.noise_variance_)
        return self

    def fit_transform(self, X, y=None):
        """Fit on X and return its projection (lazy for Dask input).

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        X_new : ndarray or dask.array.Array of shape (n_samples, n_components_)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import PCA
        >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 2.5]])
        >>> PCA(1).fit_transform(X).shape
        (4, 1)
        """
        return self.fit(X, y).transform(X)

    def _check_rows(self, n):
        if n == 0:
            raise ValueError(f"{type(self).__name__}: X has 0 rows (Found array with 0 "
                             "sample(s)); pass at least 2 rows of training data.")
        if n < 2:
            raise _too_few_rows(type(self).__name__, n)

    def _choose_solver(self, blocks, exact: bool = False) -> str:
        d = blocks.n_features
        k = self.n_components
        if self.svd_solver == "full":
            return "tsqr"
        if self.svd_solver != "auto":
            return self.svd_solver
        known = blocks.known_lengths
        if d <= 1000 and (known is None or int(known.sum()) >= 10 * d):
            return "covariance_eigh"
        if exact:
            return "tsqr"
        n = blocks.n_samples
        small = max(n, d) <= 500
        if (not small and isinstance(k, Integral) and not isinstance(k, bool)
                and 1 <= k < 0.8 * min(n, d)):
            return "randomized"
        return "tsqr"

    def _set_full(self, n, d, mean, s, ev, Vt, total=None):
        """Attributes from the spectrum of the exact solvers, as scikit-learn's: the full one,
        or (with ``total``, the total variance) its first ``n_components`` values."""
        name = type(self).__name__
        k = self.n_components
        r = min(n, d)
        if k is None:
            k = r
        elif k == "mle":
            if n < d:
                raise ValueError(f"{name}: n_components='mle' is only supported if n_samples >= "
                                 f"n_features (got n_samples={n}, n_features={d})")
        elif isinstance(k, Integral) and not 0 <= k <= r:
            raise ValueError(f"{name}: n_components={k} must be between 0 and min(n_samples, "
                             f"n_features)={r} with svd_solver={self._fit_svd_solver!r}; "
                             "ask for fewer components")
        partial = total is not None
        if not partial:
            total = ev.sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = ev / total
        if k == "mle":
            k = _infer_dimension(ev, n)
        elif 0 < k < 1.0 and not isinstance(k, Integral):
            k = int(np.searchsorted(np.cumsum(ratio), k, side="right") + 1)
            k = min(k, r)
        if k >= r:
            self.noise_variance_ = 0.0
        elif partial:
            self.noise_variance_ = max(float(total - ev[:k].sum()), 0.0) / (r - k)
        else:
            self.noise_variance_ = float(ev[k:].mean())
        self.n_samples_ = int(n)
        self.n_components_ = int(k)
        self.components_ = np.ascontiguousarray(Vt[:k])
        self.explained_variance_ = ev[:k].copy()
        self.explained_variance_ratio_ = ratio[:k].copy()
        self.singular_values_ = s[:k].copy()
        self.mean_ = mean

    def _fit_randomized(self, blocks, d):
        name = type(self).__name__
        k = self.n_components
        n_known = None if blocks.known_lengths is None else blocks.n_samples
        if isinstance(k, str) or (k is not None and not isinstance(k, Integral)):
            raise ValueError(f"{name}: n_components={k!r} cannot be a string or a fraction with "
                             "svd_solver='randomized'; pass an int or use an exact solver")
        if k is None:
            k = min(n_known, d) if n_known is not None else d
        if not 1 <= k <= min(n_known if n_known is not None else k, d):
            raise ValueError(f"{name}: n_components={k} must be between 1 and min(n_samples, "
                             f"n_features)={min(n_known, d) if n_known is not None else d} with "
                             "svd_solver='randomized'")
        n_iter = self.iterated_power
        if n_iter == "auto":
            n_iter = 7 if k < 0.1 * min(n_known or d, d) else 4
        n, mean, lam, V, stats = randomized_eigs(blocks, k, self.n_oversamples, n_iter,
                                                 seed_from(self.random_state), centre=True)
        self._check_rows(n)
        if k > min(n, d):
            raise ValueError(f"{name}: n_components={k} must be between 1 and min(n_samples, "
                             f"n_features)={min(n, d)} with svd_solver='randomized'")
        s = np.sqrt(lam)
        ev = lam / (n - 1)
        total = stats["ss"] / (n - 1)
        self.n_samples_ = int(n)
        self.components_ = np.ascontiguousarray(svd_flip_v(V.T))
        self.n_components_ = int(k)
        self.explained_variance_ = ev
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            self.explained_variance_ratio_ = ev / total
        self.singular_values_ = s
        r = min(n, d)
        self.noise_variance_ = float((total - ev.sum()) / (r - k)) if k < r else 0.0
        self.mean_ = mean
