"""The ``dml`` command: train, evaluate and predict from files, and a demo on generated data.

::

    dml train JOB.yaml [--scheduler ADDRESS] [--output DIR]
    dml evaluate MODEL DATA --target COL [--metrics accuracy,f1]
    dml predict MODEL DATA --output PATH [--proba] [--keep COL ...]
    dml demo [--quick]

Every command runs on a Dask cluster obtained with :func:`dml.runtime.connect`: the scheduler at
``--scheduler``, else ``$DML_SCHEDULER_ADDRESS``, else the job file's ``scheduler.address``, else
an embedded local cluster (one worker process per core). Data is read and transformed by the
workers; only parameters, metrics and small summaries come back.

Errors that a user can cause (a bad job file, a missing file, an unreachable scheduler, an
incompatible model file) are reported as one line on stderr with a non-zero exit status: 2 for
a bad job file or command line, 1 otherwise. ``--debug`` shows the traceback instead.

The job file reference is in :data:`JOB_REFERENCE` (``dml train --help`` prints it).
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["main", "load_job", "Job", "JobError", "DEMOS", "DemoEntry", "split_frame",
           "split_blocks", "JOB_REFERENCE", "evaluate_frame"]

JOB_REFERENCE = """\
job file (YAML); paths are relative to the job file's directory:

  name: adult_nb                 # optional; default: the job file's name
  data:                          # a file/glob/directory ...
    path: data/adult.csv         #   CSV/TSV/Parquet file, glob or Parquet directory
    format: csv                  #   optional: csv | tsv | parquet (default: from extension)
    options: {blocksize: 16MB}   #   optional: passed to the reader (dask read_csv/read_parquet)
  # data:                        # ... or generated data
  #   generator: make_classification   # make_classification | make_regression | make_blobs
  #   params: {n_samples: 10000, n_features: 8, chunks: 2500, random_state: 0}  # | make_counts
  target: income                 # label column (generated data: 'y', features x0, x1, ...)
  features: [age, education]     # optional; default: every other column
  preprocessing:                 # optional; default: one_hot non-numeric, standard_scaler numeric
    - one_hot: [education]       #   step: columns (a list, one name, or empty = automatic)
    - standard_scaler: [age]     #   or {columns: [...], params: {...}}
    - minmax_scaler:             #   empty: every numeric feature not used by another step
  # preprocessing: none          # no preprocessing: the model gets the feature columns as they are
  model:
    name: gaussian_nb            # a name from dml.registry
    params: {var_smoothing: 1.0e-9}
  # search:                      # optional: pick model.params by cross-validated search on the
  #   grid: {var_smoothing: [1.0e-9, 1.0e-5]}  # training rows (grid: every combination; or
  #   # random: {alpha: [...]}, n_iter: 10, random_state: 0   # random: n_iter draws)
  #   cv: 5                      #   folds (default 5; stratified for classifiers)
  #   scoring: accuracy          #   a scikit-learn scorer name (default: accuracy / r2)
  split: {test_size: 0.2, random_state: 0}   # held-out rows (this is the default);
                                             # `split: none` evaluates on the training rows
  metrics: [accuracy, f1]        # optional; default: accuracy, precision, recall, f1 (classifiers)
                                 #                    rmse, mae, r2 (regressors)
  scheduler: {address: tcp://scheduler:8786}   # optional; default: $DML_SCHEDULER_ADDRESS or an
                                               # embedded local cluster; --scheduler overrides
  # scheduler:                   # a tls:// scheduler: CA, client certificate and key files
  #   address: tls://scheduler:8786      # (--tls-ca-file/--tls-cert/--tls-key and
  #   tls: {ca_file: ca.pem, cert: client.pem, key: client-key.pem}   # $DML_TLS_* override)
  output: models/adult_nb        # optional; default: ./dml-output/<name> (--output overrides)
"""

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CLIError(Exception):
    """An error the user can fix; printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAILURE):
        super().__init__(message)
        self.code = code


class JobError(CLIError):
    """A job file that fails validation; the message names the field(s). Exit status 2."""

    def __init__(self, messages):
        messages = [messages] if isinstance(messages, str) else list(messages)
        super().__init__("\n".join(messages), EXIT_USAGE)
        self.messages = messages


# ============================================================================================
# Metrics
# ============================================================================================

_CLASSIFICATION = "classification"
_REGRESSION = "regression"


@dataclass(frozen=True)
class _Metric:
    task: str
    label: str
    needs_proba: bool = False
    scalar: bool = True


_METRICS: dict[str, _Metric] = {
    "accuracy": _Metric(_CLASSIFICATION, "accuracy"),
    "precision": _Metric(_CLASSIFICATION, "precision"),
    "recall": _Metric(_CLASSIFICATION, "recall"),
    "f1": _Metric(_CLASSIFICATION, "F1"),
    **{f"{m}_{avg}": _Metric(_CLASSIFICATION, f"{m} ({avg})")
       for m in ("precision", "recall", "f1") for avg in ("macro", "micro", "weighted")},
    "log_loss": _Metric(_CLASSIFICATION, "log loss", needs_proba=True),
    "roc_auc": _Metric(_CLASSIFICATION, "ROC AUC", needs_proba=True),
    "confusion_matrix": _Metric(_CLASSIFICATION, "confusion matrix", scalar=False),
    "mse": _Metric(_REGRESSION, "MSE"),
    "rmse": _Metric(_REGRESSION, "RMSE"),
    "mae": _Metric(_REGRESSION, "MAE"),
    "r2": _Metric(_REGRESSION, "R2"),
}

# dml.metrics function names accepted as well.
_METRIC_ALIASES = {
    "accuracy_score": "accuracy", "precision_score": "precision", "recall_score": "recall",
    "f1_score": "f1", "roc_auc_score": "roc_auc", "mean_squared_error": "mse",
    "root_mean_squared_error": "rmse", "mean_absolute_error": "mae", "r2_score": "r2",
}

DEFAULT_METRICS = {
    _CLASSIFICATION: ["accuracy", "precision", "recall", "f1"],
    _REGRESSION: ["rmse", "mae", "r2"],
}


def _metric_name(name: str) -> str | None:
    name = _METRIC_ALIASES.get(name, name)
    return name if name in _METRICS else None


def _task_of(estimator) -> str | None:
    from sklearn.base import is_classifier, is_regressor

    if is_classifier(estimator):
        return _CLASSIFICATION
    if is_regressor(estimator):
        return _REGRESSION
    return None


def compute_metrics(names: list[str], y_true, y_pred, proba=None, classes=None) -> dict:
    """Metrics of Dask predictions (aligned Dask arrays with known chunks), via dml.metrics."""
    import dask

    from dml import metrics as M

    def value(x):
        if hasattr(x, "dask"):
            x = dask.compute(x)[0]
        if isinstance(x, np.ndarray) and x.ndim > 0:
            return x.tolist()
        return float(x)

    out: dict[str, Any] = {}
    binary = classes is not None and len(classes) == 2
    for name in names:
        kw: dict[str, Any] = {}
        if name in ("precision", "recall", "f1"):
            kw = {"average": "binary", "pos_label": _py(classes[1])} if binary else \
                {"average": "macro"}
        elif "_" in name and name.split("_")[0] in ("precision", "recall", "f1") and \
                name.split("_")[1] in ("macro", "micro", "weighted"):
            kw = {"average": name.split("_")[1]}
        base = name.split("_")[0] if name.split("_")[0] in ("precision", "recall", "f1") else name
        if base == "accuracy":
            out[name] = value(M.accuracy_score(y_true, y_pred))
        elif base in ("precision", "recall", "f1"):
            fn = {"precision": M.precision_score, "recall": M.recall_score,
                  "f1": M.f1_score}[base]
            out[name] = value(fn(y_true, y_pred, **kw))
        elif name == "log_loss":
            out[name] = value(M.log_loss(y_true, proba, labels=list(classes)))
        elif name == "roc_auc":
            if binary:
                out[name] = value(M.roc_auc_score(y_true, proba[:, 1]))
            else:
                out[name] = value(M.roc_auc_score(y_true, proba, multi_class="ovr",
                                                  labels=list(classes)))
        elif name == "confusion_matrix":
            cm = M.confusion_matrix(y_true, y_pred, labels=list(classes))
            out[name] = {"labels": [_py(c) for c in classes], "matrix": value(np.asarray(
                dask.compute(cm)[0] if hasattr(cm, "dask") else cm))}
        elif name == "mse":
            out[name] = value(M.mean_squared_error(y_true, y_pred))
        elif name == "rmse":
            out[name] = value(M.root_mean_squared_error(y_true, y_pred))
        elif name == "mae":
            out[name] = value(M.mean_absolute_error(y_true, y_pred))
        elif name == "r2":
            out[name] = value(M.r2_score(y_true, y_pred))
    return out


