"""Scorers and metric names: one table for searches, cross-validation and the ``dml`` command.

Every metric dml can score by name is one row of :data:`_TABLE`: the :mod:`dml.metrics` function
(blockwise for Dask input; the adjusted Rand index, which has no blockwise form, is scikit-learn's
on gathered labels), the sign that makes greater better, what it reads from the model
(labels, class probabilities, or a score for ROC AUC), the task it belongs to and a short label
for tables. Two consumers read it:

* :func:`get_scorer` gives ``scorer(estimator, X, y)`` as scikit-learn's scorers of the same
  name (``accuracy``, ``neg_log_loss``, ``f1_macro``, ...), for the searches;
* :func:`score_predictions` computes metric *values* (unsigned: RMSE, not its negative) from
  predictions made once, for reports such as ``metrics.json`` of ``dml train``.

Names are scikit-learn's scorer names, plus short aliases (``log_loss``, ``mse``, ``rmse``,
``mae``) and the :mod:`dml.metrics` function names (``accuracy_score``, ``f1_score``, ...); an
alias means the same metric as its scorer name.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

__all__ = ["get_scorer", "score_predictions", "metric_info", "metric_names", "default_metrics",
           "MetricInfo", "estimator_scorer"]

CLASSIFICATION = "classification"
REGRESSION = "regression"
CLUSTERING = "clustering"


@dataclass(frozen=True)
class MetricInfo:
    """One named metric: how it is scored and how a report names it.

    ``name`` is the scorer name (scikit-learn's spelling), ``short`` the key a report uses
    (``rmse`` rather than ``neg_root_mean_squared_error``); ``response`` is ``"predict"``,
    ``"proba"`` or ``"score"`` (ROC AUC); ``sign`` is -1 for losses, whose scorer is negated.
    """

    name: str
    short: str
    metric: str
    task: str
    label: str
    sign: int = 1
    response: str = "predict"
    kwargs: dict = field(default_factory=dict)
    scalar: bool = True
    # "binary": without an explicit average, binary labels score the positive class
    # (classes_[1]) and more classes the macro average.
    averaging: str | None = None
    # A scikit-learn metric with no blockwise form in dml.metrics: the labels are gathered.
    gathered: bool = False


def _table() -> dict[str, MetricInfo]:
    rows = [
        MetricInfo("accuracy", "accuracy", "accuracy_score", CLASSIFICATION, "accuracy"),
        MetricInfo("neg_log_loss", "log_loss", "log_loss", CLASSIFICATION, "log loss", -1,
                   "proba"),
        MetricInfo("roc_auc", "roc_auc", "roc_auc_score", CLASSIFICATION, "ROC AUC",
                   response="score"),
        MetricInfo("confusion_matrix", "confusion_matrix", "confusion_matrix", CLASSIFICATION,
                   "confusion matrix", scalar=False),
        MetricInfo("r2", "r2", "r2_score", REGRESSION, "R2"),
        MetricInfo("adjusted_rand_score", "ari", "adjusted_rand_score", CLUSTERING, "ARI",
                   gathered=True),
        MetricInfo("neg_mean_squared_error", "mse", "mean_squared_error", REGRESSION, "MSE", -1),
        MetricInfo("neg_root_mean_squared_error", "rmse", "root_mean_squared_error", REGRESSION,
                   "RMSE", -1),
        MetricInfo("neg_mean_absolute_error", "mae", "mean_absolute_error", REGRESSION, "MAE",
                   -1),
    ]
    for base, label in (("precision", "precision"), ("recall", "recall"), ("f1", "F1")):
        rows.append(MetricInfo(base, base, f"{base}_score", CLASSIFICATION, label,
                               averaging="binary"))
        for avg in ("macro", "micro", "weighted"):
            rows.append(MetricInfo(f"{base}_{avg}", f"{base}_{avg}", f"{base}_score",
                                   CLASSIFICATION, f"{label} ({avg})", kwargs={"average": avg}))
    return {row.name: row for row in rows}


_TABLE = _table()
_ALIASES = {row.short: row.name for row in _TABLE.values() if row.short != row.name}
# dml.metrics function names, as the dml command has always accepted them.
_ALIASES.update({"accuracy_score": "accuracy", "precision_score": "precision",
                 "recall_score": "recall", "f1_score": "f1", "roc_auc_score": "roc_auc",
                 "mean_squared_error": "neg_mean_squared_error",
                 "root_mean_squared_error": "neg_root_mean_squared_error",
                 "mean_absolute_error": "neg_mean_absolute_error", "r2_score": "r2"})

_DEFAULTS = {CLASSIFICATION: ["accuracy", "precision", "recall", "f1"],
             REGRESSION: ["rmse", "mae", "r2"]}


def metric_names(*, aliases: bool = False, task: str | None = None) -> list[str]:
    """Sorted metric names (scikit-learn scorer names; with ``aliases`` the other spellings)."""
    names = [n for n, row in _TABLE.items() if task is None or row.task == task]
    if aliases:
        names += [a for a, n in _ALIASES.items() if task is None or _TABLE[n].task == task]
    return sorted(names)


def metric_info(name: str) -> MetricInfo:
    """The :class:`MetricInfo` of a scorer name or alias; ValueError naming the close ones.

    Examples
    --------
    >>> info = metric_info("rmse")
    >>> info.name, info.short, info.sign
    ('neg_root_mean_squared_error', 'rmse', -1)
    """
    if isinstance(name, str):
        row = _TABLE.get(_ALIASES.get(name, name))
        if row is not None:
            return row
    from dml.registry import suggest

    close = suggest(str(name), metric_names(aliases=True))
    hint = f"; did you mean {close!r}?" if close else ""
    raise ValueError(f"unknown metric {name!r}{hint} Known: "
                     f"{', '.join(metric_names(aliases=True))}")


def task_of(estimator) -> str | None:
    """``"classification"``, ``"regression"`` or None (clusterers, transformers)."""
    from sklearn.base import is_classifier, is_regressor

    if is_classifier(estimator):
        return CLASSIFICATION
    if is_regressor(estimator):
        return REGRESSION
    return None


def default_metrics(estimator) -> list[str]:
    """The metrics a report shows when none are asked for (by the estimator's task)."""
    return list(_DEFAULTS.get(task_of(estimator), []))


def _py(v):
    return v.item() if isinstance(v, np.generic) else v


def _value(x):
    if hasattr(x, "dask"):
        import dask

        x = dask.compute(x)[0]
    if isinstance(x, np.ndarray) and x.ndim > 0:
        return x.tolist()
    return float(x)


def _metric_value(row: MetricInfo, y_true, y_pred, y_proba, classes, sample_weight=None,
                  y_score=None):
    """The unsigned metric of ``row`` (possibly lazy) from whichever response it reads."""
    if row.gathered:
        import dask
        from sklearn import metrics as skm

        y_true, y_pred = dask.compute(y_true, y_pred)
        fn = getattr(skm, row.metric)
    else:
        from dml import metrics as M

        fn = getattr(M, row.metric)
    kw = dict(row.kwargs)
    if sample_weight is not None:
        kw["sample_weight"] = sample_weight
    n_classes = None if classes is None else len(classes)
    if row.averaging == "binary" and n_classes is not None:
        kw.update({"average": "binary", "pos_label": _py(classes[1])} if n_classes == 2
                  else {"average": "macro"})
    if row.response == "predict":
        if not row.scalar:  # the confusion matrix: labels in the order of classes_
            if classes is None:
                raise ValueError(f"{row.name} needs the model's classes_")
            return fn(y_true, y_pred, labels=list(classes), **kw)
        return fn(y_true, y_pred, **kw)
    if row.response == "proba":
        if classes is not None:
            kw.setdefault("labels", list(classes))
        return fn(y_true, y_proba, **kw)
    # ROC AUC: a score for the positive class (binary), else one-vs-rest on probabilities.
    if y_score is not None:
        return fn(y_true, y_score, **kw)
    if n_classes == 2:
        return fn(y_true, y_proba[:, 1], **kw)
    return fn(y_true, y_proba, multi_class="ovr", labels=list(classes), **kw)


def score_predictions(names, y_true, y_pred, y_proba=None, *, classes=None) -> dict:
    """Metric values (unsigned) of predictions made once, keyed by each metric's short name.

    ``y_true``, ``y_pred`` (and ``y_proba``, one column per class in the order of ``classes``)
    may be NumPy or aligned Dask arrays; Dask inputs are reduced blockwise by
    :mod:`dml.metrics`, never gathered. ``precision``/``recall``/``f1`` score the positive class
    ``classes[1]`` of binary labels and average over classes (macro) otherwise; ``roc_auc`` reads
    ``y_proba``; ``confusion_matrix`` gives ``{"labels": [...], "matrix": [[...]]}``.

    Examples
    --------
    >>> import numpy as np
    >>> score_predictions(["accuracy", "rmse"], np.array([1.0, 2.0]), np.array([1.0, 4.0]))
    {'accuracy': 0.5, 'rmse': 1.4142135623730951}
    """
    out: dict = {}
    for name in names:
        row = metric_info(name)
        if row.response != "predict" and y_proba is None:
            raise ValueError(f"{row.short} needs class probabilities (y_proba)")
        value = _value(_metric_value(row, y_true, y_pred, y_proba, classes))
        if not row.scalar:
            value = {"labels": [_py(c) for c in classes], "matrix": value}
        out[row.short] = value
    return out


class _Scorer:
    """``scorer(estimator, X, y)`` from a dml metric: predictions stay lazy for Dask input."""

    def __init__(self, row: MetricInfo):
        self.row = row
        self.name = row.name

    def __call__(self, estimator, X, y, sample_weight=None):
        row = self.row
        pred = proba = score = None
        if row.response == "predict":
            pred = estimator.predict(X)
        elif row.response == "proba":
            proba = estimator.predict_proba(X)
        elif hasattr(estimator, "decision_function"):
            score = estimator.decision_function(X)
        else:
            score = estimator.predict_proba(X)
            score = score[:, 1] if score.ndim == 2 and score.shape[1] == 2 else score
        # Scorers keep scikit-learn's defaults (average="binary", pos_label=1): a search scores
        # as scikit-learn would; only the labels of log loss come from the estimator.
        classes = getattr(estimator, "classes_", None) if row.response == "proba" else None
        plain = replace(row, averaging=None)
        return row.sign * float(_metric_value(plain, y, pred, proba, classes, sample_weight,
                                              score))

    def __repr__(self):
        return f"make_scorer({self.name})"


def _default_score_metric(estimator) -> str | None:
    """The metric name of ``estimator.score`` when it is scikit-learn's default one, else None.

    scikit-learn's classifiers and regressors inherit ``score`` from ``ClassifierMixin``
    (accuracy) or ``RegressorMixin`` (R²); a pipeline scores with its final step's ``score``.
    Estimators with a ``score`` of their own (KMeans: the opposite of the inertia) keep it.
    """
    from sklearn.base import ClassifierMixin, RegressorMixin
    from sklearn.pipeline import Pipeline

    if isinstance(estimator, Pipeline):
        final = estimator.steps[-1][1]
        if final in (None, "passthrough"):
            return None
        return _default_score_metric(final)
    score = getattr(type(estimator), "score", None)
    if score is ClassifierMixin.score:
        return "accuracy"
    if score is RegressorMixin.score:
        return "r2"
    return None


class _EstimatorScorer:
    """``scoring=None``: the estimator's own ``score``, as scikit-learn's ``check_scoring`` gives.

    When that ``score`` is scikit-learn's default accuracy or R², the same value is computed by
    :mod:`dml.metrics` from ``predict`` (blockwise for Dask input, predictions never gathered);
    any other ``score`` (KMeans, MatrixFactorization, ...) is called as it is.
    """

    name = "score"

    def __call__(self, estimator, X, y=None, sample_weight=None):
        metric = _default_score_metric(estimator)
        if metric is not None and y is not None:
            return _Scorer(metric_info(metric))(estimator, X, y, sample_weight)
        kw = {} if sample_weight is None else {"sample_weight": sample_weight}
        value = estimator.score(X, **kw) if y is None else estimator.score(X, y, **kw)
        return float(value)

    def __eq__(self, other):  # stateless: every instance scores the same way
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))

    def __repr__(self):
        return "passthrough_scorer"


