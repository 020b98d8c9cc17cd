"""Lasso and elastic net: exact coordinate descent on reduced moments, or proximal SGD.

Objective (scikit-learn's)::

    1/(2 Σw) Σ wᵢ (yᵢ − xᵢ·w − b)² + alpha ρ ‖w‖₁ + alpha (1 − ρ)/2 ‖w‖²

* ``solver="cd"`` (default): one pass reduces the centred scatter of ``[X, y]`` (as for
  :class:`~dml.linear_model.LinearRegression`); cyclic coordinate descent then runs on the
  d × d Gram matrix on the client, exactly like scikit-learn's ``precompute=True`` path, so the
  coefficients agree with scikit-learn's to its tolerance whatever the partitioning. Cost:
  one pass plus O(d²) per sweep on the client: for d up to a few thousand.
* ``solver="sgd"``: proximal mini-batch SGD through :mod:`dml.optim` (the l1 part is a
  soft-threshold after each step), for very wide data; parameters as
  :class:`~dml.linear_model.SGDRegressor`.
"""
from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from dml._blocks import BlockSpec
from dml.base import DaskEstimatorMixin
from dml.linear_model._base import LinearRegressorMixin, SGDMixin
from dml.linear_model._least_squares import moments
from dml.linear_model._problem import LinearProblem
from dml.optim.losses import Squared

__all__ = ["ElasticNet", "Lasso", "enet_coordinate_descent"]


def enet_coordinate_descent(A, b, l1, l2, *, max_iter=1000, tol=1e-4, w0=None):
    """Minimise ``½ wᵀAw − bᵀw + l1 ‖w‖₁ + l2/2 ‖w‖²`` by cyclic coordinate descent.

    Stops when a sweep's largest coefficient change is at most ``tol`` times the largest
    coefficient (scikit-learn's first convergence test). Returns ``(w, n_sweeps)``.
    """
    d = len(b)
    w = np.zeros(d) if w0 is None else np.array(w0, dtype=np.float64)
    diag = np.diag(A) + l2
    grad = A @ w  # maintained A w
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        w_max = 0.0
        d_max = 0.0
        for j in range(d):
            if diag[j] == 0.0:
                continue
            old = w[j]
            rho = b[j] - (grad[j] - A[j, j] * old)
            new = np.sign(rho) * max(abs(rho) - l1, 0.0) / diag[j]
            if new != old:
                grad += A[:, j] * (new - old)
                w[j] = new
            d_max = max(d_max, abs(new - old))
            w_max = max(w_max, abs(new))
        if w_max == 0.0 or d_max / w_max <= tol:
            break
    return w, n_iter


class _ElasticNetBase(SGDMixin, LinearRegressorMixin, DaskEstimatorMixin, RegressorMixin,
                      BaseEstimator):
    _block_spec = BlockSpec(y_numeric=True)

    def _check(self):
        name = type(self).__name__
        if not (isinstance(self.alpha, numbers.Real) and self.alpha >= 0):
            raise ValueError(f"{name}: alpha must be a non-negative number, got {self.alpha!r}")
        if not (isinstance(self.l1_ratio, numbers.Real) and 0 <= self.l1_ratio <= 1):
            raise ValueError(f"{name}: l1_ratio must be in [0, 1], got {self.l1_ratio!r}")
        if self.solver not in ("cd", "sgd"):
            raise ValueError(f"{name}: solver must be 'cd' or 'sgd', got {self.solver!r}")

    def fit(self, X, y, sample_weight=None):
        """Fit the model (see the module docstring for the solvers).

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame, shape (n_samples, n_features)
        y : array-like, dask array/Series or column name, shape (n_samples,)
        sample_weight : array-like, dask array/Series or column name, optional

        Returns
        -------
        self
        """
        self._check()
        blocks = self._fit_blocks(X, y, sample_weight)
        d = blocks.n_features
        if self.solver == "cd":
            sw, mean, S = moments(blocks, bool(self.fit_intercept))
            # The objective divided by Σw: ½ wᵀ(A/Σw)w − (b/Σw)ᵀw + penalties.
            A, b = S[:d, :d] / sw, S[:d, d] / sw
            w0 = self.coef_ if (self.warm_start and hasattr(self, "coef_")
                                and np.shape(self.coef_) == (d,)) else None
            coef, n_iter = enet_coordinate_descent(
                A, b, self.alpha * self.l1_ratio, self.alpha * (1 - self.l1_ratio),
                max_iter=self.max_iter, tol=self.tol, w0=w0)
            self.coef_ = coef
            self.intercept_ = float(mean[d] - mean[:d] @ coef) if self.fit_intercept else 0.0
            self.n_iter_ = n_iter
            self.dual_gap_ = None
            return self
        problem = LinearProblem(d, Squared(), task="regression",
                                fit_intercept=self.fit_intercept, estimator=type(self).__name__)
        overrides = {"penalty": "elasticnet", "alpha": self.alpha, "l1_ratio": self.l1_ratio}
        params = self._run_sgd(blocks, problem, problem.loss, overrides=overrides)
        W, bias = problem.unpack(params)
        self.coef_ = np.array(W[0])
        self.intercept_ = float(bias[0]) if self.fit_intercept else 0.0
        return self


