"""The ``dml`` command end to end (subprocesses), job-file validation and the blockwise split."""
from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dml
from dml import cli, registry

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "deploy" / "jobs"


def run_cli(*args, timeout=240, env=None, cwd=None) -> subprocess.CompletedProcess:
    """``python -m dml.cli ARGS`` in a fresh process, as a user would run ``dml``."""
    full_env = dict(os.environ)
    for var in ("DML_SCHEDULER_ADDRESS", "DML_MODEL_KEY"):
        full_env.pop(var, None)
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "dml.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=full_env,
                          cwd=cwd)


def assert_ok(proc):
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\n" \
                                 f"stderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr


def small_frame(n=600, seed=1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], n)
    size = rng.integers(0, 5, n)
    weight = rng.normal(size=n)
    score = weight + (colour == "red") * 1.5 + size * 0.3 + rng.normal(scale=0.5, size=n)
    return pd.DataFrame({"colour": colour, "size": size, "weight": weight,
                         "label": np.where(score > 1.0, "good", "bad")})


@pytest.fixture
def project(tmp_path):
    """tmp/data/small.csv (and two part files) + tmp/jobs/, as a user's project would look."""
    (tmp_path / "data" / "parts").mkdir(parents=True)
    (tmp_path / "jobs").mkdir()
    df = small_frame()
    df.to_csv(tmp_path / "data" / "small.csv", index=False)
    df.iloc[:300].to_csv(tmp_path / "data" / "parts" / "part-0.csv", index=False)
    df.iloc[300:].to_csv(tmp_path / "data" / "parts" / "part-1.csv", index=False)
    return tmp_path


def write_job(project: Path, text: str, name="job.yaml") -> Path:
    path = project / "jobs" / name
    path.write_text(text)
    return path


GOOD_JOB = """\
name: small
data: {path: ../data/small.csv}
target: label
preprocessing:
  - one_hot: [colour]
  - standard_scaler:
model: {name: gaussian_nb}
split: {test_size: 0.25, random_state: 0}
metrics: [accuracy, f1, log_loss, roc_auc, confusion_matrix]
"""


# --------------------------------------------------------------------------------------------
# end to end on the multi-process cluster
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.multiprocess
def test_train_evaluate_predict_on_process_cluster(project, process_cluster):
    job = write_job(project, GOOD_JOB)
    out = project / "out"
    address = process_cluster.address

    # train: relative data path resolved against the job file, run on the real cluster
    proc = run_cli("train", job, "--scheduler", address, "--output", out, cwd=project / "data")
    assert_ok(proc)
    assert f"Dask: {address}" in proc.stderr
    assert "accuracy" in proc.stdout and "confusion matrix" in proc.stdout
    report = json.loads((out / "metrics.json").read_text())
    assert report["rows"]["train"] + report["rows"]["evaluated"] == 600
    assert 100 < report["rows"]["evaluated"] < 200
    assert set(report["metrics"]) == {"accuracy", "f1", "log_loss", "roc_auc", "confusion_matrix"}
    assert report["metrics"]["accuracy"] > 0.7
    cm = report["metrics"]["confusion_matrix"]
    assert cm["labels"] == ["bad", "good"]
    assert sum(map(sum, cm["matrix"])) == report["rows"]["evaluated"]

    # the saved file is the whole pipeline: preprocessing + model
    model = dml.load(out / "model.dml")
    assert [name for name, _ in model.steps] == ["preprocess", "model"]
    df = small_frame()
    features = ["colour", "size", "weight"]
    expected = model.predict(df[features])
    expected_accuracy = float(np.mean(expected == df["label"].to_numpy()))

    # evaluate: same numbers as the loaded model on pandas
    proc = run_cli("evaluate", out / "model.dml", project / "data" / "small.csv",
                   "--target", "label", "--metrics", "accuracy,f1_macro", "--json",
                   "--scheduler", address)
    assert_ok(proc)
    result = json.loads(proc.stdout)
    assert result["rows"] == 600
    assert result["metrics"]["accuracy"] == pytest.approx(expected_accuracy, abs=1e-12)

    # predict to CSV with probabilities and a kept column
    proc = run_cli("predict", out / "model.dml", project / "data" / "small.csv",
                   "--output", project / "pred.csv", "--proba", "--keep", "label",
                   "--scheduler", address)
    assert_ok(proc)
    pred = pd.read_csv(project / "pred.csv")
    assert list(pred.columns) == ["label", "prediction", "proba_bad", "proba_good"]
    np.testing.assert_array_equal(pred["prediction"].to_numpy(), expected)
    np.testing.assert_allclose(pred[["proba_bad", "proba_good"]].sum(axis=1), 1.0)
    np.testing.assert_allclose(pred[["proba_bad", "proba_good"]].to_numpy(),
                               model.predict_proba(df[features]), rtol=1e-9)

    # multi-file data -> a Parquet directory written by the workers (in-process: same code)
    code = cli.main(["predict", str(out / "model.dml"),
                     str(project / "data" / "parts" / "part-*.csv"),
                     "--output", str(project / "pred_dir"), "--scheduler", address])
    assert code == 0
    assert len(list((project / "pred_dir").glob("*.parquet"))) == 2
    pq = pd.read_parquet(project / "pred_dir")
    np.testing.assert_array_equal(pq["prediction"].to_numpy(), expected)
    # ... and never into a directory that already holds files
    code = cli.main(["predict", str(out / "model.dml"),
                     str(project / "data" / "parts" / "part-*.csv"),
                     "--output", str(project / "pred_dir"), "--scheduler", address])
    assert code == 2


