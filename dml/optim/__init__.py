"""The optimisation engine shared by linear models, neural networks and factorisation.

Pieces, one per module:

* :mod:`~dml.optim.losses`: vectorised losses and derivatives w.r.t. the decision function;
* :mod:`~dml.optim.penalties`: l2 / l1 (proximal) / elastic-net penalties on a flat vector;
* :mod:`~dml.optim.schedules`: constant, invscaling, optimal, adaptive step sizes;
* :mod:`~dml.optim.optimizers`: sgd, momentum, nesterov, adam with an explicit state; ASGD;
* :mod:`~dml.optim.problem`: what a model provides (parameters, batch loss and gradient);
* :mod:`~dml.optim.data`: prepared, validation-split, persisted training blocks;
* :mod:`~dml.optim.engine`: partition-parallel local SGD rounds;
* :mod:`~dml.optim.fullbatch`, :mod:`~dml.optim.newton`, :mod:`~dml.optim.lbfgs`: exact solvers
  over reduced gradients (and Hessians), one pass per evaluation;
* :mod:`~dml.optim.training`: the epoch loop (stopping, history, divergence, checkpoints,
  callbacks), reusable by any solver that can run one epoch;
* :mod:`~dml.optim.state`, :mod:`~dml.optim.checkpoint`, :mod:`~dml.optim.progress`.

See docs/linear_models.md.
"""
from dml.optim.engine import SGDConfig, final_params, initial_state, train
from dml.optim.losses import get_loss
from dml.optim.optimizers import OptimizerState, make_optimizer
from dml.optim.penalties import Penalty, make_penalty
from dml.optim.problem import Problem
from dml.optim.schedules import make_schedule
from dml.optim.state import TrainState
from dml.optim.training import (DivergedError, EpochResult, StopTraining, TrainConfig,
                                run_epochs)
from dml.optim.data import TrainingData, prepare

__all__ = [
    "SGDConfig", "TrainConfig", "TrainState", "OptimizerState", "EpochResult", "Problem",
    "Penalty", "TrainingData", "DivergedError", "StopTraining", "get_loss", "make_optimizer",
    "make_penalty", "make_schedule", "prepare", "initial_state", "train", "final_params",
    "run_epochs",
]
