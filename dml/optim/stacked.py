"""Many fits of one problem trained together: one pass over the blocks per epoch for all.

A hyper-parameter search fits the same estimator with different penalty strengths or step sizes
on the training rows of every fold. Within a fold, those fits visit the same blocks in the same
order with the same mini-batches (the order depends on the seed, the epoch and the block, never
on the hyper-parameters); across folds, each fold's training rows of a block are a subset of that
block. So all the fits can share the passes over the data:

* the models form a grid of G *groups* (the folds) of m models (the candidates); their
  parameters are one (G, m, n_params) array;
* a round is one task per block of the whole data set. Each task takes, for every group, the
  group's training rows of the block (a boolean row mask per group, :class:`RowGroups`) in that
  group's own epoch order, and runs every group's mini-batch steps side by side: one batched
  matrix product computes all decision values (:meth:`LinearProblem.batch_loss_grad_stacked`),
  so a step for G·m models costs about what a step for one costs;
* every model keeps its own :class:`~dml.optim.state.TrainState`, stopping rule, history and
  divergence test (:func:`dml.optim.training.close_epoch`): a model that converges or diverges
  leaves the grid and the others go on.

The computation of model (g, j) is exactly its own fit's — on the blocks of ``take_rows(X,
train_g)`` (the same block indices, hence the same epoch permutations; the same epoch plan,
step counter, schedule, averaging weights and reduction tree) — except for the rounding of the
matrix products, so the results equal separate fits up to rounding.

What may differ between models are the per-model scalars of a step: penalty weights (alpha,
l1_ratio) and schedule constants (eta0, power_t, the ``optimal`` t₀). The problem, optimiser,
batch size, local steps, shuffling, averaging and seed are shared (:func:`check_stackable`);
checkpoints, callbacks, progress displays and validation-based early stopping are per-fit
features, so fits that use them are not stacked.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
from dask import delayed

from dml._blocks import tree_add
from dml.optim.data import TrainingData
from dml.optim._stacked_kernels import sgd_segment
from dml.optim.dense_steps import kernel_terms
from dml.optim._round_kernels import _ITERATE_SLOTS
from dml.optim.engine import SGDConfig, StreamRunner, round_blocks, round_cost_params
from dml.optim.penalties import StackedPenalty
from dml.optim.schedules import StackedRate
from dml.optim.streams import (StreamLayout, _join_rows, block_order, make_streams, round_plans,
                               subtree_reduce)
from dml.optim.averaged_rounds import epoch_rounds, round_bound
from dml.optim.summed_rounds import curvature_limited, group_limits, sum_scale
from dml.optim.training import (DivergedError, EpochResult, close_epoch, diverged_message)

__all__ = ["train_stacked", "check_stackable", "RowGroups", "StreamMismatch"]

#: Bytes of gathered batch rows a task holds at a time (all groups together).
_WINDOW_BYTES = 4 << 20


class StreamMismatch(ValueError):
    """The groups' own fits would cut the blocks into different streams: train them apart."""


