"""Out-of-core fits (issue 11, part 1): data several times larger than the cluster's memory.

A dedicated multi-process cluster (``dask scheduler`` + ``dask worker`` processes with a small
``--memory-limit``) fits every estimator family on a Parquet dataset larger than the workers'
*total* memory limit, read with :func:`dml.datasets.read_parquet`, so
the blocks must stream from disk on every pass (DESIGN principle 3). Each fit must

* finish with the same worker processes (same PIDs, no worker removed by the scheduler): no
  worker was killed by its nanny for exceeding the memory limit;
* equal the fit of the same estimator on the same data and partitioning held in memory (the
  Parquet dataset persisted on the in-process cluster).

Scale: ``DML_OOC_SCALE`` is the data size divided by the workers' total memory limit (default
1.1, so that CI stays within its time budget; ``DML_OOC_SCALE=3`` is the full check of issue 11,
1.5 GiB on disk per worker and many minutes); ``DML_OOC_WORKERS`` the number of workers
(default 1). Each worker has ``WORKER_MIB`` MiB: a worker that has
imported dml's estimators (pandas, pyarrow, scikit-learn, numba) already holds about 285 MiB, so
256 MiB workers would be killed by their nanny before reading any data.

The datasets are written one Parquet part file at a time from per-part random generators, so
the test process never holds more than one part.
"""
from __future__ import annotations

import inspect
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import Client

from conftest import ProcessCluster

#: Data size / total worker memory limit.
RATIO = float(os.environ.get("DML_OOC_SCALE", "1.1"))

#: The suite's per-test timeout (600 s, a hang detector) grown with the data: a fit's time grows
#: with it. At 3x the MLP's out-of-core fit alone took 604 s on a quiet machine (its summed
#: rounds of 32 steps re-read the blocks they step, about 440 rounds an epoch with batches of
#: 1,024 — half that with the 2,048 used now —, when a round's blocks cannot stay in the
#: 768 MiB worker: docs/partition_parallel_sgd.md, "What a round costs"), so the 600 s limit
#: failed the full check there.
TIMEOUT = int(600 * max(1.0, RATIO / 1.1))

pytestmark = [pytest.mark.out_of_core, pytest.mark.multiprocess, pytest.mark.slow,
              pytest.mark.timeout(TIMEOUT)]
#: One worker by default: the data must exceed the *total* worker memory, so every extra worker
#: adds ~640 MiB to write, stream and fit twice (out of core and in memory) — CI time the suite
#: does not have. DML_OOC_WORKERS=2 checks the same with two workers.
N_WORKERS = int(os.environ.get("DML_OOC_WORKERS", "1"))
#: 285 MiB of imports plus room for a few blocks in flight: with 448 MiB workers spent much of
#: the fit paused at Dask's 80% threshold (measured), which only slowed it down.
#: 768, not 512: on a fresh clone the forest's numba kernels compile inside the worker (no
#: cache yet); with 512 MiB that pushed unmanaged memory past the 80% pause threshold and the
#: paused worker never resumed (seen in a fresh-clone `.ci/run`).
WORKER_MIB = 768
DATA_BYTES = int(RATIO * N_WORKERS * WORKER_MIB * 2**20)
#: In-memory bytes of one Parquet part (one block): small next to a worker's free memory.
PART_BYTES = 8 * 2**20
N_FEATURES = 20


# --------------------------------------------------------------------------------------------
# Data, written part by part
# --------------------------------------------------------------------------------------------

def _write_parts(path: Path, n_parts: int, make_part) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for k in range(n_parts):
        # One table per file, one row group: one Dask partition per file, in file order.
        pq.write_table(make_part(k), path / f"part-{k:05d}.parquet", compression=None,
                       row_group_size=1 << 30)
    return path


def _classification_part(k: int, rows: int) -> pa.Table:
    rng = np.random.default_rng([11, k])
    X = rng.normal(size=(rows, N_FEATURES))
    # Two linear classes plus a shift per class so that k-means and naive Bayes see structure.
    w = np.linspace(-1.0, 1.0, N_FEATURES)
    y = (X @ w + rng.normal(scale=1.0, size=rows) > 0).astype(np.int64)
    X[:, :4] += 3.0 * y[:, None]
    cols = {f"f{j}": X[:, j] for j in range(N_FEATURES)}
    cols["y"] = y
    return pa.table(cols)


