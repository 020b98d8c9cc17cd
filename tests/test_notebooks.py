"""Every notebook in ``notebooks/`` runs headless, top to bottom, and draws its figures.

The notebooks are executed with nbclient in a Jupyter kernel of *this* interpreter (a kernelspec
written to a temporary directory, so a virtualenv's kernel is used even when its ``bin/`` is not
on ``PATH``). A failing cell raises ``nbclient.exceptions.CellExecutionError`` with the cell's
traceback, which fails the test as it is.

Clusters:

* the notebooks reach a cluster through ``dml.runtime.connect()``, which honours
  ``$DML_SCHEDULER_ADDRESS``. Most tests point it at an in-process ``LocalCluster`` of this test
  process (TCP, so that the kernel process can connect) shared by the module;
* the quickstart runs with the variable unset instead, so it starts (and closes) its own embedded
  cluster as a user's would;
* one runs the quickstart on the multi-process cluster (``dask scheduler`` / ``dask worker``).

The kernel's working directory is a temporary directory, so nothing a notebook writes lands in the
repository.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import nbclient
import nbformat
import pytest
from distributed import LocalCluster

# Not skipped when missing: nbclient, nbformat, ipykernel and matplotlib are in the test extra,
# and a notebook run that silently skips would hide exactly the breakage these tests are for.

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

#: The notebooks and the figures each must render at least (image/png outputs).
EXPECTED_FIGURES = {
    "01-quickstart.ipynb": 2,      # loss curve, confusion matrix
    "02-recommender.ipynb": 2,     # RMSE curves, ranking metrics
    "03-forest-and-search.ipynb": 3,  # cv_results_, feature importances, ROC curves
    "04-clustering.ipynb": 3,      # elbow + gap, silhouette, cluster plot
    "05-neural-network.ipynb": 3,  # sample digits, per-epoch curves, learning curve
    "06-kernel-features.ipynb": 3,  # the circles, accuracies, decision boundary
    "07-text-classification.ipynb": 2,  # accuracies, confusion matrix
}

#: Notebooks that read the real data sets (MovieLens, UCI Adult) with dml.datasets' loaders: run
#: with $DML_DATA set by the ``dml_data`` fixture (tests/conftest.py), skipped without the data.
NEEDS_SHARED_DATA = {"02-recommender.ipynb", "03-forest-and-search.ipynb"}

#: The notebook run on its own embedded cluster instead of the shared in-process one (starting
#: worker processes costs time, so each notebook runs on one of the two, not both).
EMBEDDED = "01-quickstart.ipynb"

KERNEL_NAME = "dml-notebook-tests"
#: Per-cell limit: every notebook is meant to run in well under a minute on 2 cores.
CELL_TIMEOUT = 300


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory, monkeypatch_module):
    """A kernelspec that starts ipykernel with this interpreter, found through $JUPYTER_PATH."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "dml tests", "language": "python"}))
    monkeypatch_module.setenv("JUPYTER_PATH", str(root))
    return root


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def tcp_inprocess_cluster():
    """An in-process LocalCluster the kernel can reach: TCP, not the default inproc transport."""
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                           protocol="tcp://", host="127.0.0.1", dashboard_address=":0")
    try:
        yield cluster
    finally:
        cluster.close()


def run_notebook(name: str, workdir: Path, monkeypatch, address: str | None):
    """Execute ``notebooks/<name>`` in a fresh kernel; returns the executed notebook."""
    if address is None:
        monkeypatch.delenv("DML_SCHEDULER_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("DML_SCHEDULER_ADDRESS", address)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=CELL_TIMEOUT,
                                     resources={"metadata": {"path": str(workdir)}})
    t0 = time.perf_counter()
    client.execute()  # CellExecutionError (with the cell's traceback) fails the test
    print(f"{name}: {time.perf_counter() - t0:.1f} s")
    return nb


def outputs(nb, kind: str | None = None):
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if kind is None or kind in out.get("data", {}):
                yield out


def count_figures(nb) -> int:
    return sum(1 for _ in outputs(nb, "image/png"))


