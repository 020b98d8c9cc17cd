"""Partition-parallel mini-batch SGD: streams of blocks, rounds, combined updates.

The blocks are walked by *streams* (:mod:`dml.optim.streams`): runs of consecutive blocks with
at least ``stream_steps`` mini-batch steps per epoch each, walked in order by one model, every
block's rows in its own shuffled order ``block_rng(seed, "shuffle", epoch, block)``, cut into
mini-batches that run on across the blocks' boundaries (a stream of n rows takes
``ceil(n / batch_size)`` steps). One *round*: the client broadcasts the parameters and the
optimiser state; every stream takes up to ``local_steps`` steps from them; the streams' results
are combined in the fixed tree order over the streams; an epoch is as many rounds as the
longest stream needs.

How the streams' results are combined (``combine``) is what keeps the progress of an epoch
independent of how many streams run side by side (docs/partition_parallel_sgd.md works through
why):

* ``"sum"``: the parameters move by the sum of the streams' updates, as if their steps had been
  taken one after the other (a delayed update: exact to first order while a round's total
  movement is small, hence short rounds: ``SYNC_STEPS`` steps of all streams together);
* ``"average"``: the parameters become the row-weighted average of the streams' parameters. For
  the ``optimal`` schedule (step 1/(α t), whose iterate is itself a running average of the
  gradients) this is the combination that matches a sequential pass, as long as a round is
  short next to that average's memory (the first epoch's rounds grow with it:
  :mod:`dml.optim.averaged_rounds`);
* ``"auto"`` (default): ``"average"`` for the ``optimal`` schedule, ``"sum"`` otherwise.

Optimiser moments (momentum, Adam) are always averaged. The step counter counts every stream's
steps (the number of mini-batches seen, as a sequential pass counts them), so step sizes decay
with the data seen whatever the number of streams. With one stream — one block, or blocks
shorter than ``stream_steps`` all together — this is plain sequential mini-batch SGD, bit for
bit, whatever ``local_steps``.

A step on batch B at step number t: ``g = (1/|B|) Σ wᵢ ∇Lᵢ + ∇(l2 part)``;
``w ← optimizer(w, g, η_t)``; l1 part: soft-threshold by ``η_t α ρ``; iterate average update
(ASGD) when enabled.

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

import dask
import numpy as np
from dask import delayed
from dask._task_spec import Task, TaskRef
from dask.delayed import Delayed

from dml._block_groups import default_n_tasks
from dml._graph import (broadcast, layer_graph, new_name, task_argument, task_prefix, task_ref,
                        tree_add)
from dml._random import block_rng
from dml.optim._round_kernels import (_chain_result, _chained_round, _group_round_kernel,
                                      combined, local_sgd_steps, stream_steps_run)
from dml.optim.averaged_rounds import epoch_rounds, round_bound
from dml.optim.summed_rounds import curvature_limited, round_limit, sum_scale
from dml.optim.data import TrainingData, fits_persist_budget, join_fits
from dml.optim.optimizers import Optimizer, SGD
from dml.optim.penalties import Penalty
from dml.optim.schedules import Constant, Optimal, Schedule
from dml.optim.streams import (EqualShares, RoundSpec, StreamLayout, join_streams, make_streams,
                               round_plans, stream_layout, subtree_reduce, task_groups,
                               tree_levels)
from dml.optim.state import TrainState
from dml.optim.training import (DivergedError, EpochResult, TrainConfig, diverged_message,
                                run_epochs)

__all__ = ["SGDConfig", "initial_state", "train", "final_params", "epoch_plan", "run_round",
           "make_epoch_fn", "evaluate_score", "local_sgd_steps", "stream_steps_run",
           "apply_round", "StreamRunner", "SYNC_STEPS", "AVERAGE_ROUNDS",
           "LARGE_MODEL_PARAMS", "round_blocks", "round_cost_params"]


#: Global steps per round (all streams together) when ``local_steps`` is automatic and the
#: updates are summed: summed updates are exact to first order only while a round moves little
#: (measured: docs/partition_parallel_sgd.md).
SYNC_STEPS = 256
#: The same for fits whose summed rounds are limited by the data's curvature (linear models,
#: losses with unbounded gradients, plain SGD or momentum: :mod:`dml.optim.summed_rounds`):
#: every round also stays within ``(1 − μ) / (η · λ)`` steps, the bound that keeps it the
#: first-order equivalent of its sequential steps, so a longer target costs nothing in quality
#: (measured: docs/partition_parallel_sgd.md) and saves rounds, each a message exchange.
LIMITED_SYNC_STEPS = 1024
#: Rounds per epoch when ``local_steps`` is automatic and the parameters are averaged: the
#: average is stable with long rounds; a few per epoch help the first epoch.
AVERAGE_ROUNDS = 4
#: Parameters from which an averaged fit runs one round per epoch instead: every round costs
#: each stream O(parameters) (its private copy, its weighted share, the reduction), which for a
#: linear model on hashed text (2^20 weights) outweighs the round's steps on sparse rows. The
#: rule depends only on the model's size, so a sparse X and its dense copy still give one model.
LARGE_MODEL_PARAMS = 2 ** 16

COMBINES = ("auto", "sum", "average")


@dataclass(frozen=True)
class SGDConfig:
    """The stochastic part of a fit: update rule, step sizes, penalty, batching, averaging, and
    how the partitions train in parallel (streams, rounds, combination)."""

    optimizer: Optimizer = SGD()
    schedule: Schedule = Constant(0.01)
    penalty: Penalty = Penalty("none")
    batch_size: int = 32
    #: Mini-batch steps per stream between combinations: None (automatic: rounds of about
    #: ``SYNC_STEPS`` steps of all streams together when summing, ``AVERAGE_ROUNDS`` rounds per
    #: epoch when averaging), "epoch" (one round per epoch) or an int.
    local_steps: int | str | None = None
    shuffle: bool = True
    #: ASGD: None/False for no averaging; an int k averages the iterates after step k.
    average: int | None = None
    #: Least mini-batch steps per epoch of one stream (None: every block is a stream).
    stream_steps: int | None = 128
    #: How the streams' updates are combined: "auto", "sum" or "average" (module docstring).
    combine: str = "auto"

    def validate(self) -> None:
        if not (isinstance(self.batch_size, (int, np.integer)) and self.batch_size >= 1):
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if self.local_steps is not None and self.local_steps != "epoch" and not (
                isinstance(self.local_steps, (int, np.integer))
                and not isinstance(self.local_steps, bool) and self.local_steps >= 1):
            raise ValueError(f"local_steps must be a positive integer, 'epoch' or None, got "
                             f"{self.local_steps!r}")
        if self.average is not None and self.average is not False and not (
                isinstance(self.average, (int, np.integer)) and self.average >= 0):
            raise ValueError(f"average must be a bool or a non-negative int, got {self.average!r}")
        if self.stream_steps is not None and not (
                isinstance(self.stream_steps, (int, np.integer))
                and not isinstance(self.stream_steps, bool) and self.stream_steps >= 1):
            raise ValueError(f"stream_steps must be a positive integer or None, got "
                             f"{self.stream_steps!r}")
        if self.combine not in COMBINES:
            raise ValueError(f"combine must be one of {list(COMBINES)}, got {self.combine!r}")

    @property
    def averaging(self) -> bool:
        return self.average is not None and self.average is not False

    @property
    def combine_mode(self) -> str:
        """"sum" or "average": what ``combine="auto"`` means for this schedule."""
        if self.combine != "auto":
            return self.combine
        return "average" if isinstance(self.schedule, Optimal) else "sum"

    def steps_per_round(self, layout: StreamLayout, n_params: int = 0,
                        limited: bool = False) -> int | EqualShares | None:
        """Stream steps per round for ``layout`` (None: the whole epoch in one round;
        :class:`~dml.optim.streams.EqualShares` for averaged rounds) of a model with
        ``n_params`` parameters; ``limited``: its summed rounds are also limited by the data's
        curvature (:func:`dml.optim.summed_rounds.curvature_limited`)."""
        if self.local_steps == "epoch" or layout.n_streams <= 1:
            # One stream: rounds would change nothing but the number of round trips.
            return None
        if self.local_steps is not None:
            return int(self.local_steps)
        if self.combine_mode == "average":
            if n_params >= LARGE_MODEL_PARAMS:
                return None
            # Every stream in every round, all ending together (EqualShares): a stream left
            # to walk on alone would make the last rounds' model its own.
            shortest = int(layout.all_steps.min())
            return EqualShares(max(1, min(AVERAGE_ROUNDS, shortest)))
        target = LIMITED_SYNC_STEPS if limited else SYNC_STEPS
        return max(1, -(-target // layout.n_streams))


@dataclass(frozen=True)
class RoundPlan:
    """Everything a stream needs for one round, besides parameters and optimiser slots."""

    epoch: int
    #: Which steps of each stream the round covers and the streams' weights.
    spec: RoundSpec
    seed: int
    t0: int
    lr_scale: float
    config: SGDConfig
    layout: StreamLayout | None = None
    #: "sum": streams return their parameter updates; "average": their weighted parameters.
    mode: str = "average"
    #: Factor of every stream's update in a summed round (:mod:`dml.optim.summed_rounds`).
    sum_scale: float = 1.0

    @property
    def weights(self) -> tuple:
        return self.spec.weights

    def span(self, s: int) -> tuple[int, int]:
        """Stream ``s``'s steps in this round: ``first .. last - 1``."""
        return self.spec.span(s)


