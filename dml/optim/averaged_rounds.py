"""How long a round of averaged streams may be: the first epoch's rounds grow with the
``optimal`` schedule's memory.

With ``learning_rate="optimal"`` (the step ``η = 1 / (α (t₀ + t))``) the streams of a round are
averaged (docs/partition_parallel_sgd.md, "Rounds and combination"). Under that schedule the
iterate is a running average of its last ``1 / (α η) = t₀ + t`` steps' terms: each step
replaces a fraction ``α η`` of it. Averaging ``W`` streams that each took ``S / W`` steps from
the same start stands in for ``S`` sequential steps only while ``S`` is small next to that
memory: late in a fit it is (the memory is every step taken so far), but at the start of the
first epoch the memory is only ``t₀`` (about 1,000 steps at the default ``α = 10⁻⁴``, 32 at
``α = 10⁻²``), and four equal shares of the first epoch over hundreds of streams are many times
longer. Every later round starts from that first average and forgets it slowly, so the whole fit
suffers: test log-loss after 5 epochs of ``SGDClassifier(log_loss)`` on 960,000 rows in 1,024
blocks (236 streams) was 0.4689 against 0.4328 on one block, 0.5289 against 0.4306 at
``α = 10⁻³``.

So an averaged round takes at most ``MEMORY_MULTIPLE / (α η)`` steps in all, ``η`` the step size
at its start. When the first of an epoch's equal shares is longer (in practice only the first
epoch, of more than about 4 ``t₀`` steps: 128,000 rows at the default ``α`` and batch), the
epoch runs as rounds of *ranges of streams*, each stream walking its whole epoch and the others
sitting out (the streams taken in an order that spreads every range over the task groups,
:func:`~dml.optim.streams.spread_order`), as many streams per round as the limit allows (at
least one: a single stream is the sequential pass). The memory grows by every round's steps, so
the ranges about double every round, and the next epoch is equal shares again
(:func:`limited_shares`). Shortening the rounds instead (every stream a smaller share) was
measured first and does not work everywhere: it matched one block at ``α = 10⁻⁴`` and ``10⁻³``
but lost 2% at ``3·10⁻³`` and 7% at ``10⁻²``, where a round of one step per stream is still
longer than the memory.

The plan depends only on the layout, the schedule and the step counter, so a resumed fit, a
``partial_fit`` and the stacked search plan the same rounds as the fit itself. The cost is the
first epoch's critical path: a few rounds of a whole stream's epoch each instead of four
quarters (``python -m benchmarks.sgd_width``), a few milliseconds of compiled steps.
"""
from __future__ import annotations


import numpy as np

from dml.optim.schedules import Optimal
from dml.optim.streams import EqualShares, StreamLayout, StreamRanges, spread_order
from dml.optim.summed_rounds import RoundLimit, limited_rounds

__all__ = ["MEMORY_MULTIPLE", "averaged_limit", "limited_shares", "epoch_rounds"]

#: An averaged round's steps in all, in units of the running average's memory ``1 / (α η)``
#: (module docstring). Measured (5 epochs, test log-loss): 1 and 2 matched one block on 236
#: and 512 streams (within 0.1%); on 2,048 streams of 37 steps 1 matched (0.4363 against 0.4370)
#: and 2 was 2% worse (0.4464); 4 matched on 236 streams.
MEMORY_MULTIPLE = 1.0


def averaged_limit(config) -> RoundLimit | None:
    """The limit of ``config``'s averaged rounds as a :class:`RoundLimit` (its ``steps(η)`` is
    ``MEMORY_MULTIPLE / (α η)``); None when its rounds are not averaged or its schedule is not
    ``optimal`` (no running average to measure them by).

    Examples
    --------
    >>> from dml.optim.engine import SGDConfig
    >>> from dml.optim.schedules import Constant, Optimal
    >>> averaged_limit(SGDConfig(schedule=Optimal(alpha=1e-4))).steps(1 / (1e-4 * 1000))
    1000.0
    >>> averaged_limit(SGDConfig(schedule=Constant(0.01))) is None
    True
    """
    if config.combine_mode != "average" or not isinstance(config.schedule, Optimal):
        return None
    return RoundLimit(float(config.schedule.alpha) / MEMORY_MULTIPLE)


def limited_shares(shares: EqualShares, layout: StreamLayout, limit: RoundLimit | None, lr_at,
                   t: int) -> EqualShares | StreamRanges:
    """The rounds of an epoch of ``shares`` that starts after ``t`` steps: ``shares`` itself when
    its first round is at most ``limit.steps(lr_at(t + 1))`` steps in all (then so is every later
    one: the memory grows by each round's steps), else rounds of ranges of streams (in
    :func:`~dml.optim.streams.spread_order`), each walking its whole epoch, as many streams per
    round as the limit at the round's start allows (at least one)
    (:class:`~dml.optim.streams.StreamRanges`).

    Examples
    --------
    >>> from dml.optim.streams import make_streams
    >>> layout = make_streams([3200] * 8, batch_size=32, stream_steps=None)  # 8 streams, 100 steps
    >>> limit = RoundLimit(1e-4 / 2)  # rounds of at most 2 (t₀ + t) steps, here with t₀ = 60
    >>> lr_at = lambda t: 1 / (1e-4 * (59 + t))
    >>> limited_shares(EqualShares(4), layout, limit, lr_at, 0)  # limits 120, 320, 920 steps
    StreamRanges(ends=(1, 4, 8))
    >>> limited_shares(EqualShares(4), layout, limit, lr_at, 800)
    EqualShares(rounds=4)
    """
    W = layout.n_streams
    if limit is None or W <= 1:
        return shares
    steps = layout.all_steps
    R = max(int(shares.rounds), 1)
    if int((steps // R).sum()) <= limit.steps(lr_at(int(t) + 1)):
        return shares
    walked = np.concatenate([[0], np.cumsum(steps[spread_order(W)])])
    ends, lo, t = [], 0, int(t)
    while lo < W:
        bound = limit.steps(lr_at(t + 1))
        hi = int(np.searchsorted(walked, walked[lo] + bound, side="right")) - 1
        hi = min(max(hi, lo + 1), W)
        ends.append(hi)
        t += int(walked[hi] - walked[lo])
        lo = hi
    return StreamRanges(tuple(ends))


def round_bound(config, mode: str, summed: RoundLimit | None) -> RoundLimit | None:
    """What bounds a round's steps: ``summed`` (the curvature limit of
    :func:`~dml.optim.summed_rounds.round_limit`) when the streams' updates are summed (``mode``
    ``"sum"``), else the schedule's memory (:func:`averaged_limit`). The fit, the stacked search
    and ``benchmarks/sgd_width.py`` plan their epochs with it, so they plan the same rounds."""
    return summed if mode == "sum" else averaged_limit(config)


def epoch_rounds(local_steps, layout: StreamLayout, limit: RoundLimit | None, lr_at, t: int):
    """The stream steps of every round of an epoch that starts after ``t`` steps, for
    :func:`~dml.optim.streams.round_plans`: averaged rounds (:class:`EqualShares`) limited by
    :func:`limited_shares`, summed ones by :func:`~dml.optim.summed_rounds.limited_rounds`."""
    if isinstance(local_steps, EqualShares):
        return limited_shares(local_steps, layout, limit, lr_at, t)
    return limited_rounds(local_steps, layout, limit, lr_at, t)
