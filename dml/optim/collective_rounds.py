"""An epoch of SGD rounds as one long-lived task per group of streams, on a cluster.

Chained rounds (:meth:`dml.optim.engine.StreamRunner.run_chain`) cost one scheduler hop each:
every group's task of a round waits for the results of all groups of the round before, about
15 ms a hop, while a round of a linear model on tens of thousands of rows computes for a few
milliseconds. A summed fit (``SYNC_STEPS`` steps a round) has tens of rounds per epoch, so the
hops, not the arithmetic, set the fit's time, and more blocks meant more of them.

Here, on a ``distributed`` cluster with the blocks persisted, the fit's epochs run in one *run*:
one task per group of streams, pinned to the worker that holds the group's blocks
(:mod:`dml._collective`), submitted once and kept up across the epochs
(:class:`dml._collective.LiveRun`): for every epoch the client hands the tasks the epoch's
start and its rounds, and group 0 posts the epoch's result back, so an epoch costs one call to
the workers instead of a submission and the tasks' start and set-up (40-180 ms an epoch
measured). Every round, a group runs its streams from the round's payload
(:func:`dml.optim._round_kernels._group_round_kernel`), sends its reduced result to the other
groups' workers, receives theirs and applies the round's combine itself
(:func:`dml.optim._round_kernels._next_payload`: the rest of the fixed reduction tree in group
order, then the sum or average), exactly as the chained graph's next task does. Every group computes
the same function of the same values, so all start the next round from the same payload, and
the model is the chained graphs' bit for bit, whatever the number of workers. Group 0 posts
the epoch's final payload and every round's loss.

Nothing of the model is kept on the workers between epochs: the client holds the parameters at
the start of every epoch, so a lost worker or an unreachable peer costs the run, and a new run
takes the epoch again from its first round (the blocks are recomputed by Dask where they were
lost). The fit's end or an error in it ends the run (:meth:`CollectiveRounds.close`). A run
whose tasks cannot all start falls back to the chained graphs for the rest of the fit (same
model), as do fits whose persisted blocks take more than
:data:`dml._collective.HEADROOM_SHARE` of the workers' memory. See
docs/partition_parallel_sgd.md ("What a round costs").
"""
from __future__ import annotations

import itertools
import logging
import uuid

from dml import _collective
from dml.optim.data import worker_limits
from dml.optim.streams import tree_levels

__all__ = ["CollectiveRounds"]

_logger = logging.getLogger(__name__)
_WHAT = "SGD"


#: Seconds a run's tasks wait for the client's next epoch before they end (the client is gone
#: or did not end the run); the client then submits a new run for its next epoch, if any.
IDLE = 120.0


def run_group(parts, g, run, addresses, problem, mode, averaging_from, top, streams, levels):
    """Group ``g``'s part of a run that spans epochs: for every epoch the client hands over
    (``(payload, steps)``, ``steps`` being ``[(plan, start_t)]``), the rounds of its
    ``streams``; group 0 posts each epoch's (final payload, every round's info)."""
    from dml.optim._round_kernels import _group_round_kernel, _next_payload

    with _collective.long_lived(run, g, addresses, _WHAT) as link:
        k = 0  # the rounds' numbers run on across epochs: every group counts the same
        for epoch in itertools.count():
            given = link.receive(epoch, IDLE)
            if given is None:
                return None
            payload, steps = given
            infos = []
            for plan, start_t in steps:
                out = _group_round_kernel(parts, problem, payload, plan, streams, levels)
                outs = link.exchange(k, out)
                k += 1
                started = averaging_from is not None and start_t >= averaging_from
                payload, info = _next_payload(payload, mode, started, top, *outs)
                infos.append(info)
                if info["nonfinite"]:
                    # Every group sees the same info and stops here; the client raises.
                    break
            if g == 0:
                _collective.post(run, epoch, (payload, infos))