def initial_state(problem, config: SGDConfig, seed: int, params=None) -> TrainState:
    """A fresh :class:`TrainState`: ``problem.init_params(block_rng(seed, "init"))`` unless
    ``params`` are given."""
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
    """(steps per round, per round: [(weights tuple, steps taken)]) with every block a stream.

    The layout of plain local SGD (``stream_steps=None``), kept for the stacked trainer's tests:
    a block of n rows takes ceil(n / batch_size) steps per epoch; round r runs its steps
    [r L, (r + 1) L); blocks with no steps left sit out (weight 0), the others are weighted by
    their row counts; "steps taken" is the longest block's.
    """
    layout = make_streams(lengths, batch_size, None)
    rounds = round_plans(layout, local_steps)
    L = rounds[0].local_steps if rounds else max(int(local_steps or 1), 1)
    return L, [(r.weights, max(r.taken)) for r in rounds]


def _gather(blocks, streams, *parts):
    """``{block index: part}``: the blocks a task reads; with ``streams`` (not None) their
    streams joined (:func:`join_streams`) in the same task."""
    out = dict(zip(blocks, parts))
    return out if streams is None else join_streams(out, streams)


def round_blocks(layout: StreamLayout, streams, spec) -> list:
    """The blocks that streams ``streams`` touch in round ``spec`` (a
    :class:`~dml.optim.streams.RoundSpec` or :class:`RoundPlan`: its ``span(s)``)."""
    return sorted({b for s in streams for b, _, _ in layout.segments(s, *spec.span(s))})


