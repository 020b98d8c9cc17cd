"""Get dml's compiled kernels ready before the first fit: on Dask workers as they start, or in
the cache of a container image at build time.

The tree, stacked-search and matrix-factorisation kernels are numba functions; the first call of
each in a process compiles it (seconds of CPU each, see ``docs/cold_start.md``) unless the cache
directory (:mod:`dml._numba`) already holds it, in which case it is loaded in milliseconds.
This module compiles or loads the exact argument types the estimators use, ahead of time:

``dask worker --preload dml.worker_setup SCHEDULER``
    Each worker imports dml's kernel modules and loads or compiles every kernel in a background
    thread from the moment it starts, so the work overlaps the worker's registration and the
    job's data loading instead of stalling its first fit. ``DML_WARM_KERNELS`` chooses what:
    ``cached`` (default: load what the cache holds, compile nothing), ``all`` (also compile
    what is missing), ``none``, or a comma-separated list of :data:`FAMILIES` (compiled).
    Compiling everything in the background is opt-in: with an empty cache it holds numba's
    compiler lock for tens of seconds, and a fit that needs another kernel meanwhile waits.
``client.register_plugin(dml.worker_setup.WarmKernels())``
    The same from the client, for workers already running and every worker that joins later.
``python -m dml.worker_setup``
    Compile everything into the cache directory now (the container image runs this at build
    time, so its pods start warm).
:func:`prepare`
    What the tree and matrix-factorisation fits call at their start: the kernels they need,
    compiled once per cluster (shared out among the workers) and shipped to every worker.

Models do not depend on any of this: the same kernels run, compiled earlier.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import threading
import time

from distributed.diagnostics.plugin import WorkerPlugin

logger = logging.getLogger(__name__)

#: Kernel groups, by the estimators that use them.
FAMILIES = {
    "trees": "decision trees, random forests, bagging of trees (dml.tree._kernels)",
    "stacked_sgd": "SGD linear models on dense X: fits (plain SGD, one output) and stacked "
                   "searches (dml.optim._stacked_kernels)",
    "sparse_sgd": "SGD linear models on sparse X (dml.optim._stacked_kernels)",
    "gbt": "gradient-boosted trees (dml.ensemble._gb_kernels)",
    "recommender": "MatrixFactorization, SGD and ALS (dml.recommender._kernels)",
    "neighbors": "NearestNeighbors, KNeighbors* brute force (dml.neighbors._knn_kernels)",
    "kmeans": "KMeans on dense X: Lloyd step, final assignment, statistics (dml.cluster._kernels)",
    "naive_bayes": "GaussianNB, MultinomialNB, ComplementNB, BernoulliNB on dense X, "
                   "MultinomialNB and ComplementNB on sparse X: per-class sums and moments "
                   "(dml.naive_bayes._compiled)",
    # Last: compiled at a worker's start after every family a first fit needs (only the
    # workers of a multi-host cluster use it; an image's build compiles it with the rest).
    "gbt_hosts": "gradient-boosted trees on workers of several hosts: their histograms packed "
                 "(dml.ensemble._gb_wire)",
}


#: The modules whose functions dml's tasks run (a worker imports them as it unpickles its first
#: tasks: dml's drivers, dask.dataframe, pandas, numba; no scikit-learn, which only the tasks that
#: fit scikit-learn estimators import); imported by :func:`warm`.
MODULES = ("dml._blocks", "dml.base", "dml.optim.engine", "dml.optim.stacked",
           "dml.linear_model._kernels", "dml.linear_model._problem", "dml.neural_network._problem",
           "dml.naive_bayes._kernels", "dml.cluster._lloyd", "dml.cluster._kernels",
           "dml.cluster._prepared", "dml.cluster._init", "dml.cluster._chain",
           "dml.tree._model", "dml.ensemble._gb_fit", "dml.recommender._frames",
           "dml.recommender._solvers", "dml.model_selection._kernels", "dml.metrics._base",
           "dml.neighbors._knn_kernels", "dml.decomposition._pca_kernels",
           "dml.mixture._gmm_kernels")


def _signatures():
    """family → [(module, kernel name, argument types)]: the types the estimators call with
    (``tests/test_cold_start.py`` checks that fits after :func:`warm` compile nothing new)."""
    from numba import types as nt

    def a(dtype, ndim):
        return nt.Array(dtype, ndim, "C")

    f64, i64, b = nt.float64, nt.int64, nt.boolean
    f1, f2, f3 = a(f64, 1), a(f64, 2), a(f64, 3)
    i1, i2 = a(i64, 1), a(i64, 2)
    u2, i32_2, b1, b2 = a(nt.uint8, 2), a(nt.int32, 2), a(b, 1), a(b, 2)
    trees = "dml.tree._kernels"
    rec = "dml.recommender._kernels"
    knn = "dml.neighbors._knn_kernels"
    u64_1 = a(nt.uint64, 1)
    binning = [("dml.tree._binning", "bin_numeric", (f2, f1, i1, i1, f1, f1, u2, u2)),
               ("dml.tree._binning", "sort_values", (u64_1, u64_1, i1))]
    return {
        "trees": [
            *binning,
            (trees, "group_by_slot", (i32_2, i32_2, f1, u2, b, i1, i1, f1, b)),
            (trees, "hist_sparse", (u2, i1, i1, i1, f1, i2, i64, i64, b, i1, f2, f2, b1, i1)),
            (trees, "hist_sparse", (u2, f1, i1, i1, f1, i2, i64, i64, b, i1, f2, f2, b1, i1)),
            (trees, "route", (u2, i32_2, i32_2, i32_2, b2, i32_2, i32_2, i32_2, b2)),
            (trees, "merge_sum", (i1, f2, i1, i1, f2, i1, f1)),
            (trees, "best_candidates", (i1, i1, f2, f2, f3, f1, i64, b, i1, f2, f2, f2)),
            (trees, "split_scores", (f2, f2, f2, b1, f1, i64, b)),                 # categorical
            (trees, "rows_by_slot", (u2, i1, i1, i2, a(nt.int32, 1), u2)),
            (trees, "rows_in_slot_order",                                          # classes
             (a(nt.int32, 1), i64, u2, i1, f1, i1, i1, u2, i1, f1)),
            (trees, "rows_in_slot_order",                                          # regression
             (a(nt.int32, 1), i64, u2, f1, f1, i1, i1, u2, f1, f1)),
            (trees, "best_from_rows",                                              # classes
             (i1, u2, i1, f1, i64, i64, b, i64, b, f2, i1, i1, f2, f2, f2, f2, b1, i1, f2)),
            (trees, "best_from_rows",                                              # regression
             (i1, u2, f1, f1, i64, i64, b, i64, b, f2, i1, i1, f2, f2, f2, f2, b1, i1, f2)),
        ],
        "gbt": [
            *binning,
            ("dml.ensemble._gb_kernels", "grow_pass",
             (u2, a(nt.float32, 2), a(nt.float32, 2), b1, i32_2, i2, i2, i32_2, i32_2, b2,
              i32_2, i32_2, i32_2, b2, i32_2, a(f64, 4), a(f64, 5), i64, i64)),
            ("dml.ensemble._gb_kernels", "best_splits",
             (a(f64, 4), f1, f1, f1, i1, b1, b2, f64, f64, f64)),
        ],
        # Histograms packed for a group on another host (a whole share: C; a feature share
        # sliced from it: A) and unpacked with counts of 1, 2 or 4 bytes: every worker pod of
        # a Kubernetes job is on a host of its own.
        "gbt_hosts": [
            *[("dml.ensemble._gb_wire", "_pack_kernel",
               (nt.Array(f64, 4, lay), nt.Array(nt.uint64, 4, lay), a(nt.uint8, 1),
                a(nt.uint64, 2), a(nt.uint32, 1))) for lay in ("C", "A")],
            *[("dml.ensemble._gb_wire", "_unpack_kernel",
               (a(nt.uint8, 1), a(nt.uint64, 2), a(c, 1), a(f64, 4), a(nt.uint64, 4)))
              for c in (nt.uint8, nt.uint16, nt.uint32)],
        ],
        "stacked_sgd": [
            ("dml.optim._stacked_kernels", "sgd_segment",
             (f3, f2, f1, f1, i2, i1, i64, i64, i64, f3, i2, i64, f64, f2, f2, i64, f3, i64,
              f2, f2)),
        ],
        "sparse_sgd": [
            ("dml.optim._stacked_kernels", "sparse_sgd_steps",
             (f2, f1, a(nt.int32, 1), a(nt.int32, 1), f1, f2, f1, i1, i64, i64, i64, f1, f64,
              i64, f64, f64, f1)),
        ],
        "recommender": [
            (rec, "_sort_short_runs", (i1, f1, i64, i1, i1, i1, i2)),
            (rec, "sgd_cell", (i1, i1, f1, i1, f2, f2, f1, f1, f64, f64, f64, b, i64, i64)),
            (rec, "als_gram_add", (i1, i1, f1, f2, f3, f2, f1)),
            (rec, "sq_error_cell", (i1, i1, f1, f2, f2, f1, f1, f64, i64, i64)),
        ],
        "neighbors": [
            (knn, "_row_sqnorms", (f2,)),
            (knn, "_dot_topk", (f2, f1, f2, f1, i64, i64, f2, i2, i1, i64, i64)),
            (knn, "_pair_topk", (f2, f2, i64, i64, f64, f2, i2, i1, i64)),
        ],
        "kmeans": [
            ("dml.cluster._kernels", "argmin_sums", (f2, f2, f1, b, a(nt.int32, 1), f2, i64)),
            ("dml.cluster._kernels", "argmin_sqdist", (f2, f2, f2, a(nt.int32, 1), f1, i64)),
            ("dml.cluster._kernels", "column_stats", (f2, f1, f1, f1, f1, f1)),
        ],
        "naive_bayes": [
            ("dml.naive_bayes._compiled", "class_sums", (f2, i1, f1, b, b, f64, b, f2, f1, f2)),
            ("dml.naive_bayes._compiled", "class_moments", (f2, i1, f1, b, b, f2, f2, f2)),
            # CSR blocks (MultinomialNB, ComplementNB): int32 and int64 index arrays.
            ("dml.naive_bayes._compiled", "sparse_class_sums",
             (f1, a(nt.int32, 1), a(nt.int32, 1), i1, f1, b, f2)),
            ("dml.naive_bayes._compiled", "sparse_class_sums", (f1, i1, i1, i1, f1, b, f2)),
            ("dml.naive_bayes._compiled", "nonzero_columns", (f2, i1)),
        ],
    }


def _families(families) -> list[str]:
    if families is None:
        return list(FAMILIES)
    families = [families] if isinstance(families, str) else list(families)
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown kernel families {unknown}; choose from {sorted(FAMILIES)}")
    return families


def _initialise_numba() -> None:
    """What numba does once per process before its first compilation or cache load (its target
    and typing registries: about 0.4 s of CPU). Done by :func:`warm` even when it compiles
    nothing, so that a worker started with the preload and an empty cache does not pay it in
    its first fit."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target

    # Under numba's compiler lock, as its own compilations refresh them: a task compiling in
    # another thread meanwhile waits rather than seeing half-filled registries.
    with global_compiler_lock:
        cpu_target.target_context.refresh()
        cpu_target.typing_context.refresh()


