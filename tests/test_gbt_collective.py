"""Boosting on a cluster: long-lived tasks per group that swap histograms directly
(dml.ensemble._gb_collective). The model must be the one of the chained graphs that the
single-process scheduler runs, bit for bit, however many groups share a worker thread, after a
run is lost, and nothing may be left on the workers afterwards."""
from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_classification

from dml import _collective
from dml.ensemble import GradientBoostingClassifier, GradientBoostingRegressor, _gb_collective


@pytest.fixture(autouse=True)
def _a_group_per_thread(monkeypatch):
    """Tiny data would be grown as one group (``MIN_GROUP_CELLS``); these tests exercise the
    groups and the exchanges between them."""
    from dml.ensemble import _gb_fit

    monkeypatch.setattr(_gb_fit, "MIN_GROUP_CELLS", 0)
    # Every block counted on its own (small blocks are otherwise joined into runs of
    # RUN_ROWS rows, tested on their own in tests/test_gbt.py).
    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 0)


def _assert_same(a, b):
    for k in a.nodes_:
        np.testing.assert_array_equal(a.nodes_[k], b.nodes_[k])
    np.testing.assert_array_equal(a.train_score_, b.train_score_)
    np.testing.assert_array_equal(a.validation_score_, b.validation_score_)


def _leftovers(client):
    return sum(client.run(_gb_collective.leftovers, "").values())


def _set_pack(value):
    old, _gb_collective.PACK = _gb_collective.PACK, value
    return old


def test_more_groups_than_threads(client, monkeypatch):
    """Five groups on two single-threaded workers: the tasks leave the thread pool, so all run
    at once (no deadlock), and the model is the single-process scheduler's. Each group owns
    one of the five features (the reduce-scatter; groups on one worker swap in memory), a node
    may search only some of them (``max_features``), and a duplicated column makes equal gains
    in two groups (the lower feature index must win, as in the search over all features).
    The histograms for groups on the other worker travel packed (as between hosts)."""
    from dml.ensemble import _gb_fit

    X, y = make_classification(n_samples=700, n_features=5, random_state=3)
    X[:, 4] = X[:, 1]
    Xd, yd = da.from_array(X, chunks=(70, -1)), da.from_array(y, chunks=70)
    kw = dict(max_iter=3, max_leaf_nodes=5, subsample=0.8, max_features=0.6,
              early_stopping=True, validation_fraction=0.2, n_iter_no_change=1, random_state=0)
    monkeypatch.setattr(_gb_fit, "default_n_tasks", lambda: 5)
    before = client.run(_collective.channels)
    client.run(_set_pack, "workers")
    try:
        a = GradientBoostingClassifier(**kw).fit(Xd, yd)
    finally:
        client.run(_set_pack, "hosts")
    after = client.run(_collective.channels)
    # Over a direct channel between the worker processes (tcp), through the handler between
    # the in-process workers (inproc).
    used = {k: sum(after[w][k] - before[w][k] for w in after) for k in ("direct", "handler")}
    tcp = all(w.startswith("tcp://") for w in after)
    assert used["direct" if tcp else "handler"] > 0 and used["handler" if tcp else "direct"] == 0
    with dask.config.set(scheduler="sync"):
        b = GradientBoostingClassifier(**kw).fit(Xd, yd)
    assert a._fit_stats["groups"] == 5 and a._fit_stats["lost_runs"] == 0
    _assert_same(a, b)
    assert _leftovers(client) == 0


def test_packed_histograms_arrive_bit_for_bit():
    """A share of histograms packed for another host (counts as small integers, bins of three
    +0.0 left out) unpacks to the same bits, -0.0 included; counts that are not whole rows
    travel unpacked; a packed share that does not match the expected shape or whose mask
    does not match its bins is refused before a kernel reads it."""
    from dml.ensemble import _gb_wire

    rng = np.random.default_rng(0)
    hist = np.zeros((3, 6, 9, 3))
    full = rng.random((3, 6, 9)) < 0.6
    hist[full] = np.c_[rng.standard_normal(full.sum()), rng.random(full.sum()),
                       rng.integers(1, 300, full.sum())]
    hist[0, 2, 0] = (-0.0, 0.0, 0.0)
    share = hist[:, 2:5]  # a group's features: a strided view
    for h in (share, share[:, :, :, :] * [1, 1, 70000], np.zeros((2, 3, 9, 3))):
        packed = _gb_wire.pack(h)
        assert isinstance(packed, tuple)
        back = _gb_wire.unpack(packed, h.shape)
        np.testing.assert_array_equal(back.view(np.uint64),
                                      np.ascontiguousarray(h).view(np.uint64))
    assert _gb_wire.pack(share)[4].dtype == np.uint16
    assert _gb_wire.pack(share * [1, 1, 70000])[4].dtype == np.uint32
    assert isinstance(_gb_wire.pack(share + [0, 0, 0.5]), np.ndarray)
    tag, shape, mask, sums, counts = _gb_wire.pack(share)
    for bad, match in [((tag, shape, mask, sums[1:], counts[1:]), "mask does not match"),
                       ((tag, shape, mask | np.uint8(255), sums, counts), "mask does not match"),
                       ((tag, (1,) + shape[1:], mask, sums, counts), "expected shape"),
                       ((tag, shape, mask, sums, counts.astype(np.int64)), "expected shape"),
                       (("other",), "unknown form"), (share[:1], "expected")]:
        with pytest.raises(ValueError, match=match):
            _gb_wire.unpack(bad, share.shape)