def _py(v):
    return v.item() if isinstance(v, np.generic) else v


_TRUE, _PRED = "__y_true__", "__y_pred__"


def _as_labels(values) -> np.ndarray:
    values = np.asarray(values)
    return values.astype(object) if values.dtype.kind in "USO" else values


def _evaluate_partition(part, model, features, target, proba_columns):
    """One partition -> its true labels, predictions (and probabilities) as a small frame."""
    import pandas as pd

    out = pd.DataFrame(index=part.index)
    out[_TRUE] = _as_labels(part[target].to_numpy())
    if len(part):
        X = part[features]
        out[_PRED] = _as_labels(model.predict(X))
        if proba_columns:
            p = np.asarray(model.predict_proba(X), dtype=np.float64)
            for j, c in enumerate(proba_columns):
                out[c] = p[:, j]
    else:
        out[_PRED] = np.empty(0, dtype=out[_TRUE].dtype)
        for c in proba_columns:
            out[c] = np.empty(0, dtype=np.float64)
    return out


def evaluate_frame(model, df, features: list[str], target: str, names: list[str], count=None):
    """Metrics of ``model`` on the Dask dataframe ``df`` (one pass over the data).

    Each partition is predicted where it lives (``model.predict`` on the pandas partition); the
    predictions are persisted on the workers, so the metrics (reductions over blocks, from
    :mod:`dml.metrics`) read them there. ``count``, an optional lazy scalar (the number of
    training rows), is computed in the same pass.

    Returns ``(metrics, n_rows, count)``.
    """
    import dask

    from dml._blocks import broadcast

    classes = getattr(model, "classes_", None)
    needs_proba = any(_METRICS[n].needs_proba for n in names) and classes is not None
    proba_columns = [f"__proba_{j}__" for j in range(len(classes))] if needs_proba else []
    meta = _evaluate_partition(df._meta, model, features, target, proba_columns)
    preds = df.map_partitions(_evaluate_partition, broadcast(model), features, target,
                              proba_columns, meta=meta)
    if count is not None:
        preds, count = dask.persist(preds, count)
        count = int(count.compute())
    else:
        preds = preds.persist()
    y_true = preds[_TRUE].to_dask_array(lengths=True)
    chunks = y_true.chunks[0]
    y_pred = preds[_PRED].to_dask_array(lengths=list(chunks))
    proba = preds[proba_columns].to_dask_array(lengths=list(chunks)) if proba_columns else None
    n = int(sum(chunks))
    if n == 0:
        return {}, 0, count
    return compute_metrics(names, y_true, y_pred, proba, classes), n, count


# ============================================================================================
# Blockwise random split (no gather)
# ============================================================================================

_SPLIT_PURPOSE = "dml.cli.split"


def _test_mask(n: int, seed: int, index: int, test_size: float) -> np.ndarray:
    from dml._blocks import block_rng

    return block_rng(seed, _SPLIT_PURPOSE, index).random(n) < test_size


def _split_partition(part, seed, test_size, test, partition_info=None):
    index = partition_info["number"] if partition_info else 0
    mask = _test_mask(len(part), seed, index, test_size)
    return part[mask if test else ~mask]


def split_frame(df, test_size: float, seed: int):
    """Split a Dask dataframe's rows into (train, test) partition by partition.

    Each row goes to the test part with probability ``test_size``, drawn from the partition's own
    generator ``block_rng(seed, "dml.cli.split", partition_number)``: the split depends only on
    the data, its partitioning and the seed, and no data leaves its worker.
    """
    meta = df._meta
    train = df.map_partitions(_split_partition, seed, test_size, False, meta=meta)
    test = df.map_partitions(_split_partition, seed, test_size, True, meta=meta)
    return train, test


def split_blocks(X, y, test_every: int = 4):
    """Hold out whole row chunks of aligned Dask arrays: every ``test_every``-th chunk is test.

    For generated data, whose rows are independent draws, a chunk-level split is as good as a
    row-level one and keeps the chunk sizes known. Returns ``(X_train, X_test, y_train,
    y_test)``.
    """
    X = X.rechunk({1: -1})
    if X.chunks[0] != y.chunks[0]:
        y = y.rechunk((X.chunks[0],))
    n = X.numblocks[0]
    if n < 2:
        raise ValueError(f"split_blocks needs at least 2 row chunks, got {n}")
    test = [i for i in range(n) if i % test_every == test_every - 1] or [n - 1]
    train = [i for i in range(n) if i not in test]
    return X.blocks[train], X.blocks[test], y.blocks[train], y.blocks[test]


# ============================================================================================
# Job file
# ============================================================================================

_TOP_FIELDS = ("name", "description", "data", "target", "features", "preprocessing", "model",
               "search", "split", "metrics", "scheduler", "output")
_DATA_FILE_FIELDS = ("path", "format", "options")
_SEARCH_FIELDS = ("grid", "random", "n_iter", "cv", "scoring", "random_state")
_DATA_GEN_FIELDS = ("generator", "params")
_GENERATORS = ("make_classification", "make_regression", "make_blobs", "make_counts")
_FORMATS = ("csv", "tsv", "parquet")
_SCHEDULER_FIELDS = ("address", "timeout", "n_workers", "threads_per_worker", "memory_limit",
                     "tls")
_TLS_FIELDS = ("ca_file", "cert", "key")
_LOCAL_OPTIONS = ("n_workers", "threads_per_worker", "memory_limit")


@dataclass
class Step:
    """One preprocessing step: a registry transformer name, its columns (None = automatic)."""

    name: str
    columns: list[str] | None
    params: dict
    field: str


@dataclass
class Job:
    """A validated job file."""

    source: Path
    name: str
    data_path: str | None = None
    data_format: str | None = None
    data_options: dict = field(default_factory=dict)
    generator: str | None = None
    generator_params: dict = field(default_factory=dict)
    target: str | None = None
    features: list[str] | None = None
    preprocessing: list[Step] | None = None   # None: automatic
    no_preprocessing: bool = False
    model_name: str = ""
    model_params: dict = field(default_factory=dict)
    search: dict | None = None
    test_size: float | None = 0.2
    random_state: int | None = 0
    metrics: list[str] | None = None
    scheduler: dict = field(default_factory=dict)
    output: Path | None = None

    def describe_data(self) -> str:
        if self.generator:
            return self.generator
        return self.data_path or ""


class _Checker:
    def __init__(self, source: str):
        self.source = source
        self.errors: list[str] = []

    def error(self, where: str, message: str) -> None:
        self.errors.append(f"{self.source}: {where}: {message}")

    def unknown_fields(self, mapping: dict, allowed, prefix: str) -> None:
        from dml.registry import suggest

        for key in mapping:
            if key not in allowed:
                where = f"{prefix}{key}"
                close = suggest(str(key), allowed)
                hint = f"; did you mean {close!r}?" if close else ""
                self.error(where, f"unknown field {str(key)!r}{hint} Known: "
                                  f"{', '.join(allowed)}")

    def mapping(self, value, where: str) -> dict | None:
        if not isinstance(value, dict):
            self.error(where, f"expected a mapping, got {_show(value)}")
            return None
        return value

    def string(self, value, where: str) -> str | None:
        if not isinstance(value, str) or not value:
            self.error(where, f"expected a non-empty string, got {_show(value)}")
            return None
        return value

    def string_list(self, value, where: str) -> list[str] | None:
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.error(where, f"expected a list of column names, got {_show(value)}")
            return None
        return list(value)


def _show(value) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, (dict, list)):
        return f"a {'mapping' if isinstance(value, dict) else 'list'} {value!r}"[:200]
    return repr(value)


def _is_url(path: str) -> bool:
    return "://" in path


def _has_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


def _resolve(path: str, base: Path) -> str:
    path = os.path.expandvars(path)
    if _is_url(path):
        return path
    p = Path(os.path.expanduser(path))
    return str(p if p.is_absolute() else (base / p).resolve())


