"""Cold start: where compiled kernels are cached, and warming them before the first fit.

Fresh interpreters (subprocesses) with their own ``DML_CACHE_DIR`` check the cache mechanism of
:mod:`dml._numba` with a real dml kernel: compiled code lands in the cache directory and never in
the package, a second process loads it, a read-only package and a read-only warm cache (a
container image) work. A fresh ``dask worker --preload dml.worker_setup`` cluster checks that
the workers compile the kernels at start and that the fit then compiles nothing and gives the
same model. The Dockerfile's build-time warm-up command is run as a local process. No timings.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"

# A real kernel, cheap to compile (about a second), called with the types MatrixFactorization
# uses; ``stats.cache_hits`` says whether the compiled code came from the disk cache.
CALL_ALS = """
import json, sys
import numpy as np
import dml
from dml._numba import cache_dirs
from dml.recommender._kernels import als_gram_add as k
dtype = np.float32 if "--float32" in sys.argv else np.float64
rows = np.array([0, 1, 1]); cols = np.array([0, 1, 0])
Z = np.ones((2, 3)); A = np.zeros((2, 3, 3)); rhs = np.zeros((2, 3)); cnt = np.zeros(2)
k(rows, cols, np.array([1.0, 2.0, 3.0], dtype=dtype), Z, A, rhs, cnt)
write, readonly = cache_dirs()
print(json.dumps({"package": dml.__file__, "write": str(write),
                  "readonly": [str(d) for d in readonly], "cnt": cnt.tolist(),
                  "hits": sum(k.stats.cache_hits.values()),
                  "misses": sum(k.stats.cache_misses.values())}))
"""


def _python(code: str, *args: str, env: dict, cwd: Path) -> dict:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("DML_", "NUMBA_"))}
    full.update(env)
    proc = subprocess.run([sys.executable, "-c", code, *args], env=full, cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _package_copy(tmp_path: Path) -> Path:
    """A copy of the dml package (no caches), to be imported instead of the checkout's."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "dml", src / "dml",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    return src


def _compiled_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.suffix in (".nbi", ".nbc"))


class ReadOnly:
    """Make directory trees unwritable for this process, root included (``chattr +i`` when
    running as root, where permission bits do not apply); undone on exit."""

    def __init__(self, *roots: Path):
        self.dirs = [Path(d) for r in roots for d, _, _ in os.walk(r)]
        self.root = os.geteuid() == 0

    def __enter__(self):
        for d in self.dirs:
            if self.root:
                if subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode:
                    self.__exit__()
                    pytest.skip("running as root without chattr: cannot make a directory "
                                "read-only")
            else:
                os.chmod(d, 0o555)
        probe = self.dirs[0] / "probe"
        try:
            probe.touch()
        except OSError:
            return self
        probe.unlink()
        self.__exit__()
        pytest.skip("cannot make a directory read-only here")

    def __exit__(self, *exc):
        for d in self.dirs:
            if self.root:
                subprocess.run(["chattr", "-i", str(d)], capture_output=True)
            else:
                os.chmod(d, 0o755)


