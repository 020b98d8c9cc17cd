"""The full objective, its gradient and Hessian, each as one reduction over the blocks.

``J(θ) = (1/s) Σᵢ wᵢ L(yᵢ, f_θ(xᵢ)) + penalty(θ)`` where ``s`` is the normaliser (the number of
rows, or the sum of the sample weights as scikit-learn's exact solvers use). Every call of
:meth:`FullBatch.loss_grad` / :meth:`FullBatch.loss_grad_hess` is one ``map_reduce`` over the
(persisted) training blocks: per-block sums of the problem's batch kernels, added in a fixed
tree order, so the values do not depend on the number of workers.

The loss and gradient are always exact. The Hessian may be estimated from every
``hess_stride``-th row of each block (scaled up by the row ratio): on large data a subsample of
tens of thousands of rows estimates a Hessian of a few hundred parameters to a few percent, which
changes only the Newton solver's rate (still fast), never the optimum it converges to (g = 0),
and saves most of the pass's arithmetic (the Hessian costs O(n p²), the gradient O(n p)).
"""
from __future__ import annotations

import numpy as np

from dml._blocks import tree_add
from dml.optim.data import TrainingData
from dml.optim.penalties import Penalty

__all__ = ["FullBatch", "hessian_stride"]

#: Rows the subsampled Hessian aims at: at least this many, and this many per parameter.
HESS_MIN_ROWS = 20_000
HESS_ROWS_PER_PARAM = 1_000


def hessian_stride(n_rows: int, n_params: int) -> int:
    """Every how many rows the Hessian is evaluated: 1 (all) up to the target row count."""
    target = max(HESS_MIN_ROWS, HESS_ROWS_PER_PARAM * n_params)
    return max(1, int(n_rows // target))


def _loss_grad_kernel(X, Y, w, problem, params):
    if X.shape[0] == 0:
        return None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return problem.batch_loss_grad(params, X, Y, w)


def _loss_grad_hess_kernel(X, Y, w, problem, params, stride, line):
    n = X.shape[0]
    if n == 0:
        return None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        loss, grad = problem.batch_loss_grad(params, X, Y, w)
        line_losses = (np.zeros(0) if line is None else
                       np.asarray(problem.batch_line_losses(*line, X, Y, w), dtype=np.float64))
        if stride > 1 and n > stride:
            sub = slice(None, None, stride)
            Xs, Ys, ws = X[sub], Y[sub], None if w is None else w[sub]
            H = problem.batch_hess(params, Xs, Ys, ws)
            H *= (n if w is None else float(np.sum(w))) / (
                Xs.shape[0] if ws is None else max(float(np.sum(ws)), 1e-300))
        else:
            H = problem.batch_hess(params, X, Y, w)
        return loss, grad, H, line_losses


class FullBatch:
    """Exact objective evaluations of ``problem`` on ``data`` with a smooth ``penalty``."""

    def __init__(self, problem, data: TrainingData, penalty: Penalty, normaliser: float,
                 hess_stride: int = 1):
        if not penalty.smooth:
            raise ValueError("the exact solvers need a differentiable penalty (no l1 part); use "
                             "an SGD solver for l1 / elastic-net")
        self.problem = problem
        self.data = data
        self.penalty = penalty
        self.normaliser = float(normaliser)
        self.hess_stride = max(int(hess_stride), 1)
        #: Passes over the data so far.
        self.n_passes = 0

    def loss_grad(self, params):
        """(J, ∇J) at ``params``: one pass."""
        params = np.asarray(params, dtype=np.float64)
        loss, grad = self.data.train.map_reduce(_loss_grad_kernel, self.problem, params,
                                                combine=tree_add)
        self.n_passes += 1
        s = self.normaliser
        grad = grad / s
        self.penalty.add_grad(params, grad)
        return float(loss) / s + self.penalty.value(params), grad

    def loss_grad_hess(self, params, line=None):
        """(J, ∇J, ∇²J, line) at ``params``: one pass.

        ``line=(base, direction, steps)`` also returns J at ``base + s · direction`` for each s
        in ``steps`` (an empty array otherwise).
        """
        params = np.asarray(params, dtype=np.float64)
        loss, grad, hess, line_losses = self.data.train.map_reduce(
            _loss_grad_hess_kernel, self.problem, params, self.hess_stride, line,
            combine=tree_add)
        self.n_passes += 1
        s = self.normaliser
        grad = grad / s
        self.penalty.add_grad(params, grad)
        hess = hess / s
        hess[np.diag_indices_from(hess)] += self.penalty.hess_diag(len(params))
        line_J = np.zeros(0)
        if line is not None:
            base, direction, steps = line
            line_J = np.array([lv / s + self.penalty.value(base + st * direction)
                               for lv, st in zip(line_losses, steps)])
        return float(loss) / s + self.penalty.value(params), grad, hess, line_J
