"""Names of the estimators dml knows: the ``dml`` command's vocabulary, the model-file allow-list.

Each entry maps a short name (used in job files, e.g. ``model: {name: gaussian_nb}``) to an import
string ``"package.module:ClassName"``. Nothing is imported until an entry is used, so importing
this module (and the ``dml`` command's ``--help``) stays fast.

The same table is the allow-list of :func:`dml.load`: a model file can only rebuild classes that
are registered here (plus the few composition classes below). A model file never decides what
gets imported; it can only name an entry of this table.

Adding a model family is one line in :data:`_BUILTIN` (or a :func:`register` call for code that
lives outside dml)::

    register("logistic_regression", "dml.linear_model:LogisticRegression")
"""
from __future__ import annotations

import difflib
import importlib
import re
from dataclasses import dataclass

__all__ = ["register", "unregister", "get", "target", "names", "kind", "is_allowed", "allowed",
           "class_target", "dotted_to_class", "resolve_target", "suggest", "unknown_message",
           "UnknownNameError", "KINDS"]

#: Kinds of entries. ``model`` entries are what a job's ``model.name`` may be; ``transformer``
#: entries are preprocessing steps; ``component`` entries are classes that only appear inside
#: saved models (a pipeline, a column transformer and what it uses for "passthrough").
KINDS = ("model", "transformer", "component")


@dataclass(frozen=True)
class _Entry:
    target: str
    kind: str


# name -> (import string, kind). One line per estimator.
_BUILTIN: dict[str, tuple[str, str]] = {
    # naive Bayes
    "gaussian_nb": ("dml.naive_bayes:GaussianNB", "model"),
    "multinomial_nb": ("dml.naive_bayes:MultinomialNB", "model"),
    "bernoulli_nb": ("dml.naive_bayes:BernoulliNB", "model"),
    "categorical_nb": ("dml.naive_bayes:CategoricalNB", "model"),
    # linear models
    "linear_regression": ("dml.linear_model:LinearRegression", "model"),
    "ridge": ("dml.linear_model:Ridge", "model"),
    "lasso": ("dml.linear_model:Lasso", "model"),
    "elastic_net": ("dml.linear_model:ElasticNet", "model"),
    "logistic_regression": ("dml.linear_model:LogisticRegression", "model"),
    "linear_svc": ("dml.linear_model:LinearSVC", "model"),
    "sgd_classifier": ("dml.linear_model:SGDClassifier", "model"),
    "sgd_regressor": ("dml.linear_model:SGDRegressor", "model"),
    "perceptron": ("dml.linear_model:Perceptron", "model"),
    # trees and forests
    "decision_tree_classifier": ("dml.tree:DecisionTreeClassifier", "model"),
    "decision_tree_regressor": ("dml.tree:DecisionTreeRegressor", "model"),
    "random_forest_classifier": ("dml.ensemble:RandomForestClassifier", "model"),
    "random_forest_regressor": ("dml.ensemble:RandomForestRegressor", "model"),
    "kmeans": ("dml.cluster:KMeans", "model"),  # clustering
    # neural networks
    "mlp_classifier": ("dml.neural_network:MLPClassifier", "model"),
    "mlp_regressor": ("dml.neural_network:MLPRegressor", "model"),
    "matrix_factorization": ("dml.recommender:MatrixFactorization", "model"),  # recommender
    # preprocessing steps
    "standard_scaler": ("dml.preprocessing:StandardScaler", "transformer"),
    "minmax_scaler": ("dml.preprocessing:MinMaxScaler", "transformer"),
    "one_hot": ("dml.preprocessing:OneHotEncoder", "transformer"),
    # components that saved models may hold
    "column_transformer": ("dml.compose:ColumnTransformer", "component"),
    "pipeline": ("sklearn.pipeline:Pipeline", "component"),
    # A fitted column transformer's "passthrough" (stateless; a model file cannot hold the
    # functions it could be given, so only the identity can be loaded).
    "function_transformer": ("sklearn.preprocessing:FunctionTransformer", "component"),
}

_REGISTRY: dict[str, _Entry] = {n: _Entry(t, k) for n, (t, k) in _BUILTIN.items()}

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_TARGET_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class UnknownNameError(ValueError, KeyError):
    """An estimator name that is not registered (a ``ValueError`` and a ``KeyError``)."""

    def __str__(self) -> str:  # KeyError would add quotes around the message
        return str(self.args[0]) if self.args else ""


