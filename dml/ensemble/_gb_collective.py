"""Boosting rounds as one long-lived task per group of blocks that swap histograms directly.

The chained graphs of :mod:`dml.ensemble._gb_chain` pay the scheduler for every growth wave:
two tasks per group and a transfer of every group's partial sums, about 30 ms a wave, while a
whole tree of LightGBM takes about 20 ms. Here, on a ``distributed`` cluster, a *run* of several
rounds is one task per group, pinned to a worker. The tasks leave the worker's thread pool
(``secede``), so they all run at once whatever the number of threads, and step through the
same :class:`~dml.ensemble._gb_chain.Driver` as the chained graph: compute the group's partial
sums, send them to the workers of the other groups and wait for theirs (the exchange,
placement, run waiting and abandoning are :mod:`dml._collective`'s, shared with mini-batch
SGD), sum them in the fixed order of the block tree and take the next decision. The model is
the chained graph's, bit for bit: the same decisions from the same sums.

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

import uuid

import numpy as np

from dml import _collective
from dml._block_groups import block_ranges
from dml._collective import (RunCannotStart, RunLost, abandon, cluster_client,  # noqa: F401
                             has_headroom, install, leftovers)
from dml.ensemble import _gb_chain, _gb_fit, _gb_grow, _gb_wire

# ---------------------------------------------------------------------------- worker side
#: The rows' state between runs, per worker process: (fit, group) -> (round, carried state of
#: the group's blocks). The messages and abandoned runs are :mod:`dml._collective`'s.
_STATE = _collective.STATE
_WHAT = "gradient boosting"


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
                   + (_gb_grow.init_nodes(p, n_trees),))
    return tuple(out)


#: Whether the groups of a run split the features between them (a reduce-scatter: each
#: receives, sums and searches only its features' histograms, then the best splits are
#: swapped) rather than every group receiving, summing and searching all of them. The model is
#: the same either way.
REDUCE_SCATTER = True

#: Which groups a wave's histograms are packed for (:mod:`dml.ensemble._gb_wire`: the counts
#: as small integers, empty bins left out; 43% fewer bytes on the benchmark fit): ``"hosts"``,
#: groups whose worker is on another host (the bytes cross a network); ``"workers"``, every
#: group on another worker; ``"none"``. Between two processes of one host the bytes are only
#: copied, which costs less than packing and unpacking them (0.2 s of CPU time per worker
#: against about 0.05 s of copies saved, on the benchmark fit). The same histograms arrive
#: either way (docs/gradient_boosting.md, "Cost").
PACK = "hosts"


def _packed_for(addresses, g):
    """Whether group ``g`` packs its histograms for each group (see :data:`PACK`)."""
    from distributed.comm.addressing import get_address_host

    def host(a):
        try:
            return get_address_host(a)
        except (ValueError, TypeError):
            return a

    mine = addresses[g]
    return [a != mine and (PACK == "workers" or (PACK == "hosts" and host(a) != host(mine)))
            for a in addresses]


def run_group(prep, g, run, fit, addresses, driver, args, rounds, fresh, trees):
    """One group's part of a run: the driver's steps for up to ``rounds`` rounds.

    ``addresses[h]`` is the worker of group ``h``; ``args`` are the group's
    ``(start, n_blocks, loss, seed, subsample, n_trees, baseline, prior)``. Returns the driver
    (group 0) or None, and leaves the group's state on the worker for the next run."""
    with _collective.long_lived(run, g, addresses, _WHAT) as link:
        return _run(link, prep, g, fit, driver, args, rounds, fresh, trees)


def _run(link, prep, g, fit, driver, args, rounds, fresh, trees):
    start, n_blocks, loss, seed, subsample, n_trees, baseline, prior = args
    with _collective._COND:
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
    # A reduce-scatter by feature: group h sums, subtracts and searches only features
    # bounds[h] .. bounds[h + 1] - 1 of a wave's histograms, so it receives only those; the
    # groups then swap their best splits (a small message) and all take the best.
    d = prep[0][0].shape[1]
    bounds = block_ranges(d, link.n_groups) if REDUCE_SCATTER and 1 < link.n_groups <= d \
        else None
    driver.features = None if bounds is None else (bounds[g], bounds[g + 1])
    packed = _packed_for(link.addresses, g)
    partials = None
    step = 0
    while True:
        if partials is not None:
            driver.pending = driver.step(partials)
            if driver.pending[0] == "best":
                driver.pending = driver.merge(link.exchange(step, driver.pending))
                step += 1
        decision = driver.pending
        if decision[0] == "idle":
            driver.features = None
            return driver if g == 0 else None
        if (decision[0] == "end" and decision[2] is not None
                and driver.rnd - first >= rounds and driver.rnd < driver.max_iter):
            # Cut here, at the start of a round: the next run takes over from this state.
            carried = _gb_chain.end_round(prep, carried, decision, step_args, True)
            with _collective._COND:
                _STATE[(fit, g)] = (driver.rnd, carried)
            driver.pending = ("end", None, None, driver.rnd, decision[4])
            driver.features = None
            return driver if g == 0 else None
        # The task owns its state (a lost run rebuilds it): rows regrouped in place.
        carried, partial = _gb_chain.apply_decision(prep, carried, decision, step_args, True)
        if decision[0] == "grow" and bounds is not None:
            shares = [_gb_grow.feature_share(partial, bounds[h], bounds[h + 1])
                      for h in range(link.n_groups)]
            partials = link.exchange_each(step, [_gb_wire.pack_share(s) if pack else s
                                                 for s, pack in zip(shares, packed)])
            # Every other group's share, packed or not, checked against the expected shape.
            shape = (decision[3], bounds[g + 1] - bounds[g], decision[4] + 1, 3)
            partials = [p if h == g else _gb_wire.unpack_share(p, shape)
                        for h, p in enumerate(partials)]
        else:
            partials = link.exchange(step, partial)
        step += 1


# ---------------------------------------------------------------------------- client side
#: Rounds of the first run; each next run has twice as many, up to :data:`MAX_ROUNDS`. A lost
#: worker costs at most one run; each run costs a client round trip.
FIRST_ROUNDS, MAX_ROUNDS = 4, 32

#: The worker of every group (a module attribute, so tests can move groups between runs).
_placement = _collective.placement


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
            # A lost run's stragglers stop and are forgotten. A run whose tasks all finished
            # left nothing behind (every group received every message before it finished; its
            # rows' state is the next run's), so the workers are not told: two round trips a
            # run. The last run and the fit's state are dropped below.
            result = _collective.execute(client, futures, run, addresses,
                                         "a gradient-boosting run", tidy_finished=False)
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