def test_small_data_is_one_group(client, monkeypatch):
    """Data below ``MIN_GROUP_CELLS`` per group is grown as one group (no exchange); the model
    is the one grown by a group per thread, whose groups run on every worker (their blocks are
    persisted one group per worker, and a run's tasks go where their group is)."""
    from dml.ensemble import _gb_fit

    X, y = make_classification(n_samples=800, n_features=5, random_state=5)
    # All blocks on one worker: the groups must still go to every worker.
    Xd, yd = client.persist([da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100)],
                            workers=sorted(client.nthreads())[:1])
    kw = dict(max_iter=3, max_leaf_nodes=5, early_stopping=False, random_state=0)
    place, where = _gb_collective._placement, []

    def seen(cl, futures):
        where.append(place(cl, futures))
        return where[-1]

    monkeypatch.setattr(_gb_collective, "_placement", seen)
    a = GradientBoostingClassifier(**kw).fit(Xd, yd)  # a group per thread (fixture)
    assert a._fit_stats["groups"] > 1
    assert all(set(w) == set(client.nthreads()) for w in where) and where
    monkeypatch.setattr(_gb_fit, "MIN_GROUP_CELLS", 10**9)
    c = GradientBoostingClassifier(**kw).fit(Xd, yd)
    assert c._fit_stats["groups"] == 1
    _assert_same(a, c)


def test_lost_runs_restart_from_their_first_round(client, monkeypatch):
    """Every run after the first finds its groups moved to the other worker, without their
    state: the run is abandoned and submitted again, the groups rebuild their state from the
    trees fitted so far, and the model is unchanged."""
    X, y = make_classification(n_samples=600, n_features=5, random_state=4)
    Xd, yd = da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100)
    kw = dict(loss="absolute_error", max_iter=6, max_leaf_nodes=4, subsample=0.9,
              early_stopping=False, random_state=0)
    place = _gb_collective._placement
    calls = []

    def moved(cl, futures):
        calls.append(1)
        # The in-process workers share this module: drop the kept state as a new worker would.
        _gb_collective._STATE.clear()
        addresses = place(cl, futures)
        ring = sorted(set(cl.nthreads()))
        return [ring[(ring.index(a) + len(calls)) % len(ring)] for a in addresses]

    monkeypatch.setattr(_gb_collective, "FIRST_ROUNDS", 1)
    monkeypatch.setattr(_gb_collective, "_placement", moved)
    a = GradientBoostingRegressor(**kw).fit(Xd, yd.astype(float))
    with dask.config.set(scheduler="sync"):
        b = GradientBoostingRegressor(**kw).fit(Xd, yd.astype(float))
    assert a._fit_stats["lost_runs"] >= 1
    _assert_same(a, b)
    assert _leftovers(client) == 0


def test_rebuilt_state_is_the_state_the_rounds_left():
    """The rebuild of a group's state from the fitted trees (after a lost run) gives the raw
    predictions and gradients the rounds computed, bit for bit."""
    from dml.ensemble import _gb_chain

    X, y = make_classification(n_samples=400, n_features=5, n_classes=3, n_informative=3,
                               random_state=5)
    Xd, yd = da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100)
    kept = {}
    end_round = _gb_chain.end_round

    def spy(prep, carried, decision, args, *in_place):
        out = end_round(prep, carried, decision, args, *in_place)
        if decision[2] is not None:
            kept[decision[3]] = (prep, out)
        return out

    with pytest.MonkeyPatch.context() as mp, dask.config.set(scheduler="sync"):
        mp.setattr(_gb_chain, "end_round", spy)
        m = GradientBoostingClassifier(max_iter=3, max_leaf_nodes=5, early_stopping=False,
                                       random_state=0).fit(Xd, yd)
    T = m.n_trees_per_iteration_
    n_nodes = m.nodes_["tree_start"][2 * T]
    two = {k: v for k, v in m.nodes_.items() if k != "tree_start"}
    two = {k: v[:n_nodes] for k, v in two.items()}
    two["tree_start"] = m.nodes_["tree_start"][:2 * T + 1]
    # The state after round 2 of the group of the first block (one group: all blocks).
    prep, state = kept[2]
    rebuilt = _gb_collective.rebuild(prep, 0, _loss(m), m._baseline, None, two, m._seed,
                                     1.0, 2, T)
    assert len(rebuilt) == len(state)
    for r, s in zip(rebuilt, state):
        for a, b in zip(r[:4], s[:4]):
            np.testing.assert_array_equal(a, b)


def _loss(m):
    from dml.ensemble._gb_losses import make_loss

    return make_loss(m.loss, m.n_trees_per_iteration_, 0.5)


