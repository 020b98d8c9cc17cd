"""The full objective, its gradient and Hessian, each as one reduction over the blocks.

``J(θ) = (1/s) Σᵢ wᵢ L(yᵢ, f_θ(xᵢ)) + penalty(θ)`` where ``s`` is the normaliser (the number of
rows, or the sum of the sample weights as scikit-learn's exact solvers use). Every call of
:meth:`FullBatch.loss_grad` / :meth:`FullBatch.loss_grad_hess` is one ``map_reduce`` over the
(persisted) training blocks: per-block sums of the problem's batch kernels, added in a fixed
tree order, so the values do not depend on the number of workers.
"""
from __future__ import annotations

import numpy as np

from dml._blocks import tree_add
from dml.optim.data import TrainingData
from dml.optim.penalties import Penalty

__all__ = ["FullBatch"]


def _loss_grad_kernel(X, Y, w, problem, params):
    if X.shape[0] == 0:
        return None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return problem.batch_loss_grad(params, X, Y, w)


def _loss_grad_hess_kernel(X, Y, w, problem, params):
    if X.shape[0] == 0:
        return None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return problem.batch_loss_grad_hess(params, X, Y, w)


class FullBatch:
    """Exact objective evaluations of ``problem`` on ``data`` with a smooth ``penalty``."""

    def __init__(self, problem, data: TrainingData, penalty: Penalty, normaliser: float):
        if not penalty.smooth:
            raise ValueError("the exact solvers need a differentiable penalty (no l1 part); use "
                             "an SGD solver for l1 / elastic-net")
        self.problem = problem
        self.data = data
        self.penalty = penalty
        self.normaliser = float(normaliser)
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

    def loss_grad_hess(self, params):
        """(J, ∇J, ∇²J) at ``params``: one pass."""
        params = np.asarray(params, dtype=np.float64)
        loss, grad, hess = self.data.train.map_reduce(_loss_grad_hess_kernel, self.problem,
                                                      params, combine=tree_add)
        self.n_passes += 1
        s = self.normaliser
        grad = grad / s
        self.penalty.add_grad(params, grad)
        hess = hess / s
        hess[np.diag_indices_from(hess)] += self.penalty.hess_diag(len(params))
        return float(loss) / s + self.penalty.value(params), grad, hess