def _input_files(path: str) -> list[str]:
    """Files a path/glob/directory refers to ([] when nothing exists); URLs are not checked."""
    if _is_url(path):
        return [path]
    if _has_glob(path):
        return sorted(glob.glob(path))
    if os.path.isdir(path):
        return sorted(str(p) for p in Path(path).rglob("*") if p.is_file()
                      and not p.name.startswith((".", "_")))
    return [path] if os.path.exists(path) else []


def load_job(path, *, output: str | None = None) -> Job:
    """Read and validate a job file; raise :class:`JobError` naming every bad field."""
    import yaml

    from dml import registry

    source = Path(path)
    shown = str(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CLIError(f"job file not found: {shown}", EXIT_USAGE) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read the job file {shown}: {exc}", EXIT_USAGE) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise JobError(f"{shown}: invalid YAML{where}: {problem}") from None
    c = _Checker(shown)
    if not isinstance(doc, dict):
        raise JobError(f"{shown}: expected a mapping of fields ({', '.join(_TOP_FIELDS)}), got "
                       f"{_show(doc)}")
    c.unknown_fields(doc, _TOP_FIELDS, "")
    base = source.resolve().parent
    job = Job(source=source, name=source.stem)

    if "name" in doc:
        name = c.string(doc["name"], "name")
        if name is not None:
            if "/" in name or name in (".", ".."):
                c.error("name", f"must not contain '/', got {name!r}")
            else:
                job.name = name

    # ---- data ----
    if "data" not in doc:
        c.error("data", "missing: give {path: ...} or {generator: ..., params: {...}}")
    else:
        data = doc["data"]
        if isinstance(data, str):
            data = {"path": data}
        data = c.mapping(data, "data")
        if data is not None:
            if "generator" in data and "path" in data:
                c.error("data", "give either path or generator, not both")
            if "generator" in data:
                c.unknown_fields(data, _DATA_GEN_FIELDS, "data.")
                _check_generator(c, data, job)
            elif "path" in data:
                c.unknown_fields(data, _DATA_FILE_FIELDS, "data.")
                _check_data_path(c, data, job, base)
            else:
                c.unknown_fields(data, _DATA_FILE_FIELDS + _DATA_GEN_FIELDS, "data.")
                c.error("data", "missing path (a CSV/Parquet file or glob) or generator "
                                f"({', '.join(_GENERATORS)})")

    # ---- target / features ----
    if "target" in doc:
        job.target = c.string(doc["target"], "target")
    elif job.generator is None:
        c.error("target", "missing: name the label column")
    else:
        job.target = "y"
    if doc.get("features") is not None:
        job.features = c.string_list(doc["features"], "features")
        if job.features is not None:
            if not job.features:
                c.error("features", "expected at least one column")
            dup = sorted({f for f in job.features if job.features.count(f) > 1})
            if dup:
                c.error("features", f"duplicate columns {dup}")
            if job.target is not None and job.target in job.features:
                c.error("features", f"the target column {job.target!r} cannot be a feature")

    # ---- model ----
    cls = None
    if "model" not in doc:
        c.error("model", f"missing: e.g. {{name: gaussian_nb}}. Known models: "
                         f"{', '.join(registry.names('model'))}")
    else:
        model = doc["model"]
        if isinstance(model, str):
            model = {"name": model}
        model = c.mapping(model, "model")
        if model is not None:
            c.unknown_fields(model, ("name", "params"), "model.")
            name = c.string(model.get("name"), "model.name") if "name" in model else None
            if "name" not in model:
                c.error("model.name", f"missing. Known models: "
                                      f"{', '.join(registry.names('model'))}")
            elif name is not None:
                if name not in registry.names("model"):
                    c.error("model.name", registry.unknown_message(name, "model"))
                else:
                    job.model_name = name
                    try:
                        cls = registry.get(name)
                    except ImportError as exc:
                        c.error("model.name", str(exc))
            params = model.get("params")
            if params is not None:
                params = c.mapping(params, "model.params")
                if params is not None:
                    job.model_params = params
                    if cls is not None:
                        _check_params(c, cls, params, "model.params", name)

    # ---- search ----
    if doc.get("search") is not None:
        _check_search(c, doc["search"], cls, job)

    # ---- preprocessing ----
    if "preprocessing" in doc:
        _check_preprocessing(c, doc["preprocessing"], job)

    # ---- split ----
    if "split" in doc:
        split = doc["split"]
        if split is None or split is False or split == "none":
            job.test_size = None
        else:
            split = c.mapping(split, "split")
            if split is not None:
                c.unknown_fields(split, ("test_size", "random_state"), "split.")
                if "test_size" in split:
                    ts = split["test_size"]
                    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or \
                            not 0 < ts < 1:
                        c.error("split.test_size", f"expected a number between 0 and 1, got "
                                                   f"{_show(ts)}")
                    else:
                        job.test_size = float(ts)
                if "random_state" in split:
                    rs = split["random_state"]
                    if rs is not None and (isinstance(rs, bool) or not isinstance(rs, int)
                                           or rs < 0):
                        c.error("split.random_state", f"expected a non-negative integer or "
                                                      f"null, got {_show(rs)}")
                    else:
                        job.random_state = rs

    # ---- metrics ----
    task = _task_of(cls()) if cls is not None else None
    if doc.get("metrics") is not None:
        ms = doc["metrics"]
        ms = [ms] if isinstance(ms, str) else ms
        if not isinstance(ms, list) or not all(isinstance(m, str) for m in ms) or not ms:
            c.error("metrics", f"expected a list of metric names, got {_show(doc['metrics'])}")
        else:
            names = []
            for i, m in enumerate(ms):
                canonical = _metric_name(m)
                if canonical is None:
                    known = sorted(_METRICS)
                    close = registry.suggest(m, known + list(_METRIC_ALIASES))
                    hint = f"; did you mean {close!r}?" if close else ""
                    c.error(f"metrics[{i}]", f"unknown metric {m!r}{hint} Known: "
                                             f"{', '.join(known)}")
                elif task is not None and _METRICS[canonical].task != task:
                    c.error(f"metrics[{i}]", f"{m!r} is a {_METRICS[canonical].task} metric but "
                                             f"{job.model_name} is a {task} model")
                else:
                    names.append(canonical)
            job.metrics = names

    # ---- scheduler ----
    if doc.get("scheduler") is not None:
        sch = doc["scheduler"]
        if isinstance(sch, str):
            sch = {"address": sch}
        sch = c.mapping(sch, "scheduler")
        if sch is not None:
            c.unknown_fields(sch, _SCHEDULER_FIELDS, "scheduler.")
            if "address" in sch and c.string(sch["address"], "scheduler.address") and \
                    any(k in sch for k in _LOCAL_OPTIONS):
                c.error("scheduler", "n_workers/threads_per_worker/memory_limit only apply to "
                                     "the embedded local cluster, not together with address")
            for k in ("n_workers", "threads_per_worker"):
                if k in sch and (isinstance(sch[k], bool) or not isinstance(sch[k], int)
                                 or sch[k] < 1):
                    c.error(f"scheduler.{k}", f"expected a positive integer, got {_show(sch[k])}")
            job.scheduler = {k: v for k, v in sch.items() if k in _SCHEDULER_FIELDS}
            if sch.get("tls") is not None:
                job.scheduler["tls"] = _check_tls(c, sch["tls"], base)

    # ---- output ----
    if output is not None:
        job.output = Path(output).resolve()
    elif doc.get("output") is not None:
        out = c.string(doc["output"], "output")
        if out is not None:
            job.output = Path(_resolve(out, base))
    if job.output is None:
        job.output = (Path.cwd() / "dml-output" / job.name).resolve()

    if c.errors:
        raise JobError(c.errors)
    return job


def _check_search(c: _Checker, search, cls, job: Job) -> None:
    """search: {grid | random: {param: [values]}, n_iter, cv, scoring, random_state}."""
    search = c.mapping(search, "search")
    if search is None:
        return
    c.unknown_fields(search, _SEARCH_FIELDS, "search.")
    kinds = [k for k in ("grid", "random") if k in search]
    if len(kinds) != 1:
        c.error("search", "give exactly one of grid: {param: [values]} or random: {param: "
                          "[values]}")
        return
    kind = kinds[0]
    space = c.mapping(search[kind], f"search.{kind}")
    if not space:
        c.error(f"search.{kind}", "expected a non-empty mapping of parameter name to a list of "
                                  "values")
        return
    known = set(cls().get_params()) if cls is not None else None
    for name, values in space.items():
        if known is not None and name not in known:
            c.error(f"search.{kind}.{name}", f"{job.model_name} has no parameter {name!r}; "
                                             f"known: {', '.join(sorted(known))}")
        if not isinstance(values, list) or not values:
            c.error(f"search.{kind}.{name}", f"expected a non-empty list of values, got "
                                             f"{_show(values)}")
    for k in ("n_iter", "cv"):
        v = search.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < (2 if k == "cv"
                                                                                    else 1)):
            c.error(f"search.{k}", f"expected an integer >= {2 if k == 'cv' else 1}, got "
                                   f"{_show(v)}")
    scoring = search.get("scoring")
    if scoring is not None and not isinstance(scoring, str):
        c.error("search.scoring", f"expected a scorer name, got {_show(scoring)}")
    job.search = {"kind": kind, "space": space, "n_iter": search.get("n_iter", 10),
                  "cv": search.get("cv", 5), "scoring": scoring,
                  "random_state": search.get("random_state", 0)}


