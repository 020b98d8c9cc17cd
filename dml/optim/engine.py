"""Partition-parallel mini-batch SGD (local SGD with row-weighted model averaging), SPEC §2.

One *round*: the client broadcasts the parameters and the optimiser state; every block runs up
to ``local_steps`` mini-batch steps on its own rows, in the order of its epoch permutation
``block_rng(seed, "shuffle", epoch, block)``; the blocks' parameters and optimiser slots come
back as a row-weighted average, summed in the fixed tree order of
:meth:`~dml._blocks.Blocks.map_reduce`. An *epoch* is as many rounds as the largest block needs
to visit each of its rows once (a block with fewer batches sits out the last rounds), so

* ``local_steps=None`` (default): one round per epoch, each block a full local epoch, then one
  average: the fewest scheduler round trips (a round costs tens of milliseconds of latency);
* ``local_steps=1``: synchronous data-parallel SGD with a global batch of Σ block batches;
* with one block, any ``local_steps`` gives plain sequential mini-batch SGD, bit for bit.

A step on batch B at step number t (counted from the start of training):
``g = (1/|B|) Σ wᵢ ∇Lᵢ + ∇(l2 part)``; ``w ← optimizer(w, g, η_t)``; l1 part: soft-threshold by
``η_t α ρ``; iterate average update (ASGD) when enabled. After a round the global step counter
advances by the largest number of steps a block took.

The epoch objective is the mean of the mini-batch losses seen during the epoch (each evaluated
just before its step, as scikit-learn reports it) plus the penalty at the end of the epoch. With
a validation part, the validation score is computed after each epoch in an extra pass.

Everything that is not a round (stopping, history, divergence, checkpoints, progress) is
:func:`dml.optim.training.run_epochs`; this module only supplies the epoch function.

Interface for a model (see :class:`dml.optim.problem.Problem`)::

    data = prepare(problem, blocks, seed=seed, validation_fraction=0.1)
    state = initial_state(problem, config, seed)            # or a previous fit's state
    state = train(problem, data, config, train_config, state, fingerprint=...)
    coef = final_params(state, config)                      # the average when ASGD is on
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dml._blocks import block_rng, tree_add
from dml.optim.data import TrainingData
from dml.optim.optimizers import Optimizer, SGD, update_average
from dml.optim.penalties import Penalty
from dml.optim.schedules import Constant, Schedule
from dml.optim.state import TrainState
from dml.optim.training import (DivergedError, EpochResult, TrainConfig, diverged_message,
                                run_epochs)

__all__ = ["SGDConfig", "initial_state", "train", "final_params", "epoch_plan", "run_round",
           "make_epoch_fn", "evaluate_score", "local_sgd_steps"]


@dataclass(frozen=True)
class SGDConfig:
    """The stochastic part of a fit: update rule, step sizes, penalty, batching, averaging."""

    optimizer: Optimizer = SGD()
    schedule: Schedule = Constant(0.01)
    penalty: Penalty = Penalty("none")
    batch_size: int = 32
    #: Mini-batch steps per block between averages; None: a full local epoch per round.
    local_steps: int | None = None
    shuffle: bool = True
    #: ASGD: None/False for no averaging; an int k averages the iterates after step k.
    average: int | None = None

    def validate(self) -> None:
        if not (isinstance(self.batch_size, (int, np.integer)) and self.batch_size >= 1):
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if self.local_steps is not None and not (
                isinstance(self.local_steps, (int, np.integer)) and self.local_steps >= 1):
            raise ValueError(f"local_steps must be a positive integer or None, got "
                             f"{self.local_steps!r}")
        if self.average is not None and self.average is not False and not (
                isinstance(self.average, (int, np.integer)) and self.average >= 0):
            raise ValueError(f"average must be a bool or a non-negative int, got {self.average!r}")

    @property
    def averaging(self) -> bool:
        return self.average is not None and self.average is not False


@dataclass(frozen=True)
class RoundPlan:
    """Everything a block needs for one round, besides parameters and optimiser slots."""

    epoch: int
    first_step: int
    local_steps: int
    weights: tuple
    seed: int
    t0: int
    lr_scale: float
    config: SGDConfig


def initial_state(problem, config: SGDConfig, seed: int, params=None) -> TrainState:
    """A fresh :class:`TrainState`: ``problem.init_params(block_rng(seed, "init"))`` unless given."""
    if params is None:
        params = problem.init_params(block_rng(seed, "init"))
    params = np.array(params, dtype=getattr(problem, "dtype", np.float64), copy=True)
    if params.shape != (problem.n_params,):
        raise ValueError(f"initial parameters have shape {params.shape}, expected "
                         f"({problem.n_params},)")
    return TrainState(params=params,
                      opt=config.optimizer.init_state(params, average=config.averaging),
                      seed=int(seed))


def final_params(state: TrainState, config: SGDConfig) -> np.ndarray:
    """The model's parameters: the iterate average once averaging has started, else the iterate."""
    avg = state.opt.slots.get("average")
    if config.averaging and avg is not None and state.opt.t > int(config.average):
        return avg
    return state.params