class StreamRunner:
    """Runs rounds over ``data`` laid out as ``layout``: one task per group of streams.

    Persisted data: the groups' blocks are gathered once into one object per group, next to
    each other, so a round costs one task per group whatever the number of blocks; with
    ``join=True`` every stream's blocks are joined into one array there (:func:`join_streams`),
    so a round walks one array per stream instead of its blocks. Data read
    from storage on every pass: one task per stream, reading only the blocks the stream
    touches in that round (a task holds what it reads at once). With ``hold=True`` those blocks
    stay in worker memory from the round that first touches them to the last one that does:
    a stream takes only a few steps per round (Adam's rounds are short), so without it every
    round would read its blocks from storage again, many times per epoch.
    """

    def __init__(self, parts, layout: StreamLayout, persisted: bool, n_tasks: int | None = None,
                 groups=None, hold: bool = False, join: bool = False):
        self.layout = layout
        #: Block index -> the block held in worker memory (data read from storage, ``hold``).
        self.held = {} if hold and not persisted else None
        W = layout.n_streams
        # Persisted data: one group per worker thread. On a cluster the groups' tasks of a
        # collective run each hold a thread for the whole fit and meet at every round, so two
        # groups per thread would share one core and every round would wait for the slower of
        # them (0.95-1.05 s vs 0.72-0.80 s for SGDRegressor's benchmark fit at 1,024 blocks,
        # docs/partition_parallel_sgd.md "What a round costs"). Data read from storage: a task
        # holds every block it reads at once, so one stream per task keeps that to a round's
        # few blocks.
        self.ranges = task_groups(W, (default_n_tasks() if n_tasks is None else n_tasks)
                                  if persisted else W)
        self.group = len(self.ranges[0]) if self.ranges else 1
        self.levels = tree_levels(self.group)
        self.block_parts = parts  # indexed only when not persisted (no groups)
        self.gathered = None
        #: The worker of every stream group's gathered blocks when the client chose it (None:
        #: the scheduler does; known once they are in memory).
        self.workers = None
        if not persisted:
            return
        # With ``join``, every stream's rows in one array, held for the whole fit: an epoch
        # then walks a few large arrays instead of every block (no generator, call or copy per
        # block beyond the permutations). The same numbers (join_streams). The join runs in
        # the task that gathers the group's blocks: one task and one hop per group, not two.
        joins = [tuple((s, layout.starts[s], layout.starts[s + 1]) for s in r)
                 for r in self.ranges] if join else None
        if groups is not None:
            # Blocks held in groups (Blocks.persist): one task per stream group reads them,
            # on the worker the client picks (most of the group's blocks are there).
            bounds = [(layout.starts[r.start], layout.starts[r.stop]) for r in self.ranges]
            gathered = groups.gather(bounds,
                                     then=None if joins is None else (join_streams, joins))
            self.workers = groups.range_workers(bounds)
        else:
            gathered = [delayed(_gather, pure=True)(
                tuple(range(layout.starts[r.start], layout.starts[r.stop])),
                None if joins is None else joins[k],
                *parts[layout.starts[r.start]:layout.starts[r.stop]])
                for k, r in enumerate(self.ranges)]
        self.gathered = list(dask.persist(*gathered))

    def inputs(self, touched) -> list:
        """Per group, the object its round task reads; ``touched(streams)`` lists the blocks
        the group's streams use in this round."""
        if self.gathered is not None:
            return self.gathered
        per_group = [touched(r) for r in self.ranges]
        source = self.block_parts
        if self.held is not None:
            needed = set().union(*per_group)
            for b in [b for b in self.held if b not in needed]:
                del self.held[b]  # no later round of this epoch reads it: freed
            new = sorted(needed - set(self.held))
            self.held.update(zip(new, dask.persist(*[source[b] for b in new])))
            source = self.held
        return [delayed(_gather, pure=True)(tuple(blocks), None, *[source[b] for b in blocks])
                for blocks in per_group]

    def release(self) -> None:
        """Free the blocks held between rounds (end of an epoch)."""
        if self.held is not None:
            self.held.clear()

    def run(self, kernel, problem, payload, plan, touched):
        """``kernel(parts, problem, payload, plan, streams, levels)`` per group, reduced."""
        # One graph layer written out: ``delayed`` would tokenise the plan and the parameters
        # once per group task, which cost more than the round's arithmetic at many blocks.
        deps: list = []
        args = [task_argument(broadcast(a), deps) for a in (problem, payload, plan)]
        name = new_name(task_prefix(kernel))
        layer = {}
        for k, (p, r) in enumerate(zip(self.inputs(touched), self.ranges)):
            layer[(name, k)] = Task((name, k), kernel, task_ref(p, deps), *args, r, self.levels)
        graph = layer_graph(name, layer, deps)
        outs = [Delayed((name, k), graph, layer=name) for k in range(len(layer))]
        # The groups' values are small: the client finishes the tree over them.
        values = dask.compute(*outs)
        return subtree_reduce(list(values), tree_add, tree_levels(len(values)))

    def run_chain(self, problem, payload, steps: list, mode: str, averaging_from: int | None):
        """Several rounds in one graph: ``steps`` is a list of ``(plan, start_t)``.

        A group's task of round k reads the results of every group of round k − 1 and applies
        that round's combine itself (:func:`_chained_round`: the same function of the same
        values in every group, so all groups start from the same payload), then runs its
        streams. Consecutive rounds cost one scheduler hop and no round trip to the client.
        Persisted data only (data read from storage would let the scheduler read later rounds'
        blocks early).

        Returns the last round's combined payload and every round's ``{"loss", "first_loss",
        "nonfinite"}``, in order.
        """
        assert self.gathered is not None
        deps: list = []
        prob = task_argument(broadcast(problem), deps)
        first = task_argument(broadcast(payload), deps)
        name = new_name("sgd-round")
        layer = {}
        top = tree_levels(len(self.ranges))
        refs = [task_ref(p, deps) for p in self.gathered]
        previous: list = []
        started_before = False
        for k, (plan, start_t) in enumerate(steps):
            plan_arg = task_argument(broadcast(plan), deps)
            keys = []
            for g, r in enumerate(self.ranges):
                key = (name, k, g)
                layer[key] = Task(key, _chained_round, refs[g], prob, plan_arg, r, self.levels,
                                  mode, started_before, top, first if k == 0 else None,
                                  *previous)
                keys.append(TaskRef(key))
            previous = keys
            started_before = averaging_from is not None and start_t >= averaging_from
        last = (name, "epoch")
        layer[last] = Task(last, _chain_result, mode, started_before, top, len(previous),
                           *previous, *[TaskRef((name, k, 0)) for k in range(1, len(steps))])
        graph = layer_graph(name, layer, deps)
        return dask.compute(Delayed(last, graph, layer=name))[0]


