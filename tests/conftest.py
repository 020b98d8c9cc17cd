"""Real Dask clusters for the tests: an in-process LocalCluster and a multi-process cluster.

The multi-process cluster is started with the ``dask scheduler`` and ``dask worker`` commands
(two workers, one thread each) on 127.0.0.1 with free ports, exactly as a user would start one,
and is always torn down at the end of the session. No part of Dask is mocked.

Fixtures
--------
client
    Parametrised over both clusters; the test body runs with that client as the current one.
inprocess_client, process_client
    One of the two, also made current for the test.
process_cluster
    The multi-process cluster's details (address, scheduler file, PIDs).
real_data, dml_data
    The real data sets (MovieLens, UCI Adult) for the tests that use them: ``$DML_DATA`` when
    set, else the project's copy beside the repository (``../shared/data``). ``real_data`` is
    that directory, ``dml_data`` also sets ``$DML_DATA`` to it for the test (so the loaders'
    defaults find it); both skip, saying why, when the files are not there.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask
import pytest
from distributed import Client, LocalCluster

ROOT = Path(__file__).resolve().parents[1]

#: Two diagnostics of every Dask server that cost CPU while a cluster waits between tests: the
#: event-loop tick (a callback every 20 ms in each scheduler, nanny and worker, which only
#: measures how late it runs, to log "Event loop was unresponsive") and the workers' sampling
#: profiler (every 10 ms; only dashboards read it). An idle process cluster of the suite
#: (scheduler, two nannies, two workers) used 15-21% of a core with Dask's defaults and 6-7%
#: with these; the in-process cluster 5-7% and 2% (measured, 20 s idle, loaded 2-core machine).
#: Every test process keeps one of each for the whole session. Set here for this process and,
#: through the environment, for the clusters, kernels and jobs the tests start as processes.
#: Nothing the tests check depends on them (placement, memory management and heartbeats keep
#: Dask's settings).
QUIET_DASK = {"distributed.admin.tick.interval": "1s", "distributed.worker.profile.enabled": False}
dask.config.set(QUIET_DASK)
for _key, _value in QUIET_DASK.items():
    os.environ.setdefault("DASK_" + _key.upper().replace(".", "__").replace("-", "_"),
                          str(_value))


def dask_command() -> list[str]:
    """The ``dask`` command of this interpreter's environment."""
    exe = Path(sys.executable).parent / "dask"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("dask")
    if found is None:
        pytest.fail("the `dask` command is not installed in this environment")
    return [found]


class ProcessCluster:
    """A scheduler and workers started as separate OS processes with the ``dask`` CLI."""

    def __init__(self, tmpdir: Path, n_workers: int = 2, nthreads: int = 1,
                 memory_limit: str = "3GiB", extra_worker_args: tuple = ()):
        self.tmpdir = Path(tmpdir)
        self.scheduler_file = self.tmpdir / "scheduler.json"
        self.n_workers = n_workers
        self.nthreads = nthreads
        self.memory_limit = memory_limit
        self.extra_worker_args = list(extra_worker_args)
        self.procs: list[subprocess.Popen] = []
        self.address: str | None = None

    def _env(self) -> dict:
        env = dict(os.environ)
        # Workers must import this checkout's dml and the test modules: functions are pickled by
        # reference, so kernels defined in tests must be importable there too.
        paths = [str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(paths).rstrip(os.pathsep)
        env.pop("DML_SCHEDULER_ADDRESS", None)
        return env

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen:
        log = open(self.tmpdir / log_name, "wb")
        # A new session per process so teardown can signal the whole process group
        # (the nanny and its worker child).
        proc = subprocess.Popen(dask_command() + args, stdout=log, stderr=subprocess.STDOUT,
                                env=self._env(), cwd=self.tmpdir, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self, timeout: float = 90.0) -> ProcessCluster:
        self._spawn(["scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--dashboard-address", "127.0.0.1:0", "--scheduler-file",
                     str(self.scheduler_file)], "scheduler.log")
        deadline = time.monotonic() + timeout
        while not self.scheduler_file.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"dask scheduler did not start; log:\n{self.log('scheduler')}")
            time.sleep(0.1)
        for i in range(self.n_workers):
            self._spawn(["worker", "--scheduler-file", str(self.scheduler_file), "--nthreads",
                         str(self.nthreads), "--memory-limit", self.memory_limit,
                         "--no-dashboard", "--name", f"worker-{i}",
                         "--local-directory", str(self.tmpdir / f"worker-{i}"),
                         *self.extra_worker_args], f"worker-{i}.log")
        with Client(scheduler_file=str(self.scheduler_file), set_as_default=False) as c:
            self.address = c.scheduler.address
            remaining = max(1.0, deadline - time.monotonic())
            try:
                c.wait_for_workers(self.n_workers, timeout=remaining)
            except TimeoutError:
                logs = "\n".join(self.log(f"worker-{i}") for i in range(self.n_workers))
                raise TimeoutError(f"dask workers did not connect; logs:\n{logs}") from None
        return self

    def _check_alive(self):
        for p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"process {p.args} exited with {p.returncode}; log:\n"
                                   f"{self.log('scheduler')}")

    def log(self, name: str) -> str:
        path = self.tmpdir / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        # Workers first, then the scheduler; SIGTERM lets nannies stop their children.
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)
        self.procs.clear()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