@pytest.mark.multiprocess
@pytest.mark.parametrize("name, metric, floor", [("synthetic_nb.yaml", "f1_macro", 0.5),
                                                 ("adult_nb.yaml", "accuracy", 0.7)])
def test_example_jobs_on_process_cluster(process_cluster, tmp_path, capsys, name, metric, floor):
    code = cli.main(["train", str(EXAMPLES / name), "--scheduler", process_cluster.address,
                     "--output", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["metrics"][metric] > floor, report
    assert dml.load(tmp_path / "model.dml").steps[-1][0] == "model"


def check_demo_output(stdout: str, stderr: str) -> None:
    """The demo's metrics table has a sensible row for every entry of ``cli.DEMOS`` and it
    printed the dashboard's address. Run by tests/test_readme_commands.py, whose README command 1
    is ``dml demo`` itself (small with ``$DML_DEMO_QUICK``): one demo run checks both."""
    assert "dashboard: http" in stderr
    lines = stdout.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.split()[:4] ==
                       ["model", "data", "rows", "fit"]):]
    # Columns by the spans of the dashed rule under the header (cells may contain spaces).
    spans = [m.span() for m in re.finditer(r"-+", lines[1])]
    header = [lines[0][a:b].strip() for a, b in spans]
    for entry in cli.DEMOS:
        line = next(line for line in lines if line.startswith(entry.model + " "))
        row = dict(zip(header, (line[a:b].strip() for a, b in spans)))
        if row["accuracy"] != "-":
            assert float(row["accuracy"]) > 0.5, line
        elif row.get("ARI", "-") != "-":  # clustering: agreement with the generating blobs
            assert float(row["ARI"]) > 0.9, line
        elif row.get("var. captured", "-") != "-":  # PCA: 5 components of 6 blob centres
            assert float(row["var. captured"]) > 0.9, line
        else:
            # Every regression row explains most of the variance (the generated ratings are
            # rank 5 + noise 0.3: a test R2 near 0 means the demo data or the model broke).
            assert float(row["RMSE"]) > 0 and float(row["R2"]) > 0.8, line


# --------------------------------------------------------------------------------------------
# errors: one line on stderr, exit 2 for job files, no traceback
# --------------------------------------------------------------------------------------------

