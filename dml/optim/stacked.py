"""Several fits of one problem on the same data, trained together: one pass per epoch for all.

A hyper-parameter search fits the same estimator with different penalty strengths or step sizes
on the same training rows. Those fits visit the same blocks in the same order with the same
mini-batches (the order depends on the seed, the epoch and the block, never on the
hyper-parameters), so they can share the passes: the parameters of the m models are the rows of
an (m, n_params) array and every mini-batch step computes all m decision functions with one
matrix product (:meth:`LinearProblem.batch_loss_grad_stacked`). A step for m models costs about
what a step for one costs, and a round is one task per block for all of them.

What may differ between stacked models are the per-model scalars of a step: the penalty weights
(alpha, l1_ratio) and the schedule's constants (eta0, power_t, the ``optimal`` t₀ and alpha).
The problem, optimiser, batch size, local steps, shuffling, averaging, seed and data are shared;
the caller groups fits so that they are (e.g. ``SGDMixin._stack_key``).

Each model keeps its own :class:`~dml.optim.state.TrainState`, stopping rule, history and
divergence test (:func:`dml.optim.training.close_epoch`, as in a single fit): a model that
converges or diverges leaves the stack and the others go on, so each model ends where its own
fit would have ended. The parameters equal those of separate fits up to the rounding of the
matrix products (one product for m models instead of one per model).

Checkpoints, callbacks, progress displays and early stopping on a validation part are per-fit
features; fits that use them are not stacked.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from dml._blocks import block_rng, tree_add
from dml.optim.data import TrainingData
from dml.optim.engine import SGDConfig, epoch_plan
from dml.optim.optimizers import update_average
from dml.optim.penalties import StackedPenalty
from dml.optim.schedules import StackedRate
from dml.optim.training import (DivergedError, EpochResult, TrainConfig, close_epoch,
                                diverged_message)

__all__ = ["train_stacked", "check_stackable"]


def check_stackable(configs, train_configs) -> None:
    """Raise ValueError when the fits differ in more than per-model step scalars."""
    first = configs[0]
    for c in configs[1:]:
        same = (c.optimizer == first.optimizer and c.batch_size == first.batch_size
                and c.local_steps == first.local_steps and c.shuffle == first.shuffle
                and c.average == first.average and type(c.schedule) is type(first.schedule)
                and c.penalty.penalised == first.penalty.penalised)
        if not same:
            raise ValueError("stacked fits must share the optimiser, batching, shuffling, "
                             "averaging and schedule kind")
    for tc in train_configs:
        if tc.early_stopping or tc.checkpoint_dir is not None or tc.callbacks or tc.progress:
            raise ValueError("early stopping, checkpoints, callbacks and progress displays are "
                             "per-fit features: fit such models one at a time")


@dataclass(frozen=True)
class _StackPlan:
    """A round's plan for the stacked models (the engine's ``RoundPlan`` with per-model scales)."""

    epoch: int
    first_step: int
    local_steps: int
    weights: tuple
    seed: int
    t0: int
    lr_scale: np.ndarray
    config: SGDConfig
    penalty: StackedPenalty
    rate: StackedRate


def _stacked_steps(problem, P, slots, X, Y, w, order, first, last, t0, plan: _StackPlan):
    """Steps ``first..last-1`` of one block's epoch for every row of ``P``, in place.

    :func:`dml.optim.engine.local_sgd_steps` with an (m, n_params) parameter array; returns the
    per-model loss sums and first-batch losses.
    """
    cfg = plan.config
    B = cfg.batch_size
    n = X.shape[0]
    opt, penalty, rate = cfg.optimizer, plan.penalty, plan.rate
    avg_start = int(cfg.average) if cfg.averaging else None
    loss_sum = np.zeros(P.shape[0])
    first_loss = None
    for k, s in enumerate(range(first, last)):
        lo, hi = s * B, min((s + 1) * B, n)
        idx = order[lo:hi] if order is not None else slice(lo, hi)
        wb = None if w is None else w[idx]
        loss, grad = problem.batch_loss_grad_stacked(P, X[idx], Y[idx], wb)
        if first_loss is None:
            first_loss = loss / (hi - lo)
        loss_sum += loss
        grad /= (hi - lo)
        penalty.add_grad(P, grad)
        t = t0 + k + 1
        lr = rate(t, plan.lr_scale)
        opt.step(P, grad, lr, slots, t)
        penalty.prox(P, lr)
        if avg_start is not None:
            update_average(P, slots, t, avg_start)
    return loss_sum, first_loss


def _stacked_round_kernel(index, X, Y, w, problem, payload, plan: _StackPlan):
    weight = plan.weights[index]
    if weight == 0.0:
        return None
    n = X.shape[0]
    B = plan.config.batch_size
    first = plan.first_step
    last = min(first + plan.local_steps, -(-n // B))
    if first >= last:
        return None
    P_in, slots_in = payload
    P = P_in.copy()
    slots = {k: v.copy() for k, v in slots_in.items()}
    order = (block_rng(plan.seed, "shuffle", plan.epoch, index).permutation(n)
             if plan.config.shuffle else None)
    # A diverging model fills its own row with inf/nan; the other rows are computed from
    # their own columns only, so they are unaffected.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        loss_sum, first_loss = _stacked_steps(problem, P, slots, X, Y, w, order, first, last,
                                              plan.t0, plan)
        finite = np.isfinite(loss_sum) & np.isfinite(P).all(axis=1)
    return {
        "params": weight * P,
        "slots": {k: weight * v for k, v in slots.items()},
        "loss": loss_sum,
        "first_loss": weight * first_loss,
        "nonfinite": (~finite).astype(np.int64),
    }


def train_stacked(problem, data: TrainingData, configs, train_configs, states):
    """Train m models of ``problem`` on ``data`` together; one result per model.

    Parameters
    ----------
    problem : Problem
        With ``batch_loss_grad_stacked`` (e.g. :class:`dml.linear_model._problem.LinearProblem`).
    data : TrainingData
        From :func:`dml.optim.data.prepare`, shared by all the models.
    configs : list of SGDConfig
        Per model; they may differ only in the penalty weights and the schedule's constants.
    train_configs : list of TrainConfig
        Per model (max_iter, tol, n_iter_no_change, name).
    states : list of TrainState
        Fresh states (:func:`dml.optim.engine.initial_state`) with the same seed.

    Returns
    -------
    list
        Per model its final :class:`TrainState`, or the :class:`DivergedError` it stopped with.

    Examples
    --------
    >>> import numpy as np
    >>> from dml._blocks import as_blocks
    >>> from dml.linear_model._problem import LinearProblem
    >>> from dml.optim import SGDConfig, initial_state, prepare
    >>> from dml.optim.losses import get_loss
    >>> from dml.optim.penalties import Penalty
    >>> from dml.optim.training import TrainConfig
    >>> X = np.random.default_rng(0).normal(size=(64, 2)); y = X @ [1.0, -1.0]
    >>> problem = LinearProblem(2, get_loss("squared_error"))
    >>> data = prepare(problem, as_blocks(X, y), seed=0)
    >>> configs = [SGDConfig(penalty=Penalty("l2", a, penalised=problem.penalised))
    ...            for a in (0.0, 10.0)]
    >>> states = [initial_state(problem, c, seed=0) for c in configs]
    >>> out = train_stacked(problem, data, configs, [TrainConfig(max_iter=20, tol=None)] * 2,
    ...                     states)
    >>> bool(np.abs(out[0].params[:2]).sum() > np.abs(out[1].params[:2]).sum())  # shrinkage
    True
    """
    m = len(states)
    if not (len(configs) == len(train_configs) == m) or m == 0:
        raise ValueError("train_stacked needs one config, train config and state per model")
    for c, tc in zip(configs, train_configs):
        c.validate()
        tc.validate()
    # As engine.train: the divergence message names the schedule, and the adaptive schedule's
    # plateau rule needs its eta0.
    train_configs = [replace(tc, lr_hint=tc.lr_hint or c.schedule.describe(),
                             adaptive_eta0=(c.schedule.eta0 if c.schedule.adaptive
                                            and tc.adaptive_eta0 is None else tc.adaptive_eta0))
                     for c, tc in zip(configs, train_configs)]
    check_stackable(configs, train_configs)
    if len({s.seed for s in states}) != 1 or len({s.opt.t for s in states}) != 1:
        raise ValueError("stacked fits start together: the same seed and step counter")
    cfg = configs[0]
    L, rounds = epoch_plan(data.lengths, cfg.batch_size, cfg.local_steps)
    results: list = list(states)
    active = list(range(m))
    for i in active:
        states[i].stop_reason = None
    limits = [tc.max_iter for tc in train_configs]
    while active:
        active = [i for i in active if states[i].epoch < limits[i]]
        if not active:
            break
        started = time.perf_counter()
        out = _stacked_epoch(problem, data, [configs[i] for i in active],
                             [train_configs[i] for i in active], [states[i] for i in active],
                             L, rounds)
        seconds = time.perf_counter() - started
        still = []
        for i, res in zip(active, out):
            if isinstance(res, Exception):
                results[i] = res
                continue
            try:
                close_epoch(states[i], res, train_configs[i], limit=limits[i], max_epochs=None,
                            seconds=seconds)
            except DivergedError as exc:
                results[i] = exc
                continue
            if states[i].stop_reason is None:
                still.append(i)
        active = still
    return results


def _stacked_epoch(problem, data, configs, train_configs, states, L, rounds):
    """One epoch for the given models; advances their states, returns EpochResult or error."""
    m = len(states)
    cfg = configs[0]
    penalty = StackedPenalty([c.penalty for c in configs])
    rate = StackedRate([c.schedule for c in configs])
    P = np.stack([s.params for s in states])
    slots = {k: np.stack([s.opt.slots[k] for s in states]) for k in states[0].opt.slots}
    scale = np.array([s.lr_scale for s in states], dtype=np.float64)
    epoch = states[0].epoch + 1
    t = states[0].opt.t
    loss_total = np.zeros(m)
    reference = None
    failed = np.zeros(m, dtype=bool)
    for r, (weights, taken) in enumerate(rounds):
        plan = _StackPlan(epoch=epoch, first_step=r * L, local_steps=L, weights=weights,
                          seed=states[0].seed, t0=t, lr_scale=scale, config=cfg,
                          penalty=penalty, rate=rate)
        out = data.train.map_reduce(_stacked_round_kernel, problem, (P, slots), plan,
                                    with_index=True, combine=tree_add)
        if t == 0 and reference is None:
            reference = out["first_loss"] + penalty.value(P)
        loss_total += out["loss"]
        failed |= (np.asarray(out["nonfinite"]) > 0) | ~np.isfinite(loss_total)
        P, slots = out["params"], out["slots"]
        t += taken
    n_train = max(data.n_train, 1)
    objective = loss_total / n_train + penalty.value(P)
    results = []
    for j, (state, c, tc) in enumerate(zip(states, configs, train_configs)):
        if failed[j]:
            results.append(DivergedError(diverged_message(
                tc.name, epoch, loss_total[j] if not math.isfinite(loss_total[j]) else math.inf,
                tc.lr_hint)))
            continue
        state.params = np.array(P[j])
        state.opt.slots = {k: np.array(v[j]) for k, v in slots.items()}
        state.opt.t = t
        lr = c.schedule(max(t, 1), state.lr_scale)
        results.append(EpochResult(float(objective[j]), learning_rate=lr,
                                   reference=None if reference is None else float(reference[j]),
                                   info={"steps": int(t)}))
    return results