@pytest.fixture(scope="session")
def process_cluster(tmp_path_factory):
    cluster = ProcessCluster(tmp_path_factory.mktemp("dask-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def _process_client(process_cluster):
    client = Client(process_cluster.address, set_as_default=False)
    yield client
    client.close()


@pytest.fixture(scope="session")
def _inprocess_client():
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                           dashboard_address=":0")
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.fixture
def inprocess_client(_inprocess_client):
    with _inprocess_client.as_current():
        yield _inprocess_client


@pytest.fixture
def process_client(_process_client):
    with _process_client.as_current():
        yield _process_client


#: For the costliest both-cluster tests: the multi-process cluster in the quick tier, the
#: in-process one with the slow tests (the full suite runs both).
QUICK_ON_PROCESS_CLUSTER = [pytest.param("inprocess", marks=pytest.mark.slow),
                            pytest.param("multiprocess", marks=pytest.mark.multiprocess)]


@pytest.fixture(params=["inprocess", pytest.param("multiprocess",
                                                  marks=pytest.mark.multiprocess)])
def client(request):
    """Run the test on the in-process cluster and again on the multi-process one.

    A test may keep only one of the two in the quick tier with
    ``@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)``."""
    name = "_inprocess_client" if request.param == "inprocess" else "_process_client"
    c = request.getfixturevalue(name)
    with c.as_current():
        yield c


@pytest.fixture(autouse=True)
def _dask_scheduler_config_is_restored():
    """Fail the test that leaves Dask's global scheduler setting changed.

    ``Client.as_current()`` and default clients set ``dask.config`` process-wide; a test that
    leaves ``scheduler="dask.distributed"`` behind (e.g. threads entering and leaving
    ``as_current`` out of order) makes every later test without a client fail with "no Client
    active", far from the cause.
    """
    import dask

    before = dask.config.get("scheduler", None)
    yield
    after = dask.config.get("scheduler", None)
    if after != before:
        dask.config.set(scheduler=before)
        pytest.fail(f"the test left dask.config 'scheduler' as {after!r} (was {before!r})")


#: The project's copy of the real data sets, kept beside the repository (not inside it).
SHARED_DATA = ROOT.parent / "shared" / "data"
#: A file of each real data set, relative to the data home.
REAL_DATA_FILES = ("movielens-small/ratings.csv", "adult/adult.csv")


@pytest.fixture(scope="session")
def real_data() -> Path:
    """The data home holding the real data sets (``$DML_DATA`` when set, else
    ``../shared/data``); skips the test, saying why, when they are not there."""
    env = os.environ.get("DML_DATA")
    home = Path(env).expanduser() if env else SHARED_DATA
    if not all((home / f).is_file() for f in REAL_DATA_FILES):
        pytest.skip(f"the real data sets are not available: set $DML_DATA to a directory "
                    f"holding {' and '.join(REAL_DATA_FILES)} (the project keeps them in "
                    f"{SHARED_DATA})")
    return home


@pytest.fixture
def dml_data(real_data, monkeypatch) -> Path:
    """``$DML_DATA`` set to the real data sets' home for this test (which skips without them)."""
    monkeypatch.setenv("DML_DATA", str(real_data))
    return real_data


#: The longest test files, longest first (seconds in a full run, 2026-11-29: 757, 429, 316,
#: 241, 236, 225, 136, 135, 134, 134, 134, 128, 112, 111, 100): collected first so that, run in
#: parallel (pytest-xdist with ``--dist loadfile``), they start early instead of becoming the
#: tail of the run (longest first is the classic greedy schedule). xdist's own reordering
#: (files with the most tests first, which put the out-of-core file, 23 tests, near the end and
#: left one worker idle for minutes) is switched off in :func:`pytest_configure`.
LONG_FILES = ("test_out_of_core.py", "test_bad_input.py", "test_sparse.py", "test_notebooks.py",
              "test_conformance.py", "test_readme_commands.py", "test_fault_tolerance.py",
              "test_cold_start.py", "test_deploy.py", "test_feature_extraction.py",
              "test_kmeans.py", "test_block_groups.py", "test_concurrency.py", "test_mixture.py",
              "test_gbt.py")


def pytest_configure(config):
    # pytest-xdist >= 3.7 reorders ``--dist loadfile`` work by the number of tests per file,
    # which undoes LONG_FILES' order; older versions have no such option.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _on_process_cluster(item) -> bool:
    spec = getattr(item, "callspec", None)
    return spec is not None and spec.params.get("client") == "multiprocess"


def _first_case_quick(items, predicate, per_file: bool = False):
    """Of a test function's cases (or, with ``per_file``, a test file's cases) for which
    ``predicate`` holds, only the first (in collection order: usually the smallest parameters)
    stays in the quick tier; the others are marked slow. With ``per_file``, a function's only
    quick case stays (e.g. :data:`QUICK_ON_PROCESS_CLUSTER`'s). The full suite (CI) runs every
    case."""
    quick_cases: dict = {}
    for item in items:
        if not item.get_closest_marker("slow"):
            fn = (str(item.fspath), getattr(item, "originalname", item.name))
            quick_cases[fn] = quick_cases.get(fn, 0) + 1
    seen = set()
    for item in items:
        if not predicate(item) or item.get_closest_marker("slow"):
            continue
        fn = (str(item.fspath), getattr(item, "originalname", item.name))
        key = (str(item.fspath), None) if per_file else fn
        if key in seen and not (per_file and quick_cases[fn] == 1):
            item.add_marker(pytest.mark.slow)
            quick_cases[fn] -= 1
        seen.add(key)


#: Parameters that count a test's row blocks (partitions, parts).
BLOCK_COUNT_PARAMS = ("n_blocks", "nparts", "blocks", "npartitions")


def _many_blocks(item) -> bool:
    spec = getattr(item, "callspec", None)
    return spec is not None and any(
        isinstance(spec.params.get(k), int) and spec.params[k] >= 60 for k in BLOCK_COUNT_PARAMS)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks added here
def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(LONG_FILES)))
    # Every test file with cases on the multi-process cluster still runs one of them in a quick
    # run, and every test function on 60+ blocks one such case; the others (1-9 s each on the
    # process cluster, 76 cases and 131 s of the quick tier when kept per function) do not.
    _first_case_quick(items, _on_process_cluster, per_file=True)
    _first_case_quick(items, _many_blocks)


