"""Boosting rounds as one long-lived task per group of blocks that swap histograms directly.

The chained graphs of :mod:`dml.ensemble._gb_chain` pay the scheduler for every growth wave:
two tasks per group and a transfer of every group's partial sums, about 30 ms a wave, while a
whole tree of LightGBM takes about 20 ms. Here, on a ``distributed`` cluster, a *run* of several
rounds is one task per group, pinned to a worker. The tasks leave the worker's thread pool
(``secede``), so they all run at once whatever the number of threads, and step through the
same :class:`~dml.ensemble._gb_chain.Driver` as the chained graph: compute the group's partial
sums, send them to the workers of the other groups (one message per worker, through a handler
this module adds to the worker), wait for the other groups' partials, sum them in the fixed
order of the block tree and take the next decision. LightGBM's and XGBoost's Dask interfaces
work the same way with sockets of their own; here the worker's own connections carry the
messages. The model is the chained graph's, bit for bit: the same decisions from the same sums.

Between runs the rows' state (raw predictions, gradients) stays in the worker's memory, keyed
by the fit and the round it starts. The client fetches the driver after each run (the finished
trees), so a lost worker costs at most one run: the client sees the worker gone (or a task
failing to reach a peer), tells the workers to abandon the run, cancels its tasks and submits
the run again from its first round. A group whose state is not on its worker (new worker, lost
data) rebuilds it from its binned blocks and the trees fitted so far, adding the leaf values in
the same order as the rounds did, so the restart gives the same numbers. See
docs/gradient_boosting.md.
"""
from __future__ import annotations

import sys
import threading
import time
import uuid

import numpy as np

from dml.ensemble import _gb_chain, _gb_fit, _gb_grow

# ---------------------------------------------------------------------------- worker side
#: Messages, abandoned runs and the rows' state between runs, per worker process.
_COND = threading.Condition()
_BOX: dict = {}          # (run, step, sender, recipient) -> the sender's partial sums
_DEAD_RUNS: set = set()  # runs abandoned or finished: late messages for them are dropped
_STATE: dict = {}        # (fit, group) -> (round, carried state of the group's blocks)
_HANDLER = "dml_gbt_partial"
#: Seconds between checks, while waiting for a message, that the run was not abandoned.
_POLL = 0.5


class RunLost(RuntimeError):
    """The run cannot go on (a peer is gone, the run was abandoned, the state is missing);
    the client submits it again."""


def _deliver(run, step, sender, recipients, data):
    with _COND:
        if run not in _DEAD_RUNS:
            for h in recipients:
                _BOX[(run, step, sender, h)] = data
            _COND.notify_all()


async def _receive(comm=None, run=None, step=None, sender=None, recipients=None, data=None):
    _deliver(run, step, sender, recipients, data)


def install(dask_worker):
    """Add the message handler to a worker (run with ``Client.run`` before a run: messages
    are sent without a reply, so one reaching a worker without the handler would be lost)."""
    dask_worker.handlers.setdefault(_HANDLER, _receive)


def abandon(run, fit=None):
    """Stop a run on this worker (run with ``Client.run``): its waiting tasks raise
    :class:`RunLost`; with ``fit``, also drop the fit's state (the fit is over)."""
    with _COND:
        _DEAD_RUNS.add(run)
        for k in [k for k in _BOX if k[0] == run]:
            del _BOX[k]
        if fit is not None:
            for k in [k for k in _STATE if k[0] == fit]:
                del _STATE[k]
        _COND.notify_all()


def leftovers(fit):
    """Entries a fit left in this worker's memory (for tests: none after a fit)."""
    with _COND:
        return (sum(1 for k in _STATE if k[0] == fit)
                + sum(1 for k in _BOX if str(k[0]).startswith(fit)))