@dataclass
class RowGroups:
    """Which rows of every block each group trains on.

    Attributes
    ----------
    masks : list
        Per block, a (delayed or persisted) boolean array of shape (block rows, G).
    lengths : ndarray of shape (n_blocks, G)
        Training rows of each group in each block.
    block_index : ndarray of shape (n_blocks, G)
        The index block b has among group g's own blocks, which seeds its epoch permutations:
        the group's own fit sees the blocks of ``take_rows(X, rows)``, where a Dask array
        drops the blocks left empty (``da.concatenate`` keeps no zero-length chunks) and a
        Dask DataFrame keeps them.
    """

    masks: list
    lengths: np.ndarray
    block_index: np.ndarray

    @classmethod
    def from_indices(cls, block_lengths, train_indices, persist=None, drop_empty=True):
        """Groups from each group's training row indices (e.g. the folds of a splitter).

        An entry None means all rows, in the blocks as they are (a fit on X itself, e.g. a
        search's refit). ``persist`` (e.g. ``client.persist``) puts the masks on the workers
        once; ``drop_empty``: whether the groups' own blocks leave out empty ones (Dask arrays).
        """
        block_lengths = np.asarray(block_lengths, dtype=np.int64)
        n = int(block_lengths.sum())
        full = np.zeros((n, len(train_indices)), dtype=bool)
        for g, idx in enumerate(train_indices):
            if idx is None:
                full[:, g] = True
            else:
                full[np.asarray(idx, dtype=np.int64), g] = True
        bounds = np.concatenate([[0], np.cumsum(block_lengths)])
        masks = [delayed(full[a:b].copy(), pure=False) for a, b in zip(bounds[:-1], bounds[1:])]
        if persist is not None:
            masks = list(persist(masks))
        lengths = np.array([full[a:b].sum(axis=0) for a, b in zip(bounds[:-1], bounds[1:])],
                           dtype=np.int64).reshape(len(block_lengths), len(train_indices))
        block_index = np.repeat(np.arange(len(block_lengths))[:, None], len(train_indices),
                                axis=1)
        if drop_empty:
            dropped = np.cumsum(lengths > 0, axis=0) - 1
            subsets = [g for g, idx in enumerate(train_indices) if idx is not None]
            block_index[:, subsets] = dropped[:, subsets]
        return cls(masks, lengths, block_index)


