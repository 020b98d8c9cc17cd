"""The README's two commands, run in order in one folder of a clean clone, as a new user would.

Command 1 (``pip install .`` and ``dml demo``) used to leave numba's compiled kernels inside
``site-packages/dml/``; command 2's editable install then removed the package but not those
files, and the leftover ``site-packages/dml/`` became a namespace package that shadowed the real
``dml`` whenever Python started outside the repository root (the quickstart notebook failed with
"module 'dml' has no attribute 'save'"). This test runs command 1 exactly as the README writes it
(``$DML_DEMO_QUICK=1`` makes the demo small, as ``--quick`` would), then command 2's install,
and instead of the whole suite (which CI runs anyway) checks what broke: a Python started
elsewhere imports the real package, and the quickstart notebook runs on its embedded cluster.

It installs from the package index (pip's cache makes that fast), so it is slow.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli import check_demo_output
from test_project import readme_commands

ROOT = Path(__file__).resolve().parents[1]
#: The end of command 2 that this test replaces with its targeted checks.
RUN_SUITE = " && .venv/bin/python -m pytest"


def _clean_env(tmp_path: Path) -> dict:
    """The environment of a user's shell: no test session's variables, no active venv, a
    ``python3`` that is this interpreter (the README's commands call ``python3``)."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("PYTEST_", "DML_", "DASK_")) and k != "DML_CACHE_DIR")
           and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "JUPYTER_PATH")}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    # The user's kernel cache is kept (a cold one costs minutes of compiling on 2 cores): with
    # the cache misplaced again, the new package's empty cache would be filled, which is checked.
    # Bytecode: pip's installs do not compile the ~5,800 installed modules (pip's own setting,
    # as a user's pip.conf would set it; the commands stay word for word), and Python writes
    # the .pyc of what it imports as it does by default, so the later processes (demo workers,
    # notebook kernel) read them. pip's uninstall removes such .pyc files too, which the
    # editable install's check below would see.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PIP_COMPILE"] = "0"
    return env


def _run(command: str, cwd: Path, env: dict, timeout: int) -> subprocess.CompletedProcess:
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"`{command}` exited with {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
        f"\n--- stderr\n{proc.stderr[-4000:]}")
    return proc


def _site_packages(venv: Path) -> Path:
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_readme_commands_in_sequence_on_a_clean_clone(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout of dml to clone")
    install_and_demo, install_and_test = readme_commands()
    assert install_and_test.endswith(RUN_SUITE), install_and_test
    install_for_tests = install_and_test[:-len(RUN_SUITE)]

    clone = tmp_path / "dml"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=300)
    env = _clean_env(tmp_path)

    # Command 1 as written: a regular (non-editable) install, then the demo.
    demo_env = {**env, "DML_DEMO_QUICK": "1"}
    demo = _run(install_and_demo, clone, demo_env, timeout=1800)
    check_demo_output(demo.stdout, demo.stderr)
    # The demo writes no files: nothing but the virtualenv and pip's build products appeared.
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=clone,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    installed_by_pip = {"!! .venv/", "!! build/", "!! dml.egg-info/"}
    assert [line for line in status if line and line not in installed_by_pip] == [], status
    installed = _site_packages(clone / ".venv") / "dml"
    assert (installed / "__init__.py").is_file(), "command 1 did not install the package"
    # The demo's numba kernels (trees, k-NN, ALS) are cached in the user cache directory ...
    from dml._paths import user_cache_dir

    cache = user_cache_dir() / "numba"  # this process has the same environment
    assert list(cache.rglob("*.nbi")), f"no compiled kernel in {cache}"
    # ... and nothing beside the installed package's own files.
    compiled = [p for p in installed.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert not compiled, f"numba cache files written into the package: {compiled[:5]}"

    # Command 2's install in the same folder: editable, replacing the regular install.
    _run(install_for_tests, clone, env, timeout=1800)
    assert not installed.exists(), (
        f"{installed} survives the editable install: {sorted(installed.rglob('*'))[:10]}")

    # A Python started outside the repository finds the real package, not a namespace package.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = _run(f"{clone}/.venv/bin/python -c 'import dml; print(dml.__file__); "
                 "print(callable(dml.save))'", elsewhere, env, timeout=300).stdout
    assert probe.split() == [str(clone / "dml" / "__init__.py"), "True"], probe

    # The test that failed that way: the quickstart notebook on its embedded cluster (its
    # kernel starts in a temporary directory, outside the repository).
    out = _run(".venv/bin/python -m pytest -q -n 0 -p no:cacheprovider "
               "tests/test_notebooks.py::test_notebook_on_its_embedded_cluster", clone,
               {**env, "DML_README_CLONE": "1"}, timeout=1200).stdout
    assert "1 passed" in out and "skipped" not in out, out[-2000:]
