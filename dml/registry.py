"""Names of the estimators dml knows: the ``dml`` command's vocabulary, the model-file allow-list.

Each entry maps a short name (used in job files, e.g. ``model: {name: gaussian_nb}``) to an import
string ``"package.module:ClassName"``. Nothing is imported until an entry is used, so importing
this module (and the ``dml`` command's ``--help``) stays fast.

The same table is the allow-list of :func:`dml.load`: a model file can only rebuild classes that
are registered here (plus the few composition classes below). A model file never decides what
gets imported; it can only name an entry of this table.

Adding a model family is one line in :data:`ESTIMATORS` (or a :func:`register` call for code
that lives outside dml)::

    register("logistic_regression", "dml.linear_model:LogisticRegression")
"""
from __future__ import annotations

import difflib
import importlib
import re
from dataclasses import dataclass

__all__ = ["register", "unregister", "get", "target", "names", "kind", "is_allowed", "allowed",
           "class_target", "dotted_to_class", "resolve_target", "suggest", "unknown_message",
           "UnknownNameError", "KINDS", "ESTIMATORS"]

#: Kinds of entries. ``model`` entries are what a job's ``model.name`` may be; ``transformer``
#: entries are preprocessing steps; ``component`` entries are classes that only appear inside
#: saved models (a pipeline, a column transformer and what it uses for "passthrough").
KINDS = ("model", "transformer", "component")


@dataclass(frozen=True)
class _Entry:
    target: str
    kind: str


