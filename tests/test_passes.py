"""Passes over data read from storage: each costs a full read when the data does not fit in memory.

The fits here read a small Parquet dataset with the persist budget set to zero, so that every
pass re-reads the files (as out of core, see tests/test_out_of_core.py), and count the Parquet
read tasks in the task stream: a pass more than the algorithm needs would show here.
"""
from __future__ import annotations

import collections

import numpy as np
import pandas as pd
import pytest
from distributed import get_task_stream

from dml.datasets import read_parquet

N_PARTS = 4


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("passes")
    for k in range(N_PARTS):
        rng = np.random.default_rng([5, k])
        X = rng.normal(size=(150, 3))
        X[:, 0] += 4.0 * (k % 2)
        df = pd.DataFrame(X, columns=["a", "b", "c"])
        df["y"] = (X[:, 0] > 2).astype(np.int64)
        df.to_parquet(path / f"part-{k}.parquet")
    return path


def _reads(tasks) -> int:
    names = collections.Counter(t["key"][0] if isinstance(t["key"], tuple) else t["key"]
                                for t in tasks)
    return sum(v for k, v in names.items() if str(k).startswith("read_parquet"))


def _streamed(monkeypatch):
    import dml.optim.data

    monkeypatch.setattr(dml.optim.data, "PERSIST_FRACTION", 0.0)


def test_parquet_row_counts_come_from_the_footers(parquet_dir, inprocess_client):
    from dml._blocks import as_blocks

    df = read_parquet(parquet_dir / "*.parquet")
    with get_task_stream() as ts:
        blocks = as_blocks(df, "y")
        assert blocks.known_lengths.tolist() == [150] * N_PARTS
    assert _reads(ts.data) == 0
    # A filter changes the row counts: they are then not taken from the footers.
    filtered = read_parquet(parquet_dir / "*.parquet", filters=[("a", ">", 0.0)])
    assert as_blocks(filtered, "y").known_lengths is None


def test_kmeans_random_init_reads_the_data_once_per_pass_it_needs(parquet_dir, inprocess_client,
                                                                  monkeypatch):
    """The mean, then the statistics and the random initialisation together, one pass per
    Lloyd iteration and the final assignment: 5 passes for 2 iterations."""
    from dml.cluster import KMeans

    def fit():
        return KMeans(n_clusters=3, init="random", n_init=2, max_iter=2, tol=0.0,
                      random_state=0).fit(read_parquet(parquet_dir / "*.parquet"), "y")

    persisted = fit()
    _streamed(monkeypatch)
    with get_task_stream() as ts:
        streamed = fit()
    assert streamed.n_iter_ == 2
    assert _reads(ts.data) == 5 * N_PARTS
    np.testing.assert_array_equal(streamed.cluster_centers_, persisted.cluster_centers_)
    np.testing.assert_array_equal(np.asarray(streamed.labels_), np.asarray(persisted.labels_))
    assert streamed.inertia_ == persisted.inertia_


def test_gaussian_nb_reads_the_data_once(parquet_dir, inprocess_client, monkeypatch):
    from dml.naive_bayes import GaussianNB

    _streamed(monkeypatch)
    with get_task_stream() as ts:
        GaussianNB().fit(read_parquet(parquet_dir / "*.parquet"), "y")
    assert _reads(ts.data) == N_PARTS
