"""How long a round of averaged streams may be: shorter first rounds while the running average
of the ``optimal`` schedule is short.

With ``learning_rate="optimal"`` (the step ``η = 1 / (α (t₀ + t))``) the streams of a round are
averaged (docs/partition_parallel_sgd.md, "Rounds and combination"). Under that schedule the
iterate is a running average of the last ``1 / (α η) = t₀ + t`` steps' terms: each step replaces
a fraction ``α η`` of it. A round that takes ``S`` steps in all, spread over ``W`` streams, gives
each stream ``S / W`` of them; averaging the streams is a faithful stand-in for the ``S``
sequential steps only while ``S`` is small next to that memory ``t₀ + t``. Late in a fit it is
(the memory is every step taken so far), but at the start of the first epoch it is only
``t₀`` (about 1,000 steps at the default ``α = 10⁻⁴``), and a round of four equal shares of
the first epoch over hundreds of streams is many times longer: measured, test log-loss after 5
epochs of ``SGDClassifier(log_loss)`` on 960,000 rows in 1,024 blocks (236 streams) was
0.4689 against 0.4328 on one block, and 0.6113 against 0.4370 on 2,400,000 rows (512 streams).

So an averaged round takes at most ``MEMORY_MULTIPLE / (α η)`` steps in all, ``η`` the step
size at its start: the first rounds of a fit are cut into halves, quarters, ... of an equal
share (:func:`limited_shares`; every stream still walks the same fraction of its own epoch in
every round, and at least one step), and the rounds lengthen as the memory grows, so past the
first epoch's first rounds nothing changes. The plan depends only on the layout, the schedule and
the step counter, so a resumed fit, a ``partial_fit`` and the stacked search plan the same rounds
as the fit itself.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dml.optim.schedules import Optimal
from dml.optim.streams import EqualShares, ShareCuts, StreamLayout, share_bounds
from dml.optim.summed_rounds import RoundLimit, limited_rounds

__all__ = ["MEMORY_MULTIPLE", "averaged_limit", "limited_shares", "epoch_rounds"]

#: An averaged round's steps in all, in units of the running average's memory ``1 / (α η)``
#: (module docstring). Measured (5 epochs, test log-loss relative to one block): rounds of about
#: 1.2–2.3 memories matched one block on 236 and 512 streams, 3.8–4.7 were 1–3% worse,
#: 7.5 (four equal shares) 8% worse.
MEMORY_MULTIPLE = 2.0


def averaged_limit(config) -> RoundLimit | None:
    """The limit of ``config``'s averaged rounds as a :class:`RoundLimit` (its ``steps(η)`` is
    ``MEMORY_MULTIPLE / (α η)``); None when its rounds are not averaged or its schedule is not
    ``optimal`` (no running average to measure them by).

    Examples
    --------
    >>> from dml.optim.engine import SGDConfig
    >>> from dml.optim.schedules import Constant, Optimal
    >>> averaged_limit(SGDConfig(schedule=Optimal(alpha=1e-4))).steps(1 / (1e-4 * 1000))
    2000.0
    >>> averaged_limit(SGDConfig(schedule=Constant(0.01))) is None
    True
    """
    if config.combine_mode != "average" or not isinstance(config.schedule, Optimal):
        return None
    return RoundLimit(float(config.schedule.alpha) / MEMORY_MULTIPLE)


def limited_shares(shares: EqualShares, layout: StreamLayout, limit: RoundLimit | None, lr_at,
                   t: int) -> EqualShares | ShareCuts:
    """The rounds of an epoch of ``shares`` that starts after ``t`` steps, each at most
    ``limit.steps(lr_at(t' + 1))`` steps in all (``t'`` the step counter at its start): an equal
    share is halved until it fits, but not below one step of the shortest stream. ``shares``
    itself when no round needs cutting.

    Examples
    --------
    >>> from dml.optim.streams import make_streams
    >>> layout = make_streams([3200] * 8, batch_size=32, stream_steps=None)  # 8 streams, 100 steps
    >>> limit = RoundLimit(1e-4 / 2)  # rounds of at most 2 (t₀ + t) steps, here with t₀ = 20
    >>> lr_at = lambda t: 1 / (1e-4 * (19 + t))
    >>> [str(c) for c in limited_shares(EqualShares(4), layout, limit, lr_at, 0).cuts]
    ['1/32', '3/32', '1/4', '1/2', '3/4', '1']
    >>> limited_shares(EqualShares(4), layout, limit, lr_at, 800)
    EqualShares(rounds=4)
    """
    if limit is None or layout.n_streams <= 1:
        return shares
    steps = np.array([layout.steps(s) for s in range(layout.n_streams)], dtype=np.int64)
    R = max(int(shares.rounds), 1)
    # Sub-rounds of 1 / (R 2^j) of an epoch still give the shortest stream a step each.
    finest = max(0, int(math.floor(math.log2(max(int(steps.min()), 1) / R))))
    cuts, pos, t = [], Fraction(0), int(t)
    for r in range(1, R + 1):
        end = Fraction(r, R)
        while pos < end:
            bound = limit.steps(lr_at(t + 1))
            # Not even one step per stream fits: a shorter round would be no more faithful,
            # only smaller (measured: at alpha = 1e-2 cutting such rounds lost 7%).
            for j in range(finest + 1 if bound >= layout.n_streams else 1):
                nxt = min(pos + Fraction(1, R * 2 ** j), end)
                taken = int((share_bounds(steps, nxt) - share_bounds(steps, pos)).sum())
                if taken <= bound:
                    break
            cuts.append(nxt)
            t += taken
            pos = nxt
    if len(cuts) == R:
        return shares
    return ShareCuts(tuple(cuts))


def epoch_rounds(local_steps, layout: StreamLayout, limit: RoundLimit | None, lr_at, t: int):
    """The stream steps of every round of an epoch that starts after ``t`` steps, for
    :func:`~dml.optim.streams.round_plans`: averaged rounds (:class:`EqualShares`) limited by
    :func:`limited_shares`, summed ones by :func:`~dml.optim.summed_rounds.limited_rounds`."""
    if isinstance(local_steps, EqualShares):
        return limited_shares(local_steps, layout, limit, lr_at, t)
    return limited_rounds(local_steps, layout, limit, lr_at, t)
