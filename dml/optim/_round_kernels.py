"""The per-round task functions of partition-parallel SGD: what runs on a worker.

A round (:mod:`dml.optim.engine`, the driver) hands every group of streams one task that walks
its streams' mini-batch steps from the round's parameters (:func:`local_sgd_steps` for a block's
rows, :func:`stream_steps_run` for a stream cut across blocks) and reduces the streams' results
as their subtree of the fixed reduction tree (:func:`_group_round_kernel`); the combine of a
round (:func:`combined`: summed updates or their average, docs/partition_parallel_sgd.md) runs
on the client, or on the workers when rounds are chained (:func:`_chained_round`) or run as one
collective run (:mod:`dml.optim.collective_rounds`). They are kept apart from the driver so
they can be tested without a cluster and so that a worker imports only what a round needs.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from dml._graph import tree_add
from dml._random import block_rng
from dml.optim import dense_steps, sparse_steps
from dml.optim.optimizers import update_average
from dml.optim.streams import JOINED, _join_rows, block_order, round_order, subtree_reduce

if TYPE_CHECKING:
    from dml.optim.engine import RoundPlan

__all__ = ["local_sgd_steps", "stream_steps_run", "combined"]

def local_sgd_steps(problem, params, slots, X, Y, w, order, first, last, t0, plan: RoundPlan,
                    rng=None, loss_start: float = 0.0):
    """Run steps ``first..last-1`` of one block's epoch in place; returns (loss_sum, first_loss,
    finite). Step ``first + k`` is numbered ``t0 + k + 1`` for the schedule and the optimiser.
    Step ``s`` takes rows ``order[s B:(s + 1) B]`` (the rows themselves without ``order``), the
    last batch short when ``order`` (or X) runs out. The batches' losses are added to
    ``loss_start`` one by one (a stream walked in pieces sums its losses in the same order as
    in one piece).

    This is the whole numerical content of a round, also usable on its own: the one-block
    reference of plain sequential mini-batch SGD. A problem with ``stochastic = True`` (dropout)
    gets ``rng=`` in ``batch_loss_grad``: the generator of this block and round.
    """
    cfg = plan.config
    if sparse_steps.applies(problem, X, cfg):
        loss_sum, first_loss, finite = sparse_steps.lazy_sgd_steps(
            problem, params, X, Y, w, order, first, last, t0, plan)
        return loss_start + loss_sum, first_loss, finite
    kernel = dense_steps.terms(problem, X, params, cfg)
    if kernel is not None:
        return dense_steps.compiled_sgd_steps(problem, params, slots, X, Y, w, order, first,
                                              last, t0, plan, loss_start, kernel)
    B = cfg.batch_size
    n = X.shape[0] if order is None else len(order)
    opt, schedule, penalty = cfg.optimizer, cfg.schedule, cfg.penalty
    avg_start = int(cfg.average) if cfg.averaging else None
    loss_sum = float(loss_start)
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


def stream_steps_run(problem, params, slots, parts, s, plan: RoundPlan):
    """Stream ``s``'s steps of this round, in place: its blocks in order, each block's rows in
    its epoch permutation, cut into batches across the blocks' boundaries
    (:meth:`~dml.optim.streams.StreamLayout.segments`). ``parts[b]`` is block b's
    ``(X, Y, w)``. Returns (loss_sum, first_loss, finite).

    The batches inside a block run on the block itself; a batch that starts in one block and
    ends in a later one is copied together from the few rows it takes of each (at most
    ``batch_size`` rows), so nothing beyond the blocks a round touches is held.
    """
    layout, cfg = plan.layout, plan.config
    B = cfg.batch_size
    first, last = plan.span(s)
    joined = parts.get((JOINED, s))
    if joined is not None:
        return _joined_steps(problem, params, slots, joined, s, plan)
    stream_rows = layout.rows(s)
    pos = first * B  # stream row of the next row taken
    totals = [0.0, None, 0]  # loss_sum, first_loss, steps done
    stochastic = getattr(problem, "stochastic", False)
    carry: list = []  # (X, Y, w) row pieces of a batch begun in an earlier block
    carried = 0

    def run(X, Y, w, order, n_steps, rng):
        ls, fl, finite = local_sgd_steps(problem, params, slots, X, Y, w, order, 0, n_steps,
                                         plan.t0 + totals[2], plan, rng=rng,
                                         loss_start=totals[0])
        totals[0] = ls
        if totals[1] is None:
            totals[1] = fl
        totals[2] += n_steps
        return finite

    rng = None
    for b, lo, hi in layout.segments(s, first, last):
        X, Y, w = parts[b]
        n = X.shape[0]
        order = block_order(plan.seed, plan.epoch, b, n) if cfg.shuffle else None
        # Per-step noise (dropout) of this block and round; drawn only by stochastic problems.
        rng = block_rng(plan.seed, "noise", plan.epoch, b, lo) if stochastic else None
        pos += hi - lo
        if carried:
            take = min(B - carried, hi - lo)
            carry.append(_take_rows(X, Y, w, order, lo, lo + take))
            carried += take
            lo += take
            if carried == B or pos == stream_rows and lo == hi:
                if not run(*_join_rows(carry), None, 1, rng):
                    return totals[0], totals[1], False
                carry, carried = [], 0
        # Whole batches inside the block; the stream's last (short) batch too when it ends here.
        n_steps = (hi - lo) // B + (1 if pos == stream_rows and (hi - lo) % B else 0)
        if n_steps:
            sub = order[lo:] if order is not None else (None if lo == 0 else np.arange(lo, n))
            if not run(X, Y, w, sub, n_steps, rng):
                return totals[0], totals[1], False
        rest = lo + n_steps * B
        if rest < hi:
            carry.append(_take_rows(X, Y, w, order, rest, hi))
            carried += hi - rest
    if carried:  # unreachable: a round ends on a batch boundary or at the stream's end
        raise AssertionError("a round ended inside a mini-batch")
    return totals[0], totals[1], True


def _joined_steps(problem, params, slots, joined, s, plan: RoundPlan):
    """:func:`stream_steps_run` on stream ``s``'s rows joined into one array: the same batches
    in the same order (a batch across a block boundary is the same rows), so the same numbers
    bit for bit, without a call, a copy or a slice per block."""
    layout, cfg = plan.layout, plan.config
    X, Y, w = joined
    first, last = plan.span(s)
    if last <= first:
        return 0.0, None, True
    if not cfg.shuffle:
        return local_sgd_steps(problem, params, slots, X, Y, w, None, first, last, plan.t0,
                               plan)
    return local_sgd_steps(problem, params, slots, X, Y, w, round_order(layout, s, plan), 0,
                           last - first, plan.t0, plan)


def _take_rows(X, Y, w, order, lo, hi):
    """Rows ``lo .. hi - 1`` of a block's epoch order, copied."""
    idx = order[lo:hi] if order is not None else np.arange(lo, hi)
    return X[idx], Y[idx], None if w is None else w[idx]