#: Every public dml estimator: class name -> (import string, registry name, kind). The one list
#: of them: the registry entries below, the scikit-learn conformance tests and the bad-input
#: tests iterate over it, and a test checks that it names every estimator class the dml
#: subpackages export. A registry name of None: not a job model (bagging and the searches
#: wrap another estimator); model files still save and load them (dml/_io_types.py allow-lists
#: every class here).
ESTIMATORS: dict[str, tuple[str, str | None, str | None]] = {
    # naive Bayes
    "GaussianNB": ("dml.naive_bayes:GaussianNB", "gaussian_nb", "model"),
    "MultinomialNB": ("dml.naive_bayes:MultinomialNB", "multinomial_nb", "model"),
    "ComplementNB": ("dml.naive_bayes:ComplementNB", "complement_nb", "model"),
    "BernoulliNB": ("dml.naive_bayes:BernoulliNB", "bernoulli_nb", "model"),
    "CategoricalNB": ("dml.naive_bayes:CategoricalNB", "categorical_nb", "model"),
    # linear models
    "LinearRegression": ("dml.linear_model:LinearRegression", "linear_regression", "model"),
    "Ridge": ("dml.linear_model:Ridge", "ridge", "model"),
    "Lasso": ("dml.linear_model:Lasso", "lasso", "model"),
    "ElasticNet": ("dml.linear_model:ElasticNet", "elastic_net", "model"),
    "LogisticRegression": ("dml.linear_model:LogisticRegression", "logistic_regression",
                           "model"),
    "LinearSVC": ("dml.linear_model:LinearSVC", "linear_svc", "model"),
    "SGDClassifier": ("dml.linear_model:SGDClassifier", "sgd_classifier", "model"),
    "SGDRegressor": ("dml.linear_model:SGDRegressor", "sgd_regressor", "model"),
    "Perceptron": ("dml.linear_model:Perceptron", "perceptron", "model"),
    # trees and forests
    "DecisionTreeClassifier": ("dml.tree:DecisionTreeClassifier", "decision_tree_classifier",
                               "model"),
    "DecisionTreeRegressor": ("dml.tree:DecisionTreeRegressor", "decision_tree_regressor",
                              "model"),
    "RandomForestClassifier": ("dml.ensemble:RandomForestClassifier",
                               "random_forest_classifier", "model"),
    "RandomForestRegressor": ("dml.ensemble:RandomForestRegressor", "random_forest_regressor",
                              "model"),
    "GradientBoostingClassifier": ("dml.ensemble:GradientBoostingClassifier",
                                   "gradient_boosting_classifier", "model"),
    "GradientBoostingRegressor": ("dml.ensemble:GradientBoostingRegressor",
                                  "gradient_boosting_regressor", "model"),
    "AdaBoostClassifier": ("dml.ensemble:AdaBoostClassifier", "adaboost_classifier", "model"),
    "BaggingClassifier": ("dml.ensemble:BaggingClassifier", None, None),
    "BaggingRegressor": ("dml.ensemble:BaggingRegressor", None, None),
    "KMeans": ("dml.cluster:KMeans", "kmeans", "model"),  # clustering
    "GaussianMixture": ("dml.mixture:GaussianMixture", "gaussian_mixture", "model"),
    # neural networks
    "MLPClassifier": ("dml.neural_network:MLPClassifier", "mlp_classifier", "model"),
    "MLPRegressor": ("dml.neural_network:MLPRegressor", "mlp_regressor", "model"),
    "MatrixFactorization": ("dml.recommender:MatrixFactorization", "matrix_factorization",
                            "model"),  # recommender
    # nearest neighbours (NearestNeighbors predicts nothing: not a job model)
    "NearestNeighbors": ("dml.neighbors:NearestNeighbors", None, None),
    "KNeighborsClassifier": ("dml.neighbors:KNeighborsClassifier", "k_neighbors_classifier",
                             "model"),
    "KNeighborsRegressor": ("dml.neighbors:KNeighborsRegressor", "k_neighbors_regressor",
                            "model"),
    # preprocessing steps
    "StandardScaler": ("dml.preprocessing:StandardScaler", "standard_scaler", "transformer"),
    "MinMaxScaler": ("dml.preprocessing:MinMaxScaler", "minmax_scaler", "transformer"),
    "MaxAbsScaler": ("dml.preprocessing:MaxAbsScaler", "maxabs_scaler", "transformer"),
    "Normalizer": ("dml.preprocessing:Normalizer", "normalizer", "transformer"),
    "OneHotEncoder": ("dml.preprocessing:OneHotEncoder", "one_hot", "transformer"),
    "RBFSampler": ("dml.kernel_approximation:RBFSampler", "rbf_sampler", "transformer"),
    "Nystroem": ("dml.kernel_approximation:Nystroem", "nystroem", "transformer"),
    "ColumnTransformer": ("dml.compose:ColumnTransformer", "column_transformer", "component"),
    # sparse features from text and named features
    "FeatureHasher": ("dml.feature_extraction:FeatureHasher", "feature_hasher", "transformer"),
    "HashingVectorizer": ("dml.feature_extraction:HashingVectorizer", "hashing_vectorizer",
                          "transformer"),
    "CountVectorizer": ("dml.feature_extraction:CountVectorizer", "count_vectorizer",
                        "transformer"),
    "TfidfTransformer": ("dml.feature_extraction:TfidfTransformer", "tfidf_transformer",
                         "transformer"),
    "TfidfVectorizer": ("dml.feature_extraction:TfidfVectorizer", "tfidf_vectorizer",
                        "transformer"),
    # decomposition
    "PCA": ("dml.decomposition:PCA", "pca", "transformer"),
    "TruncatedSVD": ("dml.decomposition:TruncatedSVD", "truncated_svd", "transformer"),
    "IncrementalPCA": ("dml.decomposition:IncrementalPCA", "incremental_pca", "transformer"),
    # model selection
    "GridSearchCV": ("dml.model_selection:GridSearchCV", None, None),
    "RandomizedSearchCV": ("dml.model_selection:RandomizedSearchCV", None, None),
}

# name -> (import string, kind): the registered estimators and the scikit-learn components
# that saved models may hold.
_BUILTIN: dict[str, tuple[str, str]] = {
    **{name: (target, kind) for target, name, kind in ESTIMATORS.values() if name},
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