def _search_model(job: Job, model, X, y):
    """Fit ``model`` by the job's cross-validated search; returns (best model, summary)."""
    from dml.model_selection import GridSearchCV, RandomizedSearchCV

    import dask

    # Every fold selects rows from X and y: materialise the (transformed) training rows once.
    X, y = dask.persist(X, y)
    s = job.search
    if s["kind"] == "grid":
        search = GridSearchCV(model, s["space"], cv=s["cv"], scoring=s["scoring"])
    else:
        search = RandomizedSearchCV(model, s["space"], n_iter=s["n_iter"], cv=s["cv"],
                                    scoring=s["scoring"], random_state=s["random_state"])
    search.fit(X, y)
    summary = {"kind": s["kind"], "cv": s["cv"], "scoring": s["scoring"] or "default",
               "candidates": len(search.cv_results_["params"]),
               "best_params": search.best_params_, "best_score": float(search.best_score_),
               "mean_test_score": [float(v) for v in search.cv_results_["mean_test_score"]],
               "params": search.cv_results_["params"]}
    return search.best_estimator_, summary


def _check_tls(c: _Checker, tls, base: Path) -> dict:
    """scheduler.tls: {ca_file, cert, key} paths, relative to the job file."""
    tls = c.mapping(tls, "scheduler.tls") or {}
    c.unknown_fields(tls, _TLS_FIELDS, "scheduler.tls.")
    out = {}
    for k in _TLS_FIELDS:
        if k in tls and c.string(tls[k], f"scheduler.tls.{k}"):
            out[k] = _resolve(tls[k], base)
    return out


def _check_generator(c: _Checker, data: dict, job: Job) -> None:
    import inspect

    from dml.registry import suggest

    gen = data["generator"]
    if gen not in _GENERATORS:
        close = suggest(str(gen), _GENERATORS)
        hint = f"; did you mean {close!r}?" if close else ""
        c.error("data.generator", f"unknown generator {gen!r}{hint} Known: "
                                  f"{', '.join(_GENERATORS)}")
        return
    job.generator = gen
    params = data.get("params") or {}
    params = c.mapping(params, "data.params")
    if params is None:
        return
    try:
        from dml import datasets
        sig = inspect.signature(getattr(datasets, gen))
    except (ImportError, AttributeError) as exc:
        c.error("data.generator", f"dml.datasets.{gen} is not available: {exc}")
        return
    known = [p for p in sig.parameters if p not in ("return_rates", "return_centers", "coef")]
    for k in params:
        if k not in known:
            close = suggest(str(k), known)
            hint = f"; did you mean {close!r}?" if close else ""
            c.error(f"data.params.{k}", f"unknown parameter of {gen}{hint} Known: "
                                        f"{', '.join(known)}")
    job.generator_params = params


def _check_data_path(c: _Checker, data: dict, job: Job, base: Path) -> None:
    path = data["path"]
    if not isinstance(path, str) or not path:
        c.error("data.path", f"expected a file path or glob, got {_show(path)}")
        return
    resolved = _resolve(path, base)
    if not _input_files(resolved):
        what = "no file matches the pattern" if _has_glob(path) else "no such file or directory"
        shown = path if path == resolved else f"{path} (= {resolved})"
        c.error("data.path", f"{what}: {shown}")
    job.data_path = resolved
    fmt = data.get("format")
    if fmt is not None:
        if fmt not in _FORMATS:
            c.error("data.format", f"expected one of {', '.join(_FORMATS)}, got {_show(fmt)}")
        else:
            job.data_format = fmt
    opts = data.get("options")
    if opts is not None:
        opts = c.mapping(opts, "data.options")
        if opts is not None:
            job.data_options = opts


def _check_params(c: _Checker, cls, params: dict, where: str, name: str) -> None:
    from dml.registry import suggest

    try:
        known = sorted(cls().get_params(deep=False))
    except Exception:  # an estimator that cannot be built with defaults: fit will tell
        return
    for k in params:
        if k not in known:
            close = suggest(str(k), known)
            hint = f"; did you mean {close!r}?" if close else ""
            c.error(f"{where}.{k}", f"unknown parameter of {name}{hint} Known: "
                                    f"{', '.join(known)}")


def _check_preprocessing(c: _Checker, value, job: Job) -> None:
    from dml import registry

    if value is None or value == "auto":
        return
    if value is False or value == "none" or value == []:
        job.no_preprocessing = True
        return
    if not isinstance(value, list):
        c.error("preprocessing", f"expected a list of steps like [{{one_hot: [col]}}, "
                                 f"{{standard_scaler: [col]}}], 'auto' or 'none'; got "
                                 f"{_show(value)}")
        return
    steps = []
    known = registry.names("transformer")
    for i, item in enumerate(value):
        where = f"preprocessing[{i}]"
        if isinstance(item, str):
            item = {item: None}
        if not isinstance(item, dict) or len(item) != 1:
            c.error(where, f"expected one step like {{one_hot: [col, ...]}}, got {_show(item)}")
            continue
        (name, spec), = item.items()
        if name not in known:
            c.error(where, registry.unknown_message(name, "transformer"))
            continue
        where = f"{where}.{name}"
        params: dict = {}
        columns = None
        if isinstance(spec, dict):
            c.unknown_fields(spec, ("columns", "params"), f"{where}.")
            if spec.get("columns") is not None:
                columns = c.string_list(spec["columns"], f"{where}.columns")
            if spec.get("params") is not None:
                params = c.mapping(spec["params"], f"{where}.params") or {}
                try:
                    cls = registry.get(name)
                except ImportError as exc:
                    c.error(where, str(exc))
                else:
                    _check_params(c, cls, params, f"{where}.params", name)
        elif spec is not None:
            columns = c.string_list(spec, where)
        steps.append(Step(name, columns, params, where))
    job.preprocessing = steps


# ============================================================================================
# Data
# ============================================================================================

def _read(path: str, fmt: str | None, options: dict):
    from dml import datasets

    if fmt == "csv":
        return datasets.read_csv(path, **options)
    if fmt == "tsv":
        return datasets.read_csv(path, **{"sep": "\t", **options})
    if fmt == "parquet":
        return datasets.read_parquet(path, **options)
    return datasets.read_table(path, **options)


def _frame_block(xb, yb, columns, target):
    import pandas as pd

    df = pd.DataFrame(np.asarray(xb), columns=columns)
    if yb is not None:
        df[target] = np.asarray(yb)
    return df


def arrays_to_frame(X, y, columns, target):
    """Aligned Dask arrays -> a Dask dataframe with one partition per row chunk (no compute)."""
    import dask.dataframe as dd
    from dask import delayed

    X = X.rechunk({1: -1})
    if y is not None and y.chunks[0] != X.chunks[0]:
        y = y.rechunk((X.chunks[0],))
    xparts = list(X.to_delayed().ravel())
    yparts = list(y.to_delayed().ravel()) if y is not None else [None] * len(xparts)
    meta = _frame_block(np.empty((0, X.shape[1]), X.dtype),
                        None if y is None else np.empty(0, y.dtype), columns, target)
    parts = [delayed(_frame_block, pure=True)(xb, yb, columns, target)
             for xb, yb in zip(xparts, yparts)]
    # verify_meta stays on: without it Dask aliases the delayed keys, and converting the frame
    # back to Dask arrays then fails on a distributed cluster ("lost dependencies").
    return dd.from_delayed(parts, meta=meta)


