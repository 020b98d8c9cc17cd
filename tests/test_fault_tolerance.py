"""Losing a worker process mid-fit does not change the model (DESIGN.md principle 4).

A dedicated multi-process cluster (``dask scheduler`` + three ``dask worker`` processes) is
started for this module. Each test fits once undisturbed, then fits again while one worker's
process group (nanny and worker) is killed with SIGKILL by PID part-way through, and a
replacement worker is started; the two models must be equal bit for bit. Dask recomputes the
lost blocks from their task graphs; dml's fixed-order reductions make the result independent
of which worker computes what.
"""
from __future__ import annotations

import os
import signal
import threading
import time

import dask.array as da
import numpy as np
import pytest
from distributed import Client

from conftest import ProcessCluster

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]


class Cluster:
    def __init__(self, tmp):
        self.pc = ProcessCluster(tmp, n_workers=3, memory_limit="1GiB")
        self.spawned = 3

    def worker_procs(self):
        return [p for p in self.pc.procs[1:] if p.poll() is None]

    def kill_one(self, name: str | None = None) -> int:
        """SIGKILL the process group (nanny + worker) of a live worker (the one started as
        ``--name name`` when given, else the newest); return its PID."""
        procs = self.worker_procs()
        if name is not None:
            procs = [p for p in procs if f"--name {name} " in " ".join(map(str, p.args)) + " "]
            assert procs, f"no live worker process named {name!r}"
        proc = procs[-1]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        return proc.pid

    def add_worker(self) -> None:
        i = self.spawned
        self.spawned += 1
        self.pc._spawn(["worker", "--scheduler-file", str(self.pc.scheduler_file), "--nthreads",
                        "1", "--memory-limit", "1GiB", "--no-dashboard", "--name",
                        f"worker-{i}", "--local-directory", str(self.pc.tmpdir / f"worker-{i}")],
                       f"worker-{i}.log")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("fault-cluster"))
    try:
        c.pc.start()
        yield c
    finally:
        c.pc.stop()


@pytest.fixture
def fclient(cluster):
    with Client(cluster.pc.address, set_as_default=False) as client:
        # Back to three workers before each test.
        while len(cluster.worker_procs()) < 3:
            cluster.add_worker()
        client.wait_for_workers(3, timeout=60)
        with client.as_current():
            yield client


def _transitions(dask_scheduler):
    return dask_scheduler.transition_counter


def timed_fit(make, X, y=None):
    """An undisturbed fit and the number of scheduler task transitions it took."""
    from distributed import get_client

    client = get_client()
    before = client.run_on_scheduler(_transitions)
    model = make().fit(X) if y is None else make().fit(X, y)
    return model, client.run_on_scheduler(_transitions) - before


def disturbed_fit(cluster, make, X, y, transitions):
    """The same fit, with a worker killed once the scheduler has made ``transitions`` task
    transitions in it (progress, not wall time, decides when), then replaced."""
    running, killed = threading.Event(), []

    def killer():
        with Client(cluster.pc.address, set_as_default=False) as c:
            start = c.run_on_scheduler(_transitions)
            while running.is_set() and c.run_on_scheduler(_transitions) - start < transitions:
                time.sleep(0.01)
            killed.append((cluster.kill_one(), running.is_set()))
        cluster.add_worker()

    running.set()
    t = threading.Thread(target=killer, daemon=True)
    t.start()
    try:
        model = make().fit(X) if y is None else make().fit(X, y)
    finally:
        running.clear()
        t.join(timeout=60)
    assert killed and killed[0][1], "the worker was killed after the fit ended"
    return model


