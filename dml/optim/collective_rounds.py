"""An epoch of SGD rounds as one long-lived task per group of streams, on a cluster.

Chained rounds (:meth:`dml.optim.engine.StreamRunner.run_chain`) cost one scheduler hop each:
every group's task of a round waits for the results of all groups of the round before, about
15 ms a hop, while a round of a linear model on tens of thousands of rows computes for a few
milliseconds. A summed fit (``SYNC_STEPS`` steps a round) has tens of rounds per epoch, so the
hops, not the arithmetic, set the fit's time, and more blocks meant more of them.

Here, on a ``distributed`` cluster with the blocks persisted, the whole epoch is a *run*: one
task per worker thread (a *member*), pinned to the worker that holds its groups of streams
(:mod:`dml._collective`; :func:`members_of` splits a worker's groups into runs of consecutive
groups). Every round, a member runs its groups' streams from the round's payload
(:func:`dml.optim.engine._group_round_kernel`, one result per group), sends those results to
the other members' workers in one message, receives theirs and applies the round's combine
itself (:func:`dml.optim.engine._next_payload`: the rest of the fixed reduction tree over all
groups' results in group order, then the sum or average), exactly as the chained graph's next
task does. Every member computes the same function of the same values, so all start the next
round from the same payload, and the model is the chained graphs' bit for bit, whatever the
number of workers or threads. Member 0 returns the epoch's final payload and every round's
loss.

Nothing is kept on the workers between runs: the client holds the parameters at the start of
the epoch, so a lost worker or an unreachable peer costs the epoch's run, which is submitted
again from its first round (the blocks are recomputed by Dask where they were lost). A run
whose tasks cannot all start falls back to the chained graphs for the rest of the fit (same
model), as do fits whose persisted blocks take more than
:data:`dml._collective.HEADROOM_SHARE` of the workers' memory. See
docs/partition_parallel_sgd.md ("What a round costs").
"""
from __future__ import annotations

import logging
import uuid

from dml import _collective
from dml.optim.streams import tree_levels

__all__ = ["CollectiveRounds"]

_logger = logging.getLogger(__name__)
_WHAT = "SGD"


def run_member(parts, m, members, run, addresses, problem, payload, steps, mode, averaging_from,
               top, ranges, levels):
    """Member ``m``'s part of a run: the rounds ``steps`` (``[(plan, start_t)]``) of the stream
    groups ``members[m]`` (``parts`` their gathered blocks, ``ranges[g]`` group ``g``'s
    streams); returns (final payload, every round's info) from member 0, else None."""
    from dml.optim.engine import _group_round_kernel, _next_payload

    mine = members[m]
    n_groups = sum(len(gs) for gs in members)
    with _collective.long_lived(run, m, addresses, _WHAT) as link:
        infos = []
        for k, (plan, start_t) in enumerate(steps):
            own = [_group_round_kernel(p, problem, payload, plan, ranges[g], levels)
                   for p, g in zip(parts, mine)]
            # Every member's group results, put back in group order: the combine below sees
            # the values a run of one task per group sees, in the same order.
            outs = [None] * n_groups
            for gs, values in zip(members, link.exchange(k, own)):
                for g, v in zip(gs, values):
                    outs[g] = v
            started = averaging_from is not None and start_t >= averaging_from
            payload, info = _next_payload(payload, mode, started, top, *outs)
            infos.append(info)
            if info["nonfinite"]:
                # Every member sees the same info and stops here; the client raises.
                break
        return (payload, infos) if m == 0 else None