def estimator_scorer(estimator):
    """The scorer of ``scoring=None``: ``scorer(estimator, X, y=None)`` calling its ``score``.

    Raises a ``TypeError`` (as scikit-learn does) when the estimator has no ``score`` method.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.cluster import KMeans
    >>> X = np.array([[0.0], [1.0], [10.0], [11.0]])
    >>> km = KMeans(n_clusters=2, random_state=0).fit(X)
    >>> estimator_scorer(km)(km, X)
    -1.0
    """
    if not hasattr(estimator, "score"):
        raise TypeError("If no scoring is specified, the estimator passed should have a 'score' "
                        f"method. The estimator {estimator!r} does not; pass scoring, e.g. "
                        "scoring='accuracy'.")
    return _EstimatorScorer()


def get_scorer(scoring):
    """A scorer computed with :mod:`dml.metrics` (blockwise for Dask input) from its name.

    Names are scikit-learn's: ``accuracy``, ``neg_log_loss``, ``roc_auc``, ``f1`` /
    ``precision`` / ``recall`` (and their ``_macro``/``_micro``/``_weighted`` forms), ``r2``,
    ``neg_mean_squared_error``, ``neg_root_mean_squared_error``, ``neg_mean_absolute_error``;
    the aliases ``log_loss``, ``mse``, ``rmse``, ``mae`` give the same (negated) scorers.
    Callables ``scorer(estimator, X, y)`` are returned as they are.

    Examples
    --------
    >>> get_scorer("accuracy")
    make_scorer(accuracy)
    >>> get_scorer("rmse")
    make_scorer(neg_root_mean_squared_error)
    """
    if callable(scoring):
        return scoring
    try:
        row = metric_info(scoring)
    except ValueError:
        row = None
    if row is None or not row.scalar:
        scorers = sorted(n for n, r in _TABLE.items() if r.scalar)
        raise ValueError(f"scoring {scoring!r} is not supported for dml estimators; use one of "
                         f"{scorers} or a callable scorer(estimator, X, y)")
    return _Scorer(row)


def sklearn_name(scoring: str) -> str:
    """The scikit-learn scorer name of a dml alias (names scikit-learn knows pass through)."""
    return _ALIASES.get(scoring, scoring)