def warm(families=None, *, compile: bool = True, imports: bool = True) -> dict:
    """Load, or compile and cache, dml's kernels for the argument types the estimators use.

    Parameters
    ----------
    families : str or list of str, optional
        Kernel groups among :data:`FAMILIES` (default: all).
    compile : bool, default True
        False: only load what the cache directory already holds; compile nothing.
    imports : bool, default True
        Import :data:`MODULES` first. (numba is initialised in any case.)

    Returns
    -------
    dict
        ``loaded``, ``compiled``, ``skipped`` (counts of kernel signatures), ``seconds``
        (in all), ``import_seconds`` and ``cache_dir`` (where new compiled code went, None:
        not cached).

    Examples
    --------
    >>> from dml.worker_setup import warm
    >>> report = warm("trees", compile=False, imports=False)  # load what is cached, only
    >>> report["compiled"]
    0
    """
    from dml._numba import cache_dirs

    t = time.perf_counter()
    if imports:
        for module in MODULES:
            importlib.import_module(module)
    import_seconds = time.perf_counter() - t
    _initialise_numba()
    counts = {"loaded": 0, "compiled": 0, "skipped": 0}
    table = _signatures()
    for family in _families(families):
        for module, name, sig in table[family]:
            dispatcher = getattr(importlib.import_module(module), name)
            if tuple(sig) in dispatcher.overloads:
                counts["loaded"] += 1
                continue
            cache = dispatcher._cache
            cached = hasattr(cache, "contains") and cache.contains(sig, dispatcher.targetctx)
            if not (cached or compile):
                counts["skipped"] += 1
                continue
            dispatcher.compile(sig)
            counts["loaded" if cached else "compiled"] += 1
    write_dir, _ = cache_dirs()
    return {**counts, "seconds": time.perf_counter() - t, "import_seconds": import_seconds,
            "cache_dir": None if write_dir is None else str(write_dir)}


