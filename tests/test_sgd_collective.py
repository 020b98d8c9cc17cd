"""SGD epochs on a cluster as one run of long-lived tasks per group of streams
(dml.optim.collective_rounds). The run must actually be used on a distributed cluster, give the
chained graphs' model bit for bit on few and many blocks, and leave nothing on the workers."""
from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import get_task_stream

from conftest import QUICK_ON_PROCESS_CLUSTER
from dml import _collective
from dml.linear_model import SGDClassifier, SGDRegressor
from dml.optim import collective_rounds
from dml.optim.streams import group_size, make_streams


def _data(n=1280, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + rng.normal(scale=0.3, size=n)
    return X, y


def _three_epochs():
    """A regressor whose fit has three epochs of several rounds each."""
    return SGDRegressor(max_iter=3, tol=None, random_state=0, stream_steps=4, local_steps=2)


def _fit(client, make, X, y, n_blocks):
    rows = -(-X.shape[0] // n_blocks)
    Xd, yd = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
    with get_task_stream(client) as ts:
        model = make().fit(Xd, yd)
    names = [str(t["key"]) for t in ts.data]
    return model, (sum("sgd-run-" in k for k in names), sum("sgd-round" in k for k in names))


def _chained(monkeypatch):
    monkeypatch.setattr(collective_rounds.CollectiveRounds, "usable", lambda self: False)


def _same(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.n_iter_ == b.n_iter_


# Quick tier: the process cluster (runs exchanging over TCP); the in-process cluster with the
# slow tests.
@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_collective_runs_are_used_and_equal_the_chained_graphs(client, monkeypatch):
    """Summed rounds (invscaling) on 1, 8 and 64 blocks: one run task per group for the whole
    fit (the run spans the epochs), no chained round task, and the chained graphs' model bit
    for bit."""
    X, y = _data()
    make = lambda: SGDRegressor(max_iter=2, tol=None, random_state=0,  # noqa: E731
                                stream_steps=3, local_steps=2)  # 64 blocks: 19 streams
    found = {}
    for n_blocks in (1, 8, 64):
        found[n_blocks] = _fit(client, make, X, y, n_blocks)
    with monkeypatch.context() as mp:
        _chained(mp)
        for n_blocks in (1, 8, 64):
            chained, (runs, rounds) = _fit(client, make, X, y, n_blocks)
            assert runs == 0 and rounds > 0
            model, (runs, rounds) = found[n_blocks]
            assert rounds == 0 and 0 < runs
            # One run task per group of streams, for both epochs; one group per worker thread
            # (two would share a core for the whole run).
            rows = -(-X.shape[0] // n_blocks)
            W = make_streams([rows] * n_blocks, 32, 3).n_streams
            per_group = group_size(W, sum(client.nthreads().values()))
            assert runs == -(-W // per_group), (runs, W, per_group)
            _same(model, chained)
    assert sum(client.run(_collective.leftovers, "").values()) == 0


def test_averaged_rounds_with_iterate_averaging_equal_the_chained_graphs(client, monkeypatch):
    """Averaged rounds (``optimal`` schedule) with ASGD slots, several rounds an epoch."""
    X, y = _data(seed=1)
    y = (y > 0).astype(int)
    make = lambda: SGDClassifier(loss="log_loss", max_iter=2, tol=None, random_state=0,  # noqa: E731
                                 average=3, stream_steps=4)
    model, (runs, rounds) = _fit(client, make, X, y, 8)
    assert runs > 0 and rounds == 0
    _chained(monkeypatch)
    chained, (runs, rounds) = _fit(client, make, X, y, 8)
    assert runs == 0 and rounds > 0
    _same(model, chained)


def test_lost_runs_are_submitted_again_with_the_same_model(inprocess_client, live_run_steps):
    """The run is abandoned before every epoch's first attempt, as a lost worker would make it:
    each epoch is handed to a new run from its first round, and the model is unchanged."""
    X, y = _data(seed=2)
    reference, _ = _fit(inprocess_client, _three_epochs, X, y, 8)
    outcomes = live_run_steps
    live_run_steps.clear()

    def lose_every_other(live):
        if len(outcomes) % 2 == 0:
            live.client.run(_collective.abandon, live.run)  # as a peer that cannot be reached

    live_run_steps.before = lose_every_other
    lost, _ = _fit(inprocess_client, _three_epochs, X, y, 8)
    assert outcomes == [True, False] * 3, outcomes
    _same(lost, reference)


def _runs_on_scheduler(dask_scheduler):
    """The SGD run tasks still running."""
    return [str(k) for k, ts in dask_scheduler.tasks.items()
            if str(k).startswith("sgd-run-") and ts.state == "processing"]


def test_an_interrupted_fit_ends_its_run(client):
    """An error in the client's epoch logic (here a callback) ends the run that spans the
    epochs: its tasks are gone from the cluster and leave nothing on the workers."""

    class Interrupted(Exception):
        pass

    def interrupt(state, record):
        if state.epoch == 2:
            raise Interrupted
        return False

    X, y = _data(seed=4)
    Xd, yd = da.from_array(X, chunks=(160, -1)), da.from_array(y, chunks=160)
    try:
        SGDRegressor(max_iter=5, tol=None, random_state=0, stream_steps=4,
                     callbacks=[interrupt]).fit(Xd, yd)
    except Interrupted:
        pass
    else:
        raise AssertionError("the callback's error did not reach the caller")
    # The client ended the run before the error left the fit: its tasks returned.
    assert client.run_on_scheduler(_runs_on_scheduler) == []
    assert sum(client.run(_collective.leftovers, "").values()) == 0


def test_runs_whose_client_does_not_come_back_end(inprocess_client, monkeypatch,
                                                  live_run_steps):
    """Tasks that wait longer than ``IDLE`` for the next epoch end by themselves; the client
    then hands that epoch to a new run, and the model is unchanged."""
    X, y = _data(seed=5)
    reference, _ = _fit(inprocess_client, _three_epochs, X, y, 8)
    outcomes = live_run_steps
    outcomes.clear()
    monkeypatch.setattr(collective_rounds, "IDLE", 0.0)  # read by the in-process workers
    monkeypatch.setattr(_collective, "POLL", 0.05)  # the client sees the ended run sooner
    idle, _ = _fit(inprocess_client, _three_epochs, X, y, 8)
    # Three epochs done; a run ended after an epoch at least once (after every one, unless the
    # first run's tasks also ended before the first epoch came).
    assert outcomes.count(False) == 3 and outcomes.count(True) >= 2, outcomes
    _same(idle, reference)
    assert sum(inprocess_client.run(_collective.leftovers, "").values()) == 0


def test_local_schedulers_keep_the_chained_graphs(monkeypatch):
    from dml.optim import engine

    X, y = _data(seed=3)
    make = lambda: SGDRegressor(max_iter=2, tol=None, random_state=0,  # noqa: E731
                                stream_steps=4, local_steps=2)
    chains = []
    run_chain = engine.StreamRunner.run_chain

    def counted(self, *args, **kwargs):
        chains.append(1)
        return run_chain(self, *args, **kwargs)

    monkeypatch.setattr(engine.StreamRunner, "run_chain", counted)
    Xd, yd = da.from_array(X, chunks=(160, -1)), da.from_array(y, chunks=160)
    with dask.config.set(scheduler="sync"):
        assert _collective.cluster_client() is None
        make().fit(Xd, yd)
    assert len(chains) == 2  # one chained graph per epoch


def test_finished_runs_remembered_by_a_worker_are_bounded(monkeypatch):
    """A worker remembers finished runs (to drop their late messages) only up to a bound."""
    monkeypatch.setattr(_collective, "_DEAD_KEEP", 5)
    before = dict(_collective._DEAD_RUNS)
    try:
        _collective._DEAD_RUNS.clear()
        for k in range(12):
            _collective.abandon(f"test-run-{k}")
        assert _collective.dead_runs() == 5
        assert list(_collective._DEAD_RUNS) == [f"test-run-{k}" for k in range(7, 12)]
        _collective._deliver("test-run-11", 0, 0, [1], "late")
        _collective._deliver("test-run-2", 0, 0, [1], "kept")  # forgotten: not dropped
        assert ("test-run-11", 0, 0, 1) not in _collective._BOX
        _collective.abandon("test-run-2")
        assert ("test-run-2", 0, 0, 1) not in _collective._BOX
    finally:
        _collective._DEAD_RUNS.clear()
        _collective._DEAD_RUNS.update(before)
