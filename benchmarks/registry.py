"""The registry of benchmark workloads and, for each, its implementations.

A workload is a data builder plus, per implementation, three functions:

* ``prepare(dataset) -> state``: untimed; picks the data form the implementation needs
  (``dataset.numpy()``, ``dataset.dask()``, ``dataset.spark()``) and anything else it needs.
* ``fit(state) -> model``: the timed part. It must return a *finished* model: when a library
  leaves fitted parameters lazy (dask-ml), ``fit`` computes them.
* ``score(model, state) -> float``: untimed quality on the held-out part, with the workload's
  metric.

The adapters :func:`on_numpy`, :func:`on_dask` and :func:`on_spark` build those three functions
for any estimator with scikit-learn's or Spark ML's ``fit``/``predict`` (``transform``) API, so
adding a workload is one :func:`register` call (real ones:
``benchmarks/workloads/naive_bayes.py``)::

    register(Workload(
        name="ridge",
        title="ridge regression, 1,000,000 × 100",
        build=make_regression_data,             # scale -> Arrays (NumPy, made once per run)
        metric=Metric("test RMSE", rmse, greater_is_better=False),
        implementations={
            "dml": on_dask("dml.linear_model:Ridge", alpha=1.0),
            "sklearn": on_numpy("sklearn.linear_model:Ridge", alpha=1.0),
            "dask-ml": unavailable("dask-ml has no exact Ridge"),
            "spark": on_spark("pyspark.ml.regression:LinearRegression", regParam=1e-6),
        },
        target=Target({"sklearn": 1.5}, reference="..."),
    ))

Quality that is not a function of ``(y_true, y_pred)`` (k-means inertia, ranking metrics) is
given per implementation with ``score=``, e.g. ``on_dask("dml.cluster:KMeans",
score=lambda model, state: -model.score(state.X_test))``; ``Arrays.y_train``/``y_test`` may then
be None.

Estimators are named as ``"module:Class"`` strings so that nothing is imported until the
benchmark runs, and an implementation whose module is missing (no pyspark, an estimator not
written yet) is reported as skipped instead of breaking the run.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

import numpy as np

__all__ = [
    "Arrays", "Metric", "ACCURACY", "Implementation", "Unavailable", "Target", "Workload",
    "register", "get", "all_workloads", "IMPLEMENTATION_ORDER", "on_numpy", "on_dask",
    "on_spark", "unavailable", "materialize",
]

#: Row order of the result tables; implementations not listed here come after, by name.
IMPLEMENTATION_ORDER = ("dml", "sklearn", "dask-ml", "spark")


@dataclass(frozen=True)
class Arrays:
    """What a workload's builder returns: the train and held-out parts as NumPy arrays."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    #: One line describing how the data was made (shown under the table).
    description: str = ""


@dataclass(frozen=True)
class Metric:
    """A quality metric computed on the client from NumPy ``(y_true, y_pred)``."""

    name: str
    fn: Callable[[np.ndarray, np.ndarray], float]
    #: True when larger is better (accuracy); False for errors (RMSE).
    greater_is_better: bool = True

    def __call__(self, y_true, y_pred) -> float:
        return float(self.fn(np.asarray(y_true), np.asarray(y_pred)))


def _accuracy(y_true, y_pred):
    return np.mean(y_true.ravel() == y_pred.ravel())


ACCURACY = Metric("test accuracy", _accuracy)


@dataclass(frozen=True)
class Implementation:
    """One implementation of a workload (see the module docstring for the three functions)."""

    prepare: Callable[[Any], Any]
    fit: Callable[[Any], Any]
    score: Callable[[Any, Any], float]
    #: Modules that must be importable; otherwise the row says "skipped".
    requires: tuple[str, ...] = ()
    #: Shown in the table's notes column (e.g. which class, which data form).
    note: str = ""

    def missing(self) -> list[str]:
        """The required modules that cannot be imported here."""
        return [m for m in self.requires if not _importable(m)]


@dataclass(frozen=True)
class Unavailable:
    """An implementation that does not exist for this workload; the table says why."""

    reason: str


def unavailable(reason: str) -> Unavailable:
    return Unavailable(reason)


