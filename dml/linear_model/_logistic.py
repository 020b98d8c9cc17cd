"""Logistic regression: binary and multinomial, exact (Newton / L-BFGS) or SGD-trained.

The objective is scikit-learn's: ``½‖W‖² + C Σᵢ sᵢ log-loss(yᵢ, W xᵢ + b)`` (s: sample weight ×
class weight; intercept not penalised), with the binomial loss for two classes (``coef_`` of
shape (1, d)) and the softmax loss over K ≥ 3 classes (``coef_`` of shape (K, d), all of W
penalised). Solvers:

* ``"newton"``: Newton's method with the exact Hessian, one pass over the data per iteration
  (gradient and Hessian reduced together); typically converges in 5–10 passes. The Hessian has
  (K (d + 1))² entries, so it suits up to a few hundred parameters;
* ``"lbfgs"``: scipy's L-BFGS-B, one pass per function evaluation; for many parameters;
* ``"auto"`` (default): ``"newton"`` up to :data:`NEWTON_MAX_PARAMS` parameters, else
  ``"lbfgs"`` (a two-class ``multi_class="multinomial"`` fit has d + 1: see ``multi_class``);
* ``"sgd"``: the partition-parallel mini-batch engine (:mod:`dml.optim`) for data too large for
  tens of passes, or for an l1 / elastic-net penalty (``l1_ratio > 0``). Its defaults (Adam
  with an adaptive step, batches of up to 256 rows) reach the exact optimum's log-loss to
  within a fraction of a percent.

``tol`` is scikit-learn's: the exact solvers stop when the largest gradient entry of the mean
objective ``J / Σsᵢ`` is below it. ``C=np.inf`` fits without a penalty.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from dml._blocks import BlockSpec
from dml._param_validation import Integral, Interval, Real, StrOptions, invalid_parameter
from dml._typing import Any, ArrayLike, Self
from dml.base import DaskEstimatorMixin, fit_context
from dml.linear_model._base import (LABELS, LinearClassifierMixin, SGDMixin, check_classes,
                                    compute_class_weight, discover_classes, run_exact)
from dml.linear_model._problem import LinearProblem
from dml.optim.data import hold
from dml.optim.losses import Log, Softmax
from dml.optim.params import Param, table
from dml.optim.penalties import Penalty

__all__ = ["LogisticRegression"]

#: "auto" uses Newton's method up to this many parameters (K (d + 1)).
NEWTON_MAX_PARAMS = 200


class LogisticRegression(SGDMixin, LinearClassifierMixin, DaskEstimatorMixin, ClassifierMixin,
                         BaseEstimator):
    """Logistic regression (binomial for two classes, multinomial otherwise).

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularisation strength, as in scikit-learn (``np.inf``: no penalty).
    l1_ratio : float, default=0.0
        Elastic-net mixing; values above 0 need ``solver="sgd"`` (proximal steps).
    tol : float, default=1e-4
        Exact solvers: gradient tolerance. SGD: epoch-objective improvement tolerance.
    fit_intercept : bool, default=True
        The intercept is not penalised.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes ("balanced": n / (K · count), with weighted counts).
    solver : {"auto", "newton", "lbfgs", "sgd"}, default="auto"
        See the module docstring. The parameters from ``batch_size`` on are those of the SGD
        solver (``verbose``, ``warm_start``, ``persist``, ``progress`` and ``callbacks`` apply
        to all solvers). Its defaults: Adam with ``eta0=0.01`` divided by 5 whenever the
        objective stalls (``learning_rate="adaptive"``).
    max_iter : int, default=100
        Iterations (exact solvers) or epochs (SGD).
    multi_class : {"auto", "multinomial"}, default="auto"
        "auto": the binomial loss for two classes, softmax for more. "multinomial": softmax
        also for two classes (``coef_`` then has two rows; the model is the binomial one with
        half the penalty on each row). The exact solvers fit it as that binomial model with
        ``2 C`` and return ``coef_ = [−v/2, v/2]`` (likewise the intercepts): the same optimum
        with half the parameters, so ``"auto"`` picks Newton as for the binomial model.
        scikit-learn ≥ 1.8 has no such option.
    batch_size : int or "auto", default="auto"
        SGD: rows per mini-batch step. "auto": 256 rows, fewer for small blocks so that every
        block takes at least 64 steps per epoch (min 8 rows).
    average : bool, int or "auto", default=False
        SGD: average the iterates (after step ``average`` when an int). "auto": after the
        first epoch's worth of steps (fewer epochs on large data, a little less accurate).

    {SGD_PARAMETERS}

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray
    n_iter_ : ndarray of shape (1,)
    history_ : list of dict
        Per iteration / epoch: objective, seconds, passes (exact solvers), ...

    Examples
    --------
    >>> import numpy as np
    >>> from dml.linear_model import LogisticRegression
    >>> from sklearn.linear_model import LogisticRegression as SkLR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); y = (X @ [1.0, -1.0, 0.5] + rng.normal(size=300) > 0)
    >>> ours = LogisticRegression(C=0.5).fit(X, y)
    >>> ref = SkLR(C=0.5, tol=1e-8).fit(X, y)
    >>> bool(np.allclose(ours.coef_, ref.coef_, atol=1e-5))
    True
    >>> ours.predict_proba(X[:1]).round(3)
    array([[0.285, 0.715]])
    """

    # Sparse X: sparse products for the gradients and the (d + 1)² Hessian (docs/sparse.md).
    _block_spec = BlockSpec(accept_sparse=True)

    _params = table(
        "*", exclude=("penalty", "alpha"),
        C=Param(1.0, [Interval(Real, 0, np.inf, closed="right")], positional=True),
        l1_ratio=Param(0.0, [Interval(Real, 0, 1, closed="both")]),
        tol={"default": 1e-4, "doc": None}, max_iter={"default": 100, "doc": None},
        fit_intercept=Param(True, ["boolean"]),
        class_weight=Param(None, [StrOptions({"balanced"}), dict, None]),
        solver=Param("auto", [StrOptions({"auto", "newton", "lbfgs", "sgd"})]),
        multi_class=Param("auto", [StrOptions({"auto", "multinomial"})]),
        batch_size={"default": "auto", "doc": None,
                    "constraints": [Interval(Integral, 1, None, closed="left"),
                                    StrOptions({"auto"})]},
        learning_rate={"default": "adaptive"}, optimizer={"default": "adam"},
        average={"doc": None, "constraints": ["boolean",
                                              Interval(Integral, 0, None, closed="left"),
                                              StrOptions({"auto"})]})

    @property
    def penalty(self):
        """The penalty that C and l1_ratio describe (for the SGD solver)."""
        if self.C == np.inf:
            return None
        return "elasticnet" if self.l1_ratio > 0 else "l2"

    def _validate_param_relations(self):
        super()._validate_param_relations()
        if self.l1_ratio > 0 and self.solver != "sgd" and self.C != np.inf:
            raise invalid_parameter(self, "l1_ratio", "0 unless solver='sgd' (an l1 part is not "
                                    "differentiable; the SGD solver takes proximal steps)")

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the model.

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame, shape (n_samples, n_features)
        y : array-like, dask array/Series or column name; two or more classes (numbers or
            strings)
        sample_weight : array-like, dask array/Series or column name, optional

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import LogisticRegression
        >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0]]); y = np.array([0, 0, 1, 1])
        >>> LogisticRegression(C=0.5).fit(X, y).coef_.round(3)
        array([[0.715]])
        """
        name = type(self).__name__
        blocks = hold(self._fit_blocks(X, y, sample_weight), self.persist, reduce=LABELS)
        stats = discover_classes(blocks)
        check_classes(stats, name)
        classes = stats.classes
        K = len(classes)
        cw = compute_class_weight(self.class_weight, classes, stats.wsum, name)
        multinomial = K > 2 or self.multi_class == "multinomial"
        # Two-class softmax is over-parameterised: only w₁ − w₀ and b₁ − b₀ enter the loss, and
        # ½(‖w₀‖² + ‖w₁‖²) is smallest at w₁ = −w₀ = v/2, where it is ½‖v‖²/2. Its optimum is
        # therefore the binomial one with 2C, split as ±½. The exact solvers fit that model:
        # half the parameters (so "auto" picks Newton as for the binomial model) and one Gram
        # block instead of three per Hessian, with the same optimum, objective and gradient.
        split = multinomial and K == 2 and self.solver != "sgd"
        softmax = multinomial and not split
        problem = LinearProblem(blocks.n_features, Softmax() if softmax else Log(),
                                task="multinomial" if softmax else "binary",
                                n_outputs=K if softmax else 1,
                                fit_intercept=self.fit_intercept, classes=classes,
                                class_weight=cw, estimator=name)
        init = None
        if self.warm_start and hasattr(self, "coef_"):
            if split and self.coef_.shape == (2, problem.d):
                init = problem.pack(self.coef_[1] - self.coef_[0],
                                    self.intercept_[1] - self.intercept_[0])
            elif self.coef_.shape == (problem.K, problem.d):
                init = problem.pack(self.coef_, self.intercept_)
        self.classes_ = classes
        solver = self.solver
        if solver == "auto":
            solver = "newton" if problem.n_params <= NEWTON_MAX_PARAMS else "lbfgs"
        if solver == "sgd":
            params = self._fit_sgd(blocks, problem, stats, cw, init)
        else:
            # scikit-learn's scaling: the mean over the (class-)weighted sample weights.
            weights = stats.wsum if cw is None else stats.wsum * cw
            normaliser = float(weights.sum())
            C = 2.0 * self.C if split else self.C
            alpha = 0.0 if C == np.inf else 1.0 / (C * normaliser)
            penalty = Penalty("l2" if alpha else "none", alpha, penalised=problem.penalised)
            params, n_iter, history = run_exact(
                self, blocks, problem, penalty, normaliser, solver=solver, tol=self.tol,
                max_iter=self.max_iter, init_params=init, callbacks=self.callbacks or ())
            self.n_iter_ = np.array([n_iter])
            self.history_ = history
        self.solver_ = solver
        self.multinomial_ = multinomial
        W, b = problem.unpack(params)
        if split:  # the two softmax rows of the binomial model (see above)
            W, b = 0.5 * np.vstack([-W, W]), 0.5 * np.concatenate([-b, b])
        self.coef_ = np.array(W, dtype=np.float64)
        self.intercept_ = np.array(b, dtype=np.float64)
        return self

    def _fit_sgd(self, blocks, problem, stats, cw, init):
        largest = int(np.max(blocks.lengths))
        batch_size = self.batch_size
        if batch_size == "auto":
            batch_size = int(min(256, max(8, -(-largest // 64))))
        average = self.average
        if average == "auto":
            # Average the iterates after one epoch's worth of steps on the largest block.
            average = int(-(-largest // batch_size))
        # α = 1 / (C n): the SGD objective is a mean over rows.
        overrides = {"alpha": 0.0 if self.C == np.inf else 1.0 / (self.C * stats.n_samples),
                     "penalty": self.penalty, "average": average, "batch_size": batch_size}
        params = self._run_sgd(blocks, problem, problem.loss, init_params=init,
                               overrides=overrides)
        self.n_iter_ = np.array([self.n_iter_])
        return params

    def _proba_kind(self):
        return "softmax" if self.coef_.shape[0] > 1 else "log"

    def predict_proba(self, X: ArrayLike) -> Any:
        """Class probabilities: logistic for two classes, softmax otherwise.

        Columns in the order of ``classes_``.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        proba : ndarray or dask.array.Array of shape (n_samples, n_classes)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import LogisticRegression
        >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0]]); y = np.array([0, 0, 1, 1])
        >>> clf = LogisticRegression().fit(X, y)
        >>> clf.predict_proba(np.array([[1.5]])).round(3)
        array([[0.181, 0.819]])
        """
        return self._predict_proba(X)

    def predict_log_proba(self, X: ArrayLike) -> Any:
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        log_proba : ndarray or dask.array.Array of shape (n_samples, n_classes)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import LogisticRegression
        >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0]]); y = np.array([0, 0, 1, 1])
        >>> clf = LogisticRegression().fit(X, y)
        >>> clf.predict_log_proba(np.array([[1.5]])).round(3)
        array([[-1.71, -0.2 ]])
        """
        return self._predict_log_proba(X)