def main_in_process(capsys, *args) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("text, field, message", [
    (GOOD_JOB.replace("model:", "modle:"), "modle",
     "unknown field 'modle'; did you mean 'model'?"),
    (GOOD_JOB.replace("gaussian_nb", "gausian_nb"), "model.name",
     # the known names grow with every model family: check the start of the list only
     "unknown model 'gausian_nb'; did you mean 'gaussian_nb'? Known: adaboost_classifier, "),
    (GOOD_JOB.replace("test_size: 0.25", "test_size: abc"), "split.test_size",
     "expected a number between 0 and 1, got 'abc'"),
    (GOOD_JOB.replace("../data/small.csv", "../data/missing.csv"), "data.path",
     "no such file or directory: ../data/missing.csv"),
    (GOOD_JOB.replace("../data/small.csv", "../data/nothing-*.csv"), "data.path",
     "no file matches the pattern"),
    (GOOD_JOB.replace("model: {name: gaussian_nb}",
                      "model: {name: gaussian_nb, params: {var_smothing: 1}}"),
     "model.params.var_smothing", "did you mean 'var_smoothing'?"),
    (GOOD_JOB.replace("metrics: [accuracy,", "metrics: [acuracy,"), "metrics[0]",
     "unknown metric 'acuracy'; did you mean 'accuracy'?"),
    (GOOD_JOB.replace("metrics: [accuracy,", "metrics: [rmse,"), "metrics[0]",
     "'rmse' is a regression metric but gaussian_nb is a classification model"),
    (GOOD_JOB.replace("- one_hot:", "- one_hott:"), "preprocessing[0]",
     "unknown preprocessing step 'one_hott'; did you mean 'one_hot'?"),
    (GOOD_JOB.replace("target: label", "target: [label]"), "target",
     "expected a non-empty string"),
    (GOOD_JOB.replace("target: label", "target: lable"), "target",
     "column 'lable' not found in the data; did you mean 'label'?"),
    (GOOD_JOB.replace("one_hot: [colour]", "one_hot: [color]"), "preprocessing[0].one_hot",
     "column 'color' not found in the data; did you mean 'colour'?"),
    (GOOD_JOB.replace("one_hot: [colour]", "one_hot: [size]\n  - minmax_scaler: [colour]"),
     "preprocessing[1].minmax_scaler", "needs numeric columns; ['colour'] are not numeric"),
    (GOOD_JOB.replace("data: {path: ../data/small.csv}",
                      "data: {generator: make_clasification}"), "data.generator",
     "did you mean 'make_classification'?"),
    (GOOD_JOB.replace("split: {", "split: {tets_size: 0.5, "), "split.tets_size",
     "did you mean 'test_size'?"),
    ("data: [unclosed\n", "invalid YAML", "line"),
])
def test_job_file_errors_name_the_field(project, capsys, text, field, message):
    job = write_job(project, text)
    code, out, err = main_in_process(capsys, "train", job, "--output", project / "out")
    assert code == 2, err
    assert err.startswith(f"dml train: error: {job}: {field}"), err
    assert message in err, err
    # One line per problem, each naming the job file and field.
    assert all(line.startswith(f"dml train: error: {job}: ")
               for line in err.strip().splitlines()), err
    assert out == "" and "Traceback" not in err
    assert not (project / "out").exists()


def test_several_job_errors_are_reported_together(project, capsys):
    job = write_job(project, "data: {path: nope.csv}\nmodle: {name: x}\nsplit: {test_size: 2}\n")
    code, _, err = main_in_process(capsys, "train", job)
    assert code == 2
    lines = err.strip().splitlines()
    assert any("data.path: no such file" in line for line in lines)
    assert any("modle: unknown field 'modle'; did you mean 'model'?" in line for line in lines)
    assert any("split.test_size: expected a number between 0 and 1, got 2" in line
               for line in lines)
    assert any("model: missing" in line for line in lines)
    assert any("target: missing" in line for line in lines)


