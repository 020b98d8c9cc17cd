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

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from dml._blocks import BlockSpec
from dml._param_validation import Interval, Real, StrOptions
from dml._typing import ArrayLike, Self
from dml.base import DaskEstimatorMixin, fit_context
from dml.linear_model._base import LinearRegressorMixin, SGDMixin
from dml.linear_model._least_squares import moments
from dml.linear_model._problem import LinearProblem
from dml.optim.losses import Squared
from dml.optim.params import Param, table

__all__ = ["ElasticNet", "Lasso", "enet_coordinate_descent", "enet_dual_gap"]


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


def enet_dual_gap(A, b, yy, w, l1, l2) -> float:
    """The duality gap of ``½ wᵀAw − bᵀw + ½ yy + l1 ‖w‖₁ + l2/2 ‖w‖²`` at ``w``.

    ``A``, ``b``, ``yy``: XᵀX, Xᵀy and yᵀy of the (centred, weighted) data divided by the
    weight sum, so the gap is scikit-learn's ``dual_gap_`` (which it divides by n_samples):
    its formulation A for l1 > 0, B (ridge) for l1 = 0, and the squared gradient norm
    ‖Xᵀr‖² for least squares. It bounds the primal objective's distance to its optimum.
    """
    Aw = A @ w
    bw = float(b @ w)
    r_norm2 = yy + float(w @ Aw) - 2.0 * bw  # ‖y − Xw‖²
    ry = yy - bw  # (y − Xw)ᵀy
    if l1 == 0:
        xtr = b - Aw
        norm2 = float(xtr @ xtr)
        if l2 == 0:
            return norm2
        return r_norm2 + 0.5 * l2 * float(w @ w) - ry + norm2 / (2.0 * l2)
    xta = b - Aw - l2 * w
    dual_norm = float(np.max(np.abs(xta))) if len(xta) else 0.0
    if dual_norm > l1:
        const = l1 / dual_norm
        gap = 0.5 * r_norm2 * (1.0 + const * const)
    else:
        const = 1.0
        gap = r_norm2
    return gap + l1 * float(np.abs(w).sum()) - const * ry + 0.5 * l2 * (1 + const * const) * \
        float(w @ w)


_ALPHA = Param(1.0, [Interval(Real, 0, None, closed="left")],
               "float\nPenalty strength.", positional=True)
_L1_RATIO = Param(0.5, [Interval(Real, 0, 1, closed="both")],
                  "float\nElastic-net mixing ρ (penalty ρ‖w‖₁ + (1 − ρ)/2 ‖w‖²).")
_OWN = dict(
    alpha=_ALPHA,
    fit_intercept=Param(True, ["boolean"], "bool\nThe intercept is not penalised."),
    max_iter={"doc": "int\nCoordinate-descent sweeps (``cd``) or epochs (``sgd``)."},
    tol={"default": 1e-4,
         "doc": "float\nCoordinate descent: stop when a sweep's largest coefficient change is "
                "at most ``tol`` times the largest coefficient. SGD: as "
                ":class:`~dml.linear_model.SGDRegressor`."},
    warm_start={"doc": "bool\nStart from the previous fit's coefficients."},
    solver=Param("cd", [StrOptions({"cd", "sgd"})],
                 '{"cd", "sgd"}\nSee the module docstring. Besides ``max_iter``, ``tol`` and '
                 '``warm_start`` the parameters below are used by ``solver="sgd"`` only.'),
    random_state={}, learning_rate={"default": "invscaling"}, power_t={"default": 0.25})


class _ElasticNetBase(SGDMixin, LinearRegressorMixin, DaskEstimatorMixin, RegressorMixin,
                      BaseEstimator):
    _block_spec = BlockSpec(y_numeric=True)

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the model (see the module docstring for the solvers).

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
        >>> from dml.linear_model import Lasso
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = 2 * X[:, 0]
        >>> Lasso(alpha=0.01).fit(X, y).coef_.round(3)
        array([1.992])
        """
        blocks = self._fit_blocks(X, y, sample_weight)
        d = blocks.n_features
        if self.solver == "cd":
            sw, mean, S = moments(blocks, bool(self.fit_intercept))
            # The objective divided by Σw: ½ wᵀ(A/Σw)w − (b/Σw)ᵀw + penalties.
            A, b = S[:d, :d] / sw, S[:d, d] / sw
            w0 = self.coef_ if (self.warm_start and hasattr(self, "coef_")
                                and np.shape(self.coef_) == (d,)) else None
            l1, l2 = self.alpha * self.l1_ratio, self.alpha * (1 - self.l1_ratio)
            coef, n_iter = enet_coordinate_descent(A, b, l1, l2, max_iter=self.max_iter,
                                                   tol=self.tol, w0=w0)
            self.coef_ = coef
            self.intercept_ = float(mean[d] - mean[:d] @ coef) if self.fit_intercept else 0.0
            self.n_iter_ = n_iter
            self.dual_gap_ = enet_dual_gap(A, b, S[d, d] / sw, coef, l1, l2)
            return self
        problem = LinearProblem(d, Squared(), task="regression",
                                fit_intercept=self.fit_intercept, estimator=type(self).__name__)
        overrides = {"penalty": "elasticnet", "alpha": self.alpha, "l1_ratio": self.l1_ratio}
        params = self._run_sgd(blocks, problem, problem.loss, overrides=overrides)
        W, bias = problem.unpack(params)
        self.coef_ = np.array(W[0])
        self.intercept_ = float(bias[0]) if self.fit_intercept else 0.0
        self.dual_gap_ = None
        return self


class ElasticNet(_ElasticNetBase):
    """Linear regression with a combined l1 and l2 penalty (scikit-learn's parametrisation).

    Parameters
    ----------
    {SGD_PARAMETERS}

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The coefficients.
    intercept_ : float
        The (unpenalised) intercept.
    n_iter_ : int
        Coordinate-descent sweeps or SGD epochs run.
    dual_gap_ : float or None
        ``solver="cd"``: the duality gap of the solution (scikit-learn's, for the objective
        divided by the weight sum), an upper bound on its objective's distance to the optimum.
        None with ``solver="sgd"``.

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
    >>> bool(abs(ours.dual_gap_) < 1e-10)
    True
    """

    _params = table("*", exclude=("penalty",), **_OWN, l1_ratio=_L1_RATIO)


class Lasso(_ElasticNetBase):
    """Linear regression with an l1 penalty: :class:`ElasticNet` with ``l1_ratio=1``.

    Parameters
    ----------
    {SGD_PARAMETERS}

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The coefficients.
    intercept_ : float
        The (unpenalised) intercept.
    n_iter_ : int
        Coordinate-descent sweeps or SGD epochs run.
    dual_gap_ : float or None
        As :class:`ElasticNet`'s.

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
    _params = table("*", exclude=("penalty", "l1_ratio"), **_OWN)
