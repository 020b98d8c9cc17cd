"""The job file, declared once: a typed model from which validation and documentation come.

:data:`JOB_SCHEMA` is a tree of :class:`Field` declarations (names, types, bounds, defaults and
descriptions). From it come

* the structural checks of :func:`check` (unknown fields with a suggestion, types, bounds,
  choices), which :func:`dml.cli.load_job` runs before its checks against the registry and the
  file system;
* :func:`json_schema`, the JSON Schema editors use (``deploy/jobs/job.schema.json``);
* :func:`reference_markdown`, the field reference of ``deploy/jobs/README.md``, and
  :func:`help_text`, the reference ``dml train --help`` prints.

Tests check that the committed JSON Schema and reference page equal what this module generates;
``python -c "from dml.cli._schema import write_generated; write_generated()"`` rewrites both.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Field", "JOB_SCHEMA", "check", "json_schema", "reference_markdown", "help_text",
           "BAD", "GENERATORS", "FORMATS"]

GENERATORS = ("make_classification", "make_regression", "make_blobs", "make_counts")
FORMATS = ("csv", "tsv", "parquet", "libsvm")


class _Bad:
    """Marks a value that failed its check (its error is already reported)."""

    def __repr__(self):
        return "BAD"


BAD = _Bad()


@dataclass(frozen=True)
class Field:
    """One field of the job file.

    ``kind`` is one of ``str``, ``int``, ``number``, ``bool``, ``enum`` (``choices``), ``literal``
    (exactly one of ``choices``, any YAML type), ``map`` (the fixed ``fields``), ``dict`` (free
    keys, each value checked against ``values`` when given), ``list`` (of ``items``),
    ``columns`` (one column name or a list of them), ``entry`` (a one-key mapping ``{key:
    value}``, the key described by ``what``) or ``union`` (the first of ``variants`` that takes
    the value's YAML type).
    """

    name: str
    kind: str
    doc: str = ""
    default: str | None = None
    required: bool = False
    choices: tuple = ()
    minimum: float | None = None
    maximum: float | None = None
    exclusive: bool = False
    nullable: bool = False
    fields: tuple = ()
    items: Any = None
    values: Any = None
    variants: tuple = ()
    what: str = ""
    min_items: int = 0

    def child(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


def _variant(kind, what="", **kw) -> Field:
    return Field("", kind, what=what, **kw)


_COLUMNS = Field("", "columns", what="column names")
_PARAMS = Field("params", "dict", "keyword arguments of the estimator's constructor")

_STEP = Field("step", "union", variants=(
    _variant("str", what="a preprocessing step name (its columns: automatic)"),
    Field("", "entry", what="preprocessing step", values=Field("", "union", variants=(
        _variant("literal", choices=(None,), what="nothing (automatic columns)"),
        _COLUMNS,
        Field("", "map", fields=(
            Field("columns", "columns", "the step's columns (default: automatic)"),
            Field("params", "dict", "keyword arguments of the transformer"))))))))

_SCHEDULER_MAP = Field("", "map", fields=(
    Field("address", "str", "scheduler address, e.g. tcp://scheduler:8786 or tls://...",
          default="$DML_SCHEDULER_ADDRESS, else an embedded local cluster"),
    Field("timeout", "union", "how long to wait for the scheduler and its first worker",
          default="20s", variants=(_variant("str", what="a duration such as 20s"),
                                   _variant("number", what="seconds", minimum=0,
                                            exclusive=True))),
    Field("n_workers", "int", "embedded local cluster only: worker processes", minimum=1,
          default="one per core"),
    Field("threads_per_worker", "int", "embedded local cluster only: threads per worker",
          minimum=1),
    Field("memory_limit", "union", "embedded local cluster only: memory per worker",
          variants=(_variant("str", what="a size such as 2GiB"),
                    _variant("int", what="bytes", minimum=0))),
    Field("tls", "map", "TLS files for a tls:// scheduler, relative to the job file "
                        "(--tls-* flags and $DML_TLS_* override them)", fields=(
        Field("ca_file", "str", "CA certificate(s) that signed the scheduler's certificate"),
        Field("cert", "str", "client certificate (may hold the key too)"),
        Field("key", "str", "client private key"))),
))

JOB_SCHEMA = Field("job", "map", "A dml job: data, preprocessing, model, split and metrics.",
                   fields=(
    Field("name", "str", "job name: the output directory and the report's title",
          default="the job file's name without .yaml"),
    Field("description", "str", "free text about the job"),
    Field("data", "union", "the training data: a file, glob or directory (a string is a path), "
                           "or generated data", required=True, variants=(
        _variant("str", what="a path"),
        Field("", "map", fields=(
            Field("path", "str", "CSV/TSV/Parquet/libsvm file, glob or Parquet directory, "
                                 "relative to the job file ($VARIABLES expanded; URLs such as "
                                 "s3://... when the filesystem package is installed)"),
            Field("format", "enum", "file format; libsvm gives sparse features (no columns: "
                                    "no features or preprocessing, the label is y)",
                  choices=FORMATS, default="from the file extension (.libsvm/.svm: libsvm)"),
            Field("options", "dict", "keyword arguments of the reader (dask read_csv / "
                                     "read_parquet / dml.datasets.read_svmlight), e.g. "
                                     "{blocksize: 16MB} or {n_features: 1048576}"),
            Field("generator", "enum", "instead of path: a dml.datasets generator; the features "
                                       "are x0, x1, ... and the label column y",
                  choices=GENERATORS),
            Field("params", "dict", "keyword arguments of the generator, e.g. {n_samples: "
                                    "10000, chunks: 2500, random_state: 0}"))))),
    Field("target", "str", "the label column", default="y for generated data", required=True),
    Field("features", "columns", "the feature columns", default="every other column",
          nullable=True),
    Field("preprocessing", "union",
          "steps {transformer: columns}: a column list, one name, nothing (= every feature of "
          "its kind not used by another step: non-numeric for one_hot, numeric for scalers) or "
          "{columns: [...], params: {...}}; `none`: the model gets the columns as they are",
          default="auto: one_hot the non-numeric features, standard_scaler the numeric ones",
          variants=(_variant("literal", choices=("auto", "none", False, None),
                             what="auto or none"),
                    Field("", "list", items=_STEP, what="steps"))),
    Field("model", "union", "the estimator (a name alone is {name: NAME})", required=True,
          variants=(_variant("str", what="a model name"),
                    Field("", "map", fields=(
                        Field("name", "str", "a model name of dml.registry (e.g. gaussian_nb, "
                                             "logistic_regression)", required=True),
                        _PARAMS)))),
    Field("search", "map", "pick model.params by a cross-validated search on the training "
                           "rows; give grid or random", fields=(
        Field("grid", "dict", "{parameter: [values]}: every combination is tried",
              values=Field("", "list", what="values", min_items=1)),
        Field("random", "dict", "{parameter: [values]}: n_iter random draws",
              values=Field("", "list", what="values", min_items=1)),
        Field("n_iter", "int", "draws of a random search", minimum=1, default="10"),
        Field("cv", "int", "folds (stratified for classifiers)", minimum=2, default="5"),
        Field("scoring", "str", "a scorer name (see Metric names)",
              default="accuracy (classifiers), r2 (regressors)"),
        Field("random_state", "int", "seed of a random search", minimum=0, nullable=True,
              default="0"))),
    Field("split", "union", "held-out rows for the metrics; `none` evaluates on the training "
                            "rows", default="{test_size: 0.2, random_state: 0}", variants=(
        _variant("literal", choices=("none", False, None), what="none"),
        Field("", "map", fields=(
            Field("test_size", "number", "fraction of the rows held out (drawn row by row in "
                                         "every partition)", minimum=0, maximum=1,
                  exclusive=True, default="0.2"),
            Field("random_state", "int", "seed of the split (null: a new split every run)",
                  minimum=0, nullable=True, default="0"))))),
    Field("metrics", "union", "metric names (see Metric names)",
          default="accuracy, precision, recall, f1 (classifiers); rmse, mae, r2 (regressors)",
          variants=(_variant("str", what="a metric name"),
                    Field("", "list", items=_variant("str"), what="metric names",
                          min_items=1))),
    Field("scheduler", "union", "the Dask cluster (a string is an address); --scheduler and "
                                "$DML_SCHEDULER_ADDRESS override it",
          default="an embedded local cluster",
          variants=(_variant("str", what="an address"), _SCHEDULER_MAP)),
    Field("output", "str", "output directory for model.dml and metrics.json, relative to the "
                           "job file (--output overrides)", default="./dml-output/<name>"),
))


# --------------------------------------------------------------------------------------------
# Structural checks
# --------------------------------------------------------------------------------------------

def show(value) -> str:
    """A value as an error message quotes it."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, (dict, list)):
        return f"a {'mapping' if isinstance(value, dict) else 'list'} {value!r}"[:200]
    return repr(value)


def _yaml(value) -> str:
    return {None: "null", True: "true", False: "false"}.get(value, str(value)) \
        if value is None or isinstance(value, bool) else str(value)


def describe(f: Field) -> str:
    """What a field takes, in words: ``a number between 0 and 1``."""
    if f.kind == "str":
        text = "a non-empty string"
    elif f.kind in ("int", "number"):
        noun = "an integer" if f.kind == "int" else "a number"
        if f.minimum is not None and f.maximum is not None:
            text = f"{noun} between {_num(f.minimum)} and {_num(f.maximum)}"
        elif f.kind == "int" and f.minimum == 1:
            text = "a positive integer"
        elif f.kind == "int" and f.minimum == 0:
            text = "a non-negative integer"
        elif f.minimum is not None:
            text = f"{noun} {'>' if f.exclusive else '>='} {_num(f.minimum)}"
        else:
            text = noun
    elif f.kind == "bool":
        text = "true or false"
    elif f.kind == "enum":
        text = f"one of {', '.join(f.choices)}"
    elif f.kind == "literal":
        words = [_yaml(c) for c in f.choices]
        text = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
    elif f.kind in ("map", "dict"):
        text = "a mapping"
    elif f.kind == "list":
        text = f"a {'non-empty ' if f.min_items else ''}list of {f.what or 'values'}"
    elif f.kind == "columns":
        text = "a list of column names"
    elif f.kind == "entry":
        text = f"one {f.what} like {{name: ...}}"
    else:  # union
        return " or ".join(v.what if v.what.startswith(("a ", "an ", "one ")) else describe(v)
                           for v in f.variants)
    return text + (" or null" if f.nullable else "")


def _sentence(doc: str) -> str:
    return doc[:1].upper() + doc[1:] + ("" if doc.endswith(".") else ".") if doc else ""


def _num(x) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _takes(f: Field, value) -> bool:
    """Whether the value's YAML type is the one ``f`` takes (for choosing a union variant)."""
    if f.kind == "literal":
        return any(value is c or (type(value) is type(c) and value == c) for c in f.choices)
    if f.kind in ("str", "enum"):
        return isinstance(value, str)
    if f.kind in ("map", "dict", "entry"):
        return isinstance(value, dict)
    if f.kind == "list":
        return isinstance(value, list)
    if f.kind == "columns":
        return isinstance(value, (str, list))
    if f.kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if f.kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if f.kind == "bool":
        return isinstance(value, bool)
    return True


class Errors:
    """Collects ``FILE: FIELD: message`` lines."""

    def __init__(self, source: str):
        self.source = source
        self.errors: list[str] = []

    def error(self, where: str, message: str) -> None:
        self.errors.append(f"{self.source}: {where}: {message}")

    def unknown(self, key, known, where: str, what: str = "field") -> None:
        from dml.registry import suggest

        close = suggest(str(key), known)
        hint = f"; did you mean {close!r}?" if close else ""
        self.error(where, f"unknown {what} {str(key)!r}{hint} Known: {', '.join(known)}")


def check(f: Field, value, where: str, errors: Errors):
    """Check ``value`` against ``f``; report what is wrong; return the value or :data:`BAD`.

    Mappings come back with their bad entries replaced by :data:`BAD` (and unknown keys
    dropped), so later checks see which fields were given and which failed.
    """
    def bad():
        errors.error(where, f"expected {describe(f)}, got {show(value)}")
        return BAD

    if value is None and f.nullable:
        return None
    if f.kind == "union":
        for v in f.variants:
            if _takes(v, value):
                return check(v, value, where, errors)
        return bad()
    if f.kind == "literal":
        return value if _takes(f, value) else bad()
    if f.kind == "str":
        return value if isinstance(value, str) and value else bad()
    if f.kind in ("int", "number"):
        if not _takes(f, value):
            return bad()
        low = f.minimum is not None and (value <= f.minimum if f.exclusive and f.kind == "number"
                                         else value < f.minimum)
        high = f.maximum is not None and (value >= f.maximum if f.exclusive else
                                          value > f.maximum)
        return bad() if low or high else value
    if f.kind == "bool":
        return value if isinstance(value, bool) else bad()
    if f.kind == "enum":
        if value in f.choices:
            return value
        from dml.registry import suggest

        close = suggest(str(value), f.choices)
        hint = f"; did you mean {close!r}?" if close else ""
        errors.error(where, f"expected one of {', '.join(f.choices)}, got {show(value)}{hint}")
        return BAD
    if f.kind == "columns":
        if isinstance(value, str) and value:
            return [value]
        if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
            return list(value)
        return bad()
    if f.kind == "list":
        if not isinstance(value, list) or len(value) < f.min_items:
            return bad()
        if f.items is None:
            return list(value)
        return [check(f.items, v, f"{where}[{i}]", errors) for i, v in enumerate(value)]
    if f.kind == "dict":
        if not isinstance(value, dict):
            return bad()
        if f.values is None:
            return dict(value)
        return {k: check(f.values, v, f"{where}.{k}", errors) for k, v in value.items()}
    if f.kind == "entry":
        if len(value) != 1:
            errors.error(where, f"expected one {f.what} like {{name: ...}}, got {show(value)}")
            return BAD
        (key, v), = value.items()
        return {key: check(f.values, v, f"{where}.{key}", errors)}
    if f.kind == "map":
        if not isinstance(value, dict):
            return bad()
        known = [c.name for c in f.fields]
        prefix = f"{where}." if where else ""
        out = {}
        for key, v in value.items():
            if key not in known:
                errors.unknown(key, known, f"{prefix}{key}")
            else:
                out[key] = check(f.child(key), v, f"{prefix}{key}", errors)
        return out
    raise AssertionError(f"unknown field kind {f.kind!r}")


# --------------------------------------------------------------------------------------------
# JSON Schema
# --------------------------------------------------------------------------------------------

def _json(f: Field) -> dict:
    out: dict = {}
    if f.doc:
        out["description"] = _sentence(f.doc) + (f" Default: {f.default}." if f.default else "")
    if f.kind == "str":
        out.update(type="string", minLength=1)
    elif f.kind in ("int", "number"):
        out["type"] = "integer" if f.kind == "int" else "number"
        if f.minimum is not None:
            out["exclusiveMinimum" if f.exclusive else "minimum"] = f.minimum
        if f.maximum is not None:
            out["exclusiveMaximum" if f.exclusive else "maximum"] = f.maximum
    elif f.kind == "bool":
        out["type"] = "boolean"
    elif f.kind == "enum":
        out.update(type="string", enum=list(f.choices))
    elif f.kind == "literal":
        out["enum"] = list(f.choices)
    elif f.kind == "columns":
        out["anyOf"] = [{"type": "string", "minLength": 1},
                        {"type": "array", "items": {"type": "string", "minLength": 1}}]
    elif f.kind == "list":
        out["type"] = "array"
        if f.items is not None:
            out["items"] = _json(f.items)
        if f.min_items:
            out["minItems"] = f.min_items
    elif f.kind == "dict":
        out["type"] = "object"
        if f.values is not None:
            out["additionalProperties"] = _json(f.values)
    elif f.kind == "entry":
        out.update(type="object", minProperties=1, maxProperties=1,
                   additionalProperties=_json(f.values))
    elif f.kind == "map":
        out.update(type="object", properties={c.name: _json(c) for c in f.fields},
                   additionalProperties=False)
        required = [c.name for c in f.fields if c.required and c.name != "target"]
        if required:
            out["required"] = required
    elif f.kind == "union":
        out["anyOf"] = [_json(v) for v in f.variants]
    if f.nullable:
        out = {"anyOf": [out, {"type": "null"}]} if "anyOf" not in out else \
            {**out, "anyOf": out["anyOf"] + [{"type": "null"}]}
    return out


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a job file, for editors and other tools."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "title": "dml job file", **_json(JOB_SCHEMA)}
    # data: a path, or exactly one of path and generator.
    data = schema["properties"]["data"]["anyOf"][1]
    data["oneOf"] = [{"required": ["path"], "not": {"required": ["generator"]}},
                     {"required": ["generator"], "not": {"required": ["path"]}}]
    return schema


# --------------------------------------------------------------------------------------------
# Reference page and --help
# --------------------------------------------------------------------------------------------

def _rows(f: Field, path: str):
    """(dotted path, field) for every documented field under ``f``, depth first."""
    for c in f.fields:
        here = f"{path}.{c.name}" if path else c.name
        yield here, c
        maps = [c] if c.kind == "map" else [v for v in c.variants if v.kind == "map"]
        for m in maps:
            yield from _rows(m, here)


def _type_words(f: Field) -> str:
    if f.kind == "map":
        return "a mapping"
    return describe(f)


def reference_markdown() -> str:
    """The field reference of ``deploy/jobs/README.md`` (Markdown)."""
    from dml.model_selection import _scoring

    lines = ["| field | takes | default | what |", "|---|---|---|---|"]
    for path, f in _rows(JOB_SCHEMA, ""):
        default = "**required**" if f.required else (f.default or "")
        if path == "target":
            default = "**required** (generated data: y)"
        lines.append(f"| `{path}` | {_type_words(f)} | {default} | {_sentence(f.doc)} |")
    names = _scoring.metric_names()
    aliases = sorted(set(_scoring.metric_names(aliases=True)) - set(names))
    lines += ["", "Preprocessing steps and model names are those of `dml.registry` "
              "(`dml.registry.names('transformer')`, `dml.registry.names('model')`); a misspelt "
              "name is reported with the closest one.", "",
              "Metric names (`metrics`, `search.scoring`): " +
              ", ".join(f"`{n}`" for n in names) + "; also " +
              ", ".join(f"`{n}`" for n in aliases) + ". A report shows losses as they are "
              "(`rmse`, not its negative); `precision`, `recall` and `f1` score the second of "
              "the sorted labels of a binary target and the macro average of more classes."]
    return "\n".join(lines) + "\n"


def help_text() -> str:
    """The job file reference printed by ``dml train --help`` (from the same declarations)."""
    import textwrap

    lines = ["job file (YAML); paths are relative to the job file; `dml validate JOB.yaml` "
             "checks one.", ""]
    for path, f in _rows(JOB_SCHEMA, ""):
        indent = "  " * (path.count(".") + 1)
        default = " Required." if f.required else (f" Default: {f.default}." if f.default
                                                   else "")
        text = f"{path.rsplit('.', 1)[-1]}: {_sentence(f.doc)} Takes {_type_words(f)}.{default}"
        lines += textwrap.wrap(text, 96, initial_indent=indent,
                               subsequent_indent=indent + "    ")
    lines += ["", "Full reference: deploy/jobs/README.md; JSON Schema for editors: "
                  "deploy/jobs/job.schema.json"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# The generated files
# --------------------------------------------------------------------------------------------

BEGIN, END = "<!-- BEGIN generated by dml.cli._schema -->", "<!-- END generated -->"


def jobs_table(jobs_dir: Path) -> str:
    """The table of example jobs in ``jobs_dir``: file, data, model, first comment line."""
    import yaml

    lines = ["| job | data | model | what |", "|---|---|---|---|"]
    for path in sorted(jobs_dir.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        doc = yaml.safe_load(text) or {}
        data = doc.get("data", {})
        data = data if isinstance(data, dict) else {"path": data}
        source = f"generated (`{data['generator']}`)" if "generator" in data else \
            f"`{data.get('path')}`"
        model = doc.get("model", {})
        model = model.get("name") if isinstance(model, dict) else model
        about = doc.get("description") or _first_sentence(text)
        lines.append(f"| `{path.name}` | {source} | `{model}` | {about} |")
    return "\n".join(lines) + "\n"


def _first_sentence(text: str) -> str:
    """The first sentence of a job file's opening comment."""
    words = []
    for line in text.splitlines():
        if not line.startswith("#") or not line.strip("# "):
            break
        words.append(line.strip("# "))
    paragraph = " ".join(words)
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[:end + 1]


def generated_readme(text: str, jobs_dir: Path) -> str:
    """``text`` (deploy/jobs/README.md) with its generated part rebuilt."""
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    body = (f"{BEGIN}\n## Example jobs\n\n{jobs_table(jobs_dir)}\n## Job file reference\n\n"
            f"{reference_markdown()}{END}")
    return head + body + tail


def write_generated(jobs_dir: Path | None = None) -> None:
    """Rewrite ``job.schema.json`` and the generated part of ``README.md`` in ``jobs_dir``.

    The default is the repository's ``deploy/jobs``.
    """
    if jobs_dir is None:
        jobs_dir = Path(__file__).resolve().parents[2] / "deploy" / "jobs"
    (jobs_dir / "job.schema.json").write_text(json.dumps(json_schema(), indent=2) + "\n")
    readme = jobs_dir / "README.md"
    readme.write_text(generated_readme(readme.read_text(encoding="utf-8"), jobs_dir))