def test_missing_job_file_and_usage_errors(tmp_path, capsys):
    code, _, err = main_in_process(capsys, "train", tmp_path / "nope.yaml")
    assert code == 2 and "job file not found" in err
    with pytest.raises(SystemExit) as exc:
        cli.main(["evaluate", "model.dml"])  # argparse: --target and DATA missing
    assert exc.value.code == 2


def test_user_errors_of_evaluate_and_predict(project, capsys, tmp_path):
    import pickle

    code, _, err = main_in_process(capsys, "evaluate", tmp_path / "none.dml",
                                   project / "data" / "small.csv", "--target", "label")
    assert code == 1 and err.strip() == f"dml evaluate: error: model file not found: " \
                                        f"{tmp_path / 'none.dml'}"
    bad = tmp_path / "model.dml"
    bad.write_bytes(pickle.dumps({"not": "a model"}))
    code, _, err = main_in_process(capsys, "evaluate", bad, project / "data" / "small.csv",
                                   "--target", "label")
    assert code == 1 and "looks like a Python pickle" in err and len(err.splitlines()) == 1
    model = registry.get("gaussian_nb")().fit(np.eye(3), [0, 1, 1])
    dml.save(model, tmp_path / "ok.dml")
    code, _, err = main_in_process(capsys, "predict", tmp_path / "ok.dml",
                                   project / "data" / "missing.csv", "--output", tmp_path / "p")
    assert code == 1 and "data: no such file or directory" in err
    code, _, err = main_in_process(capsys, "evaluate", tmp_path / "ok.dml",
                                   project / "data" / "small.csv", "--target", "nope")
    assert code == 2 and "--target: column 'nope' not found" in err


def test_unreachable_scheduler_is_one_line(project, capsys):
    job = write_job(project, GOOD_JOB)
    code, out, err = main_in_process(capsys, "train", job, "--scheduler", "tcp://127.0.0.1:9",
                                     "--timeout", "1", "--output", project / "out")
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dml train: error: could not reach the Dask scheduler at "
                               "'tcp://127.0.0.1:9'"), err


# --------------------------------------------------------------------------------------------
# pieces
# --------------------------------------------------------------------------------------------

def test_blockwise_split_is_seeded_and_complementary():
    from dml.model_selection import train_test_split

    df = dd.from_pandas(pd.DataFrame({"i": np.arange(2000)}), npartitions=5)
    train, test = train_test_split(df, test_size=0.2, random_state=7, blockwise=True)
    tr, te = train.compute()["i"].to_numpy(), test.compute()["i"].to_numpy()
    assert np.array_equal(np.sort(np.concatenate([tr, te])), np.arange(2000))
    assert 300 < len(te) < 500
    again = train_test_split(df, test_size=0.2, random_state=7, blockwise=True)[1]
    other = train_test_split(df, test_size=0.2, random_state=8, blockwise=True)[1]
    assert np.array_equal(te, again.compute()["i"].to_numpy())
    assert not np.array_equal(te, other.compute()["i"].to_numpy())
    assert train.npartitions == test.npartitions == 5  # no shuffle, no gather


def test_blockwise_split_keeps_arrays_and_frames_aligned(inprocess_client):
    import dask.array as da

    from dml.model_selection import train_test_split

    X = da.from_array(np.arange(3000.0).reshape(1000, 3), chunks=((300, 300, 400), (2, 1)))
    y = da.from_array(np.arange(1000), chunks=((300, 300, 400),))
    frame = dd.from_pandas(pd.DataFrame({"i": np.arange(1000)}), npartitions=1)
    frame = frame.repartition(divisions=[0, 300, 600, 999])
    Xtr, Xte, ytr, yte, ftr, fte = train_test_split(X, y, frame, test_size=0.3, random_state=3,
                                                    blockwise=True)
    Xte, yte, fte = Xte.compute(), yte.compute(), fte.compute()["i"].to_numpy()
    np.testing.assert_array_equal(Xte[:, 0] / 3, yte)
    np.testing.assert_array_equal(fte, yte)  # same partitions: the same rows fall out
    assert len(Xtr.compute()) + len(yte) == 1000
    # the rows of a partition depend on the partition only, whatever the other partitions are
    part = train_test_split(X.blocks[1:], test_size=0.3, random_state=3, blockwise=True)[1]
    assert not np.array_equal(part.compute()[:, 0] / 3, yte[yte >= 300])  # block 1 is now block 0


