"""Reading a job file: the schema's structural checks, then the checks against dml and the disk.

:func:`load_job` runs :func:`dml.cli._schema.check` (types, bounds, unknown fields) and then what
the schema cannot know: registered model and step names, their parameters, metric names and the
model's task, generator parameters, and whether the data path exists. Every problem is reported
at once, one line per field.
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path

from dml.cli._errors import EXIT_USAGE, CLIError, JobError
from dml.cli._schema import BAD, JOB_SCHEMA, Errors, check

__all__ = ["Job", "Step", "load_job", "resolve_path", "input_files", "has_glob",
           "is_libsvm"]

_LOCAL_OPTIONS = ("n_workers", "threads_per_worker", "memory_limit")
_TLS_FIELDS = ("ca_file", "cert", "key")


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

    @property
    def libsvm(self) -> bool:
        """Sparse libsvm data: X and y arrays instead of a dataframe of named columns."""
        return self.data_path is not None and is_libsvm(self.data_path, self.data_format)

    def describe_data(self) -> str:
        if self.generator:
            return self.generator
        return self.data_path or ""


#: File name endings read as libsvm when data.format is not given.
LIBSVM_SUFFIXES = (".libsvm", ".svm", ".svmlight")


def is_libsvm(path: str, fmt: str | None) -> bool:
    """Whether data at ``path`` is read as libsvm: said by ``fmt``, else by the file ending."""
    return fmt == "libsvm" or (fmt is None and path.lower().rstrip("*").endswith(LIBSVM_SUFFIXES))


def _is_url(path: str) -> bool:
    return "://" in path


def has_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


def resolve_path(path: str, base: Path) -> str:
    """``path`` with ``$VARIABLES`` and ``~`` expanded, relative paths taken from ``base``."""
    path = os.path.expandvars(path)
    if _is_url(path):
        return path
    p = Path(os.path.expanduser(path))
    return str(p if p.is_absolute() else (base / p).resolve())


def input_files(path: str) -> list[str]:
    """Files a path/glob/directory refers to ([] when nothing exists); URLs are not checked."""
    if _is_url(path):
        return [path]
    if has_glob(path):
        return sorted(glob.glob(path))
    if os.path.isdir(path):
        return sorted(str(p) for p in Path(path).rglob("*") if p.is_file()
                      and not p.name.startswith((".", "_")))
    return [path] if os.path.exists(path) else []


def _read_yaml(source: Path, shown: str):
    import yaml

    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CLIError(f"job file not found: {shown}", EXIT_USAGE) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read the job file {shown}: {exc}", EXIT_USAGE) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise JobError(f"{shown}: invalid YAML{where}: {problem}") from None


def load_job(path, *, output: str | None = None) -> Job:
    """Read and validate a job file; raise :class:`JobError` naming every bad field."""
    source = Path(path)
    shown = str(path)
    raw = _read_yaml(source, shown)
    c = Errors(shown)
    if not isinstance(raw, dict):
        top = ", ".join(f.name for f in JOB_SCHEMA.fields)
        raise JobError(f"{shown}: expected a mapping of fields ({top}), got "
                       f"{'nothing (null)' if raw is None else repr(raw)[:200]}")
    doc = check(JOB_SCHEMA, raw, "", c)
    base = source.resolve().parent
    job = Job(source=source, name=source.stem)

    name = doc.get("name")
    if isinstance(name, str):
        if "/" in name or name in (".", ".."):
            c.error("name", f"must not contain '/', got {name!r}")
        else:
            job.name = name

    _data(c, doc, job, base)

    if "target" in doc:
        job.target = doc["target"] if doc["target"] is not BAD else None
    elif job.generator is None and not job.libsvm and not _bad(doc.get("data")):
        c.error("target", "missing: name the label column")
    else:
        job.target = "y"
    if job.libsvm:
        if job.target != "y":
            c.error("target", f"libsvm data has one label, named y; got {job.target!r}")
        for key in ("features", "preprocessing"):
            if key in doc and doc[key] not in ("none", False, None):
                c.error(key, "libsvm data has no named columns: leave out features and "
                             "preprocessing (the model trains on the sparse features as read)")
    features = doc.get("features")
    if isinstance(features, list):
        job.features = features
        if not features:
            c.error("features", "expected at least one column")
        dup = sorted({f for f in features if features.count(f) > 1})
        if dup:
            c.error("features", f"duplicate columns {dup}")
        if job.target is not None and job.target in features:
            c.error("features", f"the target column {job.target!r} cannot be a feature")

    cls = _model(c, doc, job)
    if isinstance(doc.get("search"), dict):
        _search(c, doc["search"], cls, job)
    if "preprocessing" in doc:
        _preprocessing(c, doc["preprocessing"], job)

    split = doc.get("split", {})
    if split in ("none", False, None):
        job.test_size = None
    elif isinstance(split, dict):
        if isinstance(split.get("test_size"), (int, float)):
            job.test_size = float(split["test_size"])
        if "random_state" in split and split["random_state"] is not BAD:
            job.random_state = split["random_state"]

    _metrics(c, doc.get("metrics"), cls, job)
    _scheduler(c, doc.get("scheduler"), job, base)

    if output is not None:
        job.output = Path(output).resolve()
    elif isinstance(doc.get("output"), str):
        job.output = Path(resolve_path(doc["output"], base))
    if job.output is None:
        job.output = (Path.cwd() / "dml-output" / job.name).resolve()

    if c.errors:
        raise JobError(c.errors)
    return job


def _bad(value) -> bool:
    return value is BAD or (isinstance(value, dict) and BAD in value.values())


def _data(c: Errors, doc: dict, job: Job, base: Path) -> None:
    if "data" not in doc:
        c.error("data", "missing: give {path: ...} or {generator: ..., params: {...}}")
        return
    data = doc["data"]
    if data is BAD:
        return
    if isinstance(data, str):
        data = {"path": data}
    if "generator" in data and "path" in data:
        c.error("data", "give either path or generator, not both")
    if "generator" in data:
        for k in ("format", "options"):
            if k in data:
                c.error(f"data.{k}", "applies to data.path, not to generated data")
        if data["generator"] is not BAD:
            _generator(c, data, job)
    elif "path" in data:
        if "params" in data:
            c.error("data.params", "applies to data.generator, not to data.path")
        if data["path"] is not BAD:
            _data_path(c, data, job, base)
    else:
        from dml.cli._schema import GENERATORS

        c.error("data", "missing path (a CSV/Parquet file or glob) or generator "
                        f"({', '.join(GENERATORS)})")


def _generator(c: Errors, data: dict, job: Job) -> None:
    import inspect

    gen = job.generator = data["generator"]
    params = data.get("params") or {}
    if params is BAD:
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
            _unknown_param(c, k, known, f"data.params.{k}", gen)
    job.generator_params = params


def _data_path(c: Errors, data: dict, job: Job, base: Path) -> None:
    path = data["path"]
    resolved = resolve_path(path, base)
    if not input_files(resolved):
        what = "no file matches the pattern" if has_glob(path) else "no such file or directory"
        shown = path if path == resolved else f"{path} (= {resolved})"
        c.error("data.path", f"{what}: {shown}")
    job.data_path = resolved
    if isinstance(data.get("format"), str):
        job.data_format = data["format"]
    if isinstance(data.get("options"), dict):
        job.data_options = data["options"]


def _unknown_param(c: Errors, key, known, where: str, owner: str) -> None:
    from dml.registry import suggest

    close = suggest(str(key), known)
    hint = f"; did you mean {close!r}?" if close else ""
    c.error(where, f"unknown parameter of {owner}{hint} Known: {', '.join(known)}")


def _check_params(c: Errors, cls, params: dict, where: str, name: str) -> None:
    try:
        known = sorted(cls().get_params(deep=False))
    except Exception:  # an estimator that cannot be built with defaults: fit will tell
        return
    for k in params:
        if k not in known:
            _unknown_param(c, k, known, f"{where}.{k}", name)


def _model(c: Errors, doc: dict, job: Job):
    """The model's class (None when unknown), after checking its name and parameters."""
    from dml import registry

    if "model" not in doc:
        c.error("model", f"missing: e.g. {{name: gaussian_nb}}. Known models: "
                         f"{', '.join(registry.names('model'))}")
        return None
    model = doc["model"]
    if model is BAD:
        return None
    if isinstance(model, str):
        model = {"name": model}
    name = model.get("name")
    if "name" not in model:
        c.error("model.name", f"missing. Known models: {', '.join(registry.names('model'))}")
    cls = None
    if isinstance(name, str):
        if name not in registry.names("model"):
            c.error("model.name", registry.unknown_message(name, "model"))
        else:
            job.model_name = name
            try:
                cls = registry.get(name)
            except ImportError as exc:
                c.error("model.name", str(exc))
    params = model.get("params")
    if isinstance(params, dict):
        job.model_params = params
        if cls is not None:
            _check_params(c, cls, params, "model.params", name)
    return cls