def _send(worker, run, step, g, partial, addresses, groups_at):
    """The group's partial to every other group: in memory for groups on this worker, one
    message per other worker."""
    mine = worker.address
    local = [h for h in groups_at.get(mine, ()) if h != g]
    if local:
        _deliver(run, step, g, local, partial)

    async def send_all():
        import asyncio

        from distributed.protocol import to_serialize

        async def one(addr, groups):
            # No reply: the sender does not wait for the receiver's loop; a lost peer shows
            # as a failed write here, or as a lost worker to the client.
            await worker.rpc(addr).dml_gbt_partial(run=run, step=step, sender=g,
                                                   recipients=groups,
                                                   data=to_serialize(partial), reply=False)

        calls = [one(a, gs) for a, gs in groups_at.items() if a != mine]
        results = await asyncio.gather(*calls, return_exceptions=True)
        if any(isinstance(r, BaseException) for r in results):
            abandon(run)  # a peer is unreachable: this run cannot finish

    if len(groups_at) > 1 or mine not in groups_at:
        worker.loop.add_callback(send_all)


def _gather(worker, key, run, step, g, own, n_groups):
    """Every group's partial of this step (this group's is ``own``), in group order."""
    got = {g: own}
    with _COND:
        while True:
            if run in _DEAD_RUNS:
                raise RunLost(f"gradient boosting: run {run} was abandoned")
            for h in range(n_groups):
                if h not in got and (run, step, h, g) in _BOX:
                    got[h] = _BOX.pop((run, step, h, g))
            if len(got) == n_groups:
                return [got[h] for h in range(n_groups)]
            if not _COND.wait(timeout=_POLL):
                ts = worker.state.tasks.get(key)
                if ts is None or ts.state not in ("executing", "long-running"):
                    raise RunLost(f"gradient boosting: task {key} was cancelled")


def rebuild(prep, start, loss, baseline, prior, trees, seed, subsample, rnd, n_trees):
    """A group's state at the start of round ``rnd`` from its binned blocks: the raw
    predictions of the trees fitted before (``prior``, a warm start) and of this fit's trees
    (``trees``), the latter's leaf values added round by round as the fit added them."""
    from dml.tree._model import apply_float

    out = []
    for j, p in enumerate(prep):
        raw = None if prior is None else _gb_fit.raw_binned_kernel(p, prior, baseline, n_trees)
        if trees is not None:
            if raw is None:
                raw = np.tile(baseline, (p[0].shape[0], 1))
            x = p[0].astype(np.float64)
            x[p[0] == _gb_fit.MISSING] = np.nan
            leaves = apply_float(x, dict(trees, threshold=trees["bin_threshold"].astype(float)))
            for k in range(leaves.shape[1]):
                raw[:, k % n_trees] += trees["value"][leaves[:, k]]
        out.append(_gb_fit.start_kernel(start + j, p, loss, baseline, raw, seed, subsample, rnd)
                   + (_gb_grow.init_assign(p, n_trees),))
    return tuple(out)


def run_group(prep, g, run, fit, addresses, driver, args, rounds, fresh, trees):
    """One group's part of a run: the driver's steps for up to ``rounds`` rounds.

    ``addresses[h]`` is the worker of group ``h``; ``args`` are the group's
    ``(start, n_blocks, loss, seed, subsample, n_trees, baseline, prior)``. Returns the driver
    (group 0) or None, and leaves the group's state on the worker for the next run."""
    from distributed import get_worker, secede

    worker = get_worker()
    worker.handlers.setdefault(_HANDLER, _receive)
    key = worker.get_current_task()
    # Out of the thread pool: every group's task must run at once, on however many threads.
    secede()
    _switch_often(True)
    try:
        return _run(worker, key, prep, g, run, fit, addresses, driver, args, rounds, fresh,
                    trees)
    finally:
        _switch_often(False)


#: Python's thread switch interval (seconds) while a run goes on in the process. Every wave
#: hands a message between this task's thread and the worker's event loop thread (both ways);
#: at Python's default 5 ms, each hand-over can wait that long for the other thread to give up
#: the interpreter lock; 1 ms made fits 1.5 to 2.5 times faster than 5 ms (measured on a
#: loaded 2-core machine; 0.2 ms and 0.05 ms were not faster).
_SWITCH_INTERVAL = 0.001
_SWITCH = {"runs": 0, "saved": None}


