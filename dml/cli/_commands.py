"""The commands ``train``, ``evaluate``, ``predict`` and ``validate``, and what they share:
the connection to the cluster, the check of the workers, the plain-text tables.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from dml.cli._data import (build_preprocessing, check_columns, evaluate_arrays, evaluate_frame,
                           fit_arrays, fit_pipeline, generate, n_rows, read_data, read_libsvm)
from dml.cli._errors import EXIT_USAGE, CLIError, JobError
from dml.cli._job import has_glob, input_files, is_libsvm, load_job, resolve_path

__all__ = ["cmd_train", "cmd_evaluate", "cmd_predict", "cmd_validate", "format_table",
           "connect", "prepare_workers", "status"]

_LOCAL_OPTIONS = ("n_workers", "threads_per_worker", "memory_limit")
_TLS_FIELDS = ("ca_file", "cert", "key")


@contextlib.contextmanager
def connect(args, job_scheduler: dict | None = None, quiet: bool = False):
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
            status(f"Dask: {where} ({n} worker{'s' if n != 1 else ''}); "
                    f"dashboard: {client.dashboard_link}")
        yield client
    finally:
        if client is not previous:
            if not address:
                _mute_shutdown_noise(client)
            client.close()


def _mute_worker_logs() -> None:
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def _mute_shutdown_noise(client) -> None:
    """Before an embedded cluster closes: its workers may log a failed heartbeat, with a
    traceback, when the scheduler stops first. The job is over and nothing is lost, so those
    records would only alarm whoever reads the job's log."""
    try:
        client.run(_mute_worker_logs)
    except Exception:  # noqa: BLE001 - a cluster already going down: nothing to mute
        pass


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


def prepare_workers(client, targets: list[str]) -> None:
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


def status(message: str) -> None:
    print(f"dml: {message}", file=sys.stderr, flush=True)


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
    from dml.model_selection import metric_info

    rows = [[metric_info(k).label, v] for k, v in metrics.items() if not isinstance(v, dict)]
    text = format_table(["metric", "value"], rows)
    for k, v in metrics.items():
        if isinstance(v, dict) and "matrix" in v:
            labels = [str(x) for x in v["labels"]]
            cm_rows = [[f"true {lab}"] + list(r) for lab, r in zip(labels, v["matrix"])]
            text += "\n\nconfusion matrix (rows: true, columns: predicted)\n" + \
                format_table([""] + labels, cm_rows)
    return text


def _py(v):
    return v.item() if isinstance(v, np.generic) else v


def _job_data(job):
    """The job's (lazy) data, its feature columns and their dtypes, with every column checked.

    Reads only what Dask needs to know the columns (a sample of the first file, or the
    generator's metadata); no cluster is needed.
    """
    if job.libsvm:
        # Sparse features without names: nothing to check before the cluster reads the files.
        return None, [], None
    df = generate(job) if job.generator else read_data(job.data_path, job.data_format,
                                                       job.data_options)
    features = check_columns(job, df)
    dtypes = df.dtypes[features]
    if not job.no_preprocessing:
        build_preprocessing(job, dtypes)  # column errors before any cluster work
    return df, features, dtypes


def cmd_validate(args) -> int:
    """Check job files without a cluster: fields, names, data paths and columns."""
    failed = []
    for path in args.jobs:
        try:
            job = load_job(path)
            _, features, _ = _job_data(job)
        except JobError as exc:
            failed.append(exc)
            continue
        except CLIError as exc:  # an unreadable job file: reported with the others
            failed.append(JobError(str(exc)))
            continue
        what = ("sparse libsvm features" if job.libsvm else
                f"target {job.target!r}, {len(features)} feature column(s)")
        print(f"{path}: valid ({job.model_name} on {job.describe_data()}, {what})")
    if failed:
        raise JobError([m for exc in failed for m in exc.messages])
    return 0


def cmd_train(args) -> int:
    import dml
    from dml import registry
    from dml.model_selection import default_metrics, train_test_split
    from dml.model_selection._scoring import task_of
    from dml._blocks import seed_from

    job = load_job(args.job, output=args.output)
    df, features, dtypes = _job_data(job)
    model = registry.get(job.model_name)()
    task = task_of(model)
    names = job.metrics or default_metrics(model)

    with connect(args, job.scheduler) as client:
        prepare_workers(client, ["dml.metrics", registry.target(job.model_name)] +
                         ([] if job.no_preprocessing else
                          [registry.target("column_transformer")]))
        seed = None
        data = read_libsvm(job.data_path, job.data_options) if job.libsvm else (df,)
        if job.test_size is not None:
            seed = seed_from(job.random_state)
            parts = train_test_split(*data, test_size=job.test_size, random_state=seed,
                                     blockwise=True)
            train, test = parts[0::2], parts[1::2]
        else:
            train = test = data
        status(f"fitting {job.model_name} on {job.describe_data()} ...")
        start = time.perf_counter()
        if job.libsvm:
            pipeline = fit_arrays(job, *train)
            fit_seconds = time.perf_counter() - start
            metrics, n_test = evaluate_arrays(pipeline, *test, names)
            n_train = n_rows(train[1])
        else:
            pipeline = fit_pipeline(job, train[0], features, dtypes)
            fit_seconds = time.perf_counter() - start
            metrics, n_test, n_train = evaluate_frame(pipeline, test[0], features, job.target,
                                                      names, count=train[0].shape[0])
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


def _resolve_data_arg(path: str) -> str:
    resolved = resolve_path(path, Path.cwd())
    if not input_files(resolved):
        what = "no file matches the pattern" if has_glob(path) else "no such file or directory"
        raise CLIError(f"data: {what}: {path}")
    return resolved