def test_blockwise_split_refuses_what_it_cannot_do():
    import dask.array as da

    from dml.model_selection import train_test_split

    X = da.ones((10, 2), chunks=5)
    with pytest.raises(TypeError, match="splits Dask arrays and dataframes"):
        train_test_split(np.ones((10, 2)), blockwise=True)
    with pytest.raises(ValueError, match="same row partitions"):
        train_test_split(X, da.ones(10, chunks=2), blockwise=True)
    with pytest.raises(ValueError, match="train_size, stratify and shuffle=False"):
        train_test_split(X, train_size=0.5, blockwise=True)
    with pytest.raises(ValueError, match="test_size as a fraction"):
        train_test_split(X, test_size=3, blockwise=True)


def test_load_job_defaults_and_resolution(project, monkeypatch):
    monkeypatch.chdir(project)
    job = cli.load_job(write_job(project, "data: {path: ../data/small.csv}\ntarget: label\n"
                                          "model: gaussian_nb\n"))
    assert job.data_path == str(project / "data" / "small.csv")
    assert job.name == "job" and job.output == project / "dml-output" / "job"
    assert (job.test_size, job.random_state) == (0.2, 0)
    assert job.preprocessing is None and not job.no_preprocessing
    gen = cli.load_job(EXAMPLES / "synthetic_nb.yaml", output=str(project / "o"))
    assert gen.generator == "make_classification" and gen.target == "y"
    assert gen.no_preprocessing and gen.output == project / "o"


def test_default_preprocessing_one_hots_text_and_scales_numbers(project):
    job = cli.load_job(write_job(project, "data: {path: ../data/small.csv}\ntarget: label\n"
                                          "model: gaussian_nb\n"))
    dtypes = small_frame().dtypes[["colour", "size", "weight"]]
    transformers, rest = cli.build_preprocessing(job, dtypes)
    assert [(type(t).__name__, cols) for _, t, cols in transformers] == [
        ("OneHotEncoder", ["colour"]), ("StandardScaler", ["size", "weight"])]
    assert rest == []


def test_format_table():
    text = cli.format_table(["model", "acc"], [["a", 0.5], ["bb", None]])
    assert text.splitlines() == ["model     acc", "-----  ------", "a      0.5000",
                                 "bb          -"]


def test_regression_metrics_match_scikit_learn():
    import dask.array as da
    from sklearn import metrics as skm

    from dml.model_selection import score_predictions

    rng = np.random.default_rng(0)
    y, p = rng.normal(size=500), rng.normal(size=500)
    out = score_predictions(["mse", "rmse", "mae", "r2"], da.from_array(y, chunks=90),
                            da.from_array(p, chunks=90))
    assert out["mse"] == pytest.approx(skm.mean_squared_error(y, p), rel=1e-12)
    assert out["rmse"] == pytest.approx(skm.mean_squared_error(y, p) ** 0.5, rel=1e-12)
    assert out["mae"] == pytest.approx(skm.mean_absolute_error(y, p), rel=1e-12)
    assert out["r2"] == pytest.approx(skm.r2_score(y, p), rel=1e-12)


