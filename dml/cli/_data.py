"""The data of a job: reading or generating it, checking its columns, the preprocessing, fitting
the pipeline and evaluating a model, all on the workers (only metrics come back).
"""
from __future__ import annotations

import numpy as np

from dml.cli._errors import JobError
from dml.cli._job import Job, Step
from dml.cli._schema import Errors

__all__ = ["read_data", "read_libsvm", "generate", "arrays_to_frame", "check_columns",
           "build_preprocessing", "fit_pipeline", "fit_arrays", "evaluate_frame",
           "evaluate_arrays", "n_rows"]


def read_data(path: str, fmt: str | None, options: dict):
    from dml import datasets

    if fmt == "libsvm":
        # Sparse features without names: they are arrays, read by read_libsvm.
        raise JobError("libsvm files hold sparse features without column names; they are read "
                       "as arrays (read_libsvm), not as a table")

    if fmt == "csv":
        return datasets.read_csv(path, **options)
    if fmt == "tsv":
        return datasets.read_csv(path, **{"sep": "\t", **options})
    if fmt == "parquet":
        return datasets.read_parquet(path, **options)
    return datasets.read_table(path, **options)


def read_libsvm(path: str, options: dict):
    """libsvm files as (X, y): a Dask array of CSR row blocks and the labels, read on the
    workers by :func:`dml.datasets.read_svmlight` (one pass to count rows and columns)."""
    from dml import datasets

    X, y = datasets.read_svmlight(path, **options)[:2]
    return X, y


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


def generate(job: Job):
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


def check_columns(job: Job, df) -> list[str]:
    """Check target / features / preprocessing columns against the data; return the features."""
    from dml.registry import suggest

    c = Errors(str(job.source))
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
    c = Errors(str(job.source))
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


def fit_arrays(job: Job, X, y):
    """Fit the job's model (or its search) on arrays, e.g. the sparse X of libsvm data; returns
    ``Pipeline([("model", model)])`` like :func:`fit_pipeline` with ``preprocessing: none``."""
    from sklearn.pipeline import Pipeline

    from dml import registry

    model = registry.get(job.model_name)(**job.model_params)
    if job.search:
        model, job.search_summary = _search_model(job, model, X, y)
    else:
        model.fit(X, y)
    return Pipeline([("model", model)])


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

    from dml.model_selection import metric_info, score_predictions

    classes = getattr(model, "classes_", None)
    needs_proba = any(metric_info(n).response != "predict" for n in names) and \
        classes is not None
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
    return score_predictions(names, y_true, y_pred, proba, classes=classes), n, count


def n_rows(a) -> int:
    """Rows of a Dask array, counted from its blocks when a split left them unknown."""
    if any(c != c for c in a.chunks[0]):
        a = a.compute_chunk_sizes()
    return int(a.shape[0])


def evaluate_arrays(model, X, y, names: list[str]):
    """Metrics of ``model`` on aligned Dask arrays X, y (one pass; predictions stay on the
    workers). Returns ``(metrics, n_rows)``."""
    import dask

    from dml.model_selection import metric_info, score_predictions

    classes = getattr(model, "classes_", None)
    needs_proba = any(metric_info(n).response != "predict" for n in names) and \
        classes is not None
    y_pred = model.predict(X)
    proba = model.predict_proba(X) if needs_proba else None
    y, y_pred, proba = dask.persist(y, y_pred, proba)
    n = n_rows(y)
    if n == 0:
        return {}, 0
    return score_predictions(names, y, y_pred, proba, classes=classes), n
