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
from dml._lazy import attach as _attach

__all__ = ["SGDConfig", "TrainConfig", "TrainState", "OptimizerState", "EpochResult", "Problem",
           "Penalty", "TrainingData", "DivergedError", "StopTraining", "get_loss",
           "make_optimizer", "make_penalty", "make_schedule", "prepare", "initial_state", "train",
           "final_params", "run_epochs"]

# Imported on first use, so that a worker unpickling one of the package's functions does not
# import every module of it (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "SGDConfig": "dml.optim.engine",
    "final_params": "dml.optim.engine",
    "initial_state": "dml.optim.engine",
    "train": "dml.optim.engine",
    "get_loss": "dml.optim.losses",
    "OptimizerState": "dml.optim.optimizers",
    "make_optimizer": "dml.optim.optimizers",
    "Penalty": "dml.optim.penalties",
    "make_penalty": "dml.optim.penalties",
    "Problem": "dml.optim.problem",
    "make_schedule": "dml.optim.schedules",
    "TrainState": "dml.optim.state",
    "DivergedError": "dml.optim.training",
    "EpochResult": "dml.optim.training",
    "StopTraining": "dml.optim.training",
    "TrainConfig": "dml.optim.training",
    "run_epochs": "dml.optim.training",
    "TrainingData": "dml.optim.data",
    "prepare": "dml.optim.data",
})