def register(name: str, target: str, *, kind: str = "model", replace: bool = False) -> None:
    """Register an estimator under ``name``.

    Parameters
    ----------
    name : str
        Lower-case identifier used in job files, e.g. ``"logistic_regression"``.
    target : str
        Import string ``"package.module:ClassName"``; imported only when the entry is used.
    kind : {"model", "transformer", "component"}, default "model"
        What the entry is (see :data:`KINDS`).
    replace : bool, default False
        Allow re-registering an existing name with a different target.

    Examples
    --------
    >>> register("sk_gaussian_nb", "sklearn.naive_bayes:GaussianNB")
    >>> get("sk_gaussian_nb").__name__
    'GaussianNB'
    >>> unregister("sk_gaussian_nb")
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"registry name must be a lower-case identifier like 'gaussian_nb', "
                         f"got {name!r}")
    if not isinstance(target, str) or not _TARGET_RE.match(target):
        raise ValueError(f"registry target must be an import string 'package.module:ClassName', "
                         f"got {target!r}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    old = _REGISTRY.get(name)
    if old is not None and old != _Entry(target, kind) and not replace:
        raise ValueError(f"{name!r} is already registered as {old.target!r}; pass replace=True "
                         "to change it")
    _REGISTRY[name] = _Entry(target, kind)


def unregister(name: str) -> None:
    """Remove ``name`` from the registry (mainly for tests and plug-ins)."""
    _REGISTRY.pop(name, None)


def names(kind: str | None = None) -> list[str]:
    """Registered names, sorted; only those of ``kind`` when given."""
    return sorted(n for n, e in _REGISTRY.items() if kind is None or e.kind == kind)


def suggest(name: str, choices) -> str | None:
    """The closest of ``choices`` to ``name`` (difflib), or None."""
    close = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_message(name, kind: str | None = None) -> str:
    """``unknown model 'x'; did you mean 'y'? Known: a, b, c``."""
    known = names(kind)
    what = {"model": "model", "transformer": "preprocessing step"}.get(kind, "estimator")
    msg = f"unknown {what} {name!r}"
    close = suggest(name, known)
    if close:
        msg += f"; did you mean {close!r}?"
    return msg + " Known: " + ", ".join(known)


def _entry(name: str, kind: str | None) -> _Entry:
    entry = _REGISTRY.get(name)
    if entry is None or (kind is not None and entry.kind != kind):
        raise UnknownNameError(unknown_message(name, kind))
    return entry


def target(name: str, kind: str | None = None) -> str:
    """The import string registered for ``name``."""
    return _entry(name, kind).target


def kind(name: str) -> str:
    """The kind of entry ``name`` is."""
    return _entry(name, None).kind


def resolve_target(target: str):
    """Import ``"package.module:ClassName"`` and return the class.

    Only call this with a string taken from the registry (see :func:`is_allowed`).
    """
    module_name, _, qualname = target.partition(":")
    try:
        obj = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"the registered estimator {target!r} could not be imported: {exc}. "
                          "Is that part of dml installed (and up to date)?") from exc
    return obj


def get(name: str, kind: str | None = None):
    """The estimator class registered as ``name``.

    Raises
    ------
    UnknownNameError
        When ``name`` is not registered (a ``ValueError``); the message lists the known names
        and suggests the closest one.

    Examples
    --------
    >>> get("gausian_nb")
    Traceback (most recent call last):
    ...
    dml.registry.UnknownNameError: unknown estimator 'gausian_nb'; did you mean 'gaussian_nb'? ...
    """
    return resolve_target(_entry(name, kind).target)


def _dotted(target: str) -> str:
    return target.replace(":", ".")


def is_allowed(dotted_class: str) -> bool:
    """True when ``"package.module.ClassName"`` is a registered class (no import happens)."""
    return any(_dotted(e.target) == dotted_class for e in _REGISTRY.values())


def allowed() -> list[str]:
    """The registered classes as ``"package.module.ClassName"`` strings, sorted."""
    return sorted({_dotted(e.target) for e in _REGISTRY.values()})


def class_target(cls) -> str | None:
    """The registered ``"package.module.ClassName"`` of ``cls``, or None when not registered.

    A class may be registered under its public path (``dml.naive_bayes:GaussianNB``) while
    being defined in a private module; the registered path is the one a model file records.
    """
    direct = f"{cls.__module__}.{cls.__qualname__}"
    if is_allowed(direct):
        return direct
    for entry in _REGISTRY.values():
        if entry.target.rsplit(":", 1)[1].split(".")[-1] != cls.__name__:
            continue
        try:
            if resolve_target(entry.target) is cls:
                return _dotted(entry.target)
        except ImportError:
            continue
    return None


def dotted_to_class(dotted_class: str):
    """Import a class given as ``"package.module.ClassName"``, only if it is registered."""
    for entry in _REGISTRY.values():
        if _dotted(entry.target) == dotted_class:
            return resolve_target(entry.target)
    raise UnknownNameError(f"class {dotted_class!r} is not registered in dml.registry")