def _generate(job: Job):
    from dml import datasets

    out = getattr(datasets, job.generator)(**job.generator_params)
    X, y = out[0], out[1]
    if y.ndim != 1:
        raise JobError(f"{job.source}: data.params: {job.generator} must produce one target "
                       f"column (got y of shape {y.shape}); use n_targets=1")
    columns = [f"x{i}" for i in range(X.shape[1])]
    return arrays_to_frame(X, y, columns, job.target)


def _is_numeric(dtype) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(dtype) and not isinstance(dtype, pd.CategoricalDtype)


def _check_columns(job: Job, df) -> list[str]:
    """Check target / features / preprocessing columns against the data; return the features."""
    from dml.registry import suggest

    c = _Checker(str(job.source))
    columns = [str(col) for col in df.columns]

    def missing(col, where):
        close = suggest(col, columns)
        hint = f"; did you mean {close!r}?" if close else ""
        c.error(where, f"column {col!r} not found in the data{hint} Columns: "
                       f"{', '.join(columns)}")

    if job.target not in columns:
        missing(job.target, "target")
    features = job.features or [col for col in columns if col != job.target]
    for i, f in enumerate(job.features or []):
        if f not in columns:
            missing(f, f"features[{i}]")
    for step in job.preprocessing or []:
        for col in step.columns or []:
            if col not in columns:
                missing(col, step.field)
            elif col not in features:
                c.error(step.field, f"column {col!r} is not one of the features")
    if c.errors:
        raise JobError(c.errors)
    return features


def build_preprocessing(job: Job, dtypes) -> tuple[list[tuple], list[str]]:
    """(ColumnTransformer transformers, passthrough numeric columns) for the job's features.

    ``dtypes`` maps every feature to its dtype. Automatic rule: one-hot the non-numeric features,
    standard-scale the numeric ones. Steps without columns take every feature of their kind
    (non-numeric for one_hot, numeric for scalers) not claimed by another step.
    """
    from dml import registry

    features = list(dtypes.index)
    numeric = [f for f in features if _is_numeric(dtypes[f])]
    other = [f for f in features if f not in numeric]
    if job.preprocessing is None:
        steps = []
        if other:
            steps.append(Step("one_hot", other, {}, "preprocessing"))
        if numeric:
            steps.append(Step("standard_scaler", numeric, {}, "preprocessing"))
    else:
        steps = job.preprocessing
    c = _Checker(str(job.source))
    claimed: dict[str, str] = {}
    for step in steps:
        for col in step.columns or []:
            if col in claimed:
                c.error(step.field, f"column {col!r} is already used by {claimed[col]}")
            claimed[col] = step.field
    transformers = []
    for i, step in enumerate(steps):
        cols = step.columns
        if cols is None:
            pool = other if step.name == "one_hot" else numeric
            cols = [f for f in pool if f not in claimed]
            for col in cols:
                claimed[col] = step.field
        elif step.name != "one_hot":
            bad = [col for col in cols if col not in numeric]
            if bad:
                c.error(step.field, f"{step.name} needs numeric columns; {bad} are not numeric "
                                    "(one-hot encode them instead)")
        if not cols:
            continue
        cls = registry.get(step.name)
        params = dict(step.params)
        if step.name == "one_hot" and "handle_unknown" in cls().get_params() and \
                "handle_unknown" not in params:
            # Held-out or new data may hold categories the training rows did not have.
            params["handle_unknown"] = "ignore"
        transformers.append((f"{step.name}_{i}", cls(**params), list(cols)))
    rest = [f for f in features if f not in claimed]
    bad = [f for f in rest if f not in numeric]
    if bad:
        c.error("preprocessing", f"columns {bad} are not numeric and no step encodes them; add "
                                 "them to a one_hot step or leave them out of features")
    if c.errors:
        raise JobError(c.errors)
    return transformers, rest


def _transform_partition(part, transformer, features, target, names, dtype):
    """A partition's transformed features (named ``names``) next to its target column."""
    import pandas as pd

    if len(part):
        values = np.asarray(transformer.transform(part[features]), dtype=dtype)
    else:
        values = np.empty((0, len(names)), dtype=dtype)
    out = pd.DataFrame(values, columns=names, index=part.index)
    out[_TARGET] = part[target].to_numpy()
    return out


_TARGET = "__target__"


def fit_pipeline(job: Job, train, features: list[str], dtypes):
    """Fit the job's column transformer and model on the Dask dataframe ``train``.

    The transformer is fitted in its one pass; the model then trains on a dataframe built
    partition by partition from the transformed features and the target column, which it takes
    by name, so features and labels stay aligned without any extra pass. Returns the fitted
    ``Pipeline([("preprocess", transformer), ("model", model)])`` (no "preprocess" step with
    ``preprocessing: none``).
    """
    import pandas as pd
    from sklearn.pipeline import Pipeline

    from dml import registry
    from dml._blocks import broadcast

    model = registry.get(job.model_name)(**job.model_params)
    if job.no_preprocessing:
        # Non-numeric columns go to the model as they are (CategoricalNB takes them; the
        # others say that they must be encoded).
        if job.search:
            model, job.search_summary = _search_model(job, model, train[features],
                                                      train[job.target])
        else:
            model.fit(train[features + [job.target]], job.target)
        return Pipeline([("model", model)])
    transformers, rest = build_preprocessing(job, dtypes)
    if rest:
        transformers.append(("passthrough", "passthrough", rest))
    ColumnTransformer = registry.get("column_transformer")
    ct = ColumnTransformer(transformers).fit(train[features])
    try:
        names = [str(n) for n in ct.get_feature_names_out()]
    except Exception:  # noqa: BLE001 - names are cosmetic here
        names = None
    try:
        sample = np.asarray(ct.transform(train._meta[features]))
        width, dtype = int(sample.shape[1]), sample.dtype
    except Exception:  # noqa: BLE001 - a transformer that rejects zero rows
        if names is None:
            raise
        width, dtype = len(names), np.dtype(np.float64)
    if names is None or len(names) != width or len(set(names)) != width:
        names = [f"x{i}" for i in range(width)]
    meta = pd.DataFrame(np.empty((0, width), dtype=dtype), columns=names)
    meta[_TARGET] = train._meta[job.target].to_numpy()
    frame = train.map_partitions(_transform_partition, broadcast(ct), features, job.target,
                                 names, dtype, meta=meta)
    if job.search:
        # The preprocessing is fitted once on all training rows, then the model is searched.
        model, job.search_summary = _search_model(job, model, frame[names], frame[_TARGET])
    else:
        model.fit(frame, _TARGET)
    return Pipeline([("preprocess", ct), ("model", model)])


# ============================================================================================
# Cluster
# ============================================================================================

@contextlib.contextmanager
def _connect(args, job_scheduler: dict | None = None, quiet: bool = False):
    """Client for ``--scheduler`` > $DML_SCHEDULER_ADDRESS > job file > embedded cluster.

    A client (and embedded cluster) started here is closed on exit; an already active client
    (``dml.cli.main`` called from a session that has one) is used and left open.
    """
    from dml import runtime

    job_scheduler = job_scheduler or {}
    address = args.scheduler or os.environ.get(runtime.ADDRESS_ENV) or \
        job_scheduler.get("address")
    timeout = args.timeout if args.timeout is not None else job_scheduler.get("timeout", "20s")
    local = {k: job_scheduler[k] for k in _LOCAL_OPTIONS if k in job_scheduler}
    if address:
        local = {}
    # Each TLS file: flag > $DML_TLS_* > the job file's scheduler.tls.
    tls = job_scheduler.get("tls") or {}
    try:
        security = runtime.tls_security(
            **{k: getattr(args, f"tls_{k}", None) or os.environ.get(runtime.TLS_ENV[k])
               or tls.get(k) for k in _TLS_FIELDS}, environ={}) if address else None
    except (ValueError, OSError) as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    previous = runtime.active_client()
    try:
        client = runtime.connect(address, timeout=timeout, security=security, **local)
    except ConnectionError as exc:
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"could not start or reach a Dask cluster: {exc}") from None
    try:
        n = len(client.scheduler_info().get("workers", {}))
        if n == 0:
            try:
                client.wait_for_workers(1, timeout=timeout)
            except (TimeoutError, OSError):
                raise CLIError(f"the Dask scheduler at {address!r} has no workers; start some "
                               f"with `dask worker {address}`") from None
            n = len(client.scheduler_info().get("workers", {}))
        if not quiet:
            where = address or ("the active Dask client" if client is previous
                                else "an embedded local cluster")
            _status(f"Dask: {where} ({n} worker{'s' if n != 1 else ''}); "
                    f"dashboard: {client.dashboard_link}")
        yield client
    finally:
        if client is not previous:
            client.close()