def _read_data_arg(path: str, fmt: str | None):
    resolved = _resolve_data_arg(path)
    return read_data(resolved, fmt, {}), resolved


def _read_libsvm_arg(model, path: str, resolved: str):
    """(X, y) of libsvm files in the model's columns; reads on the workers (inside connect)."""
    n_features = getattr(model, "n_features_in_", None)
    try:
        return read_libsvm(resolved, {} if n_features is None else
                           {"n_features": int(n_features)})
    except ValueError as exc:
        hint = ("" if n_features is None else
                f" (the model was trained on {int(n_features)} features)")
        raise CLIError(f"{path}: {exc}{hint}") from None


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
    libsvm = is_libsvm(args.data, args.format)
    if libsvm:
        # The label of a libsvm line is its first field; the features have no names.
        if args.target not in (None, "y"):
            raise CLIError(f"--target: libsvm data has one label, named y; got "
                           f"{args.target!r} (leave --target out)", EXIT_USAGE)
        resolved = _resolve_data_arg(args.data)
    else:
        if args.target is None:
            raise CLIError("--target: name the label column of the data (e.g. --target label)",
                           EXIT_USAGE)
        df, _ = _read_data_arg(args.data, args.format)
        if args.target not in df.columns:
            raise CLIError(f"--target: column {args.target!r} not found in {args.data}; "
                           f"columns: {', '.join(map(str, df.columns))}", EXIT_USAGE)
    from dml.model_selection import default_metrics, metric_info
    from dml.model_selection._scoring import task_of

    task = task_of(model)
    names = []
    for m in [x.strip() for group in (args.metrics or []) for x in group.split(",") if x.strip()]:
        try:
            info = metric_info(m)
        except ValueError as exc:
            raise CLIError(f"--metrics: {exc}", EXIT_USAGE) from None
        if task is not None and info.task != task:
            raise CLIError(f"--metrics: {m!r} is a {info.task} metric but the model is a {task} "
                           "model", EXIT_USAGE)
        names.append(info.short)
    names = names or default_metrics(model)
    features = None if libsvm else _model_features(model, df, args.target)
    with connect(args, quiet=args.json) as client:
        prepare_workers(client, ["dml.metrics"] + _model_modules(model))
        if libsvm:
            X, y = _read_libsvm_arg(model, args.data, resolved)
            metrics, n = evaluate_arrays(model, X, y, names)
        else:
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
    return _add_predictions(out, part[features], model, proba, classes)


def _predict_sparse_block(X, y, model, keep_y, proba, classes):
    """Predictions of one CSR row block of libsvm data (rows in file order)."""
    import pandas as pd

    out = pd.DataFrame(index=pd.RangeIndex(X.shape[0]))
    if keep_y:
        out["y"] = np.asarray(y)
    return _add_predictions(out, X, model, proba, classes)


def _add_predictions(out, X, model, proba, classes):
    import pandas as pd

    dtype = _label_dtype(classes)
    if len(out):
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


def _libsvm_predictions(model, path, resolved, keep_y, proba, classes):
    """A Dask dataframe of predictions, one partition per CSR block of the libsvm files."""
    import dask.dataframe as dd
    import scipy.sparse as sp
    from dask import delayed

    from dml._blocks import broadcast

    X, y = _read_libsvm_arg(model, path, resolved)
    X = X.rechunk({1: -1})
    if y.chunks[0] != X.chunks[0]:
        y = y.rechunk((X.chunks[0],))
    xparts, yparts = list(X.to_delayed().ravel()), list(y.to_delayed().ravel())
    meta = _predict_sparse_block(sp.csr_matrix((0, X.shape[1])), np.empty(0, y.dtype), model,
                                 keep_y, proba, classes)
    shared = broadcast(model)
    parts = [delayed(_predict_sparse_block, pure=True)(xb, yb, shared, keep_y, proba, classes)
             for xb, yb in zip(xparts, yparts)]
    return dd.from_delayed(parts, meta=meta)


def _single_parquet(part, path):
    part.to_parquet(path, index=False)
    return len(part)


def cmd_predict(args) -> int:
    import dask
    from dask import delayed

    from dml._blocks import broadcast

    model = _load_model(args.model)
    keep = args.keep or []
    libsvm = is_libsvm(args.data, args.format)
    if libsvm:
        resolved = _resolve_data_arg(args.data)
        wrong = [k for k in keep if k != "y"]
        if wrong:
            raise CLIError(f"--keep: libsvm data has no named columns, only the label y; got "
                           f"{wrong}", EXIT_USAGE)
    else:
        df, resolved = _read_data_arg(args.data, args.format)
        features = _model_features(model, df, None)
        missing = [k for k in keep if k not in df.columns]
        if missing:
            raise CLIError(f"--keep: columns {missing} not found in {args.data}", EXIT_USAGE)
    classes = getattr(model, "classes_", None)
    if args.proba and (classes is None or not hasattr(model, "predict_proba")):
        raise CLIError("--proba: this model does not predict probabilities", EXIT_USAGE)
    out = Path(args.output).resolve()
    multi_file = len(input_files(resolved)) > 1
    suffix = out.suffix.lower()
    # A libsvm file's blocks are known only after the workers read it: one Parquet file only
    # for one block (checked again below).
    if suffix == ".csv" and not multi_file:
        mode = "csv"
    elif suffix in (".parquet", ".pq") and not multi_file and (libsvm or df.npartitions == 1):
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
    with connect(args) as client:
        prepare_workers(client, _model_modules(model))
        if libsvm:
            preds = _libsvm_predictions(model, args.data, resolved, "y" in keep, args.proba,
                                        classes)
            if mode == "parquet-file" and preds.npartitions > 1:
                mode = "parquet-dir"
        else:
            meta = _predict_partition(df._meta, model, features, keep, args.proba, classes)
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