def run_round(problem, data: TrainingData, state: TrainState, plan: RoundPlan,
              runner: StreamRunner | None = None) -> dict:
    """One round over all streams; returns the combined result (params, slots, loss, ...)."""
    runner = runner or StreamRunner(data.train.parts, plan.layout, data.persisted,
                                    groups=data.train.groups)
    return runner.run(_group_round_kernel, problem, (state.params, state.opt.slots), plan,
                      lambda r: round_blocks(plan.layout, r, plan))


def _score_kernel(X, Y, w, problem, params):
    if X.shape[0] == 0:
        return None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return problem.score_stats(params, X, Y, w)


def evaluate_score(problem, blocks, params) -> float:
    """``problem.score_from_stats`` of the stats summed over ``blocks`` (one pass)."""
    stats = blocks.map_reduce(_score_kernel, problem, params, combine=tree_add)
    return problem.score_from_stats(stats)


def _averaging_from(config: SGDConfig) -> int | None:
    """The step counter from which the ASGD average accumulates (None: no averaging)."""
    return int(config.average) if config.averaging else None


def apply_round(state: TrainState, out: dict, mode: str, start_t: int, taken: int,
                config: SGDConfig) -> None:
    """Combine a round's reduced result into ``state`` (see the module docstring)."""
    start = _averaging_from(config)
    state.params, state.opt.slots = combined(state.params, state.opt.slots, out, mode,
                                             start is not None and start_t >= start)
    state.opt.t = start_t + taken