# ---------------------------------------------------------------------------------------------
# At a fit's start: compile once per cluster, split among the workers
# ---------------------------------------------------------------------------------------------

#: Compile cost of a kernel (CPU seconds, with the helpers it calls, in a worker that has
#: compiled something before: measured one kernel per fresh process, November 27 2026), to share
#: the compilation evenly among the workers; kernels not listed count 0.5. Only the ratios
#: matter: with the old guesses (the two split searches equal) a forest's first fit gave one
#: worker 2.6 s of its 4.3 s and the other 1.7 s; with these, 2.2 and 2.1.
COMPILE_COST = {"best_from_rows": 1.75, "best_candidates": 0.9, "hist_sparse": 0.7,
                "split_scores": 0.7, "route": 0.32, "merge_sum": 0.3, "group_by_slot": 0.2,
                "rows_by_slot": 0.15, "grow_pass": 1.35, "best_splits": 1.0,
                "_sort_short_runs": 0.3, "sgd_cell": 0.5, "als_gram_add": 0.2,
                "sq_error_cell": 0.15, "sort_values": 0.26, "bin_numeric": 0.22}

#: Client side: worker address → the (module, name, signature) entries it was given.
_prepared: dict = {}

#: Seconds a fit waits at most for :func:`prepare` (it stops waiting earlier when a worker
#: leaves); past it the fit goes on and its tasks compile what is missing on first use.
PREPARE_TIMEOUT = 120.0