def _import_all(targets: list[str]) -> str:
    import importlib

    import dml

    for target in targets:
        importlib.import_module(target.partition(":")[0])
    return dml.__version__


def _model_modules(model) -> list[str]:
    """Import targets ("module:") of every estimator class inside a (possibly nested) model."""
    seen, stack = set(), [model]
    while stack:
        est = stack.pop()
        seen.add(type(est).__module__ + ":")
        params = est.get_params(deep=True) if hasattr(est, "get_params") else {}
        extra = [t for _, t, *_ in getattr(est, "transformers_", [])]
        for v in list(params.values()) + extra:
            if hasattr(v, "get_params") and not isinstance(v, type) and \
                    type(v).__module__ + ":" not in seen:
                stack.append(v)
    return sorted(seen)


def _prepare_workers(client, targets: list[str]) -> None:
    """Import the modules a command needs on every worker, before anything is timed.

    Fails early, with a clear message, when a worker cannot import dml or runs another version
    of it (kernels are shipped by reference, so workers need the same dml installed).
    """
    import dml

    try:
        versions = client.run(_import_all, targets)
    except Exception as exc:  # noqa: BLE001 - whatever the worker raised
        raise CLIError(f"the Dask workers cannot import dml ({type(exc).__name__}: {exc}); "
                       f"install dml {dml.__version__} on the workers") from None
    other = sorted({v for v in versions.values() if v != dml.__version__})
    if other:
        raise CLIError(f"the Dask workers run dml {', '.join(other)} but this is dml "
                       f"{dml.__version__}; install the same version on both")


def _status(message: str) -> None:
    print(f"dml: {message}", file=sys.stderr, flush=True)


# ============================================================================================
# Output
# ============================================================================================

def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.{digits}f}" if abs(value) < 1e5 else f"{value:.4g}"
    return str(value)


def format_table(headers: list[str], rows: list[list], digits: dict | None = None) -> str:
    """A plain-text table: left-aligned text, right-aligned numbers.

    ``digits`` maps a column index to the number of decimals of its floats (default 4).
    """
    digits = digits or {}
    cells = [[_fmt(v, digits.get(i, 4)) for i, v in enumerate(row)] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows)
               and rows for i in range(len(headers))]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _metrics_table(metrics: dict) -> str:
    rows = [[_METRICS[k].label if k in _METRICS else k, v] for k, v in metrics.items()
            if not isinstance(v, dict)]
    text = format_table(["metric", "value"], rows)
    for k, v in metrics.items():
        if isinstance(v, dict) and "matrix" in v:
            labels = [str(x) for x in v["labels"]]
            cm_rows = [[f"true {lab}"] + list(r) for lab, r in zip(labels, v["matrix"])]
            text += "\n\nconfusion matrix (rows: true, columns: predicted)\n" + \
                format_table([""] + labels, cm_rows)
    return text


# ============================================================================================
# Commands
# ============================================================================================

def cmd_train(args) -> int:
    import dml
    from dml import registry
    from dml._blocks import seed_from

    job = load_job(args.job, output=args.output)
    df = _generate(job) if job.generator else _read(job.data_path, job.data_format,
                                                    job.data_options)
    features = _check_columns(job, df)
    dtypes = df.dtypes[features]
    task = _task_of(registry.get(job.model_name)())
    names = job.metrics or DEFAULT_METRICS.get(task, [])
    if not job.no_preprocessing:
        build_preprocessing(job, dtypes)  # column errors before any cluster work

    with _connect(args, job.scheduler) as client:
        _prepare_workers(client, ["dml.metrics", registry.target(job.model_name)] +
                         ([] if job.no_preprocessing else
                          [registry.target("column_transformer")]))
        seed = None
        if job.test_size is not None:
            seed = seed_from(job.random_state)
            train, test = split_frame(df, job.test_size, seed)
        else:
            train = test = df
        _status(f"fitting {job.model_name} on {job.describe_data()} ...")
        start = time.perf_counter()
        pipeline = fit_pipeline(job, train, features, dtypes)
        fit_seconds = time.perf_counter() - start
        metrics, n_test, n_train = evaluate_frame(pipeline, test, features, job.target, names,
                                                  count=train.shape[0])
    if n_test == 0:
        raise CLIError("the evaluation set is empty: the data has too few rows for "
                       f"split.test_size={job.test_size}")

    job.output.mkdir(parents=True, exist_ok=True)
    model_path = job.output / "model.dml"
    dml.save(pipeline, model_path)
    report = {
        "job": job.name,
        "job_file": str(job.source.resolve()),
        "model": job.model_name,
        "task": task,
        "data": job.describe_data(),
        "features": features,
        "target": job.target,
        "split": None if job.test_size is None else
        {"test_size": job.test_size, "random_state": job.random_state, "seed": seed},
        "evaluated_on": "training rows" if job.test_size is None else "held-out rows",
        "rows": {"train": n_train, "evaluated": n_test},
        "fit_seconds": round(fit_seconds, 3),
        "search": getattr(job, "search_summary", None),
        "metrics": metrics,
        "model_file": str(model_path),
        "dml_version": dml.__version__,
    }
    (job.output / "metrics.json").write_text(json.dumps(report, indent=2, default=_py) + "\n")
    evaluated = "training" if job.test_size is None else "held-out"
    print(f"{job.name}: {job.model_name} on {job.describe_data()}")
    print(f"trained on {n_train} rows in {fit_seconds:.2f} s; evaluated on {n_test} "
          f"{evaluated} rows")
    if getattr(job, "search_summary", None):
        ss = job.search_summary
        print(f"search: {ss['candidates']} candidates x {ss['cv']} folds; best "
              f"{ss['best_params']} (mean CV {ss['scoring']} {ss['best_score']:.4f})")
    print(_metrics_table(metrics))
    print(f"model:   {model_path}\nmetrics: {job.output / 'metrics.json'}")
    return 0


def _load_model(path: str):
    import dml

    if not os.path.exists(path):
        raise CLIError(f"model file not found: {path}")
    return dml.load(path)


def _read_data_arg(path: str, fmt: str | None):
    resolved = _resolve(path, Path.cwd())
    if not _input_files(resolved):
        what = "no file matches the pattern" if _has_glob(path) else "no such file or directory"
        raise CLIError(f"data: {what}: {path}")
    return _read(resolved, fmt, {}), resolved


def _model_features(model, df, target: str | None) -> list[str]:
    names = getattr(model, "feature_names_in_", None)
    columns = [str(c) for c in df.columns]
    if names is None:
        return [c for c in columns if c != target]
    missing = [str(n) for n in names if str(n) not in columns]
    if missing:
        raise CLIError(f"the data lacks the model's feature columns {missing}; the model was "
                       f"trained on {[str(n) for n in names]}")
    return [str(n) for n in names]


def cmd_evaluate(args) -> int:
    model = _load_model(args.model)
    df, _ = _read_data_arg(args.data, args.format)
    if args.target not in df.columns:
        raise CLIError(f"--target: column {args.target!r} not found in {args.data}; columns: "
                       f"{', '.join(map(str, df.columns))}", EXIT_USAGE)
    task = _task_of(model)
    names = []
    for m in [x.strip() for group in (args.metrics or []) for x in group.split(",") if x.strip()]:
        canonical = _metric_name(m)
        if canonical is None:
            from dml.registry import suggest

            close = suggest(m, list(_METRICS) + list(_METRIC_ALIASES))
            hint = f"; did you mean {close!r}?" if close else ""
            raise CLIError(f"--metrics: unknown metric {m!r}{hint} Known: "
                           f"{', '.join(sorted(_METRICS))}", EXIT_USAGE)
        if task is not None and _METRICS[canonical].task != task:
            raise CLIError(f"--metrics: {m!r} is a {_METRICS[canonical].task} metric but the "
                           f"model is a {task} model", EXIT_USAGE)
        names.append(canonical)
    names = names or DEFAULT_METRICS.get(task, [])
    features = _model_features(model, df, args.target)
    with _connect(args, quiet=args.json) as client:
        _prepare_workers(client, ["dml.metrics"] + _model_modules(model))
        metrics, n, _ = evaluate_frame(model, df, features, args.target, names)
    if n == 0:
        raise CLIError(f"{args.data} has no rows")
    if args.json:
        print(json.dumps({"model": args.model, "data": args.data, "rows": n,
                          "metrics": metrics}, indent=2, default=_py))
    else:
        print(f"{args.model} on {args.data}: {n} rows")
        print(_metrics_table(metrics))
    return 0