def test_report_metrics_are_the_scorers_of_model_selection():
    """The CLI's metrics and the searches' scorers are one table: same names, same values."""
    import dask.array as da
    from sklearn import metrics as skm

    from dml.model_selection import get_scorer, score_predictions

    rng = np.random.default_rng(1)
    classes = np.array(["bad", "good"])
    y = classes[rng.integers(0, 2, 400)]
    proba = rng.dirichlet([1, 1], 400)
    pred = classes[proba.argmax(1)]
    out = score_predictions(["accuracy", "f1", "log_loss", "roc_auc", "confusion_matrix",
                             "f1_score", "precision_weighted"],
                            da.from_array(y, chunks=150), da.from_array(pred, chunks=150),
                            da.from_array(proba, chunks=(150, 2)), classes=classes)
    assert out["accuracy"] == pytest.approx(skm.accuracy_score(y, pred), rel=1e-12)
    assert out["f1"] == pytest.approx(skm.f1_score(y, pred, pos_label="good"), rel=1e-12)
    assert "f1_score" not in out  # an alias reports under the metric's short name
    assert out["log_loss"] == pytest.approx(skm.log_loss(y, proba, labels=classes), rel=1e-9)
    assert out["roc_auc"] == pytest.approx(skm.roc_auc_score(y == "good", proba[:, 1]),
                                           rel=1e-12)
    assert out["precision_weighted"] == pytest.approx(
        skm.precision_score(y, pred, average="weighted"), rel=1e-12)
    assert out["confusion_matrix"] == {"labels": ["bad", "good"],
                                       "matrix": skm.confusion_matrix(y, pred).tolist()}
    # aliases name the same scorers as scikit-learn's names (negated losses)
    assert repr(get_scorer("rmse")) == "make_scorer(neg_root_mean_squared_error)"
    assert repr(get_scorer("log_loss")) == "make_scorer(neg_log_loss)"
    with pytest.raises(ValueError, match="not supported"):
        get_scorer("confusion_matrix")


def test_the_cli_package_has_no_metric_code():
    """Metric names and values come from dml.model_selection; no module of dml/cli computes
    one (no import of dml.metrics, no metric table) and none is over ~800 lines."""
    for path in (ROOT / "dml" / "cli").glob("*.py"):
        text = path.read_text()
        for code in ("from dml.metrics", "from dml import metrics", "sklearn.metrics",
                     "_score(", "mean_squared_error", "log_loss(", "confusion_matrix("):
            assert code not in text, (path.name, code)
        assert len(text.splitlines()) < 800, path.name


def test_debug_flag_before_or_after_the_command():
    parser = cli._parser()
    assert parser.parse_args(["--debug", "demo"]).debug
    assert parser.parse_args(["demo", "--debug"]).debug
    assert not parser.parse_args(["demo"]).debug


def test_log_level_flags_before_or_after_the_command(monkeypatch):
    import logging

    parser = cli._parser()
    monkeypatch.delenv(cli.LOG_LEVEL_ENV, raising=False)
    level = lambda *a: cli.log_level(parser.parse_args([*a]))  # noqa: E731
    assert level("demo") == logging.WARNING
    assert level("-v", "demo") == level("demo", "-v") == logging.INFO
    assert level("-vv", "demo") == level("demo", "-vv") == logging.DEBUG
    assert level("--log-level", "error", "demo") == level("demo", "--log-level", "error") \
        == logging.ERROR
    monkeypatch.setenv(cli.LOG_LEVEL_ENV, "info")
    assert level("demo") == logging.INFO
    assert level("--log-level", "warning", "demo") == logging.WARNING  # the flag wins
    monkeypatch.setenv(cli.LOG_LEVEL_ENV, "loud")
    with pytest.raises(cli.CLIError, match="DML_LOG_LEVEL='loud' is not a log level"):
        level("demo")


SGD_JOB = """\
data:
  generator: make_classification
  params: {n_samples: 2000, n_features: 5, chunks: 1000, random_state: 0}
model:
  name: sgd_classifier
  params: {max_iter: 3, tol: null, random_state: 0, verbose: 1, checkpoint_dir: CKPT}
metrics: [accuracy]
"""