def _ratings_part(k: int, rows: int, n_users: int, n_items: int) -> pa.Table:
    rng = np.random.default_rng([12, k])
    u = rng.integers(0, n_users, rows)
    i = rng.integers(0, n_items, rows)
    # A low-rank signal: user and item effects from fixed hashes of the ids.
    r = 3.0 + np.sin(u * 0.37) + np.cos(i * 0.11) + rng.normal(scale=0.3, size=rows)
    return pa.table({"user": u, "item": i, "rating": r})


@pytest.fixture(scope="module")
def classification_data(tmp_path_factory):
    row_bytes = 8 * (N_FEATURES + 1)
    rows = PART_BYTES // row_bytes
    n_parts = -(-DATA_BYTES // (rows * row_bytes))
    path = _write_parts(tmp_path_factory.mktemp("ooc") / "classification", n_parts,
                        lambda k: _classification_part(k, rows))
    return path, n_parts * rows * row_bytes


@pytest.fixture(scope="module")
def ratings_data(tmp_path_factory):
    row_bytes = 24
    rows = PART_BYTES // row_bytes
    n_parts = -(-DATA_BYTES // (rows * row_bytes))
    path = _write_parts(tmp_path_factory.mktemp("ooc") / "ratings", n_parts,
                        lambda k: _ratings_part(k, rows, 2000, 500))
    return path, n_parts * rows * row_bytes


# --------------------------------------------------------------------------------------------
# Clusters
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory):
    pc = ProcessCluster(tmp_path_factory.mktemp("ooc-cluster"), n_workers=N_WORKERS,
                        memory_limit=f"{WORKER_MIB}MiB")
    try:
        pc.start()
        yield pc
    finally:
        pc.stop()


def _worker_pids(client):
    return client.run(os.getpid)


def _removed_workers(dask_scheduler):
    # Every worker that ever left the scheduler (killed, restarted by its nanny, or closed).
    return sum(1 for topic in ("worker-remove",) for _ in dask_scheduler.get_events(topic))


def _held_state(dask_scheduler):
    """Tasks the scheduler still knows, and per worker its status, process and managed memory
    (MiB) and the number of keys it holds."""
    return {"tasks": len(dask_scheduler.tasks), "workers": [
        (ws.status.name, ws.memory.process >> 20, ws.memory.managed >> 20, len(ws.has_what))
        for ws in dask_scheduler.workers.values()]}


def _limits(client):
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {w: int(i["memory_limit"]) for w, i in workers.items()}


def fit_out_of_core(cluster, data_bytes, fit):
    """``fit()`` on the small cluster; asserts no worker died; returns (model, seconds)."""
    with Client(cluster.address, set_as_default=False) as client:
        limits = _limits(client)
        assert len(limits) == N_WORKERS
        assert data_bytes > sum(limits.values()), (data_bytes, limits)
        assert data_bytes >= RATIO * 0.99 * sum(limits.values()), (data_bytes, limits)
        pids = _worker_pids(client)
        removed = client.run_on_scheduler(_removed_workers)
        # What the earlier tests' fits left on the workers (their clients are closed by now).
        print(f"small cluster before the fit: {client.run_on_scheduler(_held_state)}")
        t0 = time.perf_counter()
        with client.as_current():
            model = fit()
        seconds = time.perf_counter() - t0
        print(f"out-of-core fit: {seconds:.1f}s")
        assert _worker_pids(client) == pids, \
            "a worker process was replaced during the fit:\n" + \
            "".join(cluster.log(f"worker-{i}") for i in range(N_WORKERS))
        assert client.run_on_scheduler(_removed_workers) == removed
        for i in range(N_WORKERS):
            log = cluster.log(f"worker-{i}")
            assert "exceeded 95% memory budget" not in log, log
    return model, seconds


def fit_in_memory(client, fit_on, X):
    """The same fit on ``X``: the same partitions persisted in memory on the in-process cluster.

    BLAS is limited to one thread, as in the ``dask worker`` processes (the nanny sets
    ``OMP_NUM_THREADS=1``), so floating-point results do not depend on the thread count.
    """
    from threadpoolctl import threadpool_limits

    t0 = time.perf_counter()
    with client.as_current(), threadpool_limits(1):
        model = fit_on(X)
    print(f"in-memory fit: {time.perf_counter() - t0:.1f}s")
    return model


@pytest.fixture(scope="module")
def _inprocess_client():
    """This module's in-process reference cluster (2 workers × 1 thread, like the suite's),
    without Dask's memory management: no spilling to disk, no pausing.

    Its workers live in this process, and each worker's memory monitor measures the whole
    process (both workers, the client, the test) against its own limit, half the machine's
    memory. At ``DML_OOC_SCALE=3`` the matrix factorisation reference holds the ratings, their
    cells and the pieces the cells are gathered from (about 9 GiB with the rest of the process):
    the workers crossed Dask's 80% pause threshold and resumed again and again (seen in a 3×
    run), and once both were paused with nothing running that could free memory, the fit
    waited for ever (the earlier hangs: every process idle, the test process at 9.9 GiB). The
    machine has room for the references (24 GiB); what they are checked for is equality with
    the out-of-core fits, not Dask's memory management, which the small cluster exercises.
    """
    import dask
    from distributed import LocalCluster

    # Read by each worker's memory manager when it is created (here, inside LocalCluster).
    with dask.config.set({"distributed.worker.memory.target": False,
                          "distributed.worker.memory.spill": False,
                          "distributed.worker.memory.pause": False}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                               dashboard_address=":0")
    client = Client(cluster, set_as_default=False)
    try:
        assert client.run(_memory_fractions) == {w: (False, False, False)
                                                 for w in cluster.scheduler.workers}
        yield client
    finally:
        client.close()
        cluster.close()


def _memory_fractions(dask_worker):
    m = dask_worker.memory_manager
    return m.memory_target_fraction, m.memory_spill_fraction, m.memory_pause_fraction


@pytest.fixture(scope="module")
def in_memory(_inprocess_client):
    """The Parquet dataset of the current test read once and persisted on the in-process
    cluster (module-wide, so the reference fits of one dataset do not re-read it).

    Only one dataset is held at a time (at ``DML_OOC_SCALE=3`` each is 2.3 GiB), and freed
    blocks are handed back to the operating system (``malloc_trim``: glibc keeps freed arena
    memory of multi-threaded processes), so the test process stays well inside the machine.
    """
    cache = {}

    def get(path, columns):
        key = (str(path), tuple(columns))
        if key not in cache:
            _release(_inprocess_client, cache)
            with _inprocess_client.as_current():
                cache[key] = _read(path, columns)().persist()
        return cache[key]

    yield get
    _release(_inprocess_client, cache)


def _release(client, cache):
    """Drop the persisted frames of ``cache``, wait until the workers freed their blocks, then
    trim the process's heap."""
    from distributed import futures_of

    if not cache:
        return
    # The keys of the futures behind the frames (a persisted collection's own keys may differ),
    # as strings: tuple keys would arrive at the scheduler as lists (msgpack).
    keys = [str(f.key) for frame in cache.values() for f in futures_of(frame)]
    cache.clear()
    deadline = time.monotonic() + 60
    while client.run_on_scheduler(_held, keys=keys) and time.monotonic() < deadline:
        time.sleep(0.2)
    client.run(_malloc_trim)
    print(f"in-process cluster after release: {_rss_gib():.2f} GiB resident, workers "
          f"{client.run_on_scheduler(_statuses)}")


def _held(dask_scheduler, keys):
    wanted = set(keys)
    return sum(1 for k in dask_scheduler.tasks if str(k) in wanted)


def _statuses(dask_scheduler):
    return sorted(ws.status.name for ws in dask_scheduler.workers.values())


def _malloc_trim():
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name and "libc" in name:
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


def _rss_gib():
    import psutil

    return psutil.Process().memory_info().rss / 2**30


def _read(path, columns):
    from dml.datasets import read_parquet

    return lambda: read_parquet(str(path), columns=columns)


FEATURES = [f"f{j}" for j in range(N_FEATURES)]


def _supervised(make, path, columns=FEATURES + ["y"]):
    read = _read(path, columns)
    return columns, (lambda X: make().fit(X, "y")), (lambda: make().fit(read(), "y"))


# --------------------------------------------------------------------------------------------
# One test per estimator family
# --------------------------------------------------------------------------------------------

def test_sgd_classifier_out_of_core(small_cluster, classification_data, inprocess_client,
                                    in_memory):
    from dml.linear_model import SGDClassifier

    path, nbytes = classification_data

    def make():
        return SGDClassifier(loss="log_loss", max_iter=2, tol=None, batch_size=1024,
                             random_state=0)

    columns, fit_on, fit = _supervised(make, path)
    got, _ = fit_out_of_core(small_cluster, nbytes, fit)
    ref = fit_in_memory(inprocess_client, fit_on, in_memory(path, columns))
    assert got.n_iter_ == ref.n_iter_ == 2
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)