def _label_dtype(classes):
    """Output dtype of predicted labels: pandas strings for text labels (Parquet-friendly)."""
    import pandas as pd

    if classes is None:
        return np.dtype(np.float64)
    classes = np.asarray(classes)
    if classes.dtype.kind in "OU" and all(isinstance(c, str) for c in classes.tolist()):
        return pd.StringDtype()
    return classes.dtype


def _predict_partition(part, model, features, keep, proba, classes):
    import pandas as pd

    out = pd.DataFrame(index=part.index)
    for col in keep:
        out[col] = part[col]
    X = part[features]
    dtype = _label_dtype(classes)
    if len(part):
        out["prediction"] = pd.array(np.asarray(model.predict(X)).tolist()
                                     if isinstance(dtype, pd.StringDtype)
                                     else model.predict(X), dtype=dtype)
        if proba:
            p = model.predict_proba(X)
            for j, c in enumerate(classes):
                out[f"proba_{c}"] = p[:, j]
    else:
        out["prediction"] = pd.array([], dtype=dtype)
        if proba:
            for c in classes:
                out[f"proba_{c}"] = np.empty(0)
    return out


def _single_parquet(part, path):
    part.to_parquet(path, index=False)
    return len(part)


def cmd_predict(args) -> int:
    import dask
    from dask import delayed

    from dml._blocks import broadcast

    model = _load_model(args.model)
    df, resolved = _read_data_arg(args.data, args.format)
    features = _model_features(model, df, None)
    keep = args.keep or []
    missing = [k for k in keep if k not in df.columns]
    if missing:
        raise CLIError(f"--keep: columns {missing} not found in {args.data}", EXIT_USAGE)
    classes = getattr(model, "classes_", None)
    if args.proba and (classes is None or not hasattr(model, "predict_proba")):
        raise CLIError("--proba: this model does not predict probabilities", EXIT_USAGE)
    meta = _predict_partition(df._meta, model, features, keep, args.proba, classes)
    out = Path(args.output).resolve()
    multi_file = len(_input_files(resolved)) > 1
    suffix = out.suffix.lower()
    if suffix == ".csv" and not multi_file:
        mode = "csv"
    elif suffix in (".parquet", ".pq") and df.npartitions == 1 and not multi_file:
        mode = "parquet-file"
    else:
        mode = "parquet-dir"
        if suffix == ".csv":
            raise CLIError(f"--output: {args.data} is several files; write a Parquet directory "
                           "instead (e.g. --output predictions/ or predictions.parquet)",
                           EXIT_USAGE)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise CLIError(f"--output: {out} already exists; the predictions go to a new Parquet "
                           "directory, so choose a new path or remove it", EXIT_USAGE)
    with _connect(args) as client:
        _prepare_workers(client, _model_modules(model))
        preds = df.map_partitions(_predict_partition, broadcast(model), features, keep,
                                  args.proba, classes, meta=meta)
        out.parent.mkdir(parents=True, exist_ok=True)
        if mode == "csv":
            # Dask appends the partitions to one file in order, on the workers.
            preds.to_csv(str(out), single_file=True, index=False)
            written = f"CSV file {out}"
        elif mode == "parquet-file":
            dask.compute(delayed(_single_parquet)(preds.to_delayed()[0], str(out)))
            written = f"Parquet file {out}"
        else:
            preds.to_parquet(str(out), write_index=False)
            written = f"Parquet directory {out} ({preds.npartitions} part(s))"
    print(f"predictions written: {written}")
    return 0


# ============================================================================================
# Demo
# ============================================================================================

@dataclass(frozen=True)
class DemoEntry:
    """One row of ``dml demo``: a registered model trained on generated data.

    ``make_data(n_samples, chunks, seed)`` returns lazy Dask arrays ``(X, y)``. Later model
    families add one entry each to :data:`DEMOS`.
    """

    model: str
    data: str
    make_data: Callable[[int, int, int], tuple]
    params: dict = field(default_factory=dict)


def _demo_classification(n, chunks, seed):
    from dml.datasets import make_classification

    return make_classification(n_samples=n, n_features=20, n_informative=6, n_redundant=2,
                               n_classes=3, n_clusters_per_class=1, random_state=seed,
                               chunks=chunks)


def _demo_counts(n, chunks, seed):
    from dml.datasets import make_counts

    return make_counts(n_samples=n, n_features=12, n_classes=4, random_state=seed,
                       chunks=chunks)


def _bin_block(x, edges):
    return np.digitize(x, edges).astype(np.float64)


def _demo_binned(n, chunks, seed):
    X, y = _demo_classification(n, chunks, seed)
    # Fixed edges (no data pass): the features are roughly standard normal.
    edges = np.array([-1.5, -0.5, 0.5, 1.5])
    return X.map_blocks(_bin_block, edges, dtype=np.float64), y


def _demo_ratings_block(seed, index, n, n_users, n_items):
    from dml.datasets import _ratings_chunk

    return _ratings_chunk(seed, index, n, n_users, n_items, 5, 0.3, 3.5).to_numpy()


