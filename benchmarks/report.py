"""``RESULTS.md``: the machine/run header and one section per workload, updated in place.

Each workload section sits between ``<!-- workload: NAME -->`` and ``<!-- /workload: NAME -->``
markers and records its own date, command and machine, so running one workload replaces only
its section and keeps the others (with their own provenance). The header at the top describes
the latest run.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import statistics
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

__all__ = ["ImplResult", "WorkloadResult", "RunInfo", "machine_info", "render_section",
           "render_header", "update_results", "read_sections", "emit"]

TITLE = "# dml benchmarks"
INTRO = """\
Side-by-side fits of dml against scikit-learn, dask-ml and Spark MLlib, written by
`python -m benchmarks.run` (see `benchmarks/run.py`). All implementations run in ONE process
on the same data: a Dask `LocalCluster(n_workers=2, threads_per_worker=1)` holds the Dask
arrays (persisted before timing) used by dml and dask-ml, scikit-learn fits the same NumPy arrays
in the client process, and Spark MLlib (`local[2]`, when pyspark is installed) fits a cached
DataFrame made from them. After one untimed warm-up fit each, the repeats are interleaved
(repeat 1 of every implementation, then repeat 2, ... with the order rotated each repeat) so
load noise hits all of them alike. Times are wall-clock seconds of `fit` only (data conversion
and scoring are untimed); "ratio vs dml" is that implementation's median over dml's median from
the same run (> 1: dml is faster). Quality is measured on the held-out 20%.
"""

_SECTION_RE = re.compile(
    r"<!-- workload: (?P<name>[\w.-]+) -->\n(?P<body>.*?)<!-- /workload: (?P=name) -->\n?",
    re.S)
_HEADER_RE = re.compile(r"<!-- header -->\n.*?<!-- /header -->\n?", re.S)


@dataclass
class ImplResult:
    name: str
    #: "ok", "skipped" (not installed), "unavailable" (no such estimator), "failed".
    status: str
    times: list[float] = field(default_factory=list)
    warmup: float | None = None
    quality: float | None = None
    note: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


@dataclass
class RunInfo:
    date: str
    command: str
    machine: str
    versions: str
    scale: float
    repeat: int
    n_blocks: int
    note: str = ""
    load_before: tuple | None = None
    load_after: tuple | None = None


@dataclass
class WorkloadResult:
    name: str
    title: str
    data: str
    shape: tuple[int, int, int]
    metric: str
    rows: list[ImplResult]
    target_text: str | None = None
    target_reference: str = ""
    target_check: list[str] = field(default_factory=list)
    not_selected: list[str] = field(default_factory=list)
    memory: str = ""
    load_before: tuple | None = None
    load_after: tuple | None = None
    #: Dask row blocks used for this workload (None: the run's ``--blocks``).
    n_blocks: int | None = None


# --------------------------------------------------------------------------------------------
# Machine / versions
# --------------------------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True,
                             capture_output=True, timeout=10).stdout.strip()
        return sha or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _java_version() -> str | None:
    try:
        out = subprocess.run(["java", "-version"], text=True, capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    first = (out.stderr or out.stdout).strip().splitlines()
    return first[0] if first else None


def machine_info(with_spark: bool = False) -> tuple[str, str]:
    """(machine line, versions line) for the header."""
    import numpy as np
    import psutil

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        usable = os.cpu_count()
    ram = psutil.virtual_memory().total / 2**30
    machine = (f"{_cpu_model()}; {os.cpu_count()} logical cores ({usable} usable); "
               f"{ram:.1f} GiB RAM; {platform.system()} {platform.release()}")
    parts = [f"Python {platform.python_version()}", f"numpy {np.__version__}"]
    for dist, label in (("scipy", "scipy"), ("dask", "dask"), ("distributed", "distributed"),
                        ("scikit-learn", "scikit-learn"), ("dask-ml", "dask-ml"),
                        ("pandas", "pandas"), ("pyspark", "pyspark")):
        v = _version(dist)
        parts.append(f"{label} {v}" if v else f"{label} not installed")
    parts.append(f"dml {_version('dml') or '?'} (git {_git_commit()})")
    try:
        from threadpoolctl import threadpool_info

        blas = [f"{i.get('internal_api')} {i.get('num_threads')} threads"
                for i in threadpool_info() if i.get("user_api") == "blas"]
        if blas:
            parts.append("client BLAS: " + ", ".join(blas))
    except ImportError:  # pragma: no cover
        pass
    if with_spark:
        java = _java_version()
        if java:
            parts.append(java)
    return machine, "; ".join(parts)


def now() -> str:
    return _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

def _fmt_load(load) -> str:
    return "/".join(f"{x:.2f}" for x in load) if load else "?"


def render_header(run: RunInfo) -> str:
    lines = [
        "<!-- header -->",
        f"Latest run: {run.date}",
        "",
        f"- Machine: {run.machine}",
        f"- Versions: {run.versions}",
        f"- Command: `{run.command}`",
        f"- Scale {run.scale:g}, {run.repeat} timed repeat(s) after 1 warm-up, Dask data in "
        f"{run.n_blocks} blocks; load average (1/5/15 min) {_fmt_load(run.load_before)} before, "
        f"{_fmt_load(run.load_after)} after",
    ]
    if run.note:
        lines += ["", f"**{run.note}**"]
    lines.append("<!-- /header -->")
    return "\n".join(lines) + "\n"


def _fmt_time(t: float | None) -> str:
    if t is None:
        return "—"
    return f"{t:.3f}" if t < 100 else f"{t:.1f}"


def render_section(w: WorkloadResult, run: RunInfo) -> str:
    n_train, n_test, d = w.shape
    dml = next((r.median for r in w.rows if r.name == "dml" and r.median), None)
    out = [f"<!-- workload: {w.name} -->", f"## {w.name}: {w.title}", ""]
    if run.note:
        out += [f"**{run.note}**", ""]
    out += [
        f"Data: {w.data}. Fit on {n_train:,} × {d} rows, quality on {n_test:,} held-out rows.",
        "",
        f"Measured {run.date} with `{run.command}` (scale {run.scale:g}, {run.repeat} "
        f"repeat(s) + warm-up, {w.n_blocks or run.n_blocks} Dask blocks; load average "
        f"{_fmt_load(w.load_before)} → {_fmt_load(w.load_after)}) on: {run.machine}.",
        "",
        f"| implementation | fit median (s) | min–max (s) | {w.metric} | time ratio vs dml "
        "| notes |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in w.rows:
        if r.status == "ok":
            med = r.median
            rng = f"{_fmt_time(min(r.times))}–{_fmt_time(max(r.times))}"
            ratio = f"{med / dml:.2f}×" if dml else "—"
            quality = f"{r.quality:.4f}" if r.quality is not None else "—"
            out.append(f"| {r.name} | {_fmt_time(med)} | {rng} | {quality} | {ratio} | "
                       f"{r.note} |")
        else:
            out.append(f"| {r.name} | — | — | — | — | {r.status}: {r.note} |")
    out.append("")
    if w.not_selected:
        out += [f"Not run this time: {', '.join(w.not_selected)}.", ""]
    if w.target_text:
        line = f"Target: {w.target_text}"
        if w.target_reference:
            line += f" ({w.target_reference})"
        out.append(line + ".")
        if w.target_check:
            out.append("This run: " + "; ".join(w.target_check) + ".")
        out.append("")
    if w.memory:
        out += [f"Memory: {w.memory}.", ""]
    out.append(f"<!-- /workload: {w.name} -->")
    return "\n".join(out) + "\n"


def read_sections(text: str) -> dict[str, str]:
    """The workload sections of an existing RESULTS.md, keyed by workload name."""
    return {m.group("name"): m.group(0).rstrip("\n") + "\n" for m in _SECTION_RE.finditer(text)}


def update_results(path: str | Path, run: RunInfo, sections: dict[str, str],
                   order: list[str]) -> str:
    """Write ``path`` with the new header and sections, keeping the other workloads' sections.

    ``order`` is the registry's workload order; sections of workloads no longer registered are
    kept at the end.
    """
    path = Path(path)
    old = read_sections(path.read_text()) if path.exists() else {}
    merged = {**old, **sections}
    names = [n for n in order if n in merged] + sorted(n for n in merged if n not in order)
    text = "\n".join([TITLE, "", INTRO, render_header(run)] + [merged[n] for n in names])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def emit(text: str, output: str | None) -> None:
    """Print a stand-alone benchmark's table, and also write it to ``output`` when given."""
    print(text)
    if output:
        with open(output, "w") as fh:
            fh.write(text + "\n")
