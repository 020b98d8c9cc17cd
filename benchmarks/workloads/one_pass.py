"""One-pass workload ``one_pass`` (issue 16): the per-round cost of a pass over 1,024 blocks.

A GaussianNB fit is one map-reduce over the blocks, so on many small blocks its time is the
cost of one round of dml's block machinery (graph building, one task per block, the reduction
tree). It is compared, on the same persisted Dask arrays of 1,024 blocks, with dask-ml's
GaussianNB and with the floor of any Dask pass: a raw ``map_blocks(XᵀX).sum()``, which builds
its graph with Dask's array machinery and computes one small Gram matrix per block.

Data: ``make_classification(n_samples=1,100,000, n_features=20, random_state=0)``; the first
1,000,000 rows are fitted (1,024 blocks of ~977 rows), the last 100,000 score accuracy.
"""
from __future__ import annotations

from benchmarks.registry import (
    ACCURACY, Arrays, Implementation, Target, Workload, materialize, on_dask, on_numpy,
    register,
)

N_TRAIN = 1_000_000
N_TEST = 100_000
N_FEATURES = 20
N_BLOCKS = 1024


def classification(scale: float = 1.0) -> Arrays:
    from sklearn.datasets import make_classification

    n, n_test = max(200, int(round(N_TRAIN * scale))), max(50, int(round(N_TEST * scale)))
    X, y = make_classification(n_samples=n + n_test, n_features=N_FEATURES, random_state=0)
    return Arrays(X[:n], y[:n], X[n:], y[n:],
                  f"`sklearn.datasets.make_classification(n_samples={n + n_test:,}, "
                  f"n_features={N_FEATURES}, random_state=0)`, first {n:,} rows fitted, float64; "
                  f"Dask arrays of {N_BLOCKS} row blocks")


def _gram(block):
    return (block.T @ block)[None]


class _Raw:
    def __init__(self, X):
        self.X = X


def _raw_prepare(dataset):
    return _Raw(dataset.dask().X_train)


def _raw_fit(state):
    """``XᵀX`` summed over the blocks: ``map_blocks`` then ``sum``, computed."""
    import dask.array as da

    X = state.X
    d = X.shape[1]
    grams = da.map_blocks(_gram, X, chunks=((1,) * X.numblocks[0], (d,), (d,)), new_axis=2,
                          dtype=X.dtype)
    return grams.sum(axis=0).compute()


def _no_quality(model, state) -> float:
    return float("nan")


register(Workload(
    name="one_pass",
    title=f"One pass over {N_BLOCKS} blocks: GaussianNB on make_classification "
          f"({N_TRAIN:,} × {N_FEATURES})",
    build=classification,
    metric=ACCURACY,
    implementations={
        "dml": on_dask("dml.naive_bayes:GaussianNB"),
        "sklearn": on_numpy("sklearn.naive_bayes:GaussianNB"),
        "dask-ml": on_dask("dask_ml.naive_bayes:GaussianNB", finish=materialize(
            "theta_", "sigma_", "class_count_", "class_prior_")),
        "raw-dask": Implementation(
            _raw_prepare, _raw_fit, _no_quality, requires=("dask",),
            note="`da.map_blocks(lambda b: (b.T @ b)[None], X).sum(axis=0).compute()` on the "
                 "same persisted Dask array (no model: quality n/a): the floor of one Dask pass"),
    },
    target=Target({"raw-dask": 1.2, "dask-ml": 1.0},
                  reference="issue 16 item 3, measured before on a 2-core machine: dml 2.45 s, "
                            "dask-ml 1.49 s, raw map_blocks + sum 1.33 s"),
    n_blocks=N_BLOCKS,
))
