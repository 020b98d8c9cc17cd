"""Out-of-core fits (issue 11, part 1): data several times larger than the cluster's memory.

A dedicated multi-process cluster (``dask scheduler`` + two ``dask worker`` processes with a
small ``--memory-limit``) fits every estimator family on a Parquet dataset about three times
larger than the workers' *total* memory limit, read with :func:`dml.datasets.read_parquet`, so
the blocks must stream from disk on every pass (DESIGN principle 3). Each fit must

* finish with the same worker processes (same PIDs, no worker removed by the scheduler): no
  worker was killed by its nanny for exceeding the memory limit;
* equal the fit of the same estimator on the same data and partitioning held in memory (the
  Parquet dataset persisted on the in-process cluster).

Scale: ``DML_OOC_SCALE`` (default 1) multiplies the worker memory limit and the data size
together, so the data stays ``RATIO`` times the total worker memory. At scale 1 each worker has
``WORKER_MIB`` MiB: a worker that has imported dml's estimators (pandas, pyarrow, scikit-learn,
numba) already holds about 285 MiB, so 256 MiB workers would be killed before reading any data.

The datasets are written one Parquet part file at a time from per-part random generators, so
the test process never holds more than one part.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import Client

from conftest import ProcessCluster

pytestmark = [pytest.mark.out_of_core, pytest.mark.multiprocess, pytest.mark.slow]

SCALE = float(os.environ.get("DML_OOC_SCALE", "1"))
N_WORKERS = 2
WORKER_MIB = int(448 * SCALE)
#: Data size / total worker memory limit.
RATIO = 3.0
DATA_BYTES = int(RATIO * N_WORKERS * WORKER_MIB * 2**20)
#: In-memory bytes of one Parquet part (one block): small next to a worker's free memory.
PART_BYTES = 16 * 2**20
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


def _limits(client):
    return {w: int(i["memory_limit"]) for w, i in client.scheduler_info(n_workers=-1)["workers"].items()}


def fit_out_of_core(cluster, data_bytes, fit):
    """``fit()`` on the small cluster; asserts no worker died; returns (model, seconds)."""
    with Client(cluster.address, set_as_default=False) as client:
        limits = _limits(client)
        assert len(limits) == N_WORKERS
        assert data_bytes >= RATIO * 0.99 * sum(limits.values()), (data_bytes, limits)
        pids = _worker_pids(client)
        removed = client.run_on_scheduler(_removed_workers)
        t0 = time.perf_counter()
        with client.as_current():
            model = fit()
        seconds = time.perf_counter() - t0
        assert _worker_pids(client) == pids, \
            "a worker process was replaced during the fit:\n" + cluster.log("worker-0") + \
            cluster.log("worker-1")
        assert client.run_on_scheduler(_removed_workers) == removed
        for i in range(N_WORKERS):
            log = cluster.log(f"worker-{i}")
            assert "exceeded 95% memory budget" not in log, log
    return model, seconds


def fit_in_memory(client, fit_on, read):
    """The same fit with the same partitions persisted in memory on the in-process cluster.

    BLAS is limited to one thread, as in the ``dask worker`` processes (the nanny sets
    ``OMP_NUM_THREADS=1``), so floating-point results do not depend on the thread count.
    """
    from threadpoolctl import threadpool_limits

    with client.as_current(), threadpool_limits(1):
        X = read().persist()
        try:
            return fit_on(X)
        finally:
            del X


def _read(path, columns):
    from dml.datasets import read_parquet

    return lambda: read_parquet(str(path), columns=columns)


FEATURES = [f"f{j}" for j in range(N_FEATURES)]


def _supervised(make, path, columns=FEATURES + ["y"]):
    read = _read(path, columns)
    return read, (lambda X: make().fit(X, "y")), (lambda: make().fit(read(), "y"))


# --------------------------------------------------------------------------------------------
# One test per estimator family
# --------------------------------------------------------------------------------------------

def test_sgd_classifier_out_of_core(small_cluster, classification_data, inprocess_client):
    from dml.linear_model import SGDClassifier

    path, nbytes = classification_data

    def make():
        return SGDClassifier(loss="log_loss", max_iter=2, tol=None, batch_size=512,
                             random_state=0)

    read, fit_on, fit = _supervised(make, path)
    got, _ = fit_out_of_core(small_cluster, nbytes, fit)
    ref = fit_in_memory(inprocess_client, fit_on, read)
    assert got.n_iter_ == ref.n_iter_ == 2
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)