def entries(family, keep=None) -> list[tuple]:
    """The (module, kernel name, argument types) of ``family`` (see :data:`FAMILIES`) for which
    ``keep(name, sig)`` holds (all without ``keep``)."""
    return [e for e in _signatures()[_families(family)[0]]
            if keep is None or keep(e[1], e[2])]


def _compile_share(share):
    """On a worker: compile (or load from its cache) the given entries; their code as bytes."""
    from dml._numba import cpu_key, export

    out = {}
    key = None
    for module, name, sig in share:
        dispatcher = getattr(importlib.import_module(module), name)
        out[(module, name, tuple(sig))] = export(dispatcher, sig)
        key = cpu_key(dispatcher)
    return key, out


def _install_all(*shares):
    """On a worker (or the client, for what it runs itself): install the others' compiled
    code (that of another CPU is left to compile on first use). Returns the number installed."""
    from dml._numba import cpu_key, install

    n = 0
    for key, out in shares:
        for (module, name, sig), payload in out.items():
            dispatcher = getattr(importlib.import_module(module), name)
            if key == cpu_key(dispatcher):
                n += install(dispatcher, sig, payload)
    return n


def prepare(kernels, local=(), client=None, timeout=None) -> dict | None:
    """Have every worker of the cluster hold ``kernels`` before a fit uses them, compiling each
    once per cluster: split among the workers, each compiles (or loads from its cache) its
    share, and every worker installs the others' compiled code (numba's cache format, shipped
    from worker to worker; a worker on another CPU model compiles on first use instead).

    A fit that lets its tasks compile their kernels on first use meets the compilations one
    after the other as it goes (a level's histograms, then their merge, then the split
    search...), each on every worker that runs it; prepared, a cold first fit pays about its
    kernels' compile time divided by the number of workers, once, at its start.

    Parameters
    ----------
    kernels : list of (module, kernel name, argument types)
        From :func:`entries`: what the fit's tasks run.
    local : list of (module, kernel name, argument types)
        What the fit runs in this process (the client): compiled on the workers too, and
        installed here.
    client : distributed.Client, optional
        Default: the client Dask computes on now; with a local scheduler nothing is done.
    timeout : float, optional
        Seconds to wait (default :data:`PREPARE_TIMEOUT`).

    Returns
    -------
    dict or None
        ``workers`` (how many were prepared) and ``installed`` (compiled codes received), or
        None when nothing was to be done (no cluster, called inside a task, or every worker
        prepared before by this process).
    """
    try:
        from distributed import get_worker, wait

        try:
            get_worker()
            # A fit inside a task (bagging, a search's member): waiting here for tasks pinned
            # to the workers could hold the only thread of the worker they wait for.
            return None
        except ValueError:
            pass
        if client is None:
            from dask.base import get_scheduler

            # Only when the fit's tasks go to a cluster (not a local scheduler, even with a
            # client around).
            client = getattr(get_scheduler(), "__self__", None)
            if client is None or not hasattr(client, "ncores"):
                return None
        if not kernels:
            return None
        here = {(m, n, tuple(s)) for m, n, s in local
                if tuple(s) not in getattr(importlib.import_module(m), n).overloads}
        wanted = {(m, n, tuple(s)) for m, n, s in kernels}
        workers = sorted(w for w in client.ncores()
                         if not wanted <= _prepared.get(w, frozenset()))
        if not workers:
            if not here:
                return None
            workers, wanted = sorted(client.ncores())[:1], set()
        wanted |= here
        # Largest first onto the least loaded worker (LPT): balanced shares.
        load = {w: 0.0 for w in workers}
        shares = {w: [] for w in workers}
        for e in sorted(wanted, key=lambda e: (-COMPILE_COST.get(e[1], 0.5), e[:2], str(e[2]))):
            w = min(workers, key=lambda w_: (load[w_], w_))
            shares[w].append(e)
            load[w] += COMPILE_COST.get(e[1], 0.5)
        compiled = [client.submit(_compile_share, shares[w], workers=[w], pure=False,
                                  key=f"dml-compile-{w}-{time.time_ns()}")
                    for w in workers if shares[w]]
        done = [client.submit(_install_all, *compiled, workers=[w], pure=False,
                              key=f"dml-install-{w}-{time.time_ns()}") for w in workers]
        deadline = time.monotonic() + (PREPARE_TIMEOUT if timeout is None else timeout)
        while True:
            try:
                wait(done, timeout=0.5)
                break
            except TimeoutError:
                pass
            # A lost worker never runs its pinned tasks (nor the installs that wait for its
            # share): go on with what is ready; the rest compiles on first use.
            if time.monotonic() > deadline or not set(workers) <= set(client.ncores()):
                break
        installed = 0
        for w, f in zip(workers, done):
            if f.status == "finished":
                installed += f.result()
                _prepared[w] = _prepared.get(w, frozenset()) | wanted
        if here:  # what this process runs itself, installed as the workers install theirs
            done_shares = [f.result() for f in compiled if f.status == "finished"]
            installed += _install_all(*[(key, {e: out[e] for e in here & set(out)})
                                        for key, out in done_shares])
        return {"workers": len(workers), "installed": installed}
    except Exception as exc:  # never a reason for a fit to fail: its kernels compile on use
        logger.debug("preparing dml kernels on the cluster failed: %s", exc)
        return None