def _switch_often(enter):
    """Shorten the switch interval while any run is in this process, then restore it."""
    with _COND:
        if enter:
            if _SWITCH["runs"] == 0:
                _SWITCH["saved"] = sys.getswitchinterval()
                sys.setswitchinterval(min(_SWITCH_INTERVAL, _SWITCH["saved"]))
            _SWITCH["runs"] += 1
        else:
            _SWITCH["runs"] -= 1
            if _SWITCH["runs"] == 0:
                sys.setswitchinterval(_SWITCH["saved"])


def _run(worker, key, prep, g, run, fit, addresses, driver, args, rounds, fresh, trees):
    start, n_blocks, loss, seed, subsample, n_trees, baseline, prior = args
    n_groups = len(addresses)
    groups_at: dict = {}
    for h, a in enumerate(addresses):
        groups_at.setdefault(a, []).append(h)
    with _COND:
        kept = _STATE.pop((fit, g), None)
    if kept is not None and kept[0] == driver.rnd:
        carried = kept[1]
    elif fresh:
        carried = rebuild(prep, start, loss, baseline, prior, trees, seed, subsample,
                          driver.rnd, n_trees)
    else:
        raise RunLost(f"gradient boosting: the state of group {g} is not on its worker")
    driver = driver.copy()
    first = driver.rnd
    step_args = (start, n_blocks, loss, seed, subsample, n_trees)
    partials = None
    step = 0
    while True:
        if partials is not None:
            driver.pending = driver.step(partials)
        decision = driver.pending
        if decision[0] == "idle":
            return driver if g == 0 else None
        if (decision[0] == "end" and decision[2] is not None
                and driver.rnd - first >= rounds and driver.rnd < driver.max_iter):
            # Cut here, at the start of a round: the next run takes over from this state.
            carried = _gb_chain.end_round(prep, carried, decision, step_args)
            with _COND:
                _STATE[(fit, g)] = (driver.rnd, carried)
            driver.pending = ("end", None, None, driver.rnd, decision[4])
            return driver if g == 0 else None
        carried, partial = _gb_chain.apply_decision(prep, carried, decision, step_args)
        _send(worker, run, step, g, partial, addresses, groups_at)
        partials = _gather(worker, key, run, step, g, partial, n_groups)
        step += 1


# ---------------------------------------------------------------------------- client side
def cluster_client():
    """The ``distributed`` client Dask computes with now, or None (local schedulers)."""
    import dask

    from dml.runtime import active_client

    client = active_client()
    if client is None:
        return None
    scheduler = dask.base.get_scheduler()
    return client if getattr(scheduler, "__self__", None) is client else None


#: Rounds of the first run; each next run has twice as many, up to :data:`MAX_ROUNDS`. A lost
#: worker costs at most one run; each run costs a client round trip.
FIRST_ROUNDS, MAX_ROUNDS = 4, 32


def _placement(client, prep_futures):
    """The worker of every group: where its blocks are, else spread over the live workers
    (those that have the message handler)."""
    workers = sorted(client.run(install, on_error="ignore"))
    if not workers:
        raise RuntimeError("gradient boosting: the cluster has no workers")
    who = client.who_has(prep_futures)
    out = []
    for g, f in enumerate(prep_futures):
        have = [a for a in who.get(f.key, ()) if a in workers]
        out.append(have[0] if have else workers[g % len(workers)])
    return out


#: Seconds within which every task of a run must be running. A worker that is paused (its
#: memory above distributed's pause fraction) or busy with other work starts no new task, and
#: the groups that did start would wait for its histograms for ever.
_START_TIMEOUT = 60.0


class RunCannotStart(RuntimeError):
    """Some tasks of a run did not start: the fit falls back to the chained graphs."""


def _running(dask_worker, keys):
    tasks = dask_worker.state.tasks
    return [k for k in keys
            if k in tasks and tasks[k].state in ("executing", "long-running", "memory")]