@pytest.fixture(autouse=True)
def _no_default_client_is_left_open():
    """Fail the test that leaves a Dask default client open.

    ``dask.compute`` without an explicit scheduler uses the newest open default client of the
    process. One left behind by a test (say, a Client that failed to start, or a worker's own
    client on a closed in-process cluster) keeps "connecting" to a scheduler that is gone, and
    a later test that computes without a client hangs until the timeout, far from the cause.
    """
    from distributed.client import _global_clients

    before = {id(c) for c in list(_global_clients.values())}
    yield
    left = [f"{c.id} ({c.status})" for c in list(_global_clients.values())
            if id(c) not in before and c.status != "closed" and c.close() is None]
    if left:
        pytest.fail(f"the test left Dask default client(s) open (now closed): {', '.join(left)}")


@pytest.fixture
def live_run_steps(monkeypatch):
    """Records every epoch handed to an SGD fit's live collective run
    (:meth:`dml._collective.LiveRun.step`): the returned list gets True for an epoch whose run
    was lost, False for one done. Set ``before`` on the list to a function of the run, called
    before each epoch is handed over (to disturb it)."""
    from dml import _collective

    step = _collective.LiveRun.step

    class Steps(list):
        before = None

    steps = Steps()

    def recorded(self, value):
        if steps.before is not None:
            steps.before(self)
        result = step(self, value)
        steps.append(result is None)
        return result

    monkeypatch.setattr(_collective.LiveRun, "step", recorded)
    return steps