#: Slots that are running sums of the iterates (combined as the parameters are); the others
#: (moments) are averaged.
_ITERATE_SLOTS = ("average",)


def _stream_result(problem, payload, parts, s, plan: RoundPlan):
    weight = plan.weights[s]
    if weight == 0.0:
        return None
    params_in, slots_in = payload
    params = params_in.copy()
    slots = {k: v.copy() for k, v in slots_in.items()}
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        loss_sum, first_loss, finite = stream_steps_run(problem, params, slots, parts, s, plan)
        finite = finite and bool(np.isfinite(params).all())
    if plan.mode == "sum":
        out_params = params - params_in
        out_slots = {k: (v - slots_in[k]) if k in _ITERATE_SLOTS else weight * v
                     for k, v in slots.items()}
        if plan.sum_scale != 1.0:
            out_params *= plan.sum_scale
            for k in _ITERATE_SLOTS:
                if k in out_slots:
                    out_slots[k] *= plan.sum_scale
    else:
        params *= weight  # a private copy: scaled in place, no second O(parameters) array
        out_params = params
        out_slots = {k: weight * v for k, v in slots.items()}
    return {
        "params": out_params,
        "slots": out_slots,
        "loss": loss_sum,
        "first_loss": weight * (first_loss if first_loss is not None else 0.0),
        "nonfinite": 0 if finite else 1,
    }


def _group_round_kernel(parts, problem, payload, plan: RoundPlan, streams, levels):
    """One task: the streams ``streams`` (a range) of this round, reduced as their subtree of
    the fixed reduction tree (``levels`` levels) so the value is the tree's, whatever the
    grouping. ``parts`` maps a block index to its ``(X, Y, w)``."""
    results = [_stream_result(problem, payload, parts, s, plan) for s in streams]
    return subtree_reduce(results, tree_add, levels)


def combined(params, slots: dict, out: dict, mode: str, averaging_started: bool):
    """The parameters and slots after a round with reduced result ``out`` (see the module
    docstring): the streams' updates added ("sum") or their weighted average taken."""
    if mode == "sum":
        params = params + out["params"]
        new_slots = {}
        for k, v in out["slots"].items():
            if k in _ITERATE_SLOTS:
                # Before averaging starts the "average" is the iterate itself.
                new_slots[k] = (slots[k] + v) if averaging_started else params.copy()
            else:
                new_slots[k] = v
        return params, new_slots
    return out["params"], out["slots"]


def _next_payload(payload, mode, averaging_started, levels, *values):
    """A round's combine, on a worker: the rest of the reduction tree over the group results
    (as the client does in :meth:`dml.optim.engine.StreamRunner.run`), then :func:`combined`."""
    out = subtree_reduce(list(values), tree_add, levels)
    params, slots = payload
    info = {"loss": out["loss"], "first_loss": out["first_loss"], "nonfinite": out["nonfinite"]}
    if info["nonfinite"]:
        return payload, info  # the client raises; nothing more is applied
    return combined(params, slots, out, mode, averaging_started), info


def _chained_round(parts, problem, plan, streams, levels, mode, started, top, first, *previous):
    """A group's task of a chained round: the previous round's combine (from ``previous``, the
    results of all its groups), or the starting payload ``first``; then this group's streams."""
    if first is not None:
        payload, info = first, None
    else:
        payload, info = _next_payload(previous[0]["payload"], mode, started, top,
                                      *[p["out"] for p in previous])
    out = _group_round_kernel(parts, problem, payload, plan, streams, levels)
    return {"payload": payload, "out": out, "info": info}


def _chain_result(mode, started, top, n_groups, *results):
    """The last round's combine and every round's info: ``results`` holds the last round's
    group results, then group 0's result of rounds 1, 2, ... (each carries the info of the
    round before it)."""
    last, carriers = results[:n_groups], results[n_groups:]
    payload, info = _next_payload(last[0]["payload"], mode, started, top,
                                  *[p["out"] for p in last])
    return payload, [c["info"] for c in carriers] + [info]