@pytest.mark.slow  # a fresh process compiling kernels (about 7 s): full suite only
def test_compiled_kernels_go_to_the_cache_dir_never_into_the_package(tmp_path):
    src = _package_copy(tmp_path)
    env = {"PYTHONPATH": str(src), "DML_CACHE_DIR": str(tmp_path / "cache")}
    first = _python(CALL_ALS, env=env, cwd=tmp_path)
    assert first["package"] == str(src / "dml" / "__init__.py")
    assert first["write"] == str(tmp_path / "cache" / "numba") and first["readonly"] == []
    assert first["misses"] == 1 and first["hits"] == 0
    assert _compiled_files(src) == [], "compiled code written into the package"
    cached = _compiled_files(tmp_path / "cache" / "numba")
    assert any(p.name.startswith("_kernels.als_gram_add") and p.suffix == ".nbi" for p in cached)

    second = _python(CALL_ALS, env=env, cwd=tmp_path)
    assert second["hits"] == 1 and second["misses"] == 0, "the cache was not used"
    assert second["cnt"] == first["cnt"]
    assert _compiled_files(src) == []

    # The same source installed elsewhere (another virtualenv, a clone) uses the same entries;
    # an edited source compiles again, beside them.
    moved = tmp_path / "elsewhere"
    shutil.copytree(src, moved)
    third = _python(CALL_ALS, env={**env, "PYTHONPATH": str(moved)}, cwd=tmp_path)
    assert third["package"] == str(moved / "dml" / "__init__.py")
    assert third["hits"] == 1 and third["misses"] == 0, "an identical source compiled again"
    with open(moved / "dml" / "recommender" / "_kernels.py", "a") as f:
        f.write("\n# edited\n")
    fourth = _python(CALL_ALS, env={**env, "PYTHONPATH": str(moved)}, cwd=tmp_path)
    assert fourth["hits"] == 0 and fourth["misses"] == 1, "an edited source used stale code"
    assert fourth["cnt"] == first["cnt"]


@pytest.mark.slow  # a fresh process compiling kernels (about 7 s): full suite only
def test_default_cache_dir_is_the_user_cache(tmp_path):
    src = _package_copy(tmp_path)
    home = tmp_path / "home"
    out = _python(CALL_ALS, env={"PYTHONPATH": str(src), "HOME": str(home)}, cwd=tmp_path)
    assert out["write"] == str(home / ".cache" / "dml" / "numba")
    out = _python(CALL_ALS, env={"PYTHONPATH": str(src), "HOME": str(home),
                                 "XDG_CACHE_HOME": str(tmp_path / "xdg")}, cwd=tmp_path)
    assert out["write"] == str(tmp_path / "xdg" / "dml" / "numba")
    assert _compiled_files(src) == []


@pytest.mark.slow  # about 15 s: runs in the full suite, kept out of the quick one
def test_read_only_package_and_read_only_warm_cache(tmp_path):
    """The container image: package and build-time cache read-only, a writable temp dir."""
    src = _package_copy(tmp_path)
    warm = tmp_path / "warm"
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {"PYTHONPATH": str(src), "DML_CACHE_DIR": str(warm), "TMPDIR": str(temp)}
    built = _python(CALL_ALS, env=env, cwd=tmp_path)          # the build step
    assert built["write"] == str(warm / "numba")
    before = _compiled_files(warm)
    assert before

    with ReadOnly(src, warm):
        run = _python(CALL_ALS, env=env, cwd=tmp_path)
        fallback = temp / f"dml-{os.getuid()}" / "numba"
        assert run["write"] == str(fallback) and run["readonly"] == [str(warm / "numba")]
        assert run["hits"] == 1 and run["misses"] == 0, "the read-only warm cache was not used"
        assert run["cnt"] == built["cnt"]
        # A signature the warm cache lacks compiles and is saved in the writable directory.
        new = _python(CALL_ALS, "--float32", env=env, cwd=tmp_path)
        assert new["misses"] == 1
        assert _compiled_files(fallback)
        assert _compiled_files(warm) == before and _compiled_files(src) == []
        again = _python(CALL_ALS, "--float32", env=env, cwd=tmp_path)
        assert again["hits"] == 1 and again["misses"] == 0


def test_kernel_refuses_a_cache_option():
    from dml._numba import kernel

    with pytest.raises(TypeError, match="always caches"):
        kernel(cache=True)


def test_prefetch_is_only_a_hint():
    """dml._numba.prefetch (used by the boosting kernel) changes no value, on any memory
    layout, and an index past the array does not fault."""
    import numpy as np

    from dml._numba import kernel, prefetch

    @kernel
    def gather_sum(x, rows, ahead):
        s = 0.0
        for k in range(rows.shape[0]):
            prefetch(x, rows[k] + ahead, x.shape[1] - 1)  # past the end near the last rows
            s += x[rows[k], 0] + x[rows[k], x.shape[1] - 1]
        return s

    base = np.arange(600.0).reshape(40, 15)
    rows = np.array([3, 39, 0, 17, 17, 8])
    for x in (base, np.asfortranarray(base), base[::2, 1::3], base.T.copy().T):
        want = float(x[rows % x.shape[0], 0].sum() + x[rows % x.shape[0], -1].sum())
        for ahead in (0, 5, 10_000):
            assert gather_sum(x, rows % x.shape[0], ahead) == want