def test_mlp_classifier_out_of_core(small_cluster, classification_data, inprocess_client,
                                    in_memory):
    from dml.neural_network import MLPClassifier

    path, nbytes = classification_data

    def make():
        # Batches of 2,048: half the steps of 1,024, so half the rounds (32 steps in all each,
        # every one re-reading the blocks it steps); still several streams of at least 1,024
        # steps (three at the default scale, seven at 3x; six and 14 with 1,024), summed
        # every round.
        return MLPClassifier(hidden_layer_sizes=(8,), max_iter=1, batch_size=2048, tol=0.0,
                             random_state=0)

    columns, fit_on, fit = _supervised(make, path)
    got, _ = fit_out_of_core(small_cluster, nbytes, fit)
    ref = fit_in_memory(inprocess_client, fit_on, in_memory(path, columns))
    assert got.n_iter_ == ref.n_iter_ == 1
    for a, b in zip(got.coefs_ + got.intercepts_, ref.coefs_ + ref.intercepts_):
        np.testing.assert_array_equal(a, b)


def test_gaussian_nb_out_of_core(small_cluster, classification_data, inprocess_client, in_memory):
    from dml.naive_bayes import GaussianNB

    path, nbytes = classification_data
    columns, fit_on, fit = _supervised(GaussianNB, path)
    got, _ = fit_out_of_core(small_cluster, nbytes, fit)
    ref = fit_in_memory(inprocess_client, fit_on, in_memory(path, columns))
    # Counting and sums in a fixed tree order: exact.
    for attr in ("class_count_", "theta_", "var_", "class_prior_"):
        np.testing.assert_array_equal(getattr(got, attr), getattr(ref, attr), err_msg=attr)