# ---------------------------------------------------------------------------------------------
# On Dask workers
# ---------------------------------------------------------------------------------------------

_state = {"status": "not started", "report": None, "error": None}
_done = threading.Event()
_lock = threading.Lock()


def _run(families, compile):
    try:
        report = warm(families, compile=compile)
        _state.update(status="done", report=report)
        logger.info("dml kernels ready in %.1f s: %d loaded, %d compiled, %d skipped (cache %s)",
                    report["seconds"], report["loaded"], report["compiled"], report["skipped"],
                    report["cache_dir"])
    except Exception as exc:  # a worker must start even if warming fails: fits compile lazily
        _state.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        logger.warning("warming dml's kernels failed (%s); they compile on first use", exc)
    finally:
        _done.set()


def start(families=None, *, compile: bool = True) -> bool:
    """Warm the kernels in a background thread of this process (once; later calls return
    False)."""
    families = _families(families)
    with _lock:
        if _state["status"] != "not started":
            return False
        _state["status"] = "running"
    threading.Thread(target=_run, args=(families, compile), name="dml-warm-kernels",
                     daemon=True).start()
    return True


def status(timeout: float | None = 0) -> dict:
    """This process's warm-up: ``status`` ('not started', 'running', 'done', 'failed'),
    ``report`` (see :func:`warm`) and ``error``; waits up to ``timeout`` seconds (None: until
    it ends) for a running one. Call it on workers with ``client.run(status, None)``."""
    if _state["status"] == "running":
        _done.wait(timeout)
    return dict(_state)


