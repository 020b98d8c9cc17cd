"""Gaussian mixture models fitted by distributed EM: one pass over the blocks per EM step.

Each EM iteration maps :func:`~dml.mixture._gmm_kernels.em_block` over the row blocks
(persisted in worker memory when they fit): every block evaluates the responsibilities with the
current parameters and returns the responsibility sums, weighted sums, centred scatter and its
log-likelihood; they are merged in the shared fixed-order tree and the M-step makes the next
parameters (:mod:`dml.mixture._em`: on held blocks many iterations per graph submission, the
M-step made inside the chain). The ``n_init`` runs advance in lockstep: one pass per iteration
serves all of them.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from dml._blocks import BlockSpec, block_rng, compute, seed_from
from dml._param_validation import RANDOM_STATE, Integral, Interval, Real, StrOptions
from dml._typing import Any, ArrayLike, Self
from dml.base import DaskEstimatorMixin, check_is_fitted, fit_context
from dml.mixture import _gmm_kernels as K
from dml.mixture._em import EMDriver, run_chained, run_per_pass
from dml.mixture._em import Run as _Run
from dml.optim.data import hold, should_persist

__all__ = ["GaussianMixture"]

_INITS = ("kmeans", "k-means++", "random", "random_from_data")


class GaussianMixture(DaskEstimatorMixin, DensityMixin, BaseEstimator):
    """Gaussian mixture model fitted by EM, one pass over the row blocks per EM step.

    Every block computes the responsibilities of its rows under the current parameters and
    returns only small sufficient statistics — per component the responsibility sum, the
    weighted sum of the rows and their centred weighted scatter (a d×d matrix for ``full``,
    a diagonal for ``diag``/``spherical``, the block's total scatter for ``tied``) — plus its
    log-likelihood. They are merged in a fixed tree order (so the model depends on the data, its
    partitioning and ``random_state``, never on the number of workers) and the client performs
    the M-step. The densities are evaluated on the log scale through Cholesky factors of the
    precisions, exactly as scikit-learn does: from the same initial parameters the fit equals
    scikit-learn's ``GaussianMixture`` to round-off.

    Parameters
    ----------
    n_components : int, default=1
        Number of mixture components.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        ``"full"``: a covariance matrix per component; ``"tied"``: one matrix shared by all;
        ``"diag"``: a diagonal per component; ``"spherical"``: one variance per component.
    tol : float, default=1e-3
        EM stops when the mean log-likelihood (the lower bound) changes by less than ``tol``.
    reg_covar : float, default=1e-6
        Added to the diagonal of every covariance, so that they stay positive definite.
    max_iter : int, default=100
        Maximum number of EM iterations per run (0: only initialise).
    n_init : int, default=1
        Number of initialisations; the run with the highest final lower bound is kept. The runs
        share every pass over the data.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, default="kmeans"
        How the initial responsibilities are made. ``"kmeans"``: hard assignment to the centres
        of a :class:`dml.cluster.KMeans` fit (k-means|| initialisation, Lloyd iterations);
        ``"k-means++"``: the ``n_components`` rows chosen by dml's exact k-means++ are the
        initial means; ``"random"``: uniform random responsibilities (drawn per global row, so
        they do not depend on the partitioning); ``"random_from_data"``: ``n_components``
        distinct rows drawn uniformly are the initial means. With the last two row-based
        choices the initial covariances are ``reg_covar`` times the identity.
    weights_init : array-like of shape (n_components,), default=None
        Initial weights (otherwise from ``init_params``).
    means_init : array-like of shape (n_components, n_features), default=None
        Initial means.
    precisions_init : array-like, default=None
        Initial precisions (inverse covariances), shaped as ``precisions_``.
    random_state : int, RandomState, Generator or None, default=None
        Seed of the initialisation and of :meth:`sample`.
    warm_start : bool, default=False
        Start the next ``fit`` from this fit's parameters (``n_init`` is then ignored).
    verbose : int, default=0
        Print the change of the lower bound every ``verbose_interval`` iterations.
    verbose_interval : int, default=10
        Iterations between two messages.

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
    means_ : ndarray of shape (n_components, n_features)
    covariances_ : ndarray
        ``(n_components, n_features, n_features)`` for full, ``(n_features, n_features)`` for
        tied, ``(n_components, n_features)`` for diag, ``(n_components,)`` for spherical.
    precisions_ : ndarray
        Inverses of the covariances, shaped like ``covariances_``.
    precisions_cholesky_ : ndarray
        Cholesky factors of the precisions, shaped like ``covariances_``.
    converged_ : bool
        Whether the kept run reached ``tol``.
    n_iter_ : int
        EM iterations of the kept run.
    lower_bound_ : float
        Mean log-likelihood of the training data at the last E-step of the kept run.
    lower_bounds_ : ndarray of shape (n_iter_,)
        The lower bound at every iteration of the kept run; EM never lowers it (up to
        round-off).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.mixture import GaussianMixture
    >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
    >>> gm = GaussianMixture(n_components=2, means_init=[[0.0, 0.0], [9.0, 0.0]],
    ...                      random_state=0).fit(X)
    >>> gm.means_
    array([[ 1.,  2.],
           [10.,  2.]])
    >>> gm.predict(np.array([[0.0, 0.0], [12.0, 3.0]]))
    array([0, 1])
    """

    # Computed in float64 whatever X's dtype: the log densities need the precision.
    _block_spec = BlockSpec(dtype=(np.float64,))

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "covariance_type": [StrOptions(set(K.COVARIANCE_TYPES))],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "reg_covar": [Interval(Real, 0.0, None, closed="left")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init_params": [StrOptions(set(_INITS))],
        "weights_init": ["array-like", None],
        "means_init": ["array-like", None],
        "precisions_init": ["array-like", None],
        "random_state": RANDOM_STATE,
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
        "verbose_interval": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, n_components=1, *, covariance_type="full", tol=1e-3, reg_covar=1e-6,
                 max_iter=100, n_init=1, init_params="kmeans", weights_init=None,
                 means_init=None, precisions_init=None, random_state=None, warm_start=False,
                 verbose=0, verbose_interval=10):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose
        self.verbose_interval = verbose_interval

    # ---- user-given initial parameters ----
    def _initial_arrays(self, d: int):
        """weights_init, means_init, precisions_init checked (None where not given)."""
        name, k, ct = type(self).__name__, self.n_components, self.covariance_type

        def array(value, what, shape):
            a = np.asarray(value)
            if a.dtype.kind not in "iuf":
                raise TypeError(f"{name}: {what} must be numeric, got dtype {a.dtype}")
            a = a.astype(np.float64)
            if a.shape != shape:
                raise ValueError(f"{name}: The parameter '{what}' should have the shape of "
                                 f"{shape}, but got {a.shape}")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{name}: {what} contains NaN or infinity")
            return a

        weights = means = precisions = None
        if self.weights_init is not None:
            weights = array(self.weights_init, "weights", (k,))
            if np.any(weights < 0) or np.any(weights > 1):
                raise ValueError(f"{name}: The parameter 'weights' should be in the range "
                                 f"[0, 1], but got max value {weights.max():.5f}, min value "
                                 f"{weights.min():.5f}")
            if not np.allclose(abs(1.0 - weights.sum()), 0.0, atol=1e-8):
                raise ValueError(f"{name}: The parameter 'weights' should be normalized, but "
                                 f"got sum(weights) = {weights.sum():.5f}")
        if self.means_init is not None:
            means = array(self.means_init, "means", (k, d))
        if self.precisions_init is not None:
            shape = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}[ct]
            precisions = array(self.precisions_init, f"{ct} precision", shape)
            if ct in ("full", "tied"):
                for p in (precisions if ct == "full" else [precisions]):
                    if not (np.allclose(p, p.T) and np.all(np.linalg.eigvalsh(p) > 0.0)):
                        raise ValueError(f"{name}: '{ct} precision' should be symmetric, "
                                         "positive-definite")
            elif np.any(precisions <= 0.0):
                raise ValueError(f"{name}: '{ct} precision' should be positive")
        return weights, means, precisions

    # ---- fit ----
    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Estimate the mixture's parameters with EM.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : None or str, default=None
            Ignored; a column name of X's dataframe is left out of the features.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.mixture import GaussianMixture
        >>> X = np.array([[0.0], [0.2], [0.1], [5.0], [5.2], [5.1]])
        >>> gm = GaussianMixture(2, means_init=[[0.0], [5.0]]).fit(X)
        >>> gm.weights_.round(3)
        array([0.5, 0.5])
        """
        blocks = self._fit_blocks(X, y if isinstance(y, str) else None, None, require_y=False)
        name = type(self).__name__
        n, d = blocks.n_samples, blocks.n_features
        if n < 2:
            raise ValueError(f"{name}: Found array with {n} sample(s) while a minimum of 2 is "
                             "required; pass at least 2 rows of training data.")
        if n < self.n_components:
            raise ValueError(f"{name}: Expected n_samples >= n_components but got "
                             f"n_components = {self.n_components}, n_samples = {n}; ask for "
                             "fewer components")
        given = self._initial_arrays(d)
        held = should_persist(blocks, "auto")
        blocks = hold(blocks, held)
        do_init = not (self.warm_start and hasattr(self, "converged_"))
        if do_init:
            runs = self._initial_runs(blocks, self.n_init, seed_from(self.random_state), given)
        else:
            runs = [_Run(self.weights_, self.means_, self.covariances_,
                         self.precisions_cholesky_, self.lower_bound_)]
        self._em(blocks, runs, n, held)
        best = None
        if self.max_iter == 0:
            best = runs[-1]
        else:
            for r in runs:  # scikit-learn's rule: the highest final lower bound, ties the first
                if best is None or r.lower_bound > best.lower_bound:
                    best = r
        self.converged_ = bool(best.converged) if self.max_iter > 0 else False
        if not self.converged_ and self.max_iter > 0:
            warnings.warn("Best performing initialization did not converge. Try different init "
                          "parameters, or increase max_iter, tol, or check for degenerate data.",
                          ConvergenceWarning, stacklevel=3)
        ct = self.covariance_type
        self.weights_, self.means_ = best.weights, best.means
        self.precisions_cholesky_ = best.prec_chol
        self.precisions_ = K.precisions_of(best.prec_chol, ct)
        self.covariances_ = (best.covariances if best.covariances is not None
                             else K.covariances_from_precisions(self.precisions_, ct))
        self.n_iter_ = best.n_iter
        self.lower_bound_ = float(best.lower_bound) if self.max_iter > 0 else -np.inf
        self.lower_bounds_ = np.asarray(best.history, dtype=np.float64)
        return self

    def _em(self, blocks, runs: list[_Run], n: int, held: bool) -> None:
        """Advance all runs to convergence or ``max_iter``: one pass per iteration, chained
        on the workers when the blocks are held there (:mod:`dml.mixture._em`)."""
        driver = EMDriver(runs, self.covariance_type, self.reg_covar, self.tol, n,
                          self.max_iter)
        driver = (run_chained if held else run_per_pass)(blocks, driver, self._report)
        # The chained driver comes back from the cluster: its runs replace the client's.
        runs[:] = driver.runs

    def _report(self, driver: EMDriver) -> None:
        if self.verbose:
            for it, change in driver.changes:
                if it % self.verbose_interval == 0:
                    print(f"  Iteration {it}\t lower bound change {change:.5f}")
        driver.changes = []

    # ---- initialisation ----
    def _initial_runs(self, blocks, n_init: int, seed: int, given) -> list[_Run]:
        weights_init, means_init, precisions_init = given
        ct, n = self.covariance_type, blocks.n_samples
        if weights_init is not None and means_init is not None and precisions_init is not None:
            # Nothing to estimate: every run starts from the given parameters.
            chol = K.precision_cholesky_from_precisions(precisions_init, ct)
            return [_Run(weights_init.copy(), means_init.copy(), None, chol.copy())
                    for _ in range(n_init)]
        seeds = [int(block_rng(seed, "gmm-init", i).integers(0, 2**63)) for i in range(n_init)]
        estimates = self._initial_estimates(blocks, seeds)
        runs = []
        for nk, means, cov in estimates:
            weights = nk / n if weights_init is None else weights_init.copy()
            means = means if means_init is None else means_init.copy()
            if precisions_init is None:
                chol = K.precision_cholesky(cov, ct)
            else:
                cov = None
                chol = K.precision_cholesky_from_precisions(precisions_init, ct)
            runs.append(_Run(weights, means, cov, chol))
        return runs

    def _initial_estimates(self, blocks, seeds: list[int]) -> list[tuple]:
        """(nk, means, covariances) of every run from its initial responsibilities."""
        ct, k, method = self.covariance_type, self.n_components, self.init_params
        offsets = np.concatenate([[0], np.cumsum(blocks.lengths)]).astype(np.int64)
        if method in ("k-means++", "random_from_data"):
            # One-hot responsibilities on k rows: the rows are the means, no spread.
            rows = (self._kmeanspp_rows(blocks, seeds) if method == "k-means++"
                    else self._random_rows(blocks, seeds, offsets))
            return [self._estimates_from_rows(r) for r in rows]
        if method == "kmeans":
            specs = [("centres", c) for c in self._kmeans_centres(blocks, seeds)]
        else:
            specs = [("random", s) for s in seeds]
        stats = blocks.map_reduce(K.init_block, specs, offsets, k, ct, combine=K.combine_stats,
                                  with_index=True)
        return [K.m_step(s, self.reg_covar, ct) for s in stats]

    def _estimates_from_rows(self, rows: np.ndarray):
        """scikit-learn's estimate for responsibilities that are one on one row per component:
        the rows are the means and the covariances are ``reg_covar`` alone."""
        ct, k, d = self.covariance_type, self.n_components, rows.shape[1]
        nk = np.ones(k) + 10 * np.finfo(np.float64).eps
        shape = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}[ct]
        cov = np.zeros(shape)
        if ct in ("full", "tied"):
            cov[..., np.arange(d), np.arange(d)] = self.reg_covar
        else:
            cov += self.reg_covar
        return nk, rows.astype(np.float64) / nk[:, None], cov

    def _kmeans_centres(self, blocks, seeds):
        from dml.cluster._kmeans import Run, init_centres, init_graph, lloyd
        from dml.cluster._prepared import prepare

        data = prepare(blocks, type(self).__name__)
        k = self.n_components
        results = compute(*[init_graph(data, "k-means||", k, s) for s in seeds])
        runs = [Run(data, init_centres("k-means||", res, k, s, data), 300, 1e-4 * data.variance)
                for res, s in zip(results, seeds)]
        lloyd(runs)
        return [r.centres.astype(np.float64) + data.mean for r in runs]

    def _kmeanspp_rows(self, blocks, seeds):
        from dml.cluster._kmeans import init_centres, init_graph
        from dml.cluster._prepared import prepare

        data = prepare(blocks, type(self).__name__)
        k = self.n_components
        results = compute(*[init_graph(data, "k-means++", k, s) for s in seeds])
        return [init_centres("k-means++", res, k, s, data).astype(np.float64) + data.mean
                for res, s in zip(results, seeds)]

    def _random_rows(self, blocks, seeds, offsets):
        n = int(offsets[-1])
        picks = [block_rng(s, "gmm-rows").choice(n, size=self.n_components, replace=False)
                 for s in seeds]
        rows = blocks.rows_at(np.concatenate(picks))
        return [rows[i * self.n_components:(i + 1) * self.n_components]
                for i in range(len(seeds))]

    # ---- inference ----
    def _params(self):
        check_is_fitted(self, "precisions_cholesky_")
        return (self.covariance_type, self.weights_, self.means_, self.precisions_cholesky_)

    def score_samples(self, X: ArrayLike) -> Any:
        """Log-likelihood of each row under the model.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        log_prob : ndarray or dask.array.Array of shape (n_samples,)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.mixture import GaussianMixture
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> gm = GaussianMixture(1).fit(X)
        >>> gm.score_samples(np.array([[1.5]])).round(4)
        array([-1.0305])
        """
        return self._blockwise(X, _score_samples_kernel, self._params(), dtype=np.float64)

    def predict(self, X: ArrayLike) -> Any:
        """The most probable component of each row.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray or dask.array.Array of shape (n_samples,)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.mixture import GaussianMixture
        >>> X = np.array([[0.0], [0.2], [0.1], [5.0], [5.2], [5.1]])
        >>> GaussianMixture(2, means_init=[[0.0], [5.0]]).fit(X).predict(np.array([[4.0]]))
        array([1])
        """
        return self._blockwise(X, _predict_kernel, self._params(), dtype=np.int64)

    def fit_predict(self, X: ArrayLike, y: ArrayLike | None = None) -> Any:
        """Fit, then return the most probable component of each training row.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None or str, default=None
            Ignored; a column name of X's dataframe is left out of the features.

        Returns
        -------
        labels : ndarray or dask.array.Array of shape (n_samples,)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.mixture import GaussianMixture
        >>> X = np.array([[0.0], [0.2], [0.1], [5.0], [5.2], [5.1]])
        >>> GaussianMixture(2, means_init=[[0.0], [5.0]]).fit_predict(X)
        array([0, 0, 0, 1, 1, 1])
        """
        self.fit(X, y)
        if isinstance(y, str):
            X = X.drop(columns=[y])
        return self.predict(X)

    def predict_proba(self, X: ArrayLike) -> Any:
        """Posterior probability of each component for each row.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        resp : ndarray or dask.array.Array of shape (n_samples, n_components)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.mixture import GaussianMixture
        >>> X = np.array([[0.0], [0.2], [0.1], [5.0], [5.2], [5.1]])
        >>> gm = GaussianMixture(2, means_init=[[0.0], [5.0]]).fit(X)
        >>> gm.predict_proba(np.array([[0.1]])).round(3)
        array([[1., 0.]])
        """
        return self._blockwise(X, _proba_kernel, self._params(), dtype=np.float64,
                               tail_shape=(self.n_components,))

    def _loglik(self, X):
        """(Σ log p(x), n) over X: one reduction."""
        params = self._params()
        blocks = self._fit_blocks(X, None, None, reset=False, require_y=False)
        total, n = blocks.map_reduce(K.score_block, params)
        return float(total), int(n)

    def score(self, X: ArrayLike, y: ArrayLike | None = None) -> float:
        """Mean log-likelihood of the rows of X.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> from dml.mixture import GaussianMixture
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> round(GaussianMixture(1).fit(X).score(X), 4)
        -1.5305
        """
        total, n = self._loglik(X)
        return total / n

    def _n_parameters(self) -> int:
        k, d = self.means_.shape
        cov = {"full": k * d * (d + 1) / 2.0, "diag": k * d, "tied": d * (d + 1) / 2.0,
               "spherical": k}[self.covariance_type]
        return int(cov + d * k + k - 1)

    def bic(self, X: ArrayLike) -> float:
        """Bayesian information criterion of the model on X (lower is better).

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> from dml.mixture import GaussianMixture
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> round(GaussianMixture(1).fit(X).bic(X), 3)
        15.017
        """
        total, n = self._loglik(X)
        return -2 * total + self._n_parameters() * math.log(n)

    def aic(self, X: ArrayLike) -> float:
        """Akaike information criterion of the model on X (lower is better).

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> from dml.mixture import GaussianMixture
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> round(GaussianMixture(1).fit(X).aic(X), 3)
        16.244
        """
        total, _ = self._loglik(X)
        return -2 * total + 2 * self._n_parameters()

    def sample(self, n_samples: Any = 1) -> Any:
        """Draw rows from the fitted mixture (on the client, as scikit-learn does).

        Parameters
        ----------
        n_samples : int, default=1

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        y : ndarray of shape (n_samples,)
            The component of each row.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.mixture import GaussianMixture
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> Xs, ys = GaussianMixture(1, random_state=0).fit(X).sample(3)
        >>> Xs.shape, ys.tolist()
        ((3, 1), [0, 0, 0])
        """
        check_is_fitted(self, "means_")
        if not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
            raise ValueError(f"Invalid value for 'n_samples': {n_samples!r}. The sampling "
                             "requires at least one sample.")
        d = self.means_.shape[1]
        rng = check_random_state(self.random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        ct = self.covariance_type
        if ct == "full":
            X = np.vstack([rng.multivariate_normal(m, c, int(s))
                           for m, c, s in zip(self.means_, self.covariances_, counts)])
        elif ct == "tied":
            X = np.vstack([rng.multivariate_normal(m, self.covariances_, int(s))
                           for m, s in zip(self.means_, counts)])
        else:
            X = np.vstack([m + rng.standard_normal(size=(s, d)) * np.sqrt(c)
                           for m, c, s in zip(self.means_, self.covariances_, counts)])
        y = np.concatenate([np.full(int(s), j, dtype=np.int64) for j, s in enumerate(counts)])
        return X, y


def _score_samples_kernel(xb, params):
    return K.log_prob_resp(xb, params)[0]


def _predict_kernel(xb, params):
    covariance_type, weights, means, prec_chol = params
    weighted = K.log_gaussian_prob(xb, means, prec_chol, covariance_type) + np.log(weights)
    return weighted.argmax(axis=1).astype(np.int64)


def _proba_kernel(xb, params):
    return np.exp(K.log_prob_resp(xb, params)[1])