def _search(c: Errors, search: dict, cls, job: Job) -> None:
    """search: {grid | random: {param: [values]}, n_iter, cv, scoring, random_state}."""
    kinds = [k for k in ("grid", "random") if k in search]
    if len(kinds) != 1:
        c.error("search", "give exactly one of grid: {param: [values]} or random: {param: "
                          "[values]}")
        return
    kind = kinds[0]
    space = search[kind]
    if space is BAD:
        return
    if not space:
        c.error(f"search.{kind}", "expected a non-empty mapping of parameter name to a list of "
                                  "values")
        return
    known = set(cls().get_params()) if cls is not None else None
    for name in space:
        if known is not None and name not in known:
            c.error(f"search.{kind}.{name}", f"{job.model_name} has no parameter {name!r}; "
                                             f"known: {', '.join(sorted(known))}")
    scoring = search.get("scoring")
    if isinstance(scoring, str):
        from dml.model_selection import get_scorer

        try:
            get_scorer(scoring)
        except ValueError as exc:
            c.error("search.scoring", str(exc))
    job.search = {"kind": kind, "space": space, "n_iter": search.get("n_iter", 10),
                  "cv": search.get("cv", 5), "scoring": scoring if scoring is not BAD else None,
                  "random_state": search.get("random_state", 0)}