@pytest.mark.slow
def test_train_logs_and_progress_reach_a_log_file(project, capsys, inprocess_client):
    """Not a terminal (as under kubectl logs): -v shows dml's INFO records, one line each, and
    the progress display writes plain lines, no carriage returns."""
    job = write_job(project, SGD_JOB.replace("CKPT", str(project / "ckpt")))
    proc = run_cli("-v", "train", job, "--output", project / "out", cwd=project)
    assert_ok(proc)
    assert "\r" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert any(re.search(r" INFO \[dml\.optim\] SGDClassifier epoch 3", line) for line in lines)
    assert any(re.search(r"\[#+\.*\] epoch 1/3", line) for line in lines), proc.stderr
    assert any(re.search(r"\[#+\] epoch 3/3", line) for line in lines), proc.stderr
    # Again (in this process, on its cluster), resumed from the checkpoint: the engine says so
    # at INFO, shown with --log-level info and not by default.
    code, _, err = main_in_process(capsys, "train", job, "--output", project / "out")
    assert code == 0, err
    assert "resuming from the checkpoint" not in err and " INFO " not in err
    code, _, err = main_in_process(capsys, "--log-level", "info", "train", job, "--output",
                                   project / "out")
    assert code == 0, err
    assert re.search(r" INFO \[dml\.optim\] SGDClassifier: resuming from the checkpoint of "
                     r"epoch 3", err), err


def test_text_progress_redraws_on_a_terminal_and_writes_lines_elsewhere():
    import io

    from dml.optim.progress import TextProgress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream, plain in ((io.StringIO(), True), (Terminal(), False)):
        bar = TextProgress(stream)
        bar.start(2, desc="fit")
        for epoch in (1, 2):
            bar.update({"epoch": epoch, "objective": 1.0 / epoch})
        bar.close()
        text = stream.getvalue()
        if plain:
            assert "\r" not in text and len(text.splitlines()) == 2
            assert text.splitlines()[1].startswith("fit [")
        else:
            assert text.count("\r") == 2 and text.endswith("\n") and text.count("\n") == 1
    forced = io.StringIO()
    bar = TextProgress(forced, plain=False)
    bar.start(1)
    bar.update({"epoch": 1})
    assert forced.getvalue().startswith("\r")


def test_arrays_to_frame_converts_back_to_arrays_on_a_cluster(inprocess_client):
    """Regression: the frame of a generated data set, built with ``from_delayed(verify_meta=
    False)``, could not be turned back into Dask arrays on a distributed cluster ("lost
    dependencies")."""
    import dask.array as da

    from dml.cli import arrays_to_frame

    X = da.from_array(np.arange(20.0).reshape(10, 2), chunks=(4, 2))
    y = da.from_array(np.arange(10) % 2, chunks=4)
    frame = arrays_to_frame(X, y, ["a", "b"], "label")
    labels = frame["label"].to_dask_array(lengths=True)
    assert labels.chunks[0] == (4, 4, 2)
    np.testing.assert_array_equal(labels.compute(), np.arange(10) % 2)


def test_train_warns_about_a_numeric_column_with_a_stray_string(project, capsys,
                                                                 inprocess_client):
    """A numeric CSV column with one stray string would be one-hot encoded value by value by the
    default preprocessing: ``dml train`` (through dml.datasets.read_csv) names the column, the
    value and its row, and how to read it as missing."""
    df = small_frame()
    df["weight"] = df["weight"].round(3).astype(object)
    df.loc[4, "weight"] = "n/a?"
    df.to_csv(project / "data" / "spoiled.csv", index=False)
    job = write_job(project, "data: {path: ../data/spoiled.csv}\ntarget: label\n"
                             "model: {name: gaussian_nb}\nmetrics: [accuracy]\n")
    with pytest.warns(UserWarning, match=r"column 'weight'.*'n/a\?'.*row 4") as rec:
        code, _, err = main_in_process(capsys, "train", job, "--output", project / "out")
    assert code == 0, err
    assert any("na_values=['n/a?']" in str(w.message) for w in rec)
