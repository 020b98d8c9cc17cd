"""Cold start: the first fit on freshly started Dask workers, against the second.

Usage (from the repository root)::

    python -m benchmarks.cold_start [--families forest search ...] [--repeat 3]
        [--cache empty|warm] [--preload] [--source DIR] [--rows 50000]

For each family and repeat, a new cluster is started exactly as in a deployment: one
``dask scheduler`` and two ``dask worker`` processes (one thread each), with
``DML_CACHE_DIR`` (and ``NUMBA_CACHE_DIR``, which older checkouts use) pointing at a directory of
this run: empty (``--cache empty``: nothing compiled yet, as on a fresh install) or filled
beforehand by ``python -m dml.worker_setup`` and made read-only (``--cache warm``: the container
image, whose warm cache is read-only at run time). A new client process (as a job pod would be)
then loads the data onto the workers (``persist``), fits the family's estimator twice with the
same ``random_state`` and checks that both fits give the same predictions. The processes are
stopped by PID. Timed: worker start (spawn → both registered), data load, first fit, second fit,
and the CPU seconds of the busiest worker during each fit (less sensitive to the machine's load
than wall time; it does not show work that waits on other work, which wall time does).

``--preload`` starts the workers with ``--preload dml.worker_setup`` (kernels loaded or compiled
in a background thread from worker start). ``--source DIR`` runs another checkout's ``dml`` (e.g.
the previous commit, for before/after numbers on the same machine).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: family → (what is fitted, for the table).
FAMILIES = {
    "sgd": "SGDClassifier(max_iter=5, tol=None)",
    "search": "GridSearchCV(SGDClassifier(log_loss, max_iter=5), 4 alphas, cv=3) (stacked kernel)",
    "mlp": "MLPClassifier((32,), max_iter=5)",
    "naive_bayes": "GaussianNB()",
    "kmeans": "KMeans(8, max_iter=10)",
    "forest": "RandomForestClassifier(10 trees, max_depth=10)",
    "gbt": "GradientBoostingClassifier(max_iter=10)",
    "mf_sgd": "MatrixFactorization(10, solver='sgd', n_epochs=5)",
    "mf_als": "MatrixFactorization(10, solver='als', n_epochs=5)",
}


# ---------------------------------------------------------------------------------------------
# The client side: one fresh process per (family, repeat)
# ---------------------------------------------------------------------------------------------

def _estimator(family):
    if family == "sgd":
        from dml.linear_model import SGDClassifier
        return SGDClassifier(max_iter=5, tol=None, random_state=0)
    if family == "search":
        from dml.linear_model import SGDClassifier
        from dml.model_selection import GridSearchCV
        return GridSearchCV(SGDClassifier(loss="log_loss", max_iter=5, tol=None, random_state=0),
                            {"alpha": [1e-5, 1e-4, 1e-3, 1e-2]}, cv=3)
    if family == "mlp":
        from dml.neural_network import MLPClassifier
        return MLPClassifier((32,), max_iter=5, random_state=0)
    if family == "naive_bayes":
        from dml.naive_bayes import GaussianNB
        return GaussianNB()
    if family == "kmeans":
        from dml.cluster import KMeans
        return KMeans(n_clusters=8, max_iter=10, random_state=0)
    if family == "forest":
        from dml.ensemble import RandomForestClassifier
        return RandomForestClassifier(n_estimators=10, max_depth=10, random_state=0)
    if family == "gbt":
        from dml.ensemble import GradientBoostingClassifier
        return GradientBoostingClassifier(max_iter=10, random_state=0)
    if family in ("mf_sgd", "mf_als"):
        from dml.recommender import MatrixFactorization
        return MatrixFactorization(10, solver=family[3:], n_epochs=5, random_state=0)
    raise ValueError(f"unknown family {family!r}; choose from {sorted(FAMILIES)}")


def _data(family, rows):
    import numpy as np
    if family.startswith("mf_"):
        rng = np.random.default_rng(0)
        n_users, n_items = max(rows // 20, 10), max(rows // 100, 10)
        X = np.stack([rng.integers(0, n_users, rows), rng.integers(0, n_items, rows)], axis=1)
        y = np.clip(3.5 + rng.normal(0, 1, rows), 1, 5)
        return X, y
    from sklearn.datasets import make_classification
    return make_classification(n_samples=rows, n_features=20, n_informative=10, random_state=0)


def _predict(model, X):
    import numpy as np
    pred = np.asarray(model.predict(X[:2000]))
    return hashlib.sha256(np.ascontiguousarray(pred).tobytes()).hexdigest()[:12]


def client_main(family, scheduler_file, rows, blocks):
    """Time persist, first and second fit on the cluster; print one JSON line."""
    import dask.array as da
    from distributed import Client, wait

    X, y = _data(family, rows)
    first_estimator = _estimator(family)      # the job has imported its estimator classes
    out = {"family": family}
    with Client(scheduler_file=scheduler_file) as client:
        t = time.perf_counter()
        chunk = -(-len(y) // blocks)
        Xd, yd = client.persist([da.from_array(X, chunks=(chunk, -1)),
                                 da.from_array(y, chunks=chunk)])
        wait([Xd, yd])
        out["load"] = time.perf_counter() - t
        hashes = []
        for key, est in (("first", first_estimator), ("second", _estimator(family))):
            cpu = client.run(time.process_time)
            t = time.perf_counter()
            est.fit(Xd, yd)
            out[key] = time.perf_counter() - t
            after = client.run(time.process_time)
            # The busiest worker's CPU seconds: what the fit cost a worker, whatever the load.
            out[key + "_cpu"] = max(after[w] - cpu[w] for w in cpu)
            hashes.append(_predict(est, X))
        out["same_model"] = hashes[0] == hashes[1]
        out["predictions"] = hashes[0]
    print("RESULT " + json.dumps(out), flush=True)


# ---------------------------------------------------------------------------------------------
# The driver: processes started and stopped by PID
# ---------------------------------------------------------------------------------------------

def _dask():
    exe = Path(sys.executable).parent / "dask"
    return [str(exe)] if exe.exists() else [shutil.which("dask") or "dask"]


class Cluster:
    def __init__(self, tmp: Path, env: dict, preload: bool):
        self.tmp, self.env, self.preload = tmp, env, preload
        self.procs: list[subprocess.Popen] = []
        self.scheduler_file = tmp / "scheduler.json"

    def _spawn(self, args, log):
        proc = subprocess.Popen(_dask() + args, stdout=open(self.tmp / log, "wb"),
                                stderr=subprocess.STDOUT, env=self.env, cwd=self.tmp,
                                start_new_session=True)
        self.procs.append(proc)

    def start(self, n_workers=2, timeout=180.0) -> float:
        """Start the processes; returns the seconds from spawning the workers to both
        registered."""
        from distributed import Client

        self._spawn(["scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address",
                     "127.0.0.1:0", "--scheduler-file", str(self.scheduler_file)],
                    "scheduler.log")
        deadline = time.monotonic() + timeout
        while not self.scheduler_file.exists():
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                raise RuntimeError((self.tmp / "scheduler.log").read_text()[-3000:])
            time.sleep(0.05)
        t = time.perf_counter()
        extra = ["--preload", "dml.worker_setup"] if self.preload else []
        for i in range(n_workers):
            self._spawn(["worker", "--scheduler-file", str(self.scheduler_file), "--nthreads",
                         "1", "--memory-limit", "3GiB", "--no-dashboard", "--name", f"w{i}",
                         "--local-directory", str(self.tmp / f"w{i}"), *extra], f"w{i}.log")
        with Client(scheduler_file=str(self.scheduler_file), set_as_default=False) as c:
            c.wait_for_workers(n_workers, timeout=timeout)
        return time.perf_counter() - t

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in reversed(self.procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        self.procs.clear()


def _env(source: Path, cache: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(source), str(ROOT)])
    env["DML_CACHE_DIR"] = str(cache)
    env["NUMBA_CACHE_DIR"] = str(cache / "numba-global")   # used by checkouts before dml's own
    env.pop("DML_SCHEDULER_ADDRESS", None)
    return env


def _warm_cache(env: dict, cache: Path) -> None:
    """Fill the cache as the container build does, then make it read-only."""
    # cwd: not the repository root, whose dml would shadow --source's
    subprocess.run([sys.executable, "-m", "dml.worker_setup"], env=env, check=True,
                   stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    for d, _, files in os.walk(cache):
        os.chmod(d, 0o555)
        for f in files:
            os.chmod(os.path.join(d, f), 0o444)


def _make_writable(path: Path) -> None:
    for d, _, _ in os.walk(path):
        os.chmod(d, 0o755)


def run_one(family, args, warm_template: Path | None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="dml-cold-"))
    try:
        cache = tmp / "cache"
        if warm_template is not None:
            shutil.copytree(warm_template, cache)
        else:
            cache.mkdir()
        env = _env(Path(args.source).resolve(), cache)
        cluster = Cluster(tmp, env, args.preload)
        try:
            ready = cluster.start()
            proc = subprocess.run(
                # This file, not --source's copy of it (which PYTHONPATH puts first).
                [sys.executable, str(Path(__file__).resolve()), "--client", family,
                 "--scheduler-file", str(cluster.scheduler_file), "--rows", str(args.rows),
                 "--blocks", str(args.blocks)],
                env=env, cwd=tmp, capture_output=True, text=True, timeout=1800)
        finally:
            cluster.stop()
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            raise RuntimeError(f"client for {family} failed:\n{proc.stdout[-3000:]}\n"
                               f"{proc.stderr[-3000:]}")
        out = json.loads(line[0][len("RESULT "):])
        out["ready"] = ready
        return out
    finally:
        _make_writable(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.cold_start",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cache", choices=["empty", "warm"], default="empty")
    p.add_argument("--preload", action="store_true",
                   help="start the workers with --preload dml.worker_setup")
    p.add_argument("--source", default=str(ROOT), help="checkout whose dml is run")
    p.add_argument("--warm-from", default=None,
                   help="with --cache warm: copy this DML_CACHE_DIR instead of building one")
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--client", help=argparse.SUPPRESS)
    p.add_argument("--scheduler-file", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.client:
        client_main(args.client, args.scheduler_file, args.rows, args.blocks)
        return 0

    load_before = os.getloadavg()
    warm_template = None
    if args.cache == "warm":
        warm_template = Path(tempfile.mkdtemp(prefix="dml-warm-")) / "cache"
        t = time.perf_counter()
        if args.warm_from:
            shutil.copytree(args.warm_from, warm_template)
        _warm_cache(_env(Path(args.source).resolve(), warm_template), warm_template)
        print(f"warm cache built in {time.perf_counter() - t:.1f} s", flush=True)
    results = {f: [] for f in args.families}
    try:
        for r in range(args.repeat):
            for family in args.families:
                out = run_one(family, args, warm_template)
                results[family].append(out)
                print(f"[{r + 1}/{args.repeat}] {family}: ready {out['ready']:.2f} s, load "
                      f"{out['load']:.2f} s, first {out['first']:.2f} s, second "
                      f"{out['second']:.2f} s, worker CPU first {out['first_cpu']:.2f} s, "
                      f"second {out['second_cpu']:.2f} s, same model {out['same_model']}, "
                      f"predictions {out['predictions']}", flush=True)
    finally:
        if warm_template is not None:
            _make_writable(warm_template.parent)
            shutil.rmtree(warm_template.parent, ignore_errors=True)
    load_after = os.getloadavg()

    med = statistics.median
    print()
    print(f"cache {args.cache}, preload {args.preload}, source {args.source}, "
          f"{args.rows:,} rows in {args.blocks} blocks, {args.repeat} repeat(s); load average "
          f"{'/'.join(f'{x:.2f}' for x in load_before)} → "
          f"{'/'.join(f'{x:.2f}' for x in load_after)}")
    print()
    print("| family | workers ready (s) | data load (s) | first fit (s) | second fit (s) "
          "| first − second (s) | worker CPU, first − second (s) | same model | predictions |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    for family, outs in results.items():
        first, second = med(o["first"] for o in outs), med(o["second"] for o in outs)
        diff = med(o["first"] - o["second"] for o in outs)
        same = all(o["same_model"] for o in outs)
        preds = sorted({o["predictions"] for o in outs})
        print(f"| {family} | {med(o['ready'] for o in outs):.2f} | "
              f"{med(o['load'] for o in outs):.2f} | {first:.2f} | {second:.2f} | {diff:.2f} | "
              f"{med(o['first_cpu'] - o['second_cpu'] for o in outs):.2f} | "
              f"{'yes' if same else 'NO'} | {', '.join(preds)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