def check_stackable(configs, train_configs) -> None:
    """Raise ValueError when the fits differ in more than per-model step scalars."""
    first = configs[0]
    for c in configs[1:]:
        same = (c.optimizer == first.optimizer and c.batch_size == first.batch_size
                and c.local_steps == first.local_steps and c.shuffle == first.shuffle
                and c.stream_steps == first.stream_steps and c.combine_mode == first.combine_mode
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
class _GridPlan:
    """One round of the packed grid: per packed group its mask column, steps and weights."""

    epoch: int
    seed: int
    config: SGDConfig
    #: Per packed group: its column in the row masks (None: every row), its round's
    #: :class:`~dml.optim.streams.RoundSpec` (None: the group has no round left in this epoch)
    #: and its step counter before the round.
    columns: tuple
    specs: tuple
    t0: tuple
    #: weights[stream][packed group]: the stream's weight in that group (0: sits out).
    weights: tuple
    #: block_index[block][packed group]: the block's index among the group's own blocks.
    block_index: tuple
    lr_scale: np.ndarray
    penalty: StackedPenalty
    rate: StackedRate
    #: Per packed group: its stream layout (the same stream boundaries for every group; the
    #: steps per block are the group's own).
    layouts: tuple = ()
    #: "sum" or "average" (:mod:`dml.optim.engine`), shared by the grid.
    mode: str = "average"
    #: Per packed group and model: the factor of its summed round (None: all 1).
    sum_scale: np.ndarray | None = None

    def span(self, g: int, s: int) -> tuple[int, int]:
        """Group ``g``'s steps of stream ``s`` in this round."""
        spec = self.specs[g]
        return (0, 0) if spec is None else spec.span(s)


def _update_average(P, slots, t, start):
    """:func:`dml.optim.optimizers.update_average` with a step counter per group."""
    avg = slots.get("average")
    if avg is None:
        return
    count = (np.asarray(t) - start)[:, None, None]
    avg[...] = np.where(count <= 0, P, avg + (P - avg) / np.maximum(count, 1))


def _compiled(problem, cfg, penalty, P, X):
    """``(loss code, loss parameter, penalised entries)`` when the compiled window kernel
    (:mod:`dml.optim._stacked_kernels`) applies (:func:`dml.optim.dense_steps.kernel_terms`),
    else None."""
    if P.dtype != np.float64:
        return None
    return kernel_terms(problem, cfg, penalty, P.shape[2], X)


def _grid_steps(problem, P, slots, rows, X, T, w, plan, groups, first_k, last_k, loss_sum,
                first_loss):
    """Steps ``first_k..last_k-1`` of this round for the packed groups ``groups``, in place."""
    cfg = plan.config
    B = cfg.batch_size
    opt = cfg.optimizer
    penalty = plan.penalty if len(groups) == P.shape[0] else plan.penalty.subset(groups)
    rate = plan.rate if len(groups) == P.shape[0] else plan.rate.subset(groups)
    scale = plan.lr_scale[groups]
    t0 = np.array([plan.t0[g] for g in groups])
    avg_start = int(cfg.average) if cfg.averaging else None
    acc = np.zeros((len(groups), P.shape[1]))
    compiled = _compiled(problem, cfg, penalty, P, X)
    if compiled is not None:
        code, param, n_pen = compiled
        lens = np.array([len(rows[g]) for g in groups], dtype=np.int64)
        padded = np.zeros((len(groups), int(lens.max())), dtype=np.int64)
        for a, g in enumerate(groups):
            padded[a, :lens[a]] = rows[g]
        t_seg = t0[None, :] + np.arange(first_k, last_k)[:, None] + 1
        lr = np.ascontiguousarray(rate.many(t_seg, scale)[..., 0])
        fl = np.zeros_like(acc)
        avg = slots["average"] if avg_start is not None else np.zeros((1, 1, 1))
        sgd_segment(P, np.ascontiguousarray(X), np.ascontiguousarray(T, dtype=np.float64),
                    np.empty(0) if w is None else np.ascontiguousarray(w, dtype=np.float64),
                    padded, lens, first_k, last_k, B, lr, t_seg, code, param,
                    np.ascontiguousarray(penalty.l2[..., 0]),
                    np.ascontiguousarray(penalty.l1[..., 0]), n_pen, avg,
                    -1 if avg_start is None else avg_start, acc, fl)
        if first_k == 0:
            first_loss[groups] = fl
        loss_sum[groups] += acc
        return
    d = X.shape[1]
    width = getattr(problem, "stacked_width", d)
    per_step = len(groups) * B * width * X.itemsize
    window = max(1, _WINDOW_BYTES // max(per_step, 1))
    tail = T.shape[1:]
    for w0 in range(first_k, last_k, window):
        w1 = min(w0 + window, last_k)
        # Gather the window's batch rows of every group once (zero-padded past a group's end).
        span = (w1 - w0) * B
        Xw = np.zeros((len(groups), span, width), dtype=X.dtype)
        Tw = np.zeros((len(groups), span) + tail, dtype=T.dtype)
        Ww = np.zeros((len(groups), span))
        counts = np.zeros((w1 - w0, len(groups)), dtype=np.int64)
        for a, g in enumerate(groups):
            sel = rows[g][w0 * B:w1 * B]
            Xw[a, :len(sel), :d] = X[sel]
            if width > d:  # the problem's column of ones (stacked_width)
                Xw[a, :len(sel), d] = 1.0
            Tw[a, :len(sel)] = T[sel]
            Ww[a, :len(sel)] = 1.0 if w is None else w[sel]
            counts[:, a] = np.clip(len(sel) - np.arange(w1 - w0) * B, 0, B)
        # Per step of the window: the batch sizes (divisors), step numbers and step sizes, all
        # computed at once with the per-step arithmetic.
        sizes = counts.astype(np.float64)
        t_win = t0[None, :] + np.arange(w0, w1)[:, None] + 1
        lr_win = rate.many(t_win, scale)
        unweighted = (counts == B).all(axis=1) if w is None else np.zeros(w1 - w0, bool)
        for i in range(w1 - w0):
            lo = i * B
            loss, grad = problem.batch_loss_grad_stacked(
                P, Xw[:, lo:lo + B], Tw[:, lo:lo + B], None if unweighted[i] else Ww[:, lo:lo + B])
            if w0 + i == 0:
                first_loss[groups] = loss / sizes[i][:, None]
            acc += loss
            grad /= sizes[i][:, None, None]
            penalty.add_grad(P, grad)
            lr = lr_win[i]
            opt.step(P, grad, lr, slots, t_win[i][:, None, None])
            penalty.prox(P, lr)
            if avg_start is not None:
                _update_average(P, slots, t_win[i], avg_start)
    loss_sum[groups] += acc


def _grid_stream_steps(parts, segs, problem, P, slots, plan: _GridPlan, loss_sum, first_loss):
    """Run one stream's steps of the round for every packed group, in place.

    ``segs[g]`` is the group's :meth:`~dml.optim.streams.StreamLayout.segments` of the round
    (groups without steps are absent). A group's rows are its blocks' rows in their epoch
    orders, one block after the other, cut into batches across the blocks' boundaries as its
    own fit cuts them; when the round touches several blocks they are put side by side.
    """
    B = plan.config.batch_size
    n_groups = len(plan.columns)
    blocks = sorted({b for pieces in segs.values() for b, _, _ in pieces})
    if not blocks:
        return
    offsets, off = {}, 0
    for b in blocks:
        offsets[b] = off
        off += parts[b][0].shape[0]
    rows, n_steps = {}, np.zeros(n_groups, dtype=np.int64)
    for g, pieces in segs.items():
        col = plan.columns[g]
        chunks = []
        for b, lo, hi in pieces:
            mask = parts[b][2][1]
            idx = (np.arange(parts[b][0].shape[0]) if col is None
                   else np.flatnonzero(mask[:, col]))
            # The group's own fit sees these rows as one of its blocks: the same permutation.
            order = (block_order(plan.seed, plan.epoch, plan.block_index[b][g], len(idx))
                     if plan.config.shuffle else np.arange(len(idx)))
            chunks.append(offsets[b] + idx[order[lo:hi]])
        rows[g] = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
        n_steps[g] = -(-len(rows[g]) // B)
    if len(blocks) == 1:
        X, Y, (w, _) = parts[blocks[0]]
    else:
        X, Y, w = _side_by_side([parts[b] for b in blocks])
    want_first = {g: True for g in segs}
    t0 = tuple(int(plan.t0[g]) if g in segs else 0 for g in range(n_groups))
    plan = replace(plan, t0=t0)
    T = problem.stack_targets(Y)
    m = P.shape[1]
    # Groups run out of rows at different steps: run the steps in segments with a fixed set of
    # active groups (at most one segment per group), on a copy of their rows of P when the
    # segment leaves groups out.
    ends = sorted({int(k) for k in n_steps if k > 0})
    start = 0
    for end in ends:
        groups = [g for g in range(n_groups) if n_steps[g] >= end]
        ls, fl = np.zeros((len(groups), m)), np.zeros((len(groups), m))
        if len(groups) == n_groups:
            _grid_steps(problem, P, slots, rows, X, T, w, plan, groups, start, end, ls, fl)
            sub_index = groups
        else:
            sub = P[groups]
            sub_slots = {k: v[groups] for k, v in slots.items()}
            local_rows = {a: rows[g] for a, g in enumerate(groups)}
            _grid_steps(problem, sub, sub_slots, local_rows, X, T, w,
                        _subset_plan(plan, groups), list(range(len(groups))), start, end,
                        ls, fl)
            P[groups] = sub
            for k, v in sub_slots.items():
                slots[k][groups] = v
            sub_index = groups
        for a, g in enumerate(sub_index):
            loss_sum[g] += ls[a]
            if start == 0 and want_first[g]:
                first_loss[g] = fl[a]
        start = end


def _grid_stream(parts, problem, payload, plan: _GridPlan, s):
    """Stream ``s`` of this round for every packed group: its blocks in order."""
    n_groups = len(plan.columns)
    active = np.array([plan.weights[s][g] > 0.0 for g in range(n_groups)])
    if not active.any():
        return None
    P_in, slots_in = payload
    P = P_in.copy()
    slots = {k: v.copy() for k, v in slots_in.items()}
    m = P.shape[1]
    loss_sum = np.zeros((n_groups, m))
    first_loss = np.zeros((n_groups, m))
    segs = {g: plan.layouts[g].segments(s, *plan.span(g, s))
            for g in range(n_groups) if active[g]}
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        _grid_stream_steps(parts, segs, problem, P, slots, plan, loss_sum, first_loss)
        finite = np.isfinite(loss_sum) & np.isfinite(P).all(axis=2)
    weight = np.array([plan.weights[s][g] for g in range(n_groups)])
    scale3 = weight[:, None, None]
    act3 = active[:, None, None]
    # As the engine's stream result for the groups this stream trains; exact zeros for the
    # others (a diverged model's nan times 0 would not be 0).
    if plan.mode == "sum":
        out_params = np.where(act3, P - P_in, 0.0)
        out_slots = {k: np.where(act3, (v - slots_in[k]) if k in _ITERATE_SLOTS else scale3 * v,
                                 0.0) for k, v in slots.items()}
        if plan.sum_scale is not None:
            # As the engine's summed round: each model's update times its own factor.
            factor = plan.sum_scale[:, :, None]
            out_params *= factor
            for k in _ITERATE_SLOTS:
                if k in out_slots:
                    out_slots[k] *= factor
    else:
        out_params = np.where(act3, scale3 * P, 0.0)
        out_slots = {k: np.where(act3, scale3 * v, 0.0) for k, v in slots.items()}
    return {
        "params": out_params,
        "slots": out_slots,
        "loss": np.where(active[:, None], loss_sum, 0.0),
        "first_loss": np.where(active[:, None], weight[:, None] * first_loss, 0.0),
        "nonfinite": (active[:, None] & ~finite).astype(np.int64),
    }


def _grid_group_kernel(parts, problem, payload, plan: _GridPlan, streams, levels):
    """One task: the streams ``streams`` of this round, reduced as their subtree."""
    results = [_grid_stream(parts, problem, payload, plan, s) for s in streams]
    return subtree_reduce(results, tree_add, levels)


def _subset_plan(plan: _GridPlan, groups) -> _GridPlan:
    pick = lambda seq: tuple(seq[g] for g in groups)  # noqa: E731
    return replace(plan, columns=pick(plan.columns), specs=pick(plan.specs), t0=pick(plan.t0),
                   weights=tuple(pick(w) for w in plan.weights),
                   block_index=tuple(pick(b) for b in plan.block_index),
                   lr_scale=plan.lr_scale[groups], penalty=plan.penalty.subset(groups),
                   rate=plan.rate.subset(groups),
                   layouts=pick(plan.layouts) if plan.layouts else (),
                   sum_scale=None if plan.sum_scale is None else plan.sum_scale[groups])


def _side_by_side(parts):
    """``(X, Y, w)`` of several blocks ``(X, Y, (w, mask))`` one after the other."""
    return _join_rows([(X, Y, w) for X, Y, (w, _) in parts])


def _with_masks(part, mask):
    X, Y, w = part
    return X, Y, (w, mask)


def _with_no_mask(part):
    X, Y, w = part
    return X, Y, (w, None)


def group_layout(lengths, block_index, cfg: SGDConfig) -> StreamLayout:
    """A group's stream layout over the grid's blocks, as its own fit cuts its own blocks.

    The group's own fit sees the blocks ``block_index`` numbers (a Dask array's empty blocks
    are dropped: they share the index of the block before them); its streams are mapped back
    to the grid's blocks, every stream starting at the grid block of its first own block.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    block_index = np.asarray(block_index, dtype=np.int64)
    n_own = int(block_index.max()) + 1 if len(block_index) else 0
    own = np.zeros(n_own, dtype=np.int64)
    np.add.at(own, block_index[block_index >= 0], lengths[block_index >= 0])
    own_layout = make_streams(own, cfg.batch_size, cfg.stream_steps)
    first_full = {}
    for b, j in enumerate(block_index.tolist()):
        first_full.setdefault(j, b)
    starts = [0] + [first_full[j] for j in own_layout.starts[1:-1]] + [len(lengths)]
    steps = -(-lengths // cfg.batch_size)
    return StreamLayout(tuple(int(x) for x in starts), tuple(int(x) for x in steps),
                        tuple(int(x) for x in lengths), int(cfg.batch_size))


def train_stacked(problem, data: TrainingData, configs, train_configs, states, *,
                  row_groups: RowGroups | None = None):
    """Train a grid of models of ``problem`` in shared passes over ``data``.

    Parameters
    ----------
    problem : Problem
        With ``stack_targets`` and ``batch_loss_grad_stacked`` (e.g.
        :class:`dml.linear_model._problem.LinearProblem`).
    data : TrainingData
        From :func:`dml.optim.data.prepare` (no validation part), shared by all the models.
    configs, train_configs, states : lists (one group) or lists of lists (``[group][model]``)
        Per model its :class:`SGDConfig`, :class:`TrainConfig` and fresh
        :class:`TrainState` (all with the same seed). The configs may differ only in the
        penalty weights and the schedule's constants.
    row_groups : RowGroups, optional
        The rows each group trains on (one group per mask column); None: one group, all rows.

    Returns
    -------
    list
        Shaped as ``states``: per model its final :class:`TrainState`, or the
        :class:`DivergedError` it stopped with.

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
    flat = not (states and isinstance(states[0], (list, tuple)))
    if flat:
        configs, train_configs, states = [list(configs)], [list(train_configs)], [list(states)]
    n_groups = len(states)
    if row_groups is None and n_groups != 1:
        raise ValueError("several groups need row_groups (the rows each group trains on)")
    if row_groups is not None and row_groups.lengths.shape[1] != n_groups:
        raise ValueError(f"row_groups has {row_groups.lengths.shape[1]} groups, the models "
                         f"{n_groups}")
    cells = [(g, j) for g in range(n_groups) for j in range(len(states[g]))]
    if not cells or any(len(configs[g]) != len(states[g]) or
                        len(train_configs[g]) != len(states[g]) for g in range(n_groups)):
        raise ValueError("train_stacked needs one config, train config and state per model")
    all_cfg = [configs[g][j] for g, j in cells]
    all_tc = [train_configs[g][j] for g, j in cells]
    for c, tc in zip(all_cfg, all_tc):
        c.validate()
        tc.validate()
    check_stackable(all_cfg, all_tc)
    if len({states[g][j].seed for g, j in cells}) != 1 or \
            len({states[g][j].opt.t for g, j in cells}) != 1:
        raise ValueError("stacked fits start together: the same seed and step counter")
    # As engine.train: the divergence message names the schedule, and the adaptive schedule's
    # plateau rule needs its eta0.
    train_configs = [[replace(tc, lr_hint=tc.lr_hint or c.schedule.describe(),
                              adaptive_eta0=(c.schedule.eta0 if c.schedule.adaptive
                                             and tc.adaptive_eta0 is None
                                             else tc.adaptive_eta0))
                      for c, tc in zip(configs[g], train_configs[g])] for g in range(n_groups)]
    cfg = all_cfg[0]
    if row_groups is None:
        lengths = np.asarray(data.lengths, dtype=np.int64)[:, None]
        blocks = replace(data.train, parts=[delayed(_with_no_mask, pure=True)(p)
                                            for p in data.train.parts])
    else:
        lengths = np.asarray(row_groups.lengths, dtype=np.int64)
        blocks = replace(data.train, parts=[delayed(_with_masks, pure=True)(p, mk)
                                            for p, mk in zip(data.train.parts,
                                                             row_groups.masks)])
    block_index = (np.repeat(np.arange(lengths.shape[0])[:, None], n_groups, axis=1)
                   if row_groups is None else row_groups.block_index)
    layouts = [group_layout(lengths[:, g], block_index[:, g], cfg) for g in range(n_groups)]
    if len({lay.starts for lay in layouts}) != 1:
        raise StreamMismatch("the groups' own fits cut their blocks into different streams")
    plans_by_steps: dict = {}
    mode = cfg.combine_mode if layouts[0].n_streams > 1 else "average"
    runner = StreamRunner(blocks.parts, layouts[0], data.persisted)
    # Each group's own fit limits its summed rounds by the curvature of its own rows.
    limits = (group_limits(problem, replace(blocks, groups=None), n_groups, cfg)
              if mode == "sum" else [None] * n_groups)
    # Whether a group's own fit targets the longer rounds of curvature-limited fits.
    targets = {g: cfg.steps_per_round(layouts[g], round_cost_params(problem),
                                      curvature_limited(limits[g])) for g in range(n_groups)}
    results = [list(row) for row in states]
    for g, j in cells:
        states[g][j].stop_reason = None
    active = [(g, j) for g, j in cells if states[g][j].epoch < train_configs[g][j].max_iter]
    while active:
        started = time.perf_counter()
        # Models whose own fits take rounds of different lengths this epoch (their summed
        # rounds are capped by their step sizes) share no pass: one grid per round length.
        by_steps: dict = {}
        for g, j in active:
            c, st = configs[g][j], states[g][j]
            steps = epoch_rounds(targets[g], layouts[g], round_bound(c, mode, limits[g]),
                                 lambda t, c=c, st=st: c.schedule(t, st.lr_scale), st.opt.t)
            by_steps.setdefault(steps, []).append((g, j))
        out = {}
        for steps, members in by_steps.items():
            if steps not in plans_by_steps:
                plans_by_steps[steps] = [round_plans(lay, steps) for lay in layouts]
            out.update(zip(members, _grid_epoch(
                problem, runner, row_groups is not None, configs, train_configs, states,
                members, plans_by_steps[steps], lengths, block_index, layouts, mode,
                limits)))
        seconds = time.perf_counter() - started
        still = []
        for g, j in active:
            res = out[(g, j)]
            if isinstance(res, Exception):
                results[g][j] = res
                continue
            tc = train_configs[g][j]
            try:
                close_epoch(states[g][j], res, tc, limit=tc.max_iter, max_epochs=None,
                            seconds=seconds)
            except DivergedError as exc:
                results[g][j] = exc
                continue
            if states[g][j].stop_reason is None:
                still.append((g, j))
        active = still
    return results[0] if flat else results


def _sum_scales(limits, groups, cf, st, t, specs):
    """Per packed group and model, its summed round's factor (as its own fit's), or None."""
    if all(limits[g] is None for g in groups):
        return None
    out = np.ones((len(groups), len(cf[0])))
    for a, g in enumerate(groups):
        if specs[a] is None or limits[g] is None:
            continue
        for k, (c, s) in enumerate(zip(cf[a], st[a])):
            out[a, k] = sum_scale(limits[g].steps(c.schedule(int(t[a]) + 1, s.lr_scale)),
                                  specs[a].total_steps)
    return None if (out == 1.0).all() else out


def _grid_epoch(problem, runner, masked, configs, train_configs, states, active, plans,
                lengths, block_index, layouts, mode, limits):
    """One epoch for the ``active`` models, packed into a rectangular (G', m', p) grid."""
    groups = sorted({g for g, _ in active})
    members = {g: [j for gg, j in active if gg == g] for g in groups}
    width = max(len(v) for v in members.values())
    # Pad short groups with copies of their first model: computed, never read back.
    packed = [[members[g][min(k, len(members[g]) - 1)] for k in range(width)] for g in groups]
    st = [[states[g][j] for j in row] for g, row in zip(groups, packed)]
    cf = [[configs[g][j] for j in row] for g, row in zip(groups, packed)]
    cfg = cf[0][0]
    penalty = StackedPenalty([[c.penalty for c in row] for row in cf])
    rate = StackedRate([[c.schedule for c in row] for row in cf])
    P = np.stack([np.stack([s.params for s in row]) for row in st])
    slots = {k: np.stack([np.stack([s.opt.slots[k] for s in row]) for row in st])
             for k in st[0][0].opt.slots}
    scale = np.array([[s.lr_scale for s in row] for row in st], dtype=np.float64)
    epoch = st[0][0].epoch + 1
    t = np.array([row[0].opt.t for row in st], dtype=np.int64)
    G = len(groups)
    loss_total = np.zeros((G, width))
    reference = [None] * G
    failed = np.zeros((G, width), dtype=bool)
    n_rounds = max(len(plans[g]) for g in groups)
    n_blocks = lengths.shape[0]
    W = layouts[0].n_streams
    avg_start = int(cfg.average) if cfg.averaging else None
    for r in range(n_rounds):
        in_round = [r < len(plans[g]) for g in groups]
        specs = [plans[g][r] if in_round[a] else None for a, g in enumerate(groups)]
        weights = tuple(tuple(specs[a].weights[s] if in_round[a] else 0.0 for a in range(G))
                        for s in range(W))
        plan = _GridPlan(
            epoch=epoch, seed=st[0][0].seed, config=cfg,
            columns=tuple(g if masked else None for g in groups),
            specs=tuple(specs),
            t0=tuple(int(x) for x in t), weights=weights,
            block_index=tuple(tuple(int(block_index[b, g]) for g in groups)
                              for b in range(n_blocks)),
            lr_scale=scale, penalty=penalty, rate=rate,
            layouts=tuple(layouts[g] for g in groups), mode=mode,
            sum_scale=_sum_scales(limits, groups, cf, st, t, specs) if mode == "sum"
            else None)
        def touched(streams, specs=specs, groups=groups):
            # Groups differ in steps per block: the blocks any of them uses this round.
            return sorted({b for a, g in enumerate(groups) if specs[a] is not None
                           for b in round_blocks(layouts[g], streams, specs[a])})

        out = runner.run(_grid_group_kernel, problem, (P, slots), plan, touched)
        start_value = penalty.value(P)
        for a in range(G):
            if not in_round[a]:
                continue
            if t[a] == 0 and reference[a] is None:
                reference[a] = out["first_loss"][a] + start_value[a]
            loss_total[a] += out["loss"][a]
            failed[a] |= (out["nonfinite"][a] > 0) | ~np.isfinite(loss_total[a])
            if mode == "sum":
                P[a] = P[a] + out["params"][a]
                started = avg_start is not None and t[a] >= avg_start
                for k in slots:
                    if k in _ITERATE_SLOTS:
                        slots[k][a] = (slots[k][a] + out["slots"][k][a]) if started else P[a]
                    else:
                        slots[k][a] = out["slots"][k][a]
            else:
                P[a] = out["params"][a]
                for k in slots:
                    slots[k][a] = out["slots"][k][a]
            t[a] += specs[a].total_steps
    objective = loss_total / np.array([max(int(lengths[:, g].sum()), 1)
                                       for g in groups])[:, None] + penalty.value(P)
    results = {}
    for a, g in enumerate(groups):
        for k, j in enumerate(members[g]):
            state, c, tc = states[g][j], configs[g][j], train_configs[g][j]
            if failed[a, k]:
                results[(g, j)] = DivergedError(diverged_message(
                    tc.name, epoch, loss_total[a, k] if not math.isfinite(loss_total[a, k])
                    else math.inf, tc.lr_hint))
                continue
            state.params = np.array(P[a, k])
            state.opt.slots = {name: np.array(v[a, k]) for name, v in slots.items()}
            state.opt.t = int(t[a])
            lr = c.schedule(max(int(t[a]), 1), state.lr_scale)
            ref = None if reference[a] is None else float(reference[a][k])
            results[(g, j)] = EpochResult(float(objective[a, k]), learning_rate=lr,
                                          reference=ref, info={"steps": int(t[a])})
    return [results[cell] for cell in active]