def _wait_run(client, futures, addresses):
    """The run's driver, or None when the run was lost (a worker gone, a peer unreachable).
    Raises :class:`RunCannotStart` when not all of its tasks run within ``_START_TIMEOUT``."""
    from distributed import wait

    started, all_running = time.monotonic(), False
    while True:
        try:
            wait(futures, timeout=_POLL)
        except TimeoutError:
            pass
        status = [f.status for f in futures]
        if all(s == "finished" for s in status):
            return futures[0].result()
        for f in futures:
            if f.status == "error":
                exc = f.exception()
                if isinstance(exc, RunLost):
                    return None
                raise exc
        if any(s == "cancelled" for s in status):
            return None
        if not set(addresses) <= set(client.nthreads()):
            return None
        if not all_running and time.monotonic() - started > _START_TIMEOUT:
            keys = [f.key for f in futures]
            running = client.run(_running, keys, on_error="return")
            seen = {k for v in running.values() if isinstance(v, list) for k in v}
            seen |= {f.key for f in futures if f.status != "pending"}
            if not set(keys) <= seen:
                raise RunCannotStart(f"{len(set(keys) - seen)} of the {len(keys)} tasks of a "
                                     f"gradient-boosting run did not start within "
                                     f"{_START_TIMEOUT:.0f} s (paused or busy workers)")
            all_running = True


#: The long-lived tasks keep each group's row state in worker memory beside the persisted
#: binned blocks, and all groups of a run must run at once. Near the memory limit (data
#: larger than memory, docs/gradient_boosting.md) that is what makes workers pause or die,
#: so the collective is used only while the binned blocks take at most this share of the
#: workers' memory; the chained graphs (same model) handle the rest.
HEADROOM_SHARE = 0.1


def has_headroom(client, prep) -> bool:
    """Whether the binned blocks ``prep`` leave the long-lived tasks room on the workers."""
    limits = [w.get("memory_limit") or 0
              for w in client.scheduler_info()["workers"].values()]
    if not limits or min(limits) <= 0:
        return True  # no memory limit set
    nbytes = client.nbytes([p.key for p in prep])
    return sum(int(v or 0) for v in nbytes.values()) <= HEADROOM_SHARE * sum(limits)


def fit_rounds(client, prep, starts, driver, *, n_blocks, loss, seed, subsample, n_trees,
               baseline, prior, flatten):
    """Grow the rounds the driver still has to grow; returns the final driver, the finished
    rounds and the number of runs submitted. ``flatten`` turns finished rounds into the flat
    node arrays the rebuild of a lost group's state needs."""
    from distributed import futures_of

    prep_futures = [futures_of(p)[0] for p in prep]
    fit = f"dml-gbt-{uuid.uuid4().hex}"
    finished: list = []
    runs, lost, rounds, fresh = 0, 0, FIRST_ROUNDS, True
    run = None
    try:
        while not driver.done:
            run = f"{fit}-{runs}"
            addresses = _placement(client, prep_futures)
            trees = flatten(finished) if fresh and finished else None
            futures = [
                client.submit(run_group, prep_futures[g], g, run, fit, addresses, driver,
                              (starts[g], n_blocks, loss, seed, subsample, n_trees, baseline,
                               prior), rounds, fresh, trees,
                              key=f"gbt-run-{run}-{g}", workers=[addresses[g]],
                              allow_other_workers=False, pure=False)
                for g in range(len(prep))]
            runs += 1
            try:
                result = _wait_run(client, futures, addresses)
            except RunCannotStart:
                client.run(abandon, run, on_error="ignore")
                client.cancel(futures)
                raise
            # The run is over: stragglers of it (or of a lost run) stop and are forgotten.
            client.run(abandon, run, on_error="ignore")
            client.cancel(futures)
            if result is None:
                lost += 1
                fresh = True
                continue
            driver = result
            finished.extend(driver.finished)
            driver.finished = []
            fresh = False
            rounds = min(2 * rounds, MAX_ROUNDS)
    finally:
        client.run(abandon, run, fit, on_error="ignore")
    return driver, finished, {"runs": runs, "lost_runs": lost}
