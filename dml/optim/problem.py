"""What a model must provide to be trained by the solvers of :mod:`dml.optim`.

A *problem* is a small picklable object (it is broadcast to the workers with every round) that
knows the model's parameter layout and how to compute a loss and its gradient on a batch of
rows. Subclass :class:`Problem` and implement

* ``n_params`` and ``init_params(rng) -> ndarray``: the flat parameter vector;
* ``penalised``: which entries the penalty applies to (a slice or boolean mask; intercepts and
  biases excluded);
* ``batch_loss_grad(params, X, Y, w) -> (loss_sum, grad_sum)``: Σᵢ wᵢ L(yᵢ, f(xᵢ)) over the rows
  of the batch and its gradient with respect to ``params`` (a new flat array), vectorised over
  the batch; ``w`` is None for unit weights.

and optionally

* ``prepare_block(X, y, w) -> (X, Y, w)``: runs once per block on its worker before training
  (encode labels, fold class weights into ``w``); its result is what the kernels receive;
* ``stochastic = True`` when ``batch_loss_grad`` draws noise (dropout): the engine then passes
  ``rng=`` (a generator per block and round, from the fit's seed) during training only;
* ``batch_hess(params, X, Y, w) -> hess_sum`` (Σᵢ wᵢ ∇²Lᵢ) for the Newton solver, and
  ``batch_line_losses(base, direction, steps, X, Y, w)``: the loss sums at
  ``base + s · direction`` for every s (the default calls ``batch_loss_grad`` per step; a model
  linear in its parameters does it with one extra product);
* ``score_stats(params, X, Y, w)`` + ``score_from_stats(stats) -> float`` (higher is better)
  for early stopping on a validation part; the default is minus the mean loss.

The engine adds the penalty, the step size and the optimiser: a multi-layer perceptron only
writes its forward and backward pass.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Problem"]


class Problem:
    n_params: int = 0
    #: True when a step costs far less than the parameter vector (a linear model's step on
    #: sparse rows touches only their non-zero columns): averaged fits of such models with many
    #: parameters then take one round per epoch, see ``SGDConfig.steps_per_round``. A network's
    #: step already costs a multiple of its parameters, so it keeps its rounds.
    steps_cheaper_than_params = False
    penalised = None
    stochastic = False
    dtype = np.float64

    def init_params(self, rng: np.random.Generator) -> np.ndarray:
        return np.zeros(self.n_params, dtype=self.dtype)

    def prepare_block(self, X, y, w):
        return X, y, w

    def batch_loss_grad(self, params, X, Y, w):
        raise NotImplementedError

    def batch_hess(self, params, X, Y, w):
        raise NotImplementedError(f"{type(self).__name__} has no Hessian; use an SGD or "
                                  "L-BFGS solver")

    def batch_line_losses(self, base, direction, steps, X, Y, w):
        return [self.batch_loss_grad(base + s * direction, X, Y, w)[0] for s in steps]

    def score_stats(self, params, X, Y, w):
        loss, _ = self.batch_loss_grad(params, X, Y, w)
        return np.array([loss, float(X.shape[0]) if w is None else float(np.sum(w))])

    def score_from_stats(self, stats) -> float:
        return -float(stats[0]) / max(float(stats[1]), 1e-300)
