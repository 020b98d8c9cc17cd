"""k-nearest-neighbour workload ``knn`` (issue 19): exact brute-force kNN classification.

Data: ``make_classification(n_samples=180_000, n_features=32, n_informative=16,
random_state=0)``; the first 160,000 rows are the training set, the last 20,000 the queries.
kNN learns nothing at fit: its work is at predict. So the timed part here is fit *and* the
prediction of the 20,000 queries (k = 5, euclidean), and the quality column is the accuracy of
those predictions. dml and scikit-learn must predict the same labels (both are exact brute
force; the quality column shows it).

dask-ml and Spark MLlib have no k-nearest-neighbour estimator.
"""
from __future__ import annotations

from benchmarks.registry import (ACCURACY, Arrays, Implementation, Target, Workload, register,
                                 unavailable)

N_TRAIN = 160_000
N_TEST = 20_000
N_FEATURES = 32
K = 5


def knn_data(scale: float = 1.0) -> Arrays:
    from sklearn.datasets import make_classification

    n_train = max(200, int(round(N_TRAIN * scale)))
    n_test = max(50, int(round(N_TEST * scale)))
    X, y = make_classification(n_samples=n_train + n_test, n_features=N_FEATURES,
                               n_informative=16, random_state=0)
    return Arrays(X[:n_train], y[:n_train], X[n_train:], y[n_train:],
                  f"`sklearn.datasets.make_classification(n_samples={n_train + n_test:,}, "
                  f"n_features={N_FEATURES}, n_informative=16, random_state=0)`, float64: "
                  f"{n_train:,} training rows, {n_test:,} queries; k = {K}, euclidean. The "
                  "timed part is fit + predict of the queries (kNN does its work at predict)")


class _Fitted:
    """A fitted model and its predictions of the queries (made inside the timed part)."""

    def __init__(self, model, predictions):
        self.model, self.predictions = model, predictions


def _score(fitted, state) -> float:
    return state.metric(state.y_test, fitted.predictions)


def _dml_fit(state):
    import dask

    from dml.neighbors import KNeighborsClassifier

    model = KNeighborsClassifier(n_neighbors=K).fit(state.X_train, state.y_train)
    (pred,) = dask.compute(model.predict(state.X_test))
    return _Fitted(model, pred)


def _sklearn_fit(state):
    from sklearn.neighbors import KNeighborsClassifier

    model = KNeighborsClassifier(n_neighbors=K, algorithm="brute", n_jobs=2).fit(
        state.X_train, state.y_train)
    return _Fitted(model, model.predict(state.X_test))


register(Workload(
    name="knn",
    title=f"k-nearest neighbours (k = {K}), {N_TRAIN:,} training rows × {N_FEATURES}, "
          f"{N_TEST:,} queries: fit + predict",
    build=knn_data,
    metric=ACCURACY,
    implementations={
        "dml": Implementation(
            lambda dataset: dataset.dask(), _dml_fit, _score, requires=("dml.neighbors",),
            note=f"`dml.neighbors.KNeighborsClassifier(n_neighbors={K})` fitted on persisted "
                 "Dask arrays, predicting the Dask query array (computed)"),
        "sklearn": Implementation(
            lambda dataset: dataset.numpy(), _sklearn_fit, _score, requires=("sklearn",),
            note=f"`sklearn.neighbors.KNeighborsClassifier(n_neighbors={K}, algorithm='brute', "
                 "n_jobs=2)` on NumPy in the client process"),
        "dask-ml": unavailable("dask-ml has no k-nearest-neighbour estimator"),
        "spark": unavailable("Spark MLlib has no k-nearest-neighbour estimator"),
    },
    target=Target({"sklearn": 1.0},
                  reference="issue 19: scikit-learn brute force (160,000 × 20,000, k = 5, "
                            "n_jobs=2) 5.6 s on a 2-core machine"),
))
