"""Job files: the one declared schema, the files generated from it, and every job file shown to
users (README.md and deploy/jobs/) validated and, when cheap, trained as written."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import dml
from dml import cli
from dml.cli import _schema

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "deploy" / "jobs"
JOB_FILES = sorted(JOBS.glob("*.yaml"))
# Trained as written on an in-process cluster (seconds each); the others are trained on a small
# copy (generated data shrunk to 4,000 rows, a forest of 5 trees, at most 3 epochs), everything
# else as written.
CHEAP = {"adult_nb.yaml", "adult_logistic.yaml", "adult_linear_svc.yaml", "synthetic_nb.yaml",
         "text_libsvm_nb.yaml"}


def readme_job() -> str:
    """The job file shown in README.md."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1, "README.md shows one job file"
    return blocks[0]


def run(capsys, *args) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def movielens_dir(tmp_path, monkeypatch):
    """$DML_DATA with a small ratings.csv in MovieLens' layout, for movielens_mf.yaml."""
    rng = np.random.default_rng(0)
    n = 3000
    users, items = rng.integers(1, 60, n), rng.integers(1, 120, n)
    rating = np.clip(np.round((users % 5 + items % 3) / 2 + rng.normal(0, 0.3, n) + 1, 1), 0.5, 5)
    folder = tmp_path / "data" / "movielens-small"
    folder.mkdir(parents=True)
    pd.DataFrame({"userId": users, "movieId": items, "rating": rating,
                  "timestamp": np.arange(n)}).to_csv(folder / "ratings.csv", index=False)
    monkeypatch.setenv("DML_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


# --------------------------------------------------------------------------------------------
# one source of truth
# --------------------------------------------------------------------------------------------

def test_json_schema_file_is_generated_from_the_declaration():
    committed = json.loads((JOBS / "job.schema.json").read_text())
    assert committed == _schema.json_schema(), (
        "deploy/jobs/job.schema.json is stale; rewrite it with "
        "python -c 'from dml.cli._schema import write_generated; write_generated()'")


def test_reference_page_is_generated_from_the_declaration():
    text = (JOBS / "README.md").read_text()
    assert _schema.BEGIN in text and _schema.END in text
    assert text == _schema.generated_readme(text, JOBS), (
        "deploy/jobs/README.md is stale; rewrite it with "
        "python -c 'from dml.cli._schema import write_generated; write_generated()'")
    # every job file and every declared field appears on the page
    for path in JOB_FILES:
        assert f"`{path.name}`" in text
    for dotted, _ in _schema._rows(_schema.JOB_SCHEMA, ""):
        assert f"| `{dotted}` |" in text


def test_help_prints_the_declared_fields_not_a_copy(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    out = capsys.readouterr().out
    assert _schema.help_text().splitlines()[2].strip() in out
    for dotted, _ in _schema._rows(_schema.JOB_SCHEMA, ""):
        assert f" {dotted.rsplit('.', 1)[-1]}: " in out, dotted


def test_every_job_file_matches_the_json_schema():
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(_schema.json_schema())
    for path in JOB_FILES:
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
        assert not errors, (path.name, [e.message for e in errors])
    assert not list(validator.iter_errors(yaml.safe_load(readme_job())))
    # ... and the schema refuses what load_job refuses
    for bad in ({"data": "a.csv", "target": "y", "modle": "x", "model": "gaussian_nb"},
                {"data": "a.csv", "target": "y", "model": "m", "split": {"test_size": 1.5}},
                {"data": {"path": "a.csv", "generator": "make_blobs"}, "model": "m"},
                {"data": "a.csv", "model": "m", "preprocessing": [{"a": 1, "b": 2}]}):
        assert list(validator.iter_errors(bad)), bad


@pytest.mark.parametrize("doc, where, message", [
    ({"split": {"test_size": "abc"}}, "split.test_size",
     "expected a number between 0 and 1, got 'abc'"),
    ({"split": {"random_state": -1}}, "split.random_state",
     "expected a non-negative integer or null, got -1"),
    ({"search": {"grid": {"alpha": []}, "cv": 1}}, "search.cv", "expected an integer >= 2"),
    ({"search": {"grid": {"alpha": []}}}, "search.grid.alpha",
     "expected a non-empty list of values, got a list []"),
    ({"scheduler": {"n_workers": 0}}, "scheduler.n_workers", "expected a positive integer"),
    ({"scheduler": {"tls": {"ca_fil": "x"}}}, "scheduler.tls.ca_fil",
     "unknown field 'ca_fil'; did you mean 'ca_file'?"),
    ({"data": {"path": "x.csv", "format": "json"}}, "data.format",
     "expected one of csv, tsv, parquet, libsvm, got 'json'"),
    ({"preprocessing": "sometimes"}, "preprocessing",
     "expected auto, none, false or null or a list of steps, got 'sometimes'"),
    ({"features": [1, 2]}, "features", "expected a list of column names"),
])
def test_structural_checks_come_from_the_declaration(doc, where, message):
    errors = _schema.Errors("job.yaml")
    _schema.check(_schema.JOB_SCHEMA, doc, "", errors)
    assert any(e.startswith(f"job.yaml: {where}: ") and message in e for e in errors.errors), \
        errors.errors


# --------------------------------------------------------------------------------------------
# dml validate
# --------------------------------------------------------------------------------------------

def test_validate_accepts_every_example_job(capsys, movielens_dir):
    code, out, err = run(capsys, "validate", *JOB_FILES)
    assert code == 0, err
    assert out.count(": valid (") == len(JOB_FILES)
    assert "Dask" not in err and "dashboard" not in err  # no cluster


def test_validate_reports_every_problem_by_field(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("data: {path: nope.csv}\nmodle: {name: x}\nsplit: {test_size: 2}\n")
    code, out, err = run(capsys, "validate", job)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert all(line.startswith(f"dml validate: error: {job}: ") for line in lines), err
    assert {line.split(": ")[3] for line in lines} >= {"data.path", "modle", "split.test_size",
                                                       "model", "target"}


def test_validate_checks_columns_without_a_cluster(tmp_path, capsys):
    """The README's old example: its text columns were neither encoded nor left out."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "adult.csv").write_text(
        (JOBS / "data" / "adult_sample.csv").read_text())
    job = tmp_path / "job.yaml"
    job.write_text("data: {path: data/adult.csv}\ntarget: income\npreprocessing:\n"
                   "  - one_hot: [education]\n  - standard_scaler: [age]\n"
                   "model: bernoulli_nb\n")
    code, _, err = run(capsys, "validate", job)
    assert code == 2
    assert f"{job}: preprocessing: columns ['type_employer', " in err
    assert "are not numeric and no step encodes them" in err


# --------------------------------------------------------------------------------------------
# every job file shown to users runs as written
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_readme_job_runs_as_written(tmp_path, capsys, inprocess_client):
    """README.md's job file, saved as job.yaml in a checkout's root: validate, then train."""
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")
    job = tmp_path / "job.yaml"
    job.write_text(readme_job())
    code, out, err = run(capsys, "validate", job)
    assert code == 0, err
    code, out, err = run(capsys, "train", job)
    assert code == 0, err
    doc = yaml.safe_load(readme_job())
    output = tmp_path / doc["output"]
    report = json.loads((output / "metrics.json").read_text())
    assert set(report["metrics"]) == set(doc["metrics"])
    assert report["metrics"]["accuracy"] > 0.7
    assert dml.load(output / "model.dml").steps[0][0] == "preprocess"


def _small_copy(path: Path, tmp_path: Path) -> Path:
    """The job with less work: generated data of 4,000 rows in 2 chunks, at most 5 trees and at
    most 3 epochs."""
    doc = yaml.safe_load(path.read_text())
    if "generator" in doc["data"]:
        doc["data"]["params"].update(n_samples=4000, chunks=2000)
    elif not doc["data"]["path"].startswith("$"):  # a path relative to the job file
        doc["data"]["path"] = str(path.parent / doc["data"]["path"])
    params = doc["model"].get("params", {})
    for name, most in (("n_estimators", 5), ("max_iter", 3), ("n_epochs", 3)):
        if name in params:
            params[name] = min(params[name], most)
    (tmp_path / "small").mkdir(exist_ok=True)
    small = tmp_path / "small" / path.name
    small.write_text(yaml.safe_dump(doc))
    return small


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # fewer epochs
@pytest.mark.parametrize("path", JOB_FILES, ids=[p.stem for p in JOB_FILES])
def test_example_job_trains(path, tmp_path, capsys, inprocess_client, movielens_dir):
    doc = yaml.safe_load(path.read_text())
    job = path if path.name in CHEAP else _small_copy(path, tmp_path)
    assert "checkpoint_dir" not in doc["model"].get("params", {}), \
        f"{path.name}: a checkpoint_dir would be written outside tmp_path"
    code, out, err = run(capsys, "train", job, "--output", tmp_path / "out")
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert report["model"] == doc["model"]["name"]
    assert set(report["metrics"]) == {cli_short(m) for m in doc["metrics"]}
    assert all(np.isfinite(v) for v in report["metrics"].values() if isinstance(v, float))


def cli_short(name: str) -> str:
    from dml.model_selection import metric_info

    return metric_info(name).short


def test_example_jobs_do_not_need_network_or_secrets():
    for path in JOB_FILES:
        doc = yaml.safe_load(path.read_text())
        assert "scheduler" not in doc, f"{path.name}: examples run on any cluster"
        data = doc["data"]
        if "path" in data:
            assert "://" not in data["path"], path.name
    assert os.sep not in yaml.safe_load(readme_job()).get("name", "")


def _libsvm_glob(folder: Path) -> None:
    """Two small libsvm files of sparse counts whose label follows the first half's mass."""
    import scipy.sparse as sp
    from sklearn.datasets import dump_svmlight_file

    X = sp.random(120, 30, density=0.2, format="csr", random_state=0) * 5
    y = (X[:, :15].sum(axis=1).A.ravel() > X[:, 15:].sum(axis=1).A.ravel()).astype(int)
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(2):
        rows = slice(60 * k, 60 * (k + 1))
        dump_svmlight_file(X[rows], y[rows], str(folder / f"part{k}.svm"), zero_based=True)


def test_libsvm_job_trains_on_sparse_blocks(tmp_path, capsys, inprocess_client):
    _libsvm_glob(tmp_path / "data")
    job = tmp_path / "job.yaml"
    job.write_text("data: {path: data/part*.svm, options: {n_features: 30}}\n"
                   "model: {name: multinomial_nb}\n"
                   "split: {test_size: 0.25, random_state: 0}\n"
                   "metrics: [accuracy, log_loss]\n")
    code, out, err = run(capsys, "validate", job)
    assert code == 0 and "sparse libsvm features" in out, err
    code, out, err = run(capsys, "train", job, "--output", tmp_path / "out")
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert report["rows"]["train"] + report["rows"]["evaluated"] == 120
    assert report["metrics"]["accuracy"] > 0.6
    model = dml.load(tmp_path / "out" / "model.dml")
    assert model[-1].n_features_in_ == 30

    # evaluate and predict read the same glob as sparse blocks, in the model's columns.
    import scipy.sparse as sp
    from sklearn.datasets import load_svmlight_files
    from sklearn.metrics import accuracy_score

    files = sorted((tmp_path / "data").glob("part*.svm"))
    parts = load_svmlight_files([str(f) for f in files], n_features=30, zero_based=True)
    X = sp.vstack(parts[0::2], format="csr")
    y = np.concatenate(parts[1::2])
    expected = model.predict(X)
    code, out, err = run(capsys, "evaluate", tmp_path / "out" / "model.dml",
                         tmp_path / "data" / "part*.svm", "--json", "--metrics", "accuracy")
    assert code == 0, err
    result = json.loads(out)
    assert result["rows"] == 120
    assert result["metrics"]["accuracy"] == pytest.approx(accuracy_score(y, expected))
    code, out, err = run(capsys, "predict", tmp_path / "out" / "model.dml",
                         tmp_path / "data" / "part0.svm", "--output", tmp_path / "p.csv",
                         "--keep", "y", "--proba")
    assert code == 0, err
    written = pd.read_csv(tmp_path / "p.csv")
    # libsvm labels are read as floats, as scikit-learn reads them
    assert list(written.columns) == ["y", "prediction", "proba_0.0", "proba_1.0"]
    np.testing.assert_array_equal(written["prediction"], expected[:60])  # file order
    np.testing.assert_array_equal(written["y"], y[:60])
    np.testing.assert_allclose(written["proba_1.0"], model.predict_proba(X[:60])[:, 1])
    code, out, err = run(capsys, "predict", tmp_path / "out" / "model.dml",
                         tmp_path / "data" / "part*.svm", "--output", tmp_path / "all")
    assert code == 0, err
    np.testing.assert_array_equal(pd.read_parquet(tmp_path / "all")["prediction"], expected)


def test_libsvm_evaluate_and_predict_errors(tmp_path, capsys):
    _libsvm_glob(tmp_path / "data")
    model = dml.naive_bayes.MultinomialNB().fit(np.ones((2, 3)), [0, 1])
    dml.save(model, tmp_path / "m.dml")
    data = tmp_path / "data" / "part0.svm"
    code, _, err = run(capsys, "evaluate", tmp_path / "m.dml", data, "--target", "label")
    assert code == 2 and "--target: libsvm data has one label, named y" in err
    code, _, err = run(capsys, "predict", tmp_path / "m.dml", data, "--output",
                       tmp_path / "p.csv", "--keep", "a")
    assert code == 2 and "--keep: libsvm data has no named columns" in err


def test_libsvm_evaluate_needs_the_model_columns(tmp_path, capsys, inprocess_client):
    _libsvm_glob(tmp_path / "data")
    model = dml.naive_bayes.MultinomialNB().fit(np.ones((2, 3)), [0, 1])
    dml.save(model, tmp_path / "m.dml")
    code, _, err = run(capsys, "evaluate", tmp_path / "m.dml", tmp_path / "data" / "part0.svm")
    assert code == 1 and "the model was trained on 3 features" in err, err


def test_libsvm_job_rejects_columns(tmp_path, capsys):
    _libsvm_glob(tmp_path / "data")
    job = tmp_path / "job.yaml"
    job.write_text("data: {path: data/part*.svm}\ntarget: label\nfeatures: [a, b]\n"
                   "preprocessing: [standard_scaler: null]\nmodel: {name: multinomial_nb}\n")
    code, out, err = run(capsys, "validate", job)
    assert code != 0
    assert "libsvm data has one label, named y" in err
    assert err.count("libsvm data has no named columns") == 2