@dataclass(frozen=True)
class Target:
    """The performance goal of a workload, as bounds on dml's median over another's median.

    ``Target({"sklearn": 1.5, "dask-ml": 1.0})`` reads: dml's median fit time is at most 1.5×
    scikit-learn's and at most dask-ml's.
    """

    max_ratio: dict[str, float]
    #: Free text: where the goal comes from, reference timings.
    reference: str = ""

    def describe(self) -> str:
        parts = []
        for impl, bound in self.max_ratio.items():
            parts.append(f"faster than {impl}" if bound == 1.0 else f"within {bound:g}× of {impl}")
        return "dml " + " and ".join(parts)

    def check(self, medians: dict[str, float]) -> list[str]:
        """One line per bound: the measured dml/impl ratio and whether it is met."""
        out = []
        dml = medians.get("dml")
        for impl, bound in self.max_ratio.items():
            other = medians.get(impl)
            if dml is None or other is None:
                out.append(f"dml/{impl}: not measured in this run")
                continue
            ratio = dml / other
            met = ratio <= bound
            out.append(f"dml/{impl} = {ratio:.2f} (target ≤ {bound:g}): "
                       f"{'met' if met else 'NOT met'}")
        return out


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    #: ``build(scale) -> Arrays``; scale 1 is the full size, 0.01 a quick smoke run.
    build: Callable[[float], Arrays]
    metric: Metric
    implementations: dict[str, Implementation | Unavailable]
    target: Target | None = None
    #: Row blocks of the Dask arrays for this workload, whatever ``--blocks`` says (for
    #: workloads about the partition count); None: ``--blocks``.
    n_blocks: int | None = None

    def ordered(self) -> list[str]:
        known = [i for i in IMPLEMENTATION_ORDER if i in self.implementations]
        return known + sorted(i for i in self.implementations if i not in IMPLEMENTATION_ORDER)


_REGISTRY: dict[str, Workload] = {}


def register(workload: Workload) -> Workload:
    """Add a workload (its name must be new)."""
    if workload.name in _REGISTRY:
        raise ValueError(f"benchmark workload {workload.name!r} is registered twice")
    _REGISTRY[workload.name] = workload
    return workload


def all_workloads() -> dict[str, Workload]:
    """All registered workloads, in registration order."""
    import benchmarks.workloads  # noqa: F401  (registers them)

    return dict(_REGISTRY)


def get(name: str) -> Workload:
    workloads = all_workloads()
    if name not in workloads:
        raise KeyError(f"unknown workload {name!r}; known: {sorted(workloads)}")
    return workloads[name]


# --------------------------------------------------------------------------------------------
# Adapters: an estimator class name -> Implementation
# --------------------------------------------------------------------------------------------

def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _resolve(spec: str):
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _factory(spec: str, params: dict) -> Callable[[], Any]:
    def make():
        return _resolve(spec)(**params)
    return make


def _label(spec: str, params: dict) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return f"`{spec.replace(':', '.')}({args})`"


def materialize(*attributes: str) -> Callable[[Any], None]:
    """A ``finish`` step for libraries whose ``fit`` leaves parameters lazy (dask-ml).

    Computes the named Dask attributes in one pass, so that the timed fit includes the work, and
    stores them back as single-chunk Dask arrays (what the library's ``predict`` expects).
    """
    def finish(model) -> None:
        import dask
        import dask.array as da

        values = dask.compute(*(getattr(model, a) for a in attributes))
        for a, v in zip(attributes, values):
            setattr(model, a, da.from_array(np.asarray(v)))
    return finish


def _fit_xy(make, finish):
    def fit(state):
        model = make().fit(state.X_train, state.y_train)
        if finish is not None:
            finish(model)
        return model
    return fit


def _predict_numpy(model, state) -> float:
    return state.metric(state.y_test, model.predict(state.X_test))


def _predict_dask(model, state) -> float:
    import dask

    (pred,) = dask.compute(model.predict(state.X_test))
    return state.metric(state.y_test, pred)


def _predict_spark(model, state) -> float:
    # Label and prediction come back together, so row order does not matter.
    pdf = model.transform(state.test).select("label", "prediction").toPandas()
    return state.metric(pdf["label"].to_numpy(), pdf["prediction"].to_numpy())


def on_numpy(spec: str, *, finish: Callable | None = None, score: Callable | None = None,
             note: str = "", **params) -> Implementation:
    """An estimator fitted in the client process on the NumPy arrays (scikit-learn's form).

    ``finish(model)`` runs inside the timed fit; ``score(model, state)`` replaces the default
    ``metric(y_test, model.predict(X_test))``.
    """
    return Implementation(
        prepare=lambda dataset: dataset.numpy(), fit=_fit_xy(_factory(spec, params), finish),
        score=score or _predict_numpy, requires=(spec.partition(":")[0],),
        note=note or f"{_label(spec, params)} on NumPy in the client process")


def on_dask(spec: str, *, finish: Callable | None = None, score: Callable | None = None,
            note: str = "", **params) -> Implementation:
    """An estimator fitted on the persisted Dask arrays (dml, dask-ml); see :func:`on_numpy`."""
    return Implementation(
        prepare=lambda dataset: dataset.dask(), fit=_fit_xy(_factory(spec, params), finish),
        score=score or _predict_dask, requires=(spec.partition(":")[0],),
        note=note or f"{_label(spec, params)} on persisted Dask arrays")


def on_spark(spec: str, *, score: Callable | None = None, note: str = "",
             **params) -> Implementation:
    """A Spark ML estimator fitted on the cached Spark DataFrame (``features``, ``label``)."""
    make = _factory(spec, {"featuresCol": "features", "labelCol": "label", **params})
    return Implementation(
        prepare=lambda dataset: dataset.spark(), fit=lambda state: make().fit(state.train),
        score=score or _predict_spark, requires=(spec.partition(":")[0],),
        note=note or f"{_label(spec, params)} on a cached Spark DataFrame")
