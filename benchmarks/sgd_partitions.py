"""Workload ``sgd_partitions``: does an SGD-trained model learn as much per epoch on many
partitions as on one?

The same data is cut into 1, 8, 64, 256 and 1,024 row blocks (persisted on a 2-worker
``LocalCluster``); each model is trained with its default hyper-parameters for a fixed number of
epochs (``tol=None``) and scored on held-out rows after every epoch:

* ``sgd_log``: ``SGDClassifier(loss="log_loss")``, test log-loss;
* ``sgd_hinge``: ``SGDClassifier(loss="hinge")``, test hinge loss (and accuracy);
* ``sgd_squared``: ``SGDRegressor()`` (squared loss), test mean squared error;
* ``mlp``: ``MLPClassifier((64,))``, test accuracy (and log-loss);
* ``mf``: ``MatrixFactorization`` (SGD solver) on synthetic ratings, test RMSE.

Classification data: ``make_classification(n_samples=300_000, n_features=50, n_informative=20,
n_redundant=10, random_state=0)`` standardised, first 240,000 rows train, last 60,000 test.
Regression data: ``make_regression(n_samples=300_000, n_features=50, n_informative=30,
noise=10, random_state=0)`` standardised (y too), same split. scikit-learn's estimators on the
same NumPy data give the reference rows.

Usage (repository root, dev venv)::

    python -m benchmarks.sgd_partitions [--models sgd_log mlp ...] [--blocks 1 8 64 256 1024]
        [--epochs 5] [--repeat 1] [--output benchmarks/sgd_partitions.md]
        [--plot docs/img/sgd_partitions.png] [--scale 1.0]

Each fit's wall time includes preparing the blocks (one pass); the per-epoch times come from
the estimator's ``history_``. Beside every multi-block fit, the *Dask regroup* column is the
time Dask alone takes to bring the same persisted blocks into 16 persisted pieces
(``rechunk`` + ``persist``, no arithmetic, :func:`regroup_floor`): the floor of any fit that
trains on runs of consecutive blocks, paid once before the first epoch. ``fit − regroup`` is
what the fit costs beyond it, to compare with the one-block fit. Fits are repeated
``--repeat`` times after a warm-up fit and the median is reported.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

MODELS = ("sgd_log", "sgd_hinge", "sgd_squared", "mlp")
BLOCKS = (1, 8, 64, 256, 1024)


def classification_data(scale=1.0):
    from sklearn.datasets import make_classification
    from sklearn.preprocessing import StandardScaler

    n = int(300_000 * scale)
    X, y = make_classification(n_samples=n, n_features=50, n_informative=20, n_redundant=10,
                               random_state=0)
    X = StandardScaler().fit_transform(X)
    k = int(0.8 * n)
    return X[:k], y[:k], X[k:], y[k:]


def regression_data(scale=1.0):
    from sklearn.datasets import make_regression
    from sklearn.preprocessing import StandardScaler

    n = int(300_000 * scale)
    X, y = make_regression(n_samples=n, n_features=50, n_informative=30, noise=10.0,
                           random_state=0)
    X = StandardScaler().fit_transform(X)
    y = (y - y.mean()) / y.std()
    k = int(0.8 * n)
    return X[:k], y[:k], X[k:], y[k:]


def _hinge(y, d):
    return float(np.mean(np.maximum(0.0, 1.0 - (2.0 * y - 1.0) * d)))


def score(name, model, X, y):
    """(primary, secondary) test quality of a fitted model (dml or scikit-learn)."""
    from sklearn.metrics import accuracy_score, log_loss

    if name == "sgd_log":
        p = np.asarray(model.predict_proba(X))
        return log_loss(y, p), accuracy_score(y, p.argmax(1))
    if name == "sgd_hinge":
        d = np.asarray(model.decision_function(X))
        return _hinge(y, d), accuracy_score(y, (d > 0).astype(int))
    if name == "sgd_squared":
        p = np.asarray(model.predict(X))
        mse = float(np.mean((p - y) ** 2))
        return mse, 1.0 - mse / float(np.var(y))
    p = np.asarray(model.predict_proba(X))
    return accuracy_score(y, p.argmax(1)), log_loss(y, p)


METRIC = {"sgd_log": ("test log-loss", "accuracy"), "sgd_hinge": ("test hinge loss", "accuracy"),
          "sgd_squared": ("test MSE", "R²"), "mlp": ("test accuracy", "log-loss")}


def make(name, lib, epochs):
    kw = dict(max_iter=epochs, tol=None, random_state=0)
    if lib == "sklearn":
        from sklearn import linear_model, neural_network
    else:
        import dml.linear_model as linear_model
        import dml.neural_network as neural_network
    if name == "sgd_log":
        return linear_model.SGDClassifier(loss="log_loss", **kw)
    if name == "sgd_hinge":
        return linear_model.SGDClassifier(loss="hinge", **kw)
    if name == "sgd_squared":
        return linear_model.SGDRegressor(**kw)
    if lib == "sklearn":
        kw["tol"] = 0.0  # scikit-learn's MLP has no tol=None; 0 never stops within 5 epochs
    return neural_network.MLPClassifier((64,), **kw)


class EpochRecorder:
    """A dml callback keeping the parameters after every epoch (to score each epoch)."""

    def __init__(self):
        self.params = []

    def __call__(self, state, record):
        self.params.append(state.params.copy())
        return False


def per_epoch_scores(name, model, recorder, X, y):
    """Score the model as it was after each epoch (parameters from the recorder)."""
    import copy

    out = []
    est = copy.copy(model)
    for params in recorder.params:
        if name == "mlp":
            problem = est._problem(X.shape[1], est.classes_)
            est._set_weights(problem, params)
        elif name == "sgd_squared":
            est._set_coef(est._problem(X.shape[1]), params)
        else:
            est._set_coef(est._problem(X.shape[1], est.classes_, None), params)
        out.append(score(name, est, X, y))
    return out


def run(models, blocks, epochs, repeat, scale, plot):
    import dask.array as da

    import dml.runtime

    client = dml.runtime.connect(n_workers=2, threads_per_worker=1)
    rows = []
    curves = {}
    data = {}
    try:
        for name in models:
            if name == "sgd_squared":
                Xtr, ytr, Xte, yte = data.setdefault("reg", regression_data(scale))
            else:
                Xtr, ytr, Xte, yte = data.setdefault("clf", classification_data(scale))
            # scikit-learn reference (in memory, one process).
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                ref = make(name, "sklearn", epochs).fit(Xtr, ytr)
                times.append(time.perf_counter() - t0)
            q = score(name, ref, Xte, yte)
            rows.append((name, "scikit-learn", "-", q, statistics.median(times), None, None,
                         None))
            print(rows[-1], flush=True)
            for nb in blocks:
                chunk = -(-len(Xtr) // nb)
                X = da.from_array(Xtr, chunks=(chunk, Xtr.shape[1])).persist()
                y = da.from_array(ytr, chunks=chunk).persist()
                make(name, "dml", 1).fit(X, y)  # warm-up (compiles, imports, first transfers)
                times, model, rec = [], None, None
                for _ in range(repeat):
                    rec = EpochRecorder()
                    model = make(name, "dml", epochs)
                    model.set_params(callbacks=[rec])
                    t0 = time.perf_counter()
                    model.fit(X, y)
                    times.append(time.perf_counter() - t0)
                model.set_params(callbacks=None)
                regroup = regroup_floor(X, y, repeat) if nb > 1 else 0.0
                epoch_s = statistics.median(h["seconds"] for h in model.history_)
                curve = per_epoch_scores(name, model, rec, Xte, yte)
                curves[(name, nb)] = [c[0] for c in curve]
                streams = getattr(model, "n_streams_", None)
                rows.append((name, "dml", nb, curve[-1], statistics.median(times), epoch_s,
                             streams, regroup))
                print(rows[-1], [round(c[0], 4) for c in curve], flush=True)
                del X, y
    finally:
        client.close()
        cluster = getattr(client, "cluster", None)
        if cluster is not None:
            cluster.close()
    if plot:
        _plot(curves, models, blocks, epochs, plot)
    return rows, curves


#: Pieces the regrouping floor brings the blocks into: the fit holds 1,024 blocks on two
#: worker threads as 16 groups (``dml.optim.data.stream_groups``).
FLOOR_PIECES = 16


def regroup_floor(X, y, repeat):
    """Median seconds Dask itself takes to bring ``X`` and ``y``'s persisted blocks together
    into at most :data:`FLOOR_PIECES` persisted pieces (``rechunk`` + ``persist``): what any
    fit that trains on runs of consecutive blocks pays once before its first epoch, with no
    arithmetic at all. At 1,024 small blocks spread over two workers it was about half of the
    difference between a linear model's fit and the one-block fit (RESULTS.md)."""
    from distributed import wait

    rows = -(-X.shape[0] // min(X.numblocks[0], FLOOR_PIECES))
    times = []
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        held = (X.rechunk((rows, X.shape[1])).persist(), y.rechunk(rows).persist())
        wait(list(held))
        times.append(time.perf_counter() - t0)
        del held
    return statistics.median(times[1:])


def _plot(curves, models, blocks, epochs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.4))
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, models):
        for nb in blocks:
            if (name, nb) in curves:
                ax.plot(range(1, epochs + 1), curves[(name, nb)], marker="o", label=f"{nb} blocks")
        ax.set_title(name)
        ax.set_xlabel("epoch")
        ax.set_ylabel(METRIC[name][0])
        ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)


def table(rows, curves, epochs):
    out = [f"| model | implementation | blocks | quality (epoch {epochs}) | second metric "
           "| fit time (median) | s per epoch | Dask regroup | fit − regroup | "
           "per-epoch quality |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, impl, nb, q, t, eps, _, regroup in rows:
        curve = curves.get((name, nb), [])
        floor = "" if regroup is None else f"{regroup:.2f} s"
        beyond = "" if regroup is None else f"{t - regroup:.2f} s"
        out.append(f"| {name} | {impl} | {nb} | {q[0]:.4f} ({METRIC[name][0]}) | "
                   f"{q[1]:.4f} ({METRIC[name][1]}) | {t:.2f} s | "
                   f"{'' if eps is None else f'{eps:.3f}'} | {floor} | {beyond} | "
                   f"{' '.join(f'{c:.4f}' for c in curve)} |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.sgd_partitions")
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--blocks", nargs="+", type=int, default=list(BLOCKS))
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--output", default="")
    p.add_argument("--plot", default="")
    a = p.parse_args(argv)
    rows, curves = run(a.models, a.blocks, a.epochs, a.repeat, a.scale, a.plot)
    from benchmarks.report import emit

    emit(table(rows, curves, a.epochs), a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
