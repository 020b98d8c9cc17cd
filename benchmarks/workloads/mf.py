"""Matrix factorisation workloads ``mf_movielens`` and ``mf_synthetic`` (issue 5): test RMSE.

MovieLens "ml-latest-small" (random 80/20 split, seed 0) and a synthetic 5,000,000-rating set
(50,000 users × 10,000 items, rank 10, :func:`dml.datasets.make_ratings`, noise 0.5), X = (user,
item) id columns, y = rating. dml: ``MatrixFactorization`` with rank 10 and 10 epochs/iterations
(weighted-λ ALS, DSGD), plus the bias-only model (ALS from zero factors). Spark MLlib's ALS needs
a (user, item, rating) DataFrame rather than the ``features`` vector the shared Spark runner
builds, so it is not wired in yet.
"""
from __future__ import annotations

import numpy as np

from benchmarks.registry import Arrays, Metric, on_dask, register, Workload


def _rmse(y_true, y_pred):
    return float(np.sqrt(np.mean((y_true.ravel() - y_pred.ravel()) ** 2)))


RMSE = Metric("test RMSE", _rmse, greater_is_better=False)


def _split(X, y, note):
    test = np.random.default_rng(0).random(len(y)) < 0.2
    return Arrays(X[~test], y[~test], X[test], y[test], note)


def movielens(scale: float) -> Arrays:
    from dml.datasets import load_movielens

    df = load_movielens().ratings.compute()
    if scale < 1:
        df = df.iloc[:max(int(len(df) * scale), 1000)]
    X = df[["userId", "movieId"]].to_numpy(dtype=np.int64)
    return _split(X, df["rating"].to_numpy(), f"MovieLens small, {len(df):,} ratings, "
                                              "random 80/20 split (seed 0)")


def synthetic(scale: float) -> Arrays:
    from dml.datasets import make_ratings

    n = max(int(5_000_000 * scale), 10_000)
    df = make_ratings(max(int(50_000 * scale), 100), max(int(10_000 * scale), 50), n, rank=10,
                      noise=0.5, random_state=0).compute()
    return _split(df[["user", "item"]].to_numpy(), df["rating"].to_numpy(),
                  f"make_ratings: {n:,} ratings, rank 10, noise 0.5, random 80/20 split")


def _impls(sgd_lr):
    spec = "dml.recommender:MatrixFactorization"
    return {
        "dml": on_dask(spec, n_factors=10, solver="als", reg=0.1, n_epochs=10, n_blocks=2,
                       random_state=0, note="`MatrixFactorization(10, solver='als', reg=0.1, "
                                            "n_epochs=10)`: weighted-λ ALS"),
        "dml-sgd": on_dask(spec, n_factors=10, solver="sgd", reg=0.05, learning_rate=sgd_lr,
                           n_epochs=10, n_blocks=2, random_state=0,
                           note=f"DSGD, 2×2 cells, η={sgd_lr}, λ=0.05, 10 epochs"),
        "dml-bias": on_dask(spec, n_factors=1, solver="als", reg=0.1, init_std=0.0,
                            n_epochs=10, note="bias-only baseline (ALS from zero factors)"),
    }


register(Workload(name="mf_movielens", title="Matrix factorisation, MovieLens small, test RMSE",
                  build=movielens, metric=RMSE, implementations=_impls(0.01)))
register(Workload(name="mf_synthetic",
                  title="Matrix factorisation, 5,000,000 synthetic ratings, test RMSE",
                  build=synthetic, metric=RMSE, implementations=_impls(0.01)))
