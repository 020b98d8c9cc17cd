"""Newton's method over reduced gradients and Hessians: exact optima in a few passes.

For models with a few hundred parameters at most (linear models: d + 1 per output), the Hessian
``Σ_blocks Xᵀ D X`` costs one pass like the gradient, and Newton's method converges in about ten
passes where first-order methods need hundreds. Each iteration:

1. the loss, gradient and Hessian at the current point (one pass; reused from the last
   line-search evaluation when the point was accepted);
2. the direction ``d = −H⁻¹ g`` (Cholesky; least squares when H is singular);
3. a line search: once a step has had to be shortened, the pass at the next full step
   ``x + d`` also returns the objective at ``x + d/2, x + d/4, ...`` (cheap: the decision values
   at x and along d are computed once), so an accepted full step costs one pass and a shorter
   one two (the second evaluates the gradient and Hessian at the chosen point);
4. convergence when ``max |∇J| ≤ tol`` (scikit-learn's ``tol`` convention for ``lbfgs``);
   the returned point then takes one more full Newton step from the gradient and Hessian
   already computed there (no pass): inside the region of quadratic convergence this squares
   the remaining error for free.

Piecewise-quadratic losses (squared hinge, Huber, smoothed hinge) use their generalised Hessian;
Newton's method with a line search still converges, in finitely many steps for the squared hinge
(Keerthi & DeCoste 2005).

:func:`newton_epoch_fn` is an ``epoch_fn`` for :func:`dml.optim.training.run_epochs` (one
iteration per "epoch"), so history, progress, callbacks and checkpoints come for free.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from dml.optim.fullbatch import FullBatch
from dml.optim.state import TrainState
from dml.optim.training import EpochResult

__all__ = ["newton_direction", "newton_epoch_fn"]

#: Armijo constant of the backtracking line search.
ARMIJO = 1e-4
MAX_HALVINGS = 40


#: Cholesky pivots whose squared ratio falls below this mark H as singular.
SINGULAR_RCOND = 1e-12


def newton_direction(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``−H⁻¹ g``; the least-norm (pseudo-inverse) solution when H is singular.

    Singular Hessians occur when some parameters are not identifiable, e.g. the intercepts of a
    softmax model (adding a constant to all of them changes nothing). The least-norm direction
    has no component along such a null space, so a fit started at zero keeps their sum at zero,
    as scikit-learn's gradient-based solvers do.
    """
    try:
        c, lower = scipy.linalg.cho_factor(H, check_finite=False)
        pivots = np.abs(np.diag(c))
        if pivots.size and (pivots.min() / pivots.max()) ** 2 > SINGULAR_RCOND:
            d = -scipy.linalg.cho_solve((c, lower), g, check_finite=False)
            if np.all(np.isfinite(d)):
                return d
    except (np.linalg.LinAlgError, ValueError):
        pass
    return -np.linalg.lstsq(H, g, rcond=SINGULAR_RCOND)[0]


#: Shorter steps whose objective is evaluated in the same pass as the full step's (1/2, 1/4, ...).
LINE_STEPS = tuple(0.5 ** k for k in range(1, 9))


def newton_epoch_fn(fb: FullBatch, tol: float):
    """One Newton iteration per call, as an ``epoch_fn``."""
    cache: dict = {"x": None, "last_step": 1.0}

    def evaluate(x, line=None):
        J, g, H, line_J = fb.loss_grad_hess(x, line=line)
        cache.update(x=x.copy(), J=J, g=g, H=H)
        return line_J

    def epoch_fn(state: TrainState) -> EpochResult:
        x = state.params
        if cache["x"] is None or not np.array_equal(cache["x"], x):
            evaluate(x)
        J, g, H = cache["J"], cache["g"], cache["H"]
        gmax = float(np.max(np.abs(g))) if g.size else 0.0
        if gmax <= tol or not np.isfinite(J):
            if np.isfinite(J) and gmax > 0:
                state.params = x + newton_direction(H, g)
            return EpochResult(J, converged=bool(np.isfinite(J)),
                               info={"grad_max": gmax, "passes": fb.n_passes})
        d = newton_direction(H, g)
        slope = float(g @ d)
        if not slope < 0:  # not a descent direction (numerically): steepest descent
            d, slope = -g, -float(g @ g)
        slack = 1e-13 * max(1.0, abs(J))  # round-off in J near the optimum

        def armijo(value, step):
            return value <= J + ARMIJO * step * slope + slack

        # The full step; after a shortened step, also the objective at 1/2, 1/4, ... of it
        # from the same pass (while full steps are accepted this extra work is skipped).
        line = (x, d, LINE_STEPS) if cache["last_step"] < 1.0 else None
        line_J = evaluate(x + d, line=line)
        step = 1.0
        if not armijo(cache["J"], 1.0):
            ok = [s for s, v in zip(LINE_STEPS, line_J) if armijo(v, s)]
            step = ok[0] if ok else (LINE_STEPS[-1] * 0.5 if len(line_J) else 0.5)
            for _ in range(MAX_HALVINGS):
                evaluate(x + step * d)
                if armijo(cache["J"], step):
                    break
                step *= 0.5
            else:
                # No decrease is possible any more: optimal to machine precision.
                evaluate(x)
                return EpochResult(J, converged=True, info={"grad_max": gmax,
                                                            "passes": fb.n_passes})
        cache["last_step"] = step
        state.params = cache["x"].copy()
        gmax = float(np.max(np.abs(cache["g"])))
        converged = gmax <= tol or (J - cache["J"]) <= slack
        if converged and gmax > 0:
            state.params = state.params + newton_direction(cache["H"], cache["g"])
        return EpochResult(cache["J"], converged=converged,
                           info={"grad_max": gmax, "step": step, "passes": fb.n_passes})

    return epoch_fn
