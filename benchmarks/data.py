"""One workload's data, built once, in the form each implementation needs.

:class:`Dataset` holds the NumPy arrays a workload's builder made and converts them (untimed, at
most once per run) into

* ``numpy()``: the arrays themselves (scikit-learn in the client process);
* ``dask()``: Dask arrays of ``n_blocks`` row blocks, already in worker memory, block *i* of X and
  of y on the same worker, blocks dealt round-robin over the workers (dml and dask-ml share
  these: the same keys, the same placement);
* ``spark()``: cached Spark DataFrames with a ``features`` vector column (VectorAssembler) and a
  double ``label`` column, ``n_blocks`` partitions.

Every form carries the workload's metric and the NumPy ``y_test``, so scoring compares the same
labels whatever the implementation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from benchmarks.registry import Arrays, Metric

__all__ = ["Dataset", "NumpySplit", "DaskSplit", "SparkSplit", "block_bounds"]


@dataclass
class NumpySplit:
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    metric: Metric


@dataclass
class DaskSplit:
    X_train: Any
    y_train: Any
    X_test: Any
    #: NumPy: the labels that predictions are compared with.
    y_test: np.ndarray
    metric: Metric


@dataclass
class SparkSplit:
    train: Any
    test: Any
    metric: Metric


def block_bounds(n: int, n_blocks: int) -> np.ndarray:
    """Row boundaries of ``n_blocks`` blocks whose sizes differ by at most one."""
    n_blocks = max(1, min(n_blocks, n))
    return np.linspace(0, n, n_blocks + 1).round().astype(int)


class Dataset:
    """The arrays of one workload and their cached Dask / Spark conversions."""

    def __init__(self, arrays: Arrays, metric: Metric, *, client=None, n_blocks: int = 8):
        self.arrays = arrays
        self.metric = metric
        self.client = client
        self.n_blocks = n_blocks
        self._dask: DaskSplit | None = None
        self._spark: SparkSplit | None = None
        self._futures: list = []

    @property
    def shape(self) -> tuple[int, int, int]:
        """(training rows, held-out rows, features)."""
        a = self.arrays
        return a.X_train.shape[0], a.X_test.shape[0], a.X_train.shape[1]

    def numpy(self) -> NumpySplit:
        a = self.arrays
        return NumpySplit(a.X_train, a.y_train, a.X_test, a.y_test, self.metric)

    # ---- Dask ----
    def dask(self) -> DaskSplit:
        if self._dask is None:
            if self.client is None:
                raise RuntimeError("Dataset.dask() needs the benchmark's distributed client")
            a = self.arrays
            X_train, y_train = self._scatter(a.X_train, a.y_train)
            X_test, _ = self._scatter(a.X_test, a.y_test)
            self._dask = DaskSplit(X_train, y_train, X_test, a.y_test, self.metric)
        return self._dask

    def _scatter(self, X: np.ndarray, y: np.ndarray | None):
        """X and y as Dask arrays of co-located blocks already held by the workers."""
        import dask.array as da
        from dask import delayed
        from distributed import wait

        workers = sorted(self.client.scheduler_info()["workers"])
        bounds = block_bounds(X.shape[0], self.n_blocks)
        xs, ys = [], []
        for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
            # Copies: a view would pickle (and keep alive) the whole parent array. A sparse X
            # (scipy CSR) gives CSR blocks: slicing a CSR matrix copies.
            xb = X[lo:hi] if sp.issparse(X) else np.ascontiguousarray(X[lo:hi])
            pieces = [xb] + ([] if y is None else [y[lo:hi].copy()])
            futures = self.client.scatter(pieces, workers=[workers[i % len(workers)]],
                                          hash=False)
            self._futures += futures
            meta = X[:0] if sp.issparse(X) else None
            xs.append(da.from_delayed(delayed(futures[0]), shape=(hi - lo, X.shape[1]),
                                      dtype=X.dtype, meta=meta))
            if y is not None:
                ys.append(da.from_delayed(delayed(futures[1]), shape=(hi - lo, *y.shape[1:]),
                                          dtype=y.dtype))
        # Persisting the concatenation gives plain arrays whose chunks are the scattered blocks
        # (a graph of one key per block, nothing left to compute at fit time).
        arrays = [da.concatenate(xs)] + ([da.concatenate(ys)] if ys else [])
        arrays = self.client.persist(arrays)
        wait(arrays)
        return arrays[0], (arrays[1] if ys else None)

    # ---- Spark ----
    def spark(self) -> SparkSplit:
        if self._spark is None:
            from benchmarks.spark import to_spark_frame

            a = self.arrays
            self._spark = SparkSplit(to_spark_frame(a.X_train, a.y_train, self.n_blocks),
                                     to_spark_frame(a.X_test, a.y_test, self.n_blocks),
                                     self.metric)
        return self._spark

    def release(self) -> None:
        """Free worker memory and Spark's cache before the next workload."""
        if self._spark is not None:
            self._spark.train.unpersist()
            self._spark.test.unpersist()
            self._spark = None
        # Dropping the last references releases the keys on the workers (an explicit cancel
        # of keys that other keys depend on upsets the scheduler).
        self._dask = None
        self._futures = []