def test_worker_side_modules_do_not_import_scikit_learn():
    """Importing scikit-learn (with SciPy's statistics) costs a fresh worker about half a second
    of CPU in its first task: the packages import their estimators on first use and the modules
    the workers run import scikit-learn only where they raise its exceptions. The public names
    still resolve (one fresh process, about 2 s). ``MODULES`` is what the preload imports."""
    code = ("import importlib, json, sys\n"
            "from dml.worker_setup import MODULES\n"
            "for m in MODULES:\n"
            "    importlib.import_module(m)\n"
            "before = 'sklearn' in sys.modules\n"
            "import dml.tree, dml.metrics\n"
            "from dml.ensemble import RandomForestClassifier\n"
            "from dml.metrics import rmse, root_mean_squared_error\n"
            "print(json.dumps({'sklearn': before, 'dir': 'DecisionTreeClassifier' in "
            "dir(dml.tree), 'alias': rmse is root_mean_squared_error, "
            "'cls': RandomForestClassifier.__module__}))\n")
    out = _python(code, env={"PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert out == {"sklearn": False, "dir": True, "alias": True, "cls": "dml.ensemble._forest"}


def test_warm_rejects_unknown_families():
    from dml.worker_setup import WarmKernels, warm

    with pytest.raises(ValueError, match="unknown kernel families.*'trees'"):
        warm(["tree"])
    with pytest.raises(ValueError, match="unknown kernel families"):
        WarmKernels(["forests"])


# ---------------------------------------------------------------------------------------------
# The warm-up table matches what the estimators really compile
# ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_fits_use_exactly_the_warmed_signatures():
    """Every signature a fit compiles is in dml.worker_setup's table, so warmed workers compile
    nothing (kernels whose arguments change must update the table).

    Compiled signatures are process-wide: other tests in the same pytest process (bad input,
    read-only arrays) add their own, so the fits run in a process of their own.
    """
    if os.environ.get("DML_SIGNATURE_CHECK") != "child":
        test_id = f"{Path(__file__).resolve()}::test_fits_use_exactly_the_warmed_signatures"
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p",
                               "no:cacheprovider", test_id],
                              env={**os.environ, "DML_SIGNATURE_CHECK": "child"},
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
        assert "1 passed" in done.stdout, done.stdout[-2000:]
        return
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    from dml._numba import kernels
    from dml.ensemble import RandomForestClassifier, RandomForestRegressor
    from dml.linear_model import SGDClassifier, SGDRegressor
    from dml.model_selection import GridSearchCV
    from dml.recommender import MatrixFactorization
    from dml.tree import DecisionTreeClassifier
    from dml.worker_setup import _signatures

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    w = rng.random(600)
    Xd, yd, wd = (da.from_array(a, chunks=200) for a in (X, y, w))
    RandomForestClassifier(n_estimators=2, random_state=0).fit(Xd, yd, sample_weight=wd)
    RandomForestRegressor(n_estimators=2, random_state=0).fit(Xd, da.from_array(X[:, 0],
                                                                               chunks=200))
    frame = pd.DataFrame({"a": X[:, 0], "c": pd.Categorical(rng.choice(list("pqr"), 600)),
                          "y": y})
    DecisionTreeClassifier(max_depth=3, random_state=0).fit(
        dd.from_pandas(frame, npartitions=3), "y")
    for est, target in ((SGDClassifier(max_iter=2, tol=None, random_state=0), yd),
                        (SGDRegressor(max_iter=2, tol=None, random_state=0), Xd[:, 0])):
        GridSearchCV(est, {"alpha": [1e-4, 1e-3]}, cv=2).fit(Xd, target)
    # Sparse X: the compiled CSR steps (family sparse_sgd).
    import scipy.sparse as sp

    from dml._blocks import sparse_blocks

    SGDClassifier(max_iter=2, tol=None, random_state=0).fit(
        sparse_blocks(sp.csr_matrix(X), 200), yd)
    ratings = pd.DataFrame({"user": rng.integers(0, 30, 900), "item": rng.integers(0, 20, 900),
                            "rating": rng.normal(3, 1, 900)})
    for solver in ("sgd", "als"):
        MatrixFactorization(3, solver=solver, n_epochs=2, n_blocks=2, random_state=0).fit(
            dd.from_pandas(ratings, npartitions=2))

    from dml.neighbors import KNeighborsClassifier

    for metric in ("euclidean", "cosine", "manhattan"):
        KNeighborsClassifier(3, metric=metric).fit(Xd, yd).predict(X[:50])
    from dml.ensemble import GradientBoostingClassifier

    GradientBoostingClassifier(max_iter=2, random_state=0).fit(Xd, yd)
    # Boosting's groups on different hosts pack their histograms: a whole share and a feature
    # share sliced from it, counts that fit 1, 2 and 4 bytes.
    from dml.ensemble import _gb_wire

    for top in (3.0, 300.0, 70000.0):
        hist = np.zeros((2, 4, 5, 3))
        hist[0, :, 1] = (0.5, -0.25, top)
        for share in (hist, hist[:, 1:3]):
            assert np.array_equal(_gb_wire.unpack(_gb_wire.pack(share), share.shape), share)

    from dml.cluster import KMeans

    KMeans(2, random_state=0, max_iter=3).fit(Xd)

    from dml.naive_bayes import BernoulliNB, MultinomialNB

    MultinomialNB().fit(abs(Xd), yd, sample_weight=wd)
    MultinomialNB().fit(sparse_blocks(sp.csr_matrix(abs(X)), 200), yd)  # CSR blocks
    BernoulliNB().fit(Xd, yd)

    table = {}
    for entries in _signatures().values():
        for module, name, sig in entries:
            table.setdefault((module, name), set()).add(tuple(sig))
    # Kernels called only from other kernels: compiled (and cached) as part of their callers.
    # They show up here only when the cache is empty, so the check must not depend on them.
    callees = {("dml.tree._kernels", "_side_gain"),   # compiled as part of best_candidates
               ("dml.tree._kernels", "_sort_prefix"),   # part of hist_sparse, best_from_rows
               ("dml.tree._kernels", "_weight_impurity"),   # part of the split searches
               ("dml.neighbors._knn_kernels", "_insert")}   # part of _dot_topk, _pair_topk
    used = {(k.py_func.__module__, k.py_func.__name__): set(k.signatures) for k in kernels()
            if k.signatures and k.py_func.__module__.startswith("dml.")}
    not_warmed = {key for key in used if key not in callees} - set(table)
    assert not not_warmed, f"kernels not warmed: {sorted(not_warmed)}"
    for key, sigs in used.items():
        if key not in callees:
            assert sigs <= table[key], f"{key} compiled signatures the warm-up lacks"
    # The fits above reach every kernel family.
    assert {m for m, _ in used} == {m for m, _ in table}


# ---------------------------------------------------------------------------------------------
# Fresh workers
# ---------------------------------------------------------------------------------------------

def _recommender_signatures():
    from dml.recommender import _kernels

    return {name: sorted(str(s) for s in getattr(_kernels, name).signatures)
            for name in ("_sort_short_runs", "sgd_cell", "als_gram_add")}


@pytest.mark.slow
@pytest.mark.multiprocess
def test_preload_compiles_on_fresh_workers_and_fits_compile_nothing(tmp_path, monkeypatch):
    """``dask worker --preload dml.worker_setup`` with an empty cache directory: the workers
    compile the kernels at start into the cache directory (not the package), the fit then
    compiles nothing new and equals the fit made without any warm-up."""
    import dask
    import dask.dataframe as dd
    import pandas as pd
    from conftest import ProcessCluster
    from distributed import Client

    from dml.recommender import MatrixFactorization
    from dml.worker_setup import status

    rng = np.random.default_rng(1)
    ratings = pd.DataFrame({"user": rng.integers(0, 40, 1200), "item": rng.integers(0, 25, 1200),
                            "rating": rng.normal(3, 1, 1200)})
    with dask.config.set(scheduler="sync"):
        reference = MatrixFactorization(4, n_epochs=3, n_blocks=2, random_state=0).fit(
            dd.from_pandas(ratings, npartitions=3))

    cache = tmp_path / "cache"
    monkeypatch.setenv("DML_CACHE_DIR", str(cache))
    monkeypatch.setenv("DML_WARM_KERNELS", "recommender")
    package_files = _compiled_files(ROOT / "dml")
    (tmp_path / "cluster").mkdir()
    with ProcessCluster(tmp_path / "cluster",
                        extra_worker_args=("--preload", "dml.worker_setup")) as cluster, \
            Client(cluster.address, set_as_default=False) as client:
        states = client.run(status, None)
        assert len(states) == 2
        for state in states.values():
            assert state["status"] == "done", state
            report = state["report"]
            assert report["loaded"] + report["compiled"] == 4 and report["skipped"] == 0
            assert report["cache_dir"] == str(cache / "numba")
        warmed = client.run(_recommender_signatures)
        with client.as_current():
            model = MatrixFactorization(4, n_epochs=3, n_blocks=2, random_state=0).fit(
                dd.from_pandas(ratings, npartitions=3))
        assert client.run(_recommender_signatures) == warmed, "the fit compiled new code"
    np.testing.assert_array_equal(model.user_factors_, reference.user_factors_)
    np.testing.assert_array_equal(model.item_factors_, reference.item_factors_)
    assert _compiled_files(cache)
    assert _compiled_files(ROOT / "dml") == package_files


@pytest.mark.multiprocess
def test_worker_plugin_loads_cached_kernels_on_running_workers(process_client):
    from dml.worker_setup import WarmKernels, status

    process_client.register_plugin(WarmKernels(["recommender"], compile=False))
    try:
        for state in process_client.run(status, None).values():
            # Once per worker process: a preload or earlier registration may have run first.
            assert state["status"] == "done", state
            assert state["report"]["compiled"] == 0
    finally:
        process_client.unregister_worker_plugin(WarmKernels.name)


def _merge_sum_args():
    keys = np.array([1, 4, 2, 4, 7], dtype=np.int64)
    vals = np.arange(10, dtype=np.float64).reshape(5, 2) / 3
    offsets = np.array([0, 2, 5], dtype=np.int64)
    return (keys, vals, offsets, np.zeros(5, np.int64), np.zeros((5, 2)), offsets[:-1].copy(),
            np.zeros(2))


def test_compiled_code_installs_in_another_dispatcher():
    """What :func:`dml.worker_setup.prepare` ships between workers: a kernel's compiled code
    (numba's cache format) installed into a dispatcher that never compiled it runs it, gives
    the same results, and compiles nothing; code of another CPU is refused."""
    import numba

    from dml._numba import cpu_key, export, install
    from dml.tree import _kernels
    from dml.worker_setup import _install_all, entries

    [(_, _, sig)] = entries("trees", lambda name, _: name == "merge_sum")
    payload = export(_kernels.merge_sum, sig)
    fresh = numba.njit(nogil=True)(_kernels.merge_sum.py_func)
    assert install(fresh, sig, payload)
    assert not install(fresh, sig, payload)  # present: nothing done
    a, b = _merge_sum_args(), _merge_sum_args()
    assert fresh(*a) == _kernels.merge_sum(*b) == 4
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert list(fresh.overloads) == [tuple(sig)], "the installed code was not used"
    other = (("another", "cpu"), {("dml.tree._kernels", "merge_sum", tuple(sig)): payload})
    assert cpu_key(fresh) != other[0] and _install_all(other) == 0


@pytest.mark.multiprocess
def test_prepare_leaves_every_worker_with_the_kernels(process_client):
    """``prepare`` on a cluster: every worker holds the kernels afterwards (compiled by one of
    them, installed on the others, or already there); a second call for the same workers does
    nothing; with a local scheduler or inside a task it does nothing."""
    import dask

    from dml.worker_setup import entries, prepare

    wanted = entries("trees", lambda name, _: name in ("merge_sum", "route"))

    def held():
        from dml.tree import _kernels

        return sorted(name for _, name, sig in wanted
                      if tuple(sig) in getattr(_kernels, name).overloads)

    first = prepare(wanted, client=process_client)
    assert first is None or first["workers"] == len(process_client.ncores())
    assert set(map(tuple, process_client.run(held).values())) == {("merge_sum", "route")}
    assert prepare(wanted, client=process_client) is None
    with dask.config.set(scheduler="sync"):
        assert prepare(wanted) is None
    # Inside a task (a fit nested in bagging or a search), never: it would wait on the workers.
    assert process_client.submit(prepare, wanted, pure=False).result() is None


# ---------------------------------------------------------------------------------------------
# The container image
# ---------------------------------------------------------------------------------------------

def _dockerfile():
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    return [tuple(line.strip().partition(" ")[::2]) for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _env_of(rest: str) -> dict:
    return dict(w.split("=", 1) for w in shlex.split(rest))


@pytest.mark.slow
def test_dockerfile_warms_the_kernel_cache_at_build_time(tmp_path):
    ins = _dockerfile()
    env = {}
    for op, rest in ins:
        if op == "ENV":
            env.update(_env_of(rest))
    # Portable compiled code (the build machine's CPU is not the nodes'), in a directory of
    # the image that the runtime user reads but cannot write (a read-only root file system).
    assert env.get("NUMBA_CPU_NAME") == "generic"
    cache = env.get("DML_CACHE_DIR", "")
    assert cache.startswith("/opt/"), cache
    warm_at = [i for i, (op, rest) in enumerate(ins) if op == "RUN" and "dml.worker_setup" in rest]
    assert len(warm_at) == 1
    user_at = max(i for i, (op, _) in enumerate(ins) if op == "USER")
    install_at = max(i for i, (op, rest) in enumerate(ins) if op == "RUN" and "pip install" in rest)
    assert install_at < warm_at[0] < user_at
    env_at = [i for i, (op, rest) in enumerate(ins) if op == "ENV" and "DML_CACHE_DIR" in rest]
    assert env_at and env_at[0] < warm_at[0]

    # The same command, run here with the image's environment (its cache dir under tmp_path).
    local = {k: v for k, v in os.environ.items() if not k.startswith(("DML_", "NUMBA_"))}
    local.update({k: v for k, v in env.items() if k.startswith(("DML_", "NUMBA_"))})
    local["DML_CACHE_DIR"] = str(tmp_path / cache.lstrip("/"))
    command = ins[warm_at[0]][1].replace("python ", f"{shlex.quote(sys.executable)} ", 1)
    proc = subprocess.run(command, shell=True, env=local, cwd=tmp_path, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert _compiled_files(tmp_path / cache.lstrip("/"))

    # At run time (read-only cache): every kernel loads, none is compiled.
    with ReadOnly(tmp_path / cache.lstrip("/")):
        out = _python("import json; from dml.worker_setup import warm; "
                      "print(json.dumps(warm(compile=False)))",
                      env={**{k: v for k, v in local.items() if k.startswith(("DML_", "NUMBA_"))},
                           "TMPDIR": str(tmp_path)}, cwd=tmp_path)
    from dml.worker_setup import _signatures

    every = sum(len(kernels) for kernels in _signatures().values())
    assert out["compiled"] == 0 and out["skipped"] == 0 and out["loaded"] == every, out
