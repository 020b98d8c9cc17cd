"""Smoke run of the benchmark runner (``python -m benchmarks.run``) at a tiny scale.

Checks the runner end to end (its own LocalCluster, data preparation, warm-up, timing, scoring,
RESULTS.md merge), never timings: speed goals live in ``benchmarks/``.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package of the checkout, not installed
    sys.path.insert(0, str(ROOT))

pytest.importorskip("dml.naive_bayes")


@pytest.mark.slow
def test_runner_writes_tables_and_keeps_other_sections(tmp_path):
    from benchmarks import run

    out = tmp_path / "RESULTS.md"
    kept = ("<!-- workload: some_old_workload -->\n## some_old_workload\n\nkept table\n"
            "<!-- /workload: some_old_workload -->\n")
    out.write_text("# old header\n\n" + kept)

    code = run.main(["--workloads", "nb_gaussian", "nb_multinomial", "--implementations", "dml",
                     "sklearn", "--repeat", "1", "--scale", "0.002", "--output", str(out)])
    assert code == 0
    text = out.read_text()

    assert "Command: `python -m benchmarks.run --workloads nb_gaussian nb_multinomial" in text
    assert kept in text, "the section of a workload that was not rerun must be kept"
    number = r"\d+\.\d+"
    for workload in ("nb_gaussian", "nb_multinomial"):
        section = re.search(rf"<!-- workload: {workload} -->.*?<!-- /workload: {workload} -->",
                            text, re.S).group(0)
        assert "| implementation | fit median (s) | min–max (s) | test accuracy" in section
        for impl in ("dml", "sklearn"):
            row = re.search(rf"^\| {impl} \| ({number}) \| ({number})–({number}) \| "
                            rf"({number}) \| ({number})× \|", section, re.M)
            assert row, f"no timed row for {impl} in {workload}:\n{section}"
            assert 0.5 < float(row.group(4)) <= 1.0  # accuracy of a real fit
        assert re.search(r"^\| dml \| .* \| 1\.00× \|", section, re.M)
        assert "Not run this time:" in section and "spark" in section
        assert "This run: dml/sklearn = " in section
    assert "unavailable: dask-ml has no MultinomialNB" not in text  # dask-ml was not selected
