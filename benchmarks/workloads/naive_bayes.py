"""Naive Bayes workloads: ``nb_gaussian`` and ``nb_multinomial``.

Both fit on the first 80% of the rows and score accuracy on the remaining 20%.
"""
from __future__ import annotations

import numpy as np

from benchmarks.registry import (
    ACCURACY, Arrays, Target, Workload, materialize, on_dask, on_numpy, on_spark, register,
    unavailable,
)

N_SAMPLES = 1_000_000
TRAIN_FRACTION = 0.8


def _rows(scale: float) -> int:
    return max(200, int(round(N_SAMPLES * scale)))


def _split(X, y, description: str) -> Arrays:
    n_train = int(len(X) * TRAIN_FRACTION)
    return Arrays(X[:n_train], y[:n_train], X[n_train:], y[n_train:], description)


def gaussian_data(scale: float = 1.0) -> Arrays:
    """``make_classification(n_samples=1_000_000, n_features=50, random_state=0)``.

    make_classification shuffles its rows, so the first 80% is a random training part.
    """
    from sklearn.datasets import make_classification

    n = _rows(scale)
    X, y = make_classification(n_samples=n, n_features=50, random_state=0)
    return _split(X, y, f"`sklearn.datasets.make_classification(n_samples={n:,}, "
                        "n_features=50, random_state=0)`, 2 classes, float64")


#: Poisson rates: one base rate per feature (Gamma(2, 1)), times a per-class factor
#: exp(N(0, 0.15)); the classes are separable enough for ~87% accuracy, not trivially.
MULTINOMIAL_FEATURES = 100
MULTINOMIAL_CLASSES = 3
MULTINOMIAL_RATE_SPREAD = 0.15


def multinomial_data(scale: float = 1.0, random_state: int = 0) -> Arrays:
    """Poisson counts with class-dependent rates: 1,000,000 × 100, 3 balanced classes."""
    n, d, k = _rows(scale), MULTINOMIAL_FEATURES, MULTINOMIAL_CLASSES
    rng = np.random.default_rng(random_state)
    base = rng.gamma(2.0, 1.0, size=d)
    rates = base * np.exp(rng.normal(0.0, MULTINOMIAL_RATE_SPREAD, size=(k, d)))
    y = rng.integers(0, k, size=n)
    X = np.empty((n, d), dtype=np.float64)
    step = 100_000  # bounded temporaries: rates[y] for all rows would be another n × d array
    for lo in range(0, n, step):
        X[lo:lo + step] = rng.poisson(rates[y[lo:lo + step]])
    return _split(X, y, f"Poisson counts, {n:,} × {d}, {k} classes drawn uniformly; rate of "
                        f"feature j in class c = Gamma(2, 1)_j · exp(N(0, "
                        f"{MULTINOMIAL_RATE_SPREAD}))_cj; numpy seed {random_state}; float64")


register(Workload(
    name="nb_gaussian",
    title="Gaussian naive Bayes on make_classification (1,000,000 × 50)",
    build=gaussian_data,
    metric=ACCURACY,
    implementations={
        "dml": on_dask("dml.naive_bayes:GaussianNB"),
        "sklearn": on_numpy("sklearn.naive_bayes:GaussianNB"),
        # dask-ml's fit only builds a graph: the timed fit computes the parameters.
        "dask-ml": on_dask("dask_ml.naive_bayes:GaussianNB", finish=materialize(
            "theta_", "sigma_", "class_count_", "class_prior_")),
        "spark": on_spark("pyspark.ml.classification:NaiveBayes", modelType="gaussian"),
    },
    target=Target({"sklearn": 1.5, "dask-ml": 1.0},
                  reference="reference on a 2-core machine: sklearn 0.55 s, dask-ml 1.5 s, "
                            "Spark 2.1 s"),
))

register(Workload(
    name="nb_multinomial",
    title="Multinomial naive Bayes on Poisson counts (1,000,000 × 100, 3 classes)",
    build=multinomial_data,
    metric=ACCURACY,
    implementations={
        "dml": on_dask("dml.naive_bayes:MultinomialNB"),
        "sklearn": on_numpy("sklearn.naive_bayes:MultinomialNB"),
        "dask-ml": unavailable("dask-ml has no MultinomialNB"),
        "spark": on_spark("pyspark.ml.classification:NaiveBayes", modelType="multinomial"),
    },
    target=Target({"sklearn": 1.5},
                  reference="reference on a 2-core machine: sklearn 0.25 s, Spark 2.5 s"),
))