#: Events the held tasks wait on: the in-process workers share this module with the test.
#: (A ``distributed.Event`` would make each task open its worker's own client, set as Dask's
#: default: that changes the process's dask.config for the tests that come after.)
_RELEASE: dict = {}


def _blocker(name):
    _RELEASE[name].wait(timeout=120)


def test_run_that_cannot_start_falls_back_to_chained_graphs(inprocess_client, monkeypatch):
    """When the tasks of a run cannot all start (here every worker thread is held by a task
    that waits for an event; in practice paused workers near the memory limit), the client
    gives up on the run after the start timeout and grows the same model as chained graphs.
    The held threads are released only once the fallback begins (or after 60 s, and then the
    fit ends on the long-lived tasks and the test fails)."""
    import threading
    import uuid

    from dml.ensemble import _gb_fit

    client = inprocess_client
    X, y = make_classification(n_samples=400, n_features=5, random_state=6)
    Xd, yd = da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100)
    kw = dict(max_iter=3, max_leaf_nodes=4, early_stopping=False, random_state=0)
    name = f"dml-test-hold-{uuid.uuid4().hex}"
    release = _RELEASE.setdefault(name, threading.Event())
    holders = []
    fit_rounds, chained = _gb_collective.fit_rounds, _gb_fit._chained_rounds

    def held_fit_rounds(cl, *args, **kwargs):
        # The binned blocks are in memory now; every thread of every worker gets busy.
        for addr, n in cl.nthreads().items():
            holders.extend(cl.submit(_blocker, name, workers=[addr], allow_other_workers=False,
                                     pure=False) for _ in range(n))
        while len(_busy(cl, holders)) < len(holders):
            threading.Event().wait(0.05)
        return fit_rounds(cl, *args, **kwargs)

    def fallback(*args, **kwargs):
        release.set()
        return chained(*args, **kwargs)

    monkeypatch.setattr(_collective, "START_TIMEOUT", 1.0)
    monkeypatch.setattr(_gb_collective, "fit_rounds", held_fit_rounds)
    monkeypatch.setattr(_gb_fit, "_chained_rounds", fallback)
    safety = threading.Timer(60.0, release.set)
    safety.start()
    try:
        a = GradientBoostingClassifier(**kw).fit(Xd, yd)
    finally:
        safety.cancel()
        release.set()
        client.gather(holders)
    assert a._fit_stats["collective"] is False
    with dask.config.set(scheduler="sync"):
        b = GradientBoostingClassifier(**kw).fit(Xd, yd)
    _assert_same(a, b)
    assert _leftovers(client) == 0


def _executing(keys, dask_worker=None):
    tasks = dask_worker.state.tasks
    return [k for k in keys if k in tasks and tasks[k].state == "executing"]


def _busy(client, futures):
    running = client.run(_executing, [f.key for f in futures])
    return {k for v in running.values() for k in v}


def test_a_long_run_that_started_is_not_mistaken_for_one_that_cannot_start(inprocess_client,
                                                                          monkeypatch):
    """Past the start timeout the client asks the workers which of the run's tasks are
    running; a run whose tasks all run must go on (it used to be abandoned: the question
    failed on every worker and no task was ever seen running)."""
    # Tasks start within a fraction of a second here; the later runs (up to 32 rounds) last
    # longer than that, so the check runs while they go on.
    monkeypatch.setattr(_collective, "START_TIMEOUT", 0.5)
    monkeypatch.setattr(_collective, "POLL", 0.05)
    X, y = make_classification(n_samples=4000, n_features=5, random_state=6)
    Xd, yd = da.from_array(X, chunks=(500, -1)), da.from_array(y, chunks=500)
    a = GradientBoostingClassifier(max_iter=80, max_leaf_nodes=8, early_stopping=False,
                                   random_state=0).fit(Xd, yd)
    assert a._fit_stats["collective"] is True
    assert _leftovers(inprocess_client) == 0



def _inside_a_run(addresses):
    import sys
    import threading

    from distributed import get_worker

    from dml import _collective

    worker, ident = get_worker(), threading.get_ident()
    before = sys.getswitchinterval()
    with _collective.long_lived("test-tuned-run", 0, addresses, "test"):
        inside = (ident in worker.active_threads, sys.getswitchinterval(),
                  _collective._TUNED["runs"])
    after = (ident in worker.active_threads, sys.getswitchinterval(), _collective._TUNED["runs"])
    return before, inside, after, _collective._libc() is not None


def test_a_run_tunes_its_worker_process_and_restores_it(process_client):
    """While a run goes on, its thread is hidden from the worker's sampling profiler, the thread
    switch interval is short and (a nanny's worker has fixed allocator settings) glibc's
    allocator is tuned; all is restored when it ends."""
    addr = sorted(process_client.nthreads())[0]
    before, inside, after, tuned = process_client.submit(
        _inside_a_run, [addr], workers=[addr], pure=False).result()
    assert inside == (False, min(before, 0.001), 1)
    assert after == (True, before, 0)
    assert tuned
