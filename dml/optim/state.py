"""The complete, resumable state of an iterative fit.

:class:`TrainState` is everything a training loop needs to continue exactly where it stopped:
parameters, optimiser state, the epoch counter, the learning-rate multiplier of the adaptive
schedule, the stopping rule's counters, the history and the seed every random stream derives
from. It is written to and read from checkpoints (:mod:`dml.optim.checkpoint`) as it is, so a
resumed fit and an uninterrupted one are the same computation.

Solvers with other parameter layouts (matrix factorisation) keep their arrays in ``arrays`` and
their JSON-able scalars in ``extra``; both are checkpointed too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dml.optim.optimizers import OptimizerState

__all__ = ["TrainState"]


@dataclass
class TrainState:
    #: Flat parameter vector (may be empty for solvers that use ``arrays``).
    params: np.ndarray
    #: Optimiser step counter and slots.
    opt: OptimizerState = field(default_factory=OptimizerState)
    #: The seed of every random stream of this fit (``block_rng(seed, ...)``).
    seed: int = 0
    #: Completed epochs.
    epoch: int = 0
    #: Multiplier of the learning rate (the adaptive schedule divides it by 5 on plateaus).
    lr_scale: float = 1.0
    #: Stopping rule: best epoch objective / validation score so far, epochs without improvement.
    best_objective: float = math.inf
    best_score: float = -math.inf
    no_improvement: int = 0
    #: Parameters at the best validation score (only kept when the loop restores them).
    best_params: np.ndarray | None = None
    #: One dict per epoch: epoch, objective, validation_score, seconds, learning_rate, ...
    history: list = field(default_factory=list)
    #: "converged", "max_iter", "callback" or None while running.
    stop_reason: str | None = None
    #: Solver-specific arrays and JSON-able values (checkpointed with the rest).
    arrays: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    @property
    def converged(self) -> bool:
        return self.stop_reason == "converged"

    def copy(self) -> TrainState:
        return TrainState(
            self.params.copy(), self.opt.copy(), self.seed, self.epoch, self.lr_scale,
            self.best_objective, self.best_score, self.no_improvement,
            None if self.best_params is None else self.best_params.copy(),
            [dict(h) for h in self.history], self.stop_reason,
            {k: v.copy() for k, v in self.arrays.items()}, dict(self.extra))