def _demo_ratings(n, chunks, seed):
    import dask
    import dask.array as da

    sizes = [min(chunks, n - s) for s in range(0, n, chunks)]
    # ~80 ratings per user and ~160 per item: with n/20 users (16 each) a rank-5 model overfit
    # (400,000 rows: test R2 -0.5); at this density ALS reaches the noise level (RMSE ~0.34).
    n_users, n_items = max(n // 100, 10), max(n // 200, 10)
    arr = da.concatenate([
        da.from_delayed(dask.delayed(_demo_ratings_block, pure=True)(seed, j, m, n_users,
                                                                     n_items),
                        shape=(m, 3), dtype=np.float64) for j, m in enumerate(sizes)])
    return arr[:, :2], arr[:, 2]


def _demo_regression(n, chunks, seed):
    from dml.datasets import make_regression

    return make_regression(n_samples=n, n_features=20, n_informative=8, noise=10.0,
                           random_state=seed, chunks=chunks)


def _demo_blobs(n, chunks, seed):
    from dml.datasets import make_blobs

    return make_blobs(n_samples=n, n_features=10, centers=6, cluster_std=1.5,
                      random_state=seed, chunks=chunks)


DEMOS: list[DemoEntry] = [
    DemoEntry("gaussian_nb", "make_classification", _demo_classification),
    DemoEntry("multinomial_nb", "make_counts", _demo_counts),
    DemoEntry("bernoulli_nb", "make_counts", _demo_counts),
    DemoEntry("categorical_nb", "make_classification, 5 bins", _demo_binned),
    DemoEntry("decision_tree_classifier", "make_classification", _demo_classification,
              {"max_depth": 8}),
    DemoEntry("random_forest_classifier", "make_classification", _demo_classification,
              {"n_estimators": 20, "max_depth": 10, "random_state": 0}),
    DemoEntry("logistic_regression", "make_classification", _demo_classification),
    DemoEntry("linear_svc", "make_classification", _demo_classification),
    DemoEntry("sgd_classifier", "make_classification", _demo_classification,
              {"loss": "log_loss", "optimizer": "adam", "batch_size": 256, "random_state": 0}),
    DemoEntry("mlp_classifier", "make_classification", _demo_classification,
              {"hidden_layer_sizes": [32], "batch_size": 128, "learning_rate_init": 0.01,
               "max_iter": 20, "random_state": 0}),
    DemoEntry("ridge", "make_regression", _demo_regression, {"alpha": 1.0}),
    DemoEntry("kmeans", "make_blobs, 6 centres", _demo_blobs,
              {"n_clusters": 6, "random_state": 0}),
    DemoEntry("matrix_factorization", "make_ratings, rank 5", _demo_ratings,
              {"n_factors": 5, "solver": "als", "reg": 0.05, "n_epochs": 10, "random_state": 0}),
]


def run_demo_entry(entry: DemoEntry, n_samples: int, chunks: int, seed: int = 0) -> dict:
    """Train one demo entry on the current scheduler; return a row of the demo table."""
    import dask
    from sklearn.base import is_clusterer
    from sklearn.metrics import adjusted_rand_score

    from dml import registry

    X, y = entry.make_data(n_samples, chunks, seed)
    X_train, X_test, y_train, y_test = split_blocks(X, y)
    model = registry.get(entry.model)(**entry.params)
    start = time.perf_counter()
    if is_clusterer(model):
        # Unsupervised: fit on X alone, then score the held-out assignment against the
        # generating labels (adjusted Rand index; label permutations do not matter).
        model.fit(X_train)
        fit_seconds = time.perf_counter() - start
        y_true, labels = dask.compute(y_test, model.predict(X_test))
        return {"model": entry.model, "data": entry.data, "rows": n_samples,
                "fit_seconds": fit_seconds, "ari": float(adjusted_rand_score(y_true, labels))}
    model.fit(X_train, y_train)
    fit_seconds = time.perf_counter() - start
    task = _task_of(model)
    names = ["accuracy", "f1_macro"] if task == _CLASSIFICATION else ["rmse", "r2"]
    # Persisted on the workers: the metrics then read them there instead of regenerating.
    y_test, y_pred = dask.persist(y_test, model.predict(X_test))
    metrics = compute_metrics(names, y_test, y_pred, None, getattr(model, "classes_", None))
    return {"model": entry.model, "data": entry.data, "rows": n_samples,
            "fit_seconds": fit_seconds, **metrics}


def cmd_demo(args) -> int:
    from dml import registry

    n, chunks = (20_000, 5_000) if args.quick else (400_000, 50_000)
    rows, skipped = [], []
    with _connect(args) as client:
        _prepare_workers(client, ["dml.datasets", "dml.metrics"] +
                         [registry.target(e.model) for e in DEMOS])
        for entry in DEMOS:
            try:
                registry.get(entry.model)
            except ImportError:
                skipped.append(entry.model)
                continue
            _status(f"demo: {entry.model} on {entry.data} ({n} rows) ...")
            rows.append(run_demo_entry(entry, n, chunks))
    columns = [("model", "model"), ("data", "data"), ("rows", "rows"),
               ("fit_seconds", "fit s"), ("accuracy", "accuracy"), ("f1_macro", "F1 (macro)"),
               ("rmse", "RMSE"), ("r2", "R2"), ("ari", "ARI")]
    columns = [(k, h) for k, h in columns if any(k in r for r in rows)]
    if not rows:
        raise CLIError("no model family is installed: " + ", ".join(skipped))
    print(format_table([h for _, h in columns], [[r.get(k) for k, _ in columns] for r in rows],
                       digits={[k for k, _ in columns].index("fit_seconds"): 2}))
    if skipped:
        print(f"(not installed, skipped: {', '.join(skipped)})")
    return 0


# ============================================================================================
# Entry point
# ============================================================================================

def _parser() -> argparse.ArgumentParser:
    import dml

    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a subcommand's default must not undo `dml --debug COMMAND`.
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of an error")
    scheduler = argparse.ArgumentParser(add_help=False)
    scheduler.add_argument("--scheduler", metavar="ADDRESS",
                           help="Dask scheduler address (default: $DML_SCHEDULER_ADDRESS, the "
                                "job file's scheduler.address, or an embedded local cluster)")
    scheduler.add_argument("--timeout", metavar="SECONDS", type=float,
                           help="how long to wait for the scheduler (default 20)")
    for k, what in (("ca_file", "CA certificate(s) that signed the scheduler's certificate"),
                    ("cert", "client certificate (may contain the key too)"),
                    ("key", "client private key")):
        scheduler.add_argument(f"--tls-{k.replace('_', '-')}", dest=f"tls_{k}", metavar="FILE",
                               help=f"TLS {what} for a tls:// scheduler (default: "
                                    f"${'DML_TLS_' + k.upper()}, the job file's scheduler.tls)")

    p = argparse.ArgumentParser(
        prog="dml", description="Train, evaluate and apply dml models on a Dask cluster.")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    p.add_argument("--version", action="version", version=f"dml {dml.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    t = sub.add_parser("train", parents=[common, scheduler],
                       help="train a model from a YAML job file",
                       description="Train the job's preprocessing + model pipeline, evaluate it "
                                   "on held-out rows, write model.dml and metrics.json.",
                       epilog=JOB_REFERENCE, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("job", help="job file (YAML)")
    t.add_argument("--output", metavar="DIR", help="output directory (overrides the job file)")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("evaluate", parents=[common, scheduler],
                       help="metrics of a saved model on labelled data")
    e.add_argument("model", help="model file written by `dml train` or dml.save")
    e.add_argument("data", help="CSV/TSV/Parquet file, glob or Parquet directory")
    e.add_argument("--target", required=True, metavar="COL", help="label column")
    e.add_argument("--metrics", action="append", metavar="NAMES",
                   help="comma-separated metric names (default: by task type)")
    e.add_argument("--format", choices=_FORMATS, help="data format (default: from extension)")
    e.add_argument("--json", action="store_true", help="print JSON instead of a table")
    e.set_defaults(func=cmd_evaluate)

    pr = sub.add_parser("predict", parents=[common, scheduler],
                        help="write predictions of a saved model",
                        description="Predict every row of DATA. --output PATH: *.csv writes "
                                    "one CSV file; *.parquet one Parquet file (single-partition "
                                    "data) or a Parquet directory; any other path, or "
                                    "multi-file data, a Parquet directory. The Dask workers "
                                    "read DATA and write the output, so on a multi-machine "
                                    "cluster both must be on storage the workers share.")
    pr.add_argument("model", help="model file written by `dml train` or dml.save")
    pr.add_argument("data", help="CSV/TSV/Parquet file, glob or Parquet directory")
    pr.add_argument("--output", "-o", required=True, metavar="PATH",
                    help="where to write the predictions")
    pr.add_argument("--proba", action="store_true",
                    help="add one probability column per class (proba_<class>)")
    pr.add_argument("--keep", nargs="+", metavar="COL", help="input columns to copy to the output")
    pr.add_argument("--format", choices=_FORMATS, help="data format (default: from extension)")
    pr.set_defaults(func=cmd_predict)

    d = sub.add_parser("demo", parents=[common, scheduler],
                       help="train every model family on generated data and print one table")
    d.add_argument("--quick", action="store_true", help="smaller data (a few seconds)")
    d.set_defaults(func=cmd_demo)
    return p


_NOISY_LOGGERS = ("distributed", "distributed.nanny", "distributed.scheduler",
                  "distributed.worker", "distributed.core", "distributed.batched",
                  "distributed.comm", "distributed.client", "distributed.deploy")


def _quiet_dask_logs() -> dict:
    """Silence cluster start-up/shut-down chatter (errors still show); return the old levels."""
    import logging

    old = {}
    for name in _NOISY_LOGGERS:
        logger = logging.getLogger(name)
        old[name] = logger.level
        logger.setLevel(logging.ERROR)
    return old


def main(argv: list[str] | None = None) -> int:
    """Run the ``dml`` command; returns the exit status."""
    import logging
    import warnings

    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    prog = f"dml {args.command}"
    levels = {} if args.debug else _quiet_dask_logs()
    try:
        with warnings.catch_warnings():
            # Dask's note that text labels become object arrays is not actionable for users.
            warnings.filterwarnings("ignore", message="Dask currently has limited support for "
                                                      "converting pandas extension dtypes")
            return args.func(args)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the command line reports, --debug re-raises
        if args.debug:
            raise
        print(_one_line(prog, exc), file=sys.stderr)
        return exc.code if isinstance(exc, CLIError) else EXIT_FAILURE
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _one_line(prog: str, exc: Exception) -> str:
    if isinstance(exc, JobError):
        return "\n".join(f"{prog}: error: {m}" for m in exc.messages)
    message = str(exc) or type(exc).__name__
    if isinstance(exc, CLIError):
        return f"{prog}: error: {message}"
    from dml.io import ModelFileError

    if isinstance(exc, (ModelFileError, FileNotFoundError, ConnectionError, PermissionError)):
        return f"{prog}: error: {message}"
    if isinstance(exc, (ValueError, TypeError, OSError, ImportError)):
        return f"{prog}: error: {message} (run with --debug for the traceback)"
    return (f"{prog}: internal error: {type(exc).__name__}: {message} (run with --debug for the "
            "traceback and please report it)")


if __name__ == "__main__":  # `python -m dml.cli`; the guard matters for spawned workers
    sys.exit(main())