#: Rounds of persisted data submitted as one graph (see :meth:`StreamRunner.run_chain`).
ROUNDS_PER_SUBMIT = 32


def round_cost_params(problem) -> int:
    """The parameter count that decides the rounds per epoch (0: not a model whose rounds cost
    more than its steps)."""
    return problem.n_params if problem.steps_cheaper_than_params else 0


#: Blocks read from storage are held between rounds only while the blocks of one round (about
#: one or two per stream) take at most this fraction of the persist budget.
HOLD_FRACTION = 0.25


def _hold_fits(data: TrainingData, layout: StreamLayout) -> bool:
    """Whether a round's blocks (two per stream at most, each as large as the largest block, in
    float64 with targets and weights) may stay in worker memory between rounds."""
    if not len(data.lengths):
        return False
    block_bytes = int(np.max(data.lengths)) * (int(data.train.n_features) + 2) * 8
    return fits_persist_budget(2 * layout.n_streams * block_bytes / HOLD_FRACTION)


def _join_fits(problem, data: TrainingData) -> bool:
    """Whether a stream's persisted blocks may be joined into one array for the fit
    (:func:`dml.optim.data.join_fits`)."""
    return data.persisted and join_fits(problem, data.n_train, data.train.n_features)


def make_epoch_fn(problem, data: TrainingData, config: SGDConfig, train_config: TrainConfig):
    """The ``epoch_fn`` of :func:`~dml.optim.training.run_epochs` for stream SGD on ``data``."""
    layout = stream_layout(data.lengths, config.batch_size, config.stream_steps)
    mode = config.combine_mode if layout.n_streams > 1 else "average"
    # The runner first: it submits the joining of the streams' blocks, which the cluster then
    # does while the curvature pass below runs (neither waits for the other).
    runner = StreamRunner(data.train.parts, layout, data.persisted, groups=data.train.groups,
                          hold=not data.persisted and _hold_fits(data, layout),
                          join=_join_fits(problem, data))
    # Summed rounds are kept short enough to be the sequential steps' first-order equivalent.
    limit = round_limit(problem, data.train, config) if mode == "sum" else None
    local_steps = config.steps_per_round(layout, round_cost_params(problem),
                                         curvature_limited(limit))
    # Averaged rounds are kept short while the schedule's running average is (first epoch).
    bound = round_bound(config, mode, limit)
    collective = None
    if runner.gathered is not None:
        from dml.optim.collective_rounds import CollectiveRounds

        # The joined rows' size, for the memory check of the runs before they are joined.
        collective = CollectiveRounds(
            runner, nbytes=int(data.n_train) * (int(data.train.n_features) + 2) * 8)
    n_train = data.n_train
    plans_by_steps: dict = {}

    def epoch_fn(state: TrainState) -> EpochResult:
        epoch = state.epoch + 1
        loss_total = 0.0
        reference = None
        # Each round as long as the step size at its own start allows (rounds lengthen as a
        # decaying step size falls): a function of the state's step counter only.
        per_stream = epoch_rounds(local_steps, layout, bound,
                                  lambda t: config.schedule(t, state.lr_scale), state.opt.t)
        if per_stream not in plans_by_steps:
            plans_by_steps[per_stream] = round_plans(layout, per_stream)
        rounds = plans_by_steps[per_stream]

        def plan_of(spec, t0):
            scale = 1.0 if limit is None else sum_scale(
                limit.steps(config.schedule(t0 + 1, state.lr_scale)), spec.total_steps)
            return RoundPlan(epoch=epoch, spec=spec, seed=state.seed, t0=t0,
                             lr_scale=state.lr_scale, config=config, layout=layout, mode=mode,
                             sum_scale=scale)

        def account(out, start_t):
            nonlocal loss_total, reference
            if start_t == 0 and reference is None:
                reference = out["first_loss"] + config.penalty.value(state.params)
            loss_total += out["loss"]
            if out["nonfinite"] or not math.isfinite(loss_total):
                raise DivergedError(diverged_message(
                    train_config.name, epoch, loss_total if not math.isfinite(loss_total)
                    else math.inf, train_config.lr_hint))

        if runner.gathered is not None:
            steps, t = [], state.opt.t
            for spec in rounds:
                steps.append((plan_of(spec, t), t))
                t += spec.total_steps
            payload = (state.params, state.opt.slots)
            done = None
            if collective is not None and collective.usable():
                # On a cluster: the epoch in a run of long-lived tasks that exchange their
                # results directly and stay up for the next epoch
                # (dml.optim.collective_rounds); the same model.
                done = collective.run_epoch(problem, payload, steps, mode,
                                            _averaging_from(config))
            if done is not None:
                payload, infos = done
                for (_, start_t), info in zip(steps, infos):
                    account(info, start_t)
            else:
                # Rounds chained on the cluster, ROUNDS_PER_SUBMIT per graph.
                for a in range(0, len(steps), ROUNDS_PER_SUBMIT):
                    window = steps[a:a + ROUNDS_PER_SUBMIT]
                    payload, infos = runner.run_chain(problem, payload, window, mode,
                                                      _averaging_from(config))
                    for (_, start_t), info in zip(window, infos):
                        account(info, start_t)
            state.params, state.opt.slots = payload
            state.opt.t = t
        else:
            try:
                for spec in rounds:
                    start_t = state.opt.t
                    out = run_round(problem, data, state, plan_of(spec, start_t), runner)
                    account(out, start_t)
                    apply_round(state, out, mode, start_t, spec.total_steps, config)
            finally:
                runner.release()
        params = final_params(state, config)
        objective = loss_total / max(n_train, 1) + config.penalty.value(state.params)
        score = None
        if data.validation is not None:
            score = evaluate_score(problem, data.validation, params)
        lr = config.schedule(max(state.opt.t, 1), state.lr_scale)
        return EpochResult(objective, score=score, learning_rate=lr, reference=reference,
                           info={"steps": int(state.opt.t)})

    # The fit's end (or an error) ends the run that spans its epochs.
    epoch_fn.close = collective.close if collective is not None else (lambda: None)
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
    try:
        return run_epochs(state, epoch_fn, train_config, fingerprint=fingerprint,
                          max_epochs=max_epochs)
    finally:
        epoch_fn.close()