def _preprocessing(c: Errors, value, job: Job) -> None:
    from dml import registry

    if value is BAD or value is None or value == "auto":
        return
    if value is False or value == "none" or value == []:
        job.no_preprocessing = True
        return
    steps = []
    known = registry.names("transformer")
    for i, item in enumerate(value):
        where = f"preprocessing[{i}]"
        if item is BAD:
            continue
        if isinstance(item, str):
            item = {item: None}
        (name, spec), = item.items()
        if name not in known:
            c.error(where, registry.unknown_message(name, "transformer"))
            continue
        where = f"{where}.{name}"
        params: dict = {}
        columns = None
        if isinstance(spec, dict):
            columns = spec.get("columns") if isinstance(spec.get("columns"), list) else None
            if isinstance(spec.get("params"), dict):
                params = spec["params"]
                try:
                    cls = registry.get(name)
                except ImportError as exc:
                    c.error(where, str(exc))
                else:
                    _check_params(c, cls, params, f"{where}.params", name)
        elif isinstance(spec, list):
            columns = spec
        steps.append(Step(name, columns, params, where))
    job.preprocessing = steps


def _metrics(c: Errors, value, cls, job: Job) -> None:
    from dml.model_selection._scoring import metric_info, task_of

    if value is None or value is BAD:
        return
    value = [value] if isinstance(value, str) else value
    task = task_of(cls()) if cls is not None else None
    names = []
    for i, m in enumerate(value):
        if m is BAD:
            continue
        try:
            info = metric_info(m)
        except ValueError as exc:
            c.error(f"metrics[{i}]", str(exc))
            continue
        if task is not None and info.task != task:
            c.error(f"metrics[{i}]", f"{m!r} is a {info.task} metric but {job.model_name} is a "
                                     f"{task} model")
        else:
            names.append(info.short)
    job.metrics = names


def _scheduler(c: Errors, sch, job: Job, base: Path) -> None:
    if sch is None or sch is BAD:
        return
    if isinstance(sch, str):
        sch = {"address": sch}
    if isinstance(sch.get("address"), str) and any(k in sch for k in _LOCAL_OPTIONS):
        c.error("scheduler", "n_workers/threads_per_worker/memory_limit only apply to the "
                             "embedded local cluster, not together with address")
    job.scheduler = {k: v for k, v in sch.items() if v is not BAD}
    tls = sch.get("tls")
    if isinstance(tls, dict):
        job.scheduler["tls"] = {k: resolve_path(tls[k], base) for k in _TLS_FIELDS
                                if isinstance(tls.get(k), str)}