def classification(n=3000, d=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.5 * X[:, 1] - X[:, 2] + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return X, y


def test_sgd_survives_a_killed_worker(cluster, fclient):
    from dml.linear_model import SGDClassifier

    X, y = classification()
    Xd, yd = da.from_array(X, chunks=(250, -1)), da.from_array(y, chunks=250)
    events = []

    def on_epoch(state, record):
        # Mid-fit, deterministically: after epoch 3 kill a worker, after epoch 5 replace it.
        if events is not None and state.epoch == 3:
            events.append(cluster.kill_one())
        if events is not None and state.epoch == 5:
            cluster.add_worker()
        return False

    def make(cb):
        return SGDClassifier(loss="log_loss", max_iter=8, tol=None, random_state=0,
                             batch_size=32, callbacks=[cb])

    events_ref, events = events, None
    reference = make(on_epoch).fit(Xd, yd)
    events = events_ref
    disturbed = make(on_epoch).fit(Xd, yd)
    assert len(events) == 1
    assert disturbed.n_iter_ == reference.n_iter_ == 8
    np.testing.assert_array_equal(disturbed.coef_, reference.coef_)
    np.testing.assert_array_equal(disturbed.intercept_, reference.intercept_)


def test_kmeans_survives_a_killed_worker(cluster, fclient):
    from dml.cluster import KMeans

    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(loc=c, scale=1.5, size=(400, 4)) for c in range(6)])
    Xd = da.from_array(X, chunks=(300, -1))

    def make():
        # 2 x 20 iterations (tol=0: all of them): the kill lands a third of the way in.
        return KMeans(n_clusters=6, n_init=2, max_iter=20, tol=0.0, random_state=0)

    reference, transitions = timed_fit(make, Xd)
    disturbed = disturbed_fit(cluster, make, Xd, None, transitions // 3)
    np.testing.assert_array_equal(disturbed.cluster_centers_, reference.cluster_centers_)
    assert disturbed.inertia_ == reference.inertia_ and disturbed.n_iter_ == reference.n_iter_


def test_random_forest_survives_a_killed_worker(cluster, fclient):
    from dml import ensemble

    X, y = classification(n=2000, d=6)
    Xd, yd = da.from_array(X, chunks=(250, -1)), da.from_array(y, chunks=250)

    def make():
        # Two passes of two trees, four levels each: the kill lands a third of the way in.
        return ensemble.RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0,
                                               trees_per_pass=2)

    reference, transitions = timed_fit(make, Xd, yd)
    disturbed = disturbed_fit(cluster, make, Xd, yd, transitions // 3)
    np.testing.assert_array_equal(disturbed.predict_proba(X), reference.predict_proba(X))


def test_gradient_boosting_survives_a_killed_worker(cluster, fclient, monkeypatch):
    from dml import ensemble
    from dml.ensemble import _gb_fit

    monkeypatch.setattr(_gb_fit, "MIN_GROUP_CELLS", 0)  # several groups, on both workers
    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 500)  # blocks counted in runs of two

    X, y = classification(n=2000, d=6)
    Xd, yd = da.from_array(X, chunks=(250, -1)), da.from_array(y, chunks=250)

    def make():
        return ensemble.GradientBoostingClassifier(max_iter=8, max_leaf_nodes=8, subsample=0.8,
                                                   early_stopping=True, n_iter_no_change=20,
                                                   random_state=0)

    reference, transitions = timed_fit(make, Xd, yd)
    disturbed = disturbed_fit(cluster, make, Xd, yd, transitions // 3)
    np.testing.assert_array_equal(disturbed.predict_proba(X), reference.predict_proba(X))
    np.testing.assert_array_equal(disturbed.validation_score_, reference.validation_score_)


def _gbt_runs_processing(dask_scheduler):
    """(run number, worker name) of the boosting runs (``gbt-run-<fit>-<run>-<group>``) being
    processed."""
    return [(int(str(k).split("-")[-2]), ts.processing_on.name)
            for k, ts in dask_scheduler.tasks.items()
            if str(k).startswith("gbt-run-") and ts.state == "processing"]


def test_gradient_boosting_survives_a_worker_killed_inside_a_run(cluster, fclient, monkeypatch):
    """The worker is killed while the long-lived tasks of a later run swap histograms: the run
    is abandoned and submitted again from its first round, with the same model."""
    from dml import ensemble
    from dml.ensemble import _gb_fit

    monkeypatch.setattr(_gb_fit, "MIN_GROUP_CELLS", 0)  # several groups, on both workers
    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 400)  # blocks counted in runs of two

    X, y = classification(n=2400, d=6)
    Xd, yd = da.from_array(X, chunks=(200, -1)), da.from_array(y, chunks=200)

    def make():
        return ensemble.GradientBoostingRegressor(max_iter=40, max_leaf_nodes=8,
                                                  subsample=0.8, early_stopping=False,
                                                  random_state=0)

    reference = make().fit(Xd, yd.astype(float))
    models = _fit_killing_inside_a_run(
        cluster, _gbt_runs_processing, lambda: make().fit(Xd, yd.astype(float)),
        lambda m: m._fit_stats["lost_runs"] >= 1)
    for disturbed in models:
        np.testing.assert_array_equal(disturbed.nodes_["value"], reference.nodes_["value"])
        np.testing.assert_array_equal(disturbed.predict(X), reference.predict(X))
        np.testing.assert_array_equal(disturbed.train_score_, reference.train_score_)


