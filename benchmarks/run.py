"""Run benchmark workloads side by side and update ``benchmarks/RESULTS.md``.

Usage (from the repository root)::

    python -m benchmarks.run [--workloads nb_gaussian nb_multinomial ...] [--repeat 5]
        [--implementations dml sklearn dask-ml spark] [--output benchmarks/RESULTS.md]
        [--scale 1] [--blocks 8] [--note TEXT]

For each workload: build the data once; prepare every implementation (untimed: Dask arrays
persisted on the cluster, Spark DataFrame cached); fit each once as an untimed warm-up; then time
``--repeat`` rounds, each round fitting every implementation once (the order rotates by one
each round, so no implementation always runs right after the same other one); score the last
model of each on the held-out part. Everything runs in this one process, on one Dask
``LocalCluster(n_workers=2, threads_per_worker=1)`` started with :func:`dml.runtime.connect`.
"""
from __future__ import annotations

import argparse
import gc
import os
import shlex
import sys
import threading
import time
import traceback

from benchmarks import report
from benchmarks.data import Dataset
from benchmarks.registry import Implementation, Unavailable, Workload, all_workloads

N_WORKERS = 2
THREADS_PER_WORKER = 1
DEFAULT_OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")

_INSTALL_HINTS = {
    "pyspark": "pip install 'dml[spark]' (needs Java 17+)",
    "dask_ml": "pip install 'dml[bench]'",
}


def parse_args(argv):
    workloads = all_workloads()
    impls = sorted({i for w in workloads.values() for i in w.implementations})
    p = argparse.ArgumentParser(prog="python -m benchmarks.run",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", nargs="+", choices=list(workloads), default=list(workloads),
                   metavar="NAME",
                   help=f"workloads to run (default: all: {', '.join(workloads)})")
    p.add_argument("--implementations", nargs="+", choices=impls, default=impls, metavar="NAME",
                   help=f"implementations to run (default: all: {', '.join(impls)})")
    p.add_argument("--repeat", type=int, default=5,
                   help="timed fits per implementation (default: %(default)s)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="shrink every workload's row count, e.g. 0.01 for a smoke run "
                        "(default: %(default)s)")
    p.add_argument("--blocks", type=int, default=8,
                   help="row blocks of the Dask arrays (default: %(default)s)")
    p.add_argument("--output", default=DEFAULT_OUTPUT,
                   help="results file to update (default: benchmarks/RESULTS.md)")
    p.add_argument("--note", default="",
                   help="text printed in bold in the header and in every section of this run "
                        "(e.g. 'PRELIMINARY: noisy shared machine')")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if not 0 < args.scale <= 1:
        p.error("--scale must be in (0, 1]")
    if args.blocks < 1:
        p.error("--blocks must be at least 1")
    return args


def log(msg: str) -> None:
    print(msg, flush=True)


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ").replace("|", "/")
    return text[:300]


# --------------------------------------------------------------------------------------------
# Memory sampling
# --------------------------------------------------------------------------------------------

class MemorySampler:
    """Peak RSS of the client, each Dask worker and the Spark JVM, sampled in a thread.

    The cluster is local, so worker processes are found by PID (``client.run(os.getpid)``).
    """

    def __init__(self, client, interval: float = 0.5):
        import psutil

        self._psutil = psutil
        self.client_proc = psutil.Process()
        self.worker_procs = [psutil.Process(pid) for pid in client.run(os.getpid).values()]
        self.interval = interval
        self.peak: dict[str, int] = {}
        self._n = 0
        self._jvm = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="memory-sampler")

    def _java(self):
        # Listing children walks /proc: done every 10th sample only, to keep the sampler light
        # while the client process itself is being timed (scikit-learn).
        self._n += 1
        if self._n % 10 == 1:
            self._jvm = [p for p in self.client_proc.children(recursive=True)
                         if p.name().startswith("java")]
        return self._jvm

    def sample(self) -> None:
        groups = {"client": [self.client_proc], "Dask workers": self.worker_procs,
                  "Spark JVM": self._java()}
        for name, procs in groups.items():
            total = 0
            for p in procs:
                try:
                    total += p.memory_info().rss
                except self._psutil.Error:
                    pass
            if procs:
                self.peak[name] = max(self.peak.get(name, 0), total)
        used = self._psutil.virtual_memory()
        self.peak["machine used"] = max(self.peak.get("machine used", 0),
                                        used.total - used.available)

    def _loop(self):
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self):
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()

    def describe(self) -> str:
        gib = {k: v / 2**30 for k, v in self.peak.items()}
        parts = [f"{k} {v:.2f} GiB" for k, v in gib.items() if k != "machine used"]
        return ("peak RSS during the workload: " + ", ".join(parts)
                + f"; machine RAM in use at peak {gib.get('machine used', 0):.1f} GiB")


# --------------------------------------------------------------------------------------------
# One workload
# --------------------------------------------------------------------------------------------