_SGD_DOC = """batch_size, learning_rate, eta0, power_t, optimizer, momentum, average, local_steps, \
shuffle, early_stopping, validation_fraction, n_iter_no_change, random_state, verbose, \
checkpoint_dir, checkpoint_every, persist, progress, callbacks
        ``solver="sgd"`` only; see :class:`~dml.linear_model.SGDRegressor`."""


class ElasticNet(_ElasticNetBase):
    """Linear regression with a combined l1 and l2 penalty (scikit-learn's parametrisation).

    Parameters
    ----------
    alpha : float, default 1.0
    l1_ratio : float, default 0.5
    fit_intercept : bool, default True
    max_iter : int, default 1000
        Coordinate-descent sweeps (``cd``) or epochs (``sgd``).
    tol : float, default 1e-4
    warm_start : bool, default False
    solver : {"cd", "sgd"}, default "cd"
    """ + _SGD_DOC + """

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_iter_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from dml.linear_model import ElasticNet
    >>> from sklearn.linear_model import ElasticNet as SkEN
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5)); y = X @ [2.0, 0, 0, -1.0, 0] + 0.1 * rng.normal(size=200)
    >>> ours = ElasticNet(alpha=0.1, tol=1e-10).fit(X, y)
    >>> bool(np.allclose(ours.coef_, SkEN(alpha=0.1, tol=1e-10).fit(X, y).coef_, atol=1e-8))
    True
    """

    def __init__(self, alpha=1.0, *, l1_ratio=0.5, fit_intercept=True, max_iter=1000, tol=1e-4,
                 warm_start=False, solver="cd", random_state=None, batch_size=32,
                 learning_rate="invscaling", eta0=0.01, power_t=0.25, optimizer="sgd",
                 momentum=0.9, average=False, local_steps=None, shuffle=True,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=5, verbose=0,
                 checkpoint_dir=None, checkpoint_every=1, persist="auto", progress=None,
                 callbacks=None):
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.solver = solver
        self.random_state = random_state
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.power_t = power_t
        self.optimizer = optimizer
        self.momentum = momentum
        self.average = average
        self.local_steps = local_steps
        self.shuffle = shuffle
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.verbose = verbose
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.persist = persist
        self.progress = progress
        self.callbacks = callbacks


class Lasso(_ElasticNetBase):
    """Linear regression with an l1 penalty: :class:`ElasticNet` with ``l1_ratio=1``.

    Parameters as :class:`ElasticNet` (without ``l1_ratio``).

    Examples
    --------
    >>> import numpy as np
    >>> from dml.linear_model import Lasso
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4)); y = 3 * X[:, 0] + 0.1 * rng.normal(size=200)
    >>> Lasso(alpha=0.1).fit(X, y).coef_.round(2)
    array([2.9, 0. , 0. , 0. ])
    """

    l1_ratio = 1.0

    def __init__(self, alpha=1.0, *, fit_intercept=True, max_iter=1000, tol=1e-4,
                 warm_start=False, solver="cd", random_state=None, batch_size=32,
                 learning_rate="invscaling", eta0=0.01, power_t=0.25, optimizer="sgd",
                 momentum=0.9, average=False, local_steps=None, shuffle=True,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=5, verbose=0,
                 checkpoint_dir=None, checkpoint_every=1, persist="auto", progress=None,
                 callbacks=None):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.solver = solver
        self.random_state = random_state
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.power_t = power_t
        self.optimizer = optimizer
        self.momentum = momentum
        self.average = average
        self.local_steps = local_steps
        self.shuffle = shuffle
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.verbose = verbose
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.persist = persist
        self.progress = progress
        self.callbacks = callbacks