def make_kmeans():
    from dml.cluster import KMeans

    # init="random" is one pass; k-means|| and k-means++ keep per-row distances of every block
    # alive between their steps (one graph), which is not a streaming pass. One Lloyd iteration:
    # the data is still read from disk three times (statistics and initial centres, the
    # iteration, the final labels and inertia), and equality after one iteration is checked
    # by the same streamed pass as after two (one pass fewer on each side).
    return KMeans(n_clusters=3, init="random", n_init=1, max_iter=1, tol=0.0, random_state=0)


def test_kmeans_out_of_core(small_cluster, classification_data, inprocess_client, in_memory):

    path, nbytes = classification_data
    # The frame with its y column on both sides (KMeans leaves a y column name out of X), so
    # the in-memory reference reuses the module's persisted frame. Twice (448 MiB workers
    # pausing at 80%; a loaded 3x run) a centre differed from the in-memory fit in its last bit:
    # a block the worker had spilled came back from its spill file unaligned, and NumPy summed
    # its columns (the data mean) in other pieces. The mean's sums no longer depend on the
    # layout (dml.cluster._lloyd.column_sums, checked in tests/test_kmeans.py).
    columns, fit_on, fit = _supervised(make_kmeans, path)
    got, _ = fit_out_of_core(small_cluster, nbytes, fit)
    ref = fit_in_memory(inprocess_client, fit_on, in_memory(path, columns))
    assert got.n_iter_ == ref.n_iter_ == 1
    np.testing.assert_array_equal(got.cluster_centers_, ref.cluster_centers_)
    assert got.inertia_ == ref.inertia_