def run_workload(workload: Workload, selected: list[str], client, repeat: int, scale: float,
                 n_blocks: int) -> report.WorkloadResult:
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    arrays = workload.build(scale)
    dataset = Dataset(arrays, workload.metric, client=client, n_blocks=n_blocks)
    log(f"[{workload.name}] data {dataset.shape} built in {time.perf_counter() - t0:.1f} s")

    rows: dict[str, report.ImplResult] = {}
    active: dict[str, tuple[Implementation, object]] = {}
    not_selected = []
    with MemorySampler(client) as memory:
        for name in workload.ordered():
            impl = workload.implementations[name]
            if name not in selected:
                not_selected.append(name)
                continue
            if isinstance(impl, Unavailable):
                rows[name] = report.ImplResult(name, "unavailable", note=impl.reason)
                continue
            missing = impl.missing()
            if missing:
                hints = [_INSTALL_HINTS.get(m.split(".")[0], "") for m in missing]
                hint = "; ".join(h for h in hints if h)
                rows[name] = report.ImplResult(
                    name, "skipped", note=f"`{'`, `'.join(missing)}` not importable"
                                          + (f" ({hint})" if hint else ""))
                log(f"[{workload.name}] {name}: skipped ({rows[name].note})")
                continue
            rows[name] = report.ImplResult(name, "ok", note=impl.note)
            try:
                t = time.perf_counter()
                state = impl.prepare(dataset)
                log(f"[{workload.name}] {name}: prepared in {time.perf_counter() - t:.1f} s")
                active[name] = (impl, state)
            except Exception as exc:  # noqa: BLE001 - one failing library must not stop the run
                _fail(rows[name], workload, "prepare", exc)

        models = {}
        for name, (impl, state) in list(active.items()):
            try:
                gc.collect()
                t = time.perf_counter()
                models[name] = impl.fit(state)
                rows[name].warmup = time.perf_counter() - t
                log(f"[{workload.name}] {name}: warm-up fit {rows[name].warmup:.3f} s")
            except Exception as exc:  # noqa: BLE001
                _fail(rows[name], workload, "fit", exc)
                del active[name]

        order = list(active)
        for r in range(repeat):
            k = r % len(order) if order else 0
            for name in order[k:] + order[:k]:
                if name not in active:
                    continue
                impl, state = active[name]
                models.pop(name, None)
                gc.collect()
                try:
                    t = time.perf_counter()
                    model = impl.fit(state)
                    elapsed = time.perf_counter() - t
                except Exception as exc:  # noqa: BLE001
                    _fail(rows[name], workload, "fit", exc)
                    del active[name]
                    continue
                models[name] = model
                rows[name].times.append(elapsed)
                log(f"[{workload.name}] {name}: repeat {r + 1}/{repeat} {elapsed:.3f} s")

        for name, (impl, state) in active.items():
            try:
                rows[name].quality = impl.score(models[name], state)
                log(f"[{workload.name}] {name}: {workload.metric.name} "
                    f"{rows[name].quality:.4f}")
            except Exception as exc:  # noqa: BLE001
                _fail(rows[name], workload, "score", exc)
        models.clear()
        dataset.release()

    medians = {n: r.median for n, r in rows.items() if r.status == "ok" and r.median}
    target = workload.target
    return report.WorkloadResult(
        name=workload.name, title=workload.title, data=arrays.description, shape=dataset.shape,
        metric=workload.metric.name + ("" if workload.metric.greater_is_better
                                       else " (lower is better)"),
        rows=list(rows.values()),
        target_text=target.describe() if target else None,
        target_reference=target.reference if target else "",
        target_check=target.check(medians) if target else [],
        not_selected=not_selected, memory=memory.describe(), n_blocks=n_blocks,
        load_before=load_before, load_after=os.getloadavg())


def _fail(row: report.ImplResult, workload: Workload, stage: str, exc: Exception) -> None:
    row.status = "failed"
    row.times = []
    row.note = f"{stage} raised {_error_text(exc)}"
    log(f"[{workload.name}] {row.name}: {stage} FAILED")
    traceback.print_exc()


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    workloads = all_workloads()
    command = "python -m benchmarks.run" + (" " + shlex.join(argv) if argv else "")

    import dml.runtime

    use_spark = "spark" in args.implementations and any(
        "spark" in workloads[w].implementations for w in args.workloads)
    load_before = os.getloadavg()
    results = {}
    try:
        with dml.runtime.connect(n_workers=N_WORKERS, threads_per_worker=THREADS_PER_WORKER) \
                as client:
            log(f"Dask cluster: {N_WORKERS} workers × {THREADS_PER_WORKER} thread; dashboard "
                f"{client.dashboard_link}")
            for name in args.workloads:
                results[name] = run_workload(workloads[name], args.implementations, client,
                                             args.repeat, args.scale,
                                             workloads[name].n_blocks or args.blocks)
            # Versions after the run: the imports above are what threadpoolctl reports.
            machine, versions = report.machine_info(with_spark=use_spark)
    finally:
        if "benchmarks.spark" in sys.modules:
            sys.modules["benchmarks.spark"].stop()
    if use_spark and "benchmarks.spark" in sys.modules:
        versions += "; Spark: " + sys.modules["benchmarks.spark"].describe()

    run = report.RunInfo(date=report.now(), command=command, machine=machine, versions=versions,
                         scale=args.scale, repeat=args.repeat, n_blocks=args.blocks,
                         note=args.note, load_before=load_before, load_after=os.getloadavg())
    sections = {n: report.render_section(r, run) for n, r in results.items()}
    report.update_results(args.output, run, sections, list(workloads))
    log(f"wrote {args.output}")
    failed = [f"{w}/{r.name}" for w, res in results.items() for r in res.rows
              if r.status == "failed"]
    if failed:
        log(f"FAILED: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