def epoch_plan(lengths, batch_size: int, local_steps: int | None) -> tuple[int, list]:
    """(steps per round, per round: [(weights tuple, steps taken)]) for one epoch.

    A block of n rows takes ceil(n / batch_size) steps per epoch; round r runs its steps
    [r L, (r + 1) L). Blocks with no steps left sit out (weight 0); the others are weighted by
    their row counts.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    steps = -(-lengths // batch_size)
    longest = int(steps.max()) if len(steps) else 0
    L = longest if local_steps is None else int(local_steps)
    L = max(L, 1)
    rounds = []
    for r in range(-(-longest // L)):
        active = steps > r * L
        total = float(lengths[active].sum())
        weights = tuple(float(n) / total if a else 0.0 for n, a in zip(lengths, active))
        taken = int(min(L, longest - r * L))
        rounds.append((weights, taken))
    return L, rounds


def local_sgd_steps(problem, params, slots, X, Y, w, order, first, last, t0, plan: RoundPlan,
                    rng=None):
    """Run steps ``first..last-1`` of one block's epoch in place; returns (loss_sum, first_loss,
    finite).

    This is the whole numerical content of a round, also usable on its own: the one-block
    reference of plain sequential mini-batch SGD. A problem with ``stochastic = True`` (dropout)
    gets ``rng=`` in ``batch_loss_grad``: the generator of this block and round.
    """
    cfg = plan.config
    B = cfg.batch_size
    n = X.shape[0]
    opt, schedule, penalty = cfg.optimizer, cfg.schedule, cfg.penalty
    avg_start = int(cfg.average) if cfg.averaging else None
    loss_sum = 0.0
    first_loss = None
    extra = {"rng": rng} if getattr(problem, "stochastic", False) else {}
    for k, s in enumerate(range(first, last)):
        lo, hi = s * B, min((s + 1) * B, n)
        idx = order[lo:hi] if order is not None else slice(lo, hi)
        wb = None if w is None else w[idx]
        loss, grad = problem.batch_loss_grad(params, X[idx], Y[idx], wb, **extra)
        if first_loss is None:
            first_loss = float(loss) / (hi - lo)
        loss_sum += float(loss)
        if not math.isfinite(loss_sum):
            return loss_sum, first_loss, False
        grad /= (hi - lo)
        penalty.add_grad(params, grad)
        t = t0 + k + 1
        lr = schedule(t, plan.lr_scale)
        opt.step(params, grad, lr, slots, t)
        penalty.prox(params, lr)
        if avg_start is not None:
            update_average(params, slots, t, avg_start)
    return loss_sum, first_loss, True


def _round_kernel(index, X, Y, w, problem, payload, plan: RoundPlan):
    weight = plan.weights[index]
    if weight == 0.0:
        return None
    n = X.shape[0]
    B = plan.config.batch_size
    first = plan.first_step
    last = min(first + plan.local_steps, -(-n // B))
    if first >= last:
        return None
    params_in, slots_in = payload
    params = params_in.copy()
    slots = {k: v.copy() for k, v in slots_in.items()}
    order = (block_rng(plan.seed, "shuffle", plan.epoch, index).permutation(n)
             if plan.config.shuffle else None)
    # Per-step noise (dropout) of this block and round; drawn only by stochastic problems.
    rng = (block_rng(plan.seed, "noise", plan.epoch, index, first)
           if getattr(problem, "stochastic", False) else None)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        loss_sum, first_loss, finite = local_sgd_steps(problem, params, slots, X, Y, w, order,
                                                       first, last, plan.t0, plan, rng=rng)
        finite = finite and bool(np.isfinite(params).all())
    return {
        "params": weight * params,
        "slots": {k: weight * v for k, v in slots.items()},
        "loss": loss_sum,
        "first_loss": weight * (first_loss if first_loss is not None else 0.0),
        "nonfinite": 0 if finite else 1,
    }


def run_round(problem, data: TrainingData, state: TrainState, plan: RoundPlan) -> dict:
    """One round over all blocks; returns the combined result (params, slots, loss, ...)."""
    payload = (state.params, state.opt.slots)
    return data.train.map_reduce(_round_kernel, problem, payload, plan, with_index=True,
                                 combine=tree_add)


def _score_kernel(X, Y, w, problem, params):
    if X.shape[0] == 0:
        return None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return problem.score_stats(params, X, Y, w)


def evaluate_score(problem, blocks, params) -> float:
    """``problem.score_from_stats`` of the stats summed over ``blocks`` (one pass)."""
    stats = blocks.map_reduce(_score_kernel, problem, params, combine=tree_add)
    return problem.score_from_stats(stats)


def make_epoch_fn(problem, data: TrainingData, config: SGDConfig, train_config: TrainConfig):
    """The ``epoch_fn`` of :func:`~dml.optim.training.run_epochs` for local SGD on ``data``."""
    L, rounds = epoch_plan(data.lengths, config.batch_size, config.local_steps)
    n_train = data.n_train

    def epoch_fn(state: TrainState) -> EpochResult:
        epoch = state.epoch + 1
        loss_total = 0.0
        reference = None
        for r, (weights, taken) in enumerate(rounds):
            plan = RoundPlan(epoch=epoch, first_step=r * L, local_steps=L, weights=weights,
                             seed=state.seed, t0=state.opt.t, lr_scale=state.lr_scale,
                             config=config)
            start_t = state.opt.t
            out = run_round(problem, data, state, plan)
            if start_t == 0 and reference is None:
                reference = out["first_loss"] + config.penalty.value(state.params)
            loss_total += out["loss"]
            if out["nonfinite"] or not math.isfinite(loss_total):
                raise DivergedError(diverged_message(
                    train_config.name, epoch, loss_total if not math.isfinite(loss_total)
                    else math.inf, train_config.lr_hint))
            state.params = out["params"]
            state.opt.slots = out["slots"]
            state.opt.t = start_t + taken
        params = final_params(state, config)
        objective = loss_total / max(n_train, 1) + config.penalty.value(state.params)
        score = None
        if data.validation is not None:
            score = evaluate_score(problem, data.validation, params)
        lr = config.schedule(max(state.opt.t, 1), state.lr_scale)
        return EpochResult(objective, score=score, learning_rate=lr, reference=reference,
                           info={"steps": int(state.opt.t)})

    return epoch_fn


def train(problem, data: TrainingData, config: SGDConfig, train_config: TrainConfig,
          state: TrainState, *, fingerprint: dict | None = None,
          max_epochs: int | None = None) -> TrainState:
    """Train ``problem`` on ``data`` from ``state`` until a stopping rule fires.

    Parameters
    ----------
    problem : Problem
    data : TrainingData
        From :func:`dml.optim.data.prepare` with the same problem.
    config : SGDConfig
    train_config : TrainConfig
        Stopping, history, checkpoints, progress.
    state : TrainState
        From :func:`initial_state`, or a previous fit's state (warm start / partial_fit).
    fingerprint : dict, optional
        Identifies the fit for checkpoint resumes.
    max_epochs : int, optional
        Run this many epochs now regardless of ``state.epoch`` (partial_fit passes 1).
    """
    config.validate()
    if train_config.lr_hint == "":
        train_config = replace(train_config, lr_hint=config.schedule.describe())
    if config.schedule.adaptive and train_config.adaptive_eta0 is None:
        train_config = replace(train_config, adaptive_eta0=config.schedule.eta0)
    epoch_fn = make_epoch_fn(problem, data, config, train_config)
    return run_epochs(state, epoch_fn, train_config, fingerprint=fingerprint,
                      max_epochs=max_epochs)