class WarmKernels(WorkerPlugin):
    """Worker plugin: warm dml's kernels in a background thread of every worker.

    Parameters
    ----------
    families : list of str, optional
        Kernel groups among :data:`FAMILIES` (default: all).
    compile : bool, default False
        Also compile what the workers' cache directory lacks (in the background; a fit
        needing another kernel meanwhile waits for numba's compiler lock).

    Examples
    --------
    >>> from dml.worker_setup import WarmKernels
    >>> plugin = WarmKernels(["trees"], compile=True)
    >>> # client.register_plugin(plugin)   # on every current and future worker
    """

    name = "dml-warm-kernels"

    def __init__(self, families=None, compile: bool = False):
        self.families = _families(families)
        self.compile = compile

    def setup(self, worker):
        start(self.families, compile=self.compile)


def _from_environment():
    """(families, compile) from ``DML_WARM_KERNELS``; None: do nothing."""
    value = os.environ.get("DML_WARM_KERNELS", "cached").strip().lower()
    if value == "none":
        return None
    if value == "all":
        return None, True
    if value == "cached":
        return None, False
    return _families([v.strip() for v in value.split(",") if v.strip()]), True


def dask_setup(worker):
    """``dask worker --preload dml.worker_setup``: start warming at worker start."""
    choice = _from_environment()
    if choice is not None:
        start(choice[0], compile=choice[1])


# ---------------------------------------------------------------------------------------------
# python -m dml.worker_setup
# ---------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dml.worker_setup",
                                description="Compile dml's numba kernels into the cache "
                                            "directory (DML_CACHE_DIR) now.")
    p.add_argument("--families", nargs="+", choices=list(FAMILIES), default=None,
                   help="kernel groups (default: all)")
    p.add_argument("--cached-only", action="store_true",
                   help="load what is cached, compile nothing (reports what is missing)")
    args = p.parse_args(argv)
    report = warm(args.families, compile=not args.cached_only)
    print(f"dml kernels: {report['loaded']} loaded from the cache, {report['compiled']} "
          f"compiled, {report['skipped']} not cached, in {report['seconds']:.1f} s; cache "
          f"directory: {report['cache_dir']}")
    if report["cache_dir"] is None and report["compiled"]:
        print("warning: no writable cache directory: nothing was saved", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
