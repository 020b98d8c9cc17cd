"""Does a k-means fit's cost grow with the partition count?
(``python -m benchmarks.kmeans_partitions``)

The same rows (``make_blobs``, 4 centres, persisted on a 2-worker process ``LocalCluster`` with
one thread each) are cut into 1, 8, 64, 256 and 1,024 row blocks and fitted by
:class:`dml.cluster.KMeans` from fixed initial centres with ``tol=0``, once with ``max_iter=1``
and once with ``max_iter=N``. The one-iteration fit is the set-up (validation, the statistics
pass, preparing and persisting the centred blocks, the final assignment and labels); the
difference divided by ``N - 1`` is the cost of one more Lloyd iteration. A fit whose cost does
not grow with the block count has both columns flat.

Usage (repository root, dev venv)::

    python -m benchmarks.kmeans_partitions [--rows 2048] [--blocks 1 8 64 256 1024]
        [--iterations 20] [--repeat 2] [--init fixed|k-means|||k-means++|random] [--output FILE]

``--init`` other than ``fixed`` draws the initial centres with that method (one
run, ``n_init=1``), so the set-up column includes the initialisation.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

BLOCKS = (1, 8, 64, 256, 1024)


def _timed(fit, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fit()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(rows, blocks, iterations, repeat, init_method="fixed"):
    import dask.array as da
    from distributed import Client, LocalCluster, wait
    from sklearn.datasets import make_blobs

    from dml.cluster import KMeans

    X, _ = make_blobs(n_samples=rows, n_features=4, centers=4, random_state=0)
    init = X[[0, 1, 2, 3, 4, 5]] if init_method == "fixed" else init_method
    out = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster):
        for nb in blocks:
            Xd = da.from_array(X, chunks=(-(-rows // nb), 4)).persist()
            wait(Xd)

            def fit(max_iter, Xd=Xd):
                return KMeans(6, init=init, n_init=1, tol=0.0, max_iter=max_iter,
                              random_state=0).fit(Xd)

            fit(2)  # warm-up: compiles, imports, first transfers
            one = _timed(lambda: fit(1), repeat)
            many = _timed(lambda: fit(iterations), repeat)
            out.append((nb, one, many, (many - one) / (iterations - 1)))
            print(out[-1], flush=True)
            del Xd
    return out


def table(rows, iterations):
    lines = ["| blocks | fit, 1 iteration (set-up) | fit, "
             f"{iterations} iterations | per further iteration |",
             "|---:|---:|---:|---:|"]
    lines += [f"| {nb} | {one:.2f} s | {many:.2f} s | {per * 1000:.0f} ms |"
              for nb, one, many, per in rows]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.kmeans_partitions")
    p.add_argument("--rows", type=int, default=2048)
    p.add_argument("--blocks", nargs="+", type=int, default=list(BLOCKS))
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--init", default="fixed",
                   choices=["fixed", "k-means||", "k-means++", "random"])
    p.add_argument("--output", default="")
    a = p.parse_args(argv)
    rows = run(a.rows, a.blocks, a.iterations, a.repeat, a.init)
    from benchmarks.report import emit

    emit(table(rows, a.iterations), a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