def check_executed(nb, name: str) -> None:
    assert count_figures(nb) >= EXPECTED_FIGURES[name], (
        f"{name} rendered {count_figures(nb)} figures, expected at least "
        f"{EXPECTED_FIGURES[name]}")
    html = "".join(o["data"]["text/html"] for o in outputs(nb, "text/html"))
    assert "Dask dashboard" in html, f"{name} does not show the dashboard link"
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    if 'progress="notebook"' in source:
        # The kernel is a Jupyter kernel, so the fits drew the HTML bar (not the text line).
        assert 'class="dml-progress"' in html, f"{name} shows no progress bar"


def _docs_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("execute_notebooks",
                                                  ROOT / "docs" / "execute_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_notebooks_are_stored_with_the_outputs_of_their_code():
    """The documentation site shows the stored outputs (it never runs the notebooks): each
    notebook is stored executed top to bottom by docs/execute_notebooks.py, from its current
    code, with its figures, without errors or run-specific values."""
    tool = _docs_tool()
    found = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert found == sorted(EXPECTED_FIGURES)
    for name in found:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        source = "\n".join(c.source for c in code)
        assert "dml.runtime.connect()" in source and "client.close()" in source
        refresh = f"run `python docs/execute_notebooks.py {name[:-6]}`"
        assert nb.metadata.get("dml", {}).get("outputs_of") == tool.source_hash(nb), (
            f"{name}: the stored outputs are not those of its current code; {refresh}")
        assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), (
            f"{name} was not executed top to bottom in one kernel; {refresh}")
        # Every code cell but the imports and the closing client.close() shows something.
        silent = [c.source.splitlines()[0] for c in code[1:-1] if not c.outputs]
        assert len(silent) <= len(code) // 3, f"{name}: cells without outputs: {silent}"
        assert not [o for c in code for o in c.outputs if o.output_type == "error"], name
        assert count_figures(nb) >= EXPECTED_FIGURES[name], f"{name}: figures missing"
        # Nothing run-specific (timings, ports, addresses) is stored: scrubbing changes nothing.
        stored = nbformat.writes(nb)
        tool.scrub(nb)
        assert nbformat.writes(nb) == stored, f"{name} holds run-specific values; {refresh}"
    assert (NOTEBOOKS / "README.md").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in EXPECTED_FIGURES if n != EMBEDDED])
def test_notebook_on_inprocess_cluster(name, kernel_dir, tcp_inprocess_cluster, tmp_path,
                                       monkeypatch, request):
    if name in NEEDS_SHARED_DATA:
        request.getfixturevalue("dml_data")  # $DML_DATA for the kernel, or skip with the reason
    nb = run_notebook(name, tmp_path, monkeypatch, tcp_inprocess_cluster.scheduler_address)
    check_executed(nb, name)
    # Model files go to the notebook's own temporary directory, not the working directory.
    assert not list(tmp_path.rglob("*.dml"))


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("DML_README_CLONE") != "1",
                    reason="runs in tests/test_readme_commands.py, inside the clean clone its "
                           "README commands installed (set DML_README_CLONE=1 to run it here)")
def test_notebook_on_its_embedded_cluster(kernel_dir, tmp_path, monkeypatch):
    """No $DML_SCHEDULER_ADDRESS: connect() starts a local cluster in the kernel, and the
    notebook's client.close() shuts it down. The quickstart, because that is how most users
    will first run it. The full suite runs it once, in the README test's clean clone (after
    both README commands' installs), rather than twice."""
    name = EMBEDDED
    nb = run_notebook(name, tmp_path, monkeypatch, address=None)
    check_executed(nb, name)
    text = "".join(o.get("text", "") for o in outputs(nb) if o.get("output_type") == "stream")
    assert "workers at tcp://127.0.0.1:" in text
    assert not list(tmp_path.rglob("*.dml"))


@pytest.mark.slow
@pytest.mark.multiprocess
def test_quickstart_on_multiprocess_cluster(kernel_dir, process_cluster, tmp_path, monkeypatch):
    """The quickstart against `dask scheduler` / `dask worker` processes, as a deployed cluster."""
    name = "01-quickstart.ipynb"
    nb = run_notebook(name, tmp_path, monkeypatch, process_cluster.address)
    check_executed(nb, name)
    text = "".join(o.get("text", "") for o in outputs(nb) if o.get("output_type") == "stream")
    assert f"2 workers at {process_cluster.address}" in text
    assert "same predictions: True" in text