class CollectiveRounds:
    """Runs epochs of a :class:`~dml.optim.engine.StreamRunner`'s persisted groups as one
    collective run that lives across epochs. :meth:`usable` says whether the current scheduler
    allows it; :meth:`close` ends the run (end of the fit)."""

    def __init__(self, runner, nbytes: int | None = None):
        self.runner = runner
        #: Bytes of the gathered blocks as estimated by the caller (None: asked once they
        #: are in memory).
        self.nbytes = nbytes
        self.enabled = None  # decided at the first epoch, on the scheduler of the fit
        self.stats = {"runs": 0, "lost_runs": 0, "epochs": 0}
        self.futures = None
        self.placed = None
        self.live = None
        self.fit = f"dml-sgd-{uuid.uuid4().hex}"

    def usable(self) -> bool:
        """Whether epochs run as collective runs: a ``distributed`` cluster, persisted blocks,
        memory to spare, and no run that failed to start so far."""
        if self.enabled is None:
            client = _collective.cluster_client()
            self.enabled = self.runner.gathered is not None and client is not None
            if self.enabled:
                from distributed import futures_of, wait

                self.futures = [futures_of(p)[0] for p in self.runner.gathered]
                if not self._place_ahead(client):
                    # The blocks' sizes are known once they are in memory (and the scheduler
                    # may not have registered them yet: persist does not wait); the groups
                    # are placed where the blocks are.
                    wait(self.futures)
                    # The workers' memory limits were asked earlier in the fit (to hold and
                    # join the blocks), and the call that places the groups also tells the
                    # blocks' sizes: one round trip here after the wait instead of five.
                    self._place(client)
                    self.enabled = _collective.has_headroom(client, self.runner.gathered,
                                                            worker_limits(), self.placed[2])
        return bool(self.enabled)

    def _place_ahead(self, client) -> bool:
        """Places the groups without waiting for their blocks when the client chose where
        the blocks are gathered (:meth:`dml._block_groups.Groups.gather`): the first run is
        then submitted on top of the gathering, and its tasks start as soon as their blocks
        are joined, with no round trip to the client in between. False when the placement or
        the size is not known, a chosen worker is gone, or the size estimated from the rows
        (dense float64) leaves no headroom (then: wait, and ask the real sizes)."""
        at = self.runner.workers
        if at is None or self.nbytes is None:
            return False
        ids = _collective.worker_ids(client)  # also adds the message handler
        if not set(at) <= set(ids):
            return False
        # The estimate counts every value as a dense float64: when it says the rows fit, they
        # do; when not (sparse rows, or really too big), the exact sizes are asked as before.
        if not _collective.has_headroom(client, self.runner.gathered, worker_limits(),
                                        {"estimate": self.nbytes}):
            return False
        self.placed = (list(at), ids, None)
        self.enabled = True
        return True

    def run_epoch(self, problem, payload, steps, mode, averaging_from):
        """(final payload, every round's info) of the rounds ``steps``, or None when the run
        could not start (the caller runs the chained graphs instead, from the same payload)."""
        while True:
            try:
                if self.live is None:
                    self.live = self._start(problem, mode, averaging_from)
                result = self.live.step((payload, steps))
            except _collective.RunCannotStart as exc:
                _logger.info("%s; running the rounds as chained graphs instead", exc)
                self.enabled = False
                self.close()
                return None
            except BaseException:
                self.close()
                raise
            if result is not None:
                self.stats["epochs"] += 1
                return result
            self.stats["lost_runs"] += 1
            self.close()
            self.placed = None  # a worker may be gone: place the groups again

    def _start(self, problem, mode, averaging_from):
        """Submits a run: one task per group, which waits for the epochs."""
        client = _collective.cluster_client()
        runner = self.runner
        top = tree_levels(len(runner.ranges))
        run = f"{self.fit}-{self.stats['runs']}"
        addresses = self._placement(client)
        tasks = [client.submit(run_group, self.futures[g], g, run, addresses, problem, mode,
                               averaging_from, top, r, runner.levels, key=f"sgd-run-{run}-{g}",
                               workers=[addresses[g]], allow_other_workers=False, pure=False)
                 for g, r in enumerate(runner.ranges)]
        self.stats["runs"] += 1
        # The tasks may wait for their blocks to be gathered (:meth:`_place_ahead`).
        return _collective.LiveRun(client, tasks, run, addresses, "an SGD run",
                                   after=self.futures)

    def close(self):
        """Ends the current run, if any (its tasks stop; the workers forget it)."""
        live, self.live = self.live, None
        if live is not None:
            live.close()

    def _placement(self, client):
        """The groups' workers, kept from epoch to epoch while the same workers are up (the
        blocks stay where they are): the first run takes those :meth:`usable` found; a new run
        (after a lost one) first checks that its workers are still there."""
        addresses, known, _ = self.placed if self.placed is not None else (None, None, None)
        if addresses is not None and self.stats["runs"] > 0:
            workers = {a: w.get("id") for a, w in client.scheduler_info()["workers"].items()}
            if not all(known.get(a) is not None and workers.get(a) == known[a]
                       for a in addresses):
                addresses = None
        if addresses is None:
            addresses = self._place(client)
        return addresses

    def _place(self, client):
        """Places the groups where their blocks are, in one call to the workers that also adds
        the message handler to them."""
        self.placed = _collective.placement_and_ids(client, self.futures)
        return self.placed[0]