def members_of(addresses, threads) -> list:
    """The stream groups each task of a run takes: a worker's groups (``addresses[g]`` is group
    ``g``'s worker) split into at most as many runs of consecutive groups as it has threads
    (``threads[address]``), in group order.

    A task per group left several long-lived tasks per thread, each sending its result to
    every other worker and applying the same combine every round; a round of a summed fit
    computes for microseconds, so those messages and combines were most of its time.

    Examples
    --------
    >>> members_of(["a", "a", "a", "a", "b", "b", "b", "b"], {"a": 1, "b": 2})
    [[0, 1, 2, 3], [4, 5], [6, 7]]
    >>> members_of(["a", "b", "a"], {"a": 1, "b": 1})
    [[0, 2], [1]]
    """
    by_worker: dict = {}
    for g, a in enumerate(addresses):
        by_worker.setdefault(a, []).append(g)
    out = []
    for a, groups in by_worker.items():
        k = max(1, min(int(threads.get(a, 1) or 1), len(groups)))
        bounds = [round(i * len(groups) / k) for i in range(k + 1)]
        out.extend(groups[bounds[i]:bounds[i + 1]] for i in range(k))
    return sorted(out, key=lambda gs: gs[0])


class CollectiveRounds:
    """Runs epochs of a :class:`~dml.optim.engine.StreamRunner`'s persisted groups as
    collective runs. :meth:`usable` says whether the current scheduler allows it."""

    def __init__(self, runner):
        self.runner = runner
        self.enabled = None  # decided at the first epoch, on the scheduler of the fit
        self.stats = {"runs": 0, "lost_runs": 0}
        self.futures = None
        self.placed = None
        self.fit = f"dml-sgd-{uuid.uuid4().hex}"

    def usable(self) -> bool:
        """Whether epochs run as collective runs: a ``distributed`` cluster, persisted blocks,
        memory to spare, and no run that failed to start so far."""
        if self.enabled is None:
            client = _collective.cluster_client()
            self.enabled = self.runner.gathered is not None and client is not None
            if self.enabled:
                from distributed import futures_of, wait

                # The blocks' sizes are known once they are in memory (and the scheduler may
                # not have registered them yet: persist does not wait); the groups are placed
                # where the blocks are.
                self.futures = [futures_of(p)[0] for p in self.runner.gathered]
                wait(self.futures)
                self.enabled = _collective.has_headroom(client, self.runner.gathered)
        return bool(self.enabled)

    def run_epoch(self, problem, payload, steps, mode, averaging_from):
        """(final payload, every round's info) of the rounds ``steps``, or None when the run
        could not start (the caller runs the chained graphs instead, from the same payload)."""
        client = _collective.cluster_client()
        runner = self.runner
        top = tree_levels(len(runner.ranges))
        ranges = list(runner.ranges)
        while True:
            run = f"{self.fit}-{self.stats['runs']}"
            addresses = self._placement(client)
            members = members_of(addresses, client.nthreads())
            where = [addresses[gs[0]] for gs in members]
            tasks = [client.submit(run_member, [self.futures[g] for g in gs], m, members, run,
                                   where, problem, payload, steps, mode, averaging_from, top,
                                   ranges, runner.levels, key=f"sgd-run-{run}-{m}",
                                   workers=[where[m]], allow_other_workers=False, pure=False)
                     for m, gs in enumerate(members)]
            self.stats["runs"] += 1
            try:
                result = _collective.execute(client, tasks, run, where, "an SGD run",
                                             tidy_finished=False)
            except _collective.RunCannotStart as exc:
                _logger.info("%s; running the rounds as chained graphs instead", exc)
                self.enabled = False
                return None
            if result is not None:
                return result
            self.stats["lost_runs"] += 1
            self.placed = None  # a worker may be gone: place the groups again

    def _placement(self, client):
        """The groups' workers, kept from epoch to epoch while the same workers are up (the
        blocks stay where they are): placing costs two round trips to the cluster."""
        workers = {a: w.get("id") for a, w in client.scheduler_info()["workers"].items()}
        if self.placed is not None:
            addresses, known = self.placed
            if all(known.get(a) is not None and workers.get(a) == known[a] for a in addresses):
                return addresses
        # (Re)placing also adds the message handler to the workers.
        addresses = _collective.placement(client, self.futures)
        self.placed = (addresses, workers)
        return addresses
