"""``dml demo``: every model family trained on generated data, one table of held-out metrics."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from collections.abc import Callable

import numpy as np

from dml.cli._commands import connect, format_table, prepare_workers, status
from dml.cli._errors import CLIError

__all__ = ["DemoEntry", "DEMOS", "run_demo_entry", "cmd_demo", "split_blocks"]


def split_blocks(X, y, test_every: int = 4):
    """Hold out whole row chunks of aligned Dask arrays: every ``test_every``-th chunk is test.

    For generated data, whose rows are independent draws, a chunk-level split is as good as a
    row-level one and keeps the chunk sizes known. Returns ``(X_train, X_test, y_train,
    y_test)``.
    """
    X = X.rechunk({1: -1})
    if X.chunks[0] != y.chunks[0]:
        y = y.rechunk((X.chunks[0],))
    n = X.numblocks[0]
    if n < 2:
        raise ValueError(f"split_blocks needs at least 2 row chunks, got {n}")
    test = [i for i in range(n) if i % test_every == test_every - 1] or [n - 1]
    train = [i for i in range(n) if i not in test]
    return X.blocks[train], X.blocks[test], y.blocks[train], y.blocks[test]


@dataclass(frozen=True)
class DemoEntry:
    """One row of ``dml demo``: a registered model trained on generated data.

    ``make_data(n_samples, chunks, seed)`` returns lazy Dask arrays ``(X, y)``. Later model
    families add one entry each to :data:`DEMOS`.
    """

    model: str
    data: str
    make_data: Callable[[int, int, int], tuple]
    params: dict = field(default_factory=dict)
    #: At most this many rows (brute-force kNN costs training rows × held-out rows).
    max_rows: int | None = None


def _demo_classification(n, chunks, seed):
    from dml.datasets import make_classification

    return make_classification(n_samples=n, n_features=20, n_informative=6, n_redundant=2,
                               n_classes=3, n_clusters_per_class=1, random_state=seed,
                               chunks=chunks)


def _demo_counts(n, chunks, seed):
    from dml.datasets import make_counts

    return make_counts(n_samples=n, n_features=12, n_classes=4, random_state=seed,
                       chunks=chunks)


def _bin_block(x, edges):
    return np.digitize(x, edges).astype(np.float64)


def _demo_binned(n, chunks, seed):
    X, y = _demo_classification(n, chunks, seed)
    # Fixed edges (no data pass): the features are roughly standard normal.
    edges = np.array([-1.5, -0.5, 0.5, 1.5])
    return X.map_blocks(_bin_block, edges, dtype=np.float64), y


def _demo_ratings_block(index_block, seed, sizes, n_users, n_items):
    from dml.datasets._ratings import _ratings_chunk

    j = int(index_block[0])
    return _ratings_chunk(seed, j, sizes[j], n_users, n_items, 5, 0.3, 3.5).to_numpy()


def _demo_ratings(n, chunks, seed):
    import dask.array as da

    sizes = tuple(min(chunks, n - s) for s in range(0, n, chunks))
    # ~80 ratings per user and ~160 per item: with n/20 users (16 each) a rank-5 model overfit
    # (400,000 rows: test R2 -0.5); at this density ALS reaches the noise level (RMSE ~0.34).
    n_users, n_items = max(n // 100, 10), max(n // 200, 10)
    # A map over the block indices (not da.from_delayed per block): selecting some blocks
    # then leaves no task for the others in the graph.
    arr = da.arange(len(sizes), chunks=1).map_blocks(
        _demo_ratings_block, seed, sizes, n_users, n_items, chunks=(sizes, (3,)), new_axis=1,
        dtype=np.float64, meta=np.empty((0, 3)))
    return arr[:, :2], arr[:, 2]


def _demo_regression(n, chunks, seed):
    from dml.datasets import make_regression

    return make_regression(n_samples=n, n_features=20, n_informative=8, noise=10.0,
                           random_state=seed, chunks=chunks)


def _demo_blobs(n, chunks, seed):
    from dml.datasets import make_blobs

    return make_blobs(n_samples=n, n_features=10, centers=6, cluster_std=1.5,
                      random_state=seed, chunks=chunks)


DEMOS: list[DemoEntry] = [
    DemoEntry("gaussian_nb", "make_classification", _demo_classification),
    DemoEntry("multinomial_nb", "make_counts", _demo_counts),
    DemoEntry("bernoulli_nb", "make_counts", _demo_counts),
    DemoEntry("categorical_nb", "make_classification, 5 bins", _demo_binned),
    DemoEntry("decision_tree_classifier", "make_classification", _demo_classification,
              {"max_depth": 8}),
    DemoEntry("random_forest_classifier", "make_classification", _demo_classification,
              {"n_estimators": 20, "max_depth": 10, "random_state": 0}),
    DemoEntry("gradient_boosting_classifier", "make_classification", _demo_classification,
              {"max_iter": 50, "early_stopping": False, "random_state": 0}),
    DemoEntry("logistic_regression", "make_classification", _demo_classification),
    DemoEntry("linear_svc", "make_classification", _demo_classification),
    DemoEntry("sgd_classifier", "make_classification", _demo_classification,
              {"loss": "log_loss", "optimizer": "adam", "batch_size": 256, "random_state": 0}),
    DemoEntry("mlp_classifier", "make_classification", _demo_classification,
              {"hidden_layer_sizes": [32], "batch_size": 128, "learning_rate_init": 0.01,
               "max_iter": 20, "random_state": 0}),
    DemoEntry("ridge", "make_regression", _demo_regression, {"alpha": 1.0}),
    DemoEntry("kmeans", "make_blobs, 6 centres", _demo_blobs,
              {"n_clusters": 6, "random_state": 0}),
    DemoEntry("pca", "make_blobs, 6 centres", _demo_blobs, {"n_components": 5}),
    DemoEntry("k_neighbors_classifier", "make_classification", _demo_classification,
              {"n_neighbors": 5}, max_rows=40_000),
    DemoEntry("matrix_factorization", "make_ratings, rank 5", _demo_ratings,
              {"n_factors": 5, "solver": "als", "reg": 0.05, "n_epochs": 10, "random_state": 0}),
]


def run_demo_entry(entry: DemoEntry, n_samples: int, chunks: int, seed: int = 0) -> dict:
    """Train one demo entry on the current scheduler; return a row of the demo table."""
    import dask
    from sklearn.base import is_classifier, is_clusterer

    from dml import registry
    from dml.model_selection import score_predictions

    if entry.max_rows is not None and n_samples > entry.max_rows:
        n_samples, chunks = entry.max_rows, min(chunks, entry.max_rows // 4)
    X, y = entry.make_data(n_samples, chunks, seed)
    X_train, X_test, y_train, y_test = split_blocks(X, y)
    model = registry.get(entry.model)(**entry.params)
    start = time.perf_counter()
    if is_clusterer(model):
        # Unsupervised: fit on X alone, then score the held-out assignment against the
        # generating labels (adjusted Rand index; label permutations do not matter).
        model.fit(X_train)
        fit_seconds = time.perf_counter() - start
        ari = score_predictions(["ari"], y_test, model.predict(X_test))
        return {"model": entry.model, "data": entry.data, "rows": n_samples,
                "fit_seconds": fit_seconds, **ari}
    if not hasattr(model, "predict"):
        # A projection (PCA): fit on X alone; report the share of the held-out rows' variance
        # that the kept components reconstruct.
        model.fit(X_train)
        fit_seconds = time.perf_counter() - start
        resid = X_test - model.inverse_transform(model.transform(X_test))
        lost, total = dask.compute((resid ** 2).sum(),
                                   ((X_test - X_test.mean(axis=0)) ** 2).sum())
        return {"model": entry.model, "data": entry.data, "rows": n_samples,
                "fit_seconds": fit_seconds, "variance_captured": 1.0 - float(lost / total)}
    model.fit(X_train, y_train)
    fit_seconds = time.perf_counter() - start
    names = ["accuracy", "f1_macro"] if is_classifier(model) else ["rmse", "r2"]
    # Persisted on the workers: the metrics then read them there instead of regenerating.
    # One collection per call: dask merges the graphs of several collections into one
    # submission that can carry tasks none of them needs (see dml._graph.layer_graph).
    y_test = y_test.persist()
    y_pred = model.predict(X_test).persist()
    metrics = score_predictions(names, y_test, y_pred, classes=getattr(model, "classes_", None))
    return {"model": entry.model, "data": entry.data, "rows": n_samples,
            "fit_seconds": fit_seconds, **metrics}


def cmd_demo(args) -> int:
    import os

    from dml import registry

    # $DML_DEMO_QUICK=1 is --quick for a command that is run as written (the README's first
    # command in tests/test_readme_commands.py).
    quick = args.quick or os.environ.get("DML_DEMO_QUICK", "").strip() not in ("", "0")
    n, chunks = (20_000, 5_000) if quick else (400_000, 50_000)
    rows, skipped = [], []
    with connect(args) as client:
        prepare_workers(client, ["dml.datasets", "dml.metrics"] +
                         [registry.target(e.model) for e in DEMOS])
        for entry in DEMOS:
            try:
                registry.get(entry.model)
            except ImportError:
                skipped.append(entry.model)
                continue
            status(f"demo: {entry.model} on {entry.data} "
                   f"({min(n, entry.max_rows or n)} rows) ...")
            rows.append(run_demo_entry(entry, n, chunks))
    columns = [("model", "model"), ("data", "data"), ("rows", "rows"),
               ("fit_seconds", "fit s"), ("accuracy", "accuracy"), ("f1_macro", "F1 (macro)"),
               ("rmse", "RMSE"), ("r2", "R2"), ("ari", "ARI"),
               ("variance_captured", "var. captured")]
    columns = [(k, h) for k, h in columns if any(k in r for r in rows)]
    if not rows:
        raise CLIError("no model family is installed: " + ", ".join(skipped))
    print(format_table([h for _, h in columns], [[r.get(k) for k, _ in columns] for r in rows],
                       digits={[k for k, _ in columns].index("fit_seconds"): 2}))
    if skipped:
        print(f"(not installed, skipped: {', '.join(skipped)})")
    return 0
