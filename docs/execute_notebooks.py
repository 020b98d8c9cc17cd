"""Execute the notebooks and store their outputs, so the documentation site shows them.

The site renders ``notebooks/*.ipynb`` with the outputs stored in them and never runs them
(``nb_execution_mode = "off"`` in docs/conf.py; tests/test_notebooks.py runs them on a cluster).
After changing a notebook, refresh its outputs with::

    python docs/execute_notebooks.py                    # every notebook
    python docs/execute_notebooks.py 04-clustering      # some of them

Each notebook runs top to bottom in a fresh Jupyter kernel of this interpreter, in a temporary
working directory, on the embedded local cluster that ``dml.runtime.connect()`` starts (as on a
user's laptop; ``$DML_SCHEDULER_ADDRESS`` is ignored). The notebooks that read the real data sets
need them in ``$DML_DATA`` (see dml.datasets). What changes from run to run is then taken out of
the stored outputs (:func:`scrub`): timings, ports, addresses and identifiers of the cluster,
execution timestamps. The rest (numbers of the seeded fits, tables, figures) is what a
reader gets by running the notebook.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
KERNEL_NAME = "dml-docs-notebooks"
CELL_TIMEOUT = 900

#: (pattern, replacement) applied to every text output, in order.
VOLATILE = [
    # timings: "0.31 s/epoch", "(12.3 s)", "in 4.2 s", "fit 1.23 s"
    (re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)? ?(ms|s)/(\w+)"), r"… \1/\2"),
    (re.compile(r"\b\d+(?:\.\d+)? ?(ms|s|seconds)\b(?!/)"), r"… \1"),
    # cluster addresses, dashboard ports, identifiers
    (re.compile(r"(tcp|tls|inproc)://[\w.\-]+(?::\d+)?(/[\w.\-/]*)?"), r"\1://…"),
    (re.compile(r"https?://(127\.0\.0\.1|localhost|[\w.\-]+):\d+"), r"http://127.0.0.1:8787"),
    (re.compile(r"\b(Scheduler|Client|LocalCluster|Worker)-[0-9a-f\-]{8,}"), r"\1-…"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "…"),
    # temporary directories, this checkout's location (in warnings: "/path/to/dml/x.py:12")
    (re.compile(r"/tmp/[\w.\-/]+"), "/tmp/…"),
    (re.compile(re.escape(str(ROOT)) + "/"), ""),
]

#: A log record of Dask's (e.g. the nanny killing a slow worker as the cluster closes): it and
#: its traceback lines are dropped from stderr, they are about the machine that ran the notebook.
_DASK_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - distributed\.")
_ANY_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def drop_dask_records(text: str) -> str:
    kept, dropping = [], False
    for line in text.splitlines(keepends=True):
        if _DASK_RECORD.match(line):
            dropping = True
        elif _ANY_RECORD.match(line) or not (line.startswith((" ", "\t", "Traceback"))
                                             or re.match(r"^[\w.]+(Error|Exception)\b", line)
                                             or line.startswith("The above exception")
                                             or not line.strip()):
            dropping = False
        if not dropping:
            kept.append(line)
    return "".join(kept)


def source_hash(nb) -> str:
    """SHA-256 of the notebook's code cells: stored with the outputs, so that a test can tell
    outputs that predate an edit of the code (tests/test_notebooks.py)."""
    import hashlib

    code = "\n\0".join(c.source for c in nb.cells if c.cell_type == "code")
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def scrub_text(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def scrub(nb) -> None:
    """Take what changes from run to run out of an executed notebook, in place."""
    count = 0
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        count += 1
        cell.execution_count = count
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                out["text"] = drop_dask_records(out["text"])
            if "execution_count" in out:
                out["execution_count"] = count
            if "text" in out:
                out["text"] = scrub_text(out["text"])
            for kind, value in list(out.get("data", {}).items()):
                if kind.startswith("text/") or kind == "application/javascript":
                    out["data"][kind] = scrub_text(value if isinstance(value, str)
                                                   else "".join(value))
            # Display ids (progress bars updated in place) are random per run.
            out.get("transient", {}).pop("display_id", None)
            out.pop("transient", None)
        cell.outputs = [o for o in cell.get("outputs", [])
                        if not (o.get("output_type") == "stream" and not o["text"].strip())]
    nb.metadata.pop("widgets", None)
    nb.metadata["dml"] = {"outputs_of": source_hash(nb),
                          "refresh": "python docs/execute_notebooks.py"}


def execute(path: Path, kernel_dir: Path) -> None:
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    with tempfile.TemporaryDirectory(prefix="dml-nb-") as work:
        client = nbclient.NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=CELL_TIMEOUT,
                                         record_timing=False,
                                         resources={"metadata": {"path": work}})
        client.execute()
    scrub(nb)
    nbformat.validate(nb)
    nbformat.write(nb, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="notebooks (default: all), with or without .ipynb")
    args = p.parse_args(argv)
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.names:
        wanted = {n.removesuffix(".ipynb") for n in args.names}
        paths = [q for q in paths if q.stem in wanted]
        missing = wanted - {q.stem for q in paths}
        if missing:
            p.error(f"no such notebook in {NOTEBOOKS}: {sorted(missing)}")
    os.environ.pop("DML_SCHEDULER_ADDRESS", None)
    with tempfile.TemporaryDirectory(prefix="dml-kernel-") as kernels:
        spec = Path(kernels) / "kernels" / KERNEL_NAME
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "dml docs", "language": "python"}))
        os.environ["JUPYTER_PATH"] = kernels
        for path in paths:
            print(f"executing {path.relative_to(ROOT)} ...", flush=True)
            execute(path, Path(kernels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