def test_random_forest_out_of_core(small_cluster, classification_data, inprocess_client, in_memory):
    from dml.ensemble import RandomForestClassifier

    path, nbytes = classification_data

    def make():
        # Depth 2: three passes over the data (plus sketch and binning) keep CI time down.
        return RandomForestClassifier(n_estimators=2, max_depth=2, trees_per_pass=2,
                                      random_state=0)

    columns, fit_on, fit = _supervised(make, path)
    got, _ = fit_out_of_core(small_cluster, nbytes, fit)
    ref = fit_in_memory(inprocess_client, fit_on, in_memory(path, columns))
    # Histograms are counts: the trees are identical.
    assert got.nodes_.keys() == ref.nodes_.keys()
    for key in got.nodes_:
        np.testing.assert_array_equal(got.nodes_[key], ref.nodes_[key], err_msg=key)
    X = _classification_part(10**6, 2000).to_pandas()[FEATURES]
    np.testing.assert_array_equal(got.predict_proba(X), ref.predict_proba(X))


def test_gradient_boosting_out_of_core(small_cluster, classification_data, inprocess_client,
                                       in_memory, monkeypatch):
    """The boosting keeps its binned blocks (uint8, an eighth of the float features) with the
    targets, weights and per-round state on the workers, about a third of the float data; the
    float blocks stream from the Parquet parts once for the sketch and once for the binning.

    The parts are counted in runs of two or more (``RUN_ROWS``: the parts here are as large as
    the runs it would make by default), so the runs are joined from blocks binned one by one
    out of core and from blocks binned in their groups' tasks in memory: the same model."""
    from dml.ensemble import GradientBoostingClassifier, _gb_fit

    path, nbytes = classification_data
    rows_per_part = PART_BYTES // (8 * (N_FEATURES + 1))
    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 2 * rows_per_part)

    def make():
        # Two small rounds keep CI time down; the data is read twice whatever the rounds.
        return GradientBoostingClassifier(max_iter=2, max_leaf_nodes=4, early_stopping=False,
                                          random_state=0)

    columns, fit_on, fit = _supervised(make, path)
    got, _ = fit_out_of_core(small_cluster, nbytes, fit)
    ref = fit_in_memory(inprocess_client, fit_on, in_memory(path, columns))
    assert got.n_iter_ == ref.n_iter_ == 2
    n_parts = -(-nbytes // (rows_per_part * 8 * (N_FEATURES + 1)))
    assert 1 < got._fit_stats["runs"] == ref._fit_stats["runs"] <= n_parts // 2
    for key in got.nodes_:
        np.testing.assert_array_equal(got.nodes_[key], ref.nodes_[key], err_msg=key)
    X = _classification_part(10**6, 2000).to_pandas()[FEATURES]
    np.testing.assert_array_equal(got.predict_proba(X), ref.predict_proba(X))


def test_matrix_factorization_out_of_core(small_cluster, ratings_data, inprocess_client, in_memory,
                                          monkeypatch):
    from dml.recommender import MatrixFactorization, _mf
    from dml.recommender._mf import cell_budget, min_n_blocks

    path, nbytes = ratings_data
    read = _read(path, ["user", "item", "rating"])
    n_ratings = nbytes // 24
    # A fresh worker. The earlier tests leave no keys or tasks behind (printed before every
    # fit), but the worker process grows with every family it has run: 62 MiB fresh, then 349,
    # 439, 450, 496, 543 and 563 MiB after GBT (one 3x run). That is imported modules and
    # numba's compiled code (private memory; the malloc heap is only ~117 MiB, 94 in use, so
    # trimming frees little) plus ~165 MiB of shared library pages. The fit counts it (see
    # MatrixFactorization's persist): on that worker a cell may take 12 MiB, so n_blocks=25:
    # 625 cells merged from ~181,000 piece files (the graph is one task per partition and per
    # cell, P × B² = 180,000 tasks before), many minutes here; this test checks the
    # out-of-core path and its equality with the in-memory fit, not how small cells can get.
    with Client(small_cluster.address, set_as_default=False) as client:
        client.restart()
    chosen = []
    # Where each fit's cells went (spilled to files or persisted) and whether it kept the seen
    # pairs: build_cells' ``spill`` and ``remember`` arguments (read by name, wherever passed).
    paths = []
    real_build_cells = _mf.build_cells
    signature = inspect.signature(real_build_cells)

    def build_cells(*args, **kwargs):
        given = signature.bind(*args, **kwargs).arguments
        paths.append((given["spill"] is not None, given["remember"]))
        return real_build_cells(*args, **kwargs)

    monkeypatch.setattr(_mf, "build_cells", build_cells)

    def make(n_blocks, **kw):
        return MatrixFactorization(n_factors=4, n_epochs=1, n_blocks=n_blocks, random_state=0,
                                   **kw)

    def fit():
        # Out of core one task holds a whole cell: the smallest n_blocks the fit accepts on this
        # worker, given what it holds now (it refuses smaller ones with an error naming this
        # number), at least 4.
        chosen.append(max(4, min_n_blocks(n_ratings)))
        print(f"n_blocks={chosen[0]}: cell budget {cell_budget() / 2**20:.0f} MiB")
        return make(chosen[0]).fit(read())

    got, _ = fit_out_of_core(small_cluster, nbytes, fit)
    X = in_memory(path, ["user", "item", "rating"])
    print(f"before the in-memory reference: {_rss_gib():.2f} GiB resident, workers "
          f"{inprocess_client.run_on_scheduler(_statuses)}")
    # The reference does not keep the seen pairs (remember_seen=False): they take a sort of
    # every user block (about 22 s of CPU, half the reference fit) and are not compared; the
    # factors do not depend on them.
    ref = fit_in_memory(inprocess_client,
                        lambda X: make(chosen[0], remember_seen=False).fit(X), X)
    # The cells were written to files and re-read per sub-epoch (so the training pairs were not
    # kept on the client: "auto" keeps them only when the ratings fit) on the small cluster,
    # persisted in memory ("auto") for the reference.
    assert paths == [(True, False), (False, False)], paths
    assert got.seen_items_ is None and ref.seen_items_ is None
    for attr in ("user_factors_", "item_factors_", "user_bias_", "item_bias_"):
        np.testing.assert_array_equal(getattr(got, attr), getattr(ref, attr), err_msg=attr)
    assert got.history_[0]["train_rmse"] == ref.history_[0]["train_rmse"]


def test_forest_streaming_path_equals_the_persisted_one(inprocess_client, monkeypatch):
    """At the CI scale the forest's binned blocks (uint8) still fit, so the streaming path (no
    persisted bins, node assignments or bootstrap counts) is checked here on its own: the
    persist budget is set to zero and the trees must not change."""
    import dask.array as da

    import dml.optim.data
    from dml.ensemble import RandomForestClassifier

    tb = _classification_part(7, 3000)
    X = tb.select(FEATURES).to_pandas().to_numpy()
    y = tb.column("y").to_numpy()

    def fit():
        return RandomForestClassifier(n_estimators=3, max_depth=4, trees_per_pass=2,
                                      oob_score=True, random_state=0).fit(
            da.from_array(X, chunks=(500, -1)), da.from_array(y, chunks=500))

    persisted = fit()
    monkeypatch.setattr(dml.optim.data, "PERSIST_FRACTION", 0.0)
    streamed = fit()
    for key in persisted.nodes_:
        np.testing.assert_array_equal(streamed.nodes_[key], persisted.nodes_[key], err_msg=key)
    assert streamed.oob_score_ == persisted.oob_score_