def _fit_killing_inside_a_run(cluster, processing, fit, lost_a_run, attempts=3, first=1):
    """Fit while a thread kills a worker running a task of a run numbered ``first`` or later,
    as soon as one is in progress.

    Under load the kill can land just as the run finishes, and nothing is lost; the fit is then
    made again (at most ``attempts`` times) until one attempt lost a run. Returns every
    attempt's model (each must be the undisturbed model)."""
    models = []
    for _ in range(attempts):
        killed = []
        running = threading.Event()
        running.set()

        def killer(killed=killed, running=running):
            with Client(cluster.pc.address, set_as_default=False) as c:
                while not killed and running.is_set():
                    on = [name for r, name in c.run_on_scheduler(processing) if r >= first]
                    if on:
                        killed.append(cluster.kill_one(on[0]))
                    time.sleep(0.005)
            cluster.add_worker()

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        try:
            models.append(fit())
        finally:
            running.clear()
            t.join(timeout=60)
        assert killed, "no run was seen in progress"
        if lost_a_run(models[-1]):
            return models
    raise AssertionError(f"in {attempts} fits, the killed worker never took a run with it")


def _sgd_runs_processing(dask_scheduler):
    """(run number, worker name) of the SGD epoch runs (``sgd-run-<fit>-<run>-<group>``) being
    processed."""
    return [(int(str(k).split("-")[-2]), ts.processing_on.name)
            for k, ts in dask_scheduler.tasks.items()
            if str(k).startswith("sgd-run-") and ts.state == "processing"]


def test_sgd_survives_a_worker_killed_inside_a_run(cluster, fclient, live_run_steps):
    """The worker is killed while the long-lived tasks of the fit's run (which spans the
    epochs) exchange their round results: a new run takes the epoch again from its start, with
    the same model. (Killed between two epochs: test_sgd_survives_a_killed_worker.)"""
    from dml.linear_model import SGDRegressor

    # 12 blocks of 32 steps, each a stream; one step a round: 32 exchanges per epoch's run, so
    # the worker dies inside a run rather than between two.
    X, y = classification(n=12000, d=8)
    Xd, yd = da.from_array(X, chunks=(1000, -1)), da.from_array(y.astype(float), chunks=1000)

    def make():
        return SGDRegressor(max_iter=20, tol=None, random_state=0, stream_steps=4,
                            local_steps=1)

    reference = make().fit(Xd, yd)
    lost = live_run_steps

    def fit():
        lost.clear()
        return make().fit(Xd, yd)

    for disturbed in _fit_killing_inside_a_run(cluster, _sgd_runs_processing, fit,
                                               lambda m: any(lost), first=0):
        np.testing.assert_array_equal(disturbed.coef_, reference.coef_)
        np.testing.assert_array_equal(disturbed.intercept_, reference.intercept_)


SGD_JOB = """\
name: resumable_sgd
data:
  generator: make_classification
  params: {{n_samples: 2000, n_features: 8, n_informative: 5, chunks: 500, random_state: 0}}
target: y
model:
  name: sgd_classifier
  params: {{loss: log_loss, max_iter: 8, tol: null, batch_size: 32, random_state: 0,
           checkpoint_dir: {checkpoint_dir}}}
split: {{test_size: 0.25, random_state: 0}}
metrics: [accuracy]
scheduler: {{address: {address}}}
"""


def test_killed_dml_train_job_resumes_from_its_checkpoint(process_cluster, tmp_path):
    """SIGKILL the `dml train` process mid-fit, run it again with the same checkpoint_dir: it
    resumes and ends with the model of an uninterrupted run."""
    import json
    import sys

    import dml
    from _deploy_helpers import Processes

    def job(name, ckpt):
        path = tmp_path / f"{name}.yaml"
        path.write_text(SGD_JOB.format(checkpoint_dir=tmp_path / ckpt,
                                       address=process_cluster.address))
        return [sys.executable, "-m", "dml.cli", "train", str(path), "--output",
                str(tmp_path / name)]

    with Processes(tmp_path) as procs:
        procs.start("reference", job("reference", "ckpt-reference"))
        assert procs.wait("reference", 240) == 0, procs.log("reference")

        argv = job("resumed", "ckpt")
        procs.start("killed", argv)
        state = tmp_path / "ckpt" / "checkpoint.json"
        deadline = time.monotonic() + 180
        epoch = 0
        while epoch < 2:
            assert procs.procs["killed"].poll() is None, \
                "the job ended before it could be killed:\n" + procs.log("killed")
            assert time.monotonic() < deadline, procs.log("killed")
            try:
                epoch = json.loads(state.read_text())["epoch"]
            except (FileNotFoundError, ValueError, KeyError):
                pass
            time.sleep(0.02)
        procs.kill("killed", signal.SIGKILL)
        assert 2 <= epoch < 8
        assert not (tmp_path / "resumed" / "model.dml").exists()

        procs.start("restarted", argv)
        assert procs.wait("restarted", 240) == 0, procs.log("restarted")
    assert json.loads(state.read_text())["epoch"] == 8
    ref = dml.load(tmp_path / "reference" / "model.dml").named_steps["model"]
    got = dml.load(tmp_path / "resumed" / "model.dml").named_steps["model"]
    assert got.n_iter_ == ref.n_iter_ == 8
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)
