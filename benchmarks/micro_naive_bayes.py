"""Micro-benchmark: dml's naive Bayes block kernels against scikit-learn's fit on ONE block.

What one Dask worker does per block of the ``nb_gaussian`` / ``nb_multinomial`` workloads, on
one core (BLAS limited to one thread for everybody), without the cluster::

    python -m benchmarks.micro_naive_bayes                        # 21 interleaved repeats
    git show <rev>:dml/naive_bayes/_kernels.py > /tmp/nb_old.py   # before/after in ONE run:
    python -m benchmarks.micro_naive_bayes --baseline /tmp/nb_old.py

Cases (100,000 rows by default, the block size of the workloads):

* ``gaussian``: the ``nb_gaussian`` data (make_classification, 50 features, 2 classes);
  dml ``_gaussian_block`` vs ``sklearn.naive_bayes.GaussianNB().fit``;
* ``gaussian-weighted``: the same with uniform(0.5, 2) sample weights;
* ``gaussian-20-classes``: 20 classes (the compiled passes' cost does not grow with them);
* ``multinomial``: the ``nb_multinomial`` data (Poisson counts, 100 features, 3 classes);
  dml ``_count_block`` vs ``sklearn.naive_bayes.MultinomialNB().fit``.

scikit-learn's fit includes its input validation (one finiteness pass). dml's Gaussian kernel
does not (dml validates each block with one sum before it); the count kernel
(``_count_block``) makes its finiteness check from its own sums, so its time is the whole
per-block work. Every repeat runs every
function once, in an order rotated each repeat, so that load on a shared machine hits them
alike; compare the ratios of one run, not absolute times across runs.
"""
from __future__ import annotations

import argparse
import importlib.util
import time

import numpy as np


def _load(path):
    spec = importlib.util.spec_from_file_location("nb_baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _call(module, name, *args, **kwargs):
    """Call a kernel of ``module``, tolerating older signatures without ``missing``."""
    fn = getattr(module, name)
    try:
        return fn(*args, **kwargs)
    except TypeError:
        return fn(*args)


def cases(rows: int):
    from sklearn.datasets import make_classification
    from sklearn.naive_bayes import GaussianNB, MultinomialNB

    from benchmarks.workloads.naive_bayes import MULTINOMIAL_FEATURES, multinomial_data

    X, y = make_classification(n_samples=rows, n_features=50, random_state=0)
    w = np.random.default_rng(0).uniform(0.5, 2.0, rows)
    y20 = np.random.default_rng(1).integers(0, 20, rows)
    m = multinomial_data(scale=rows / 800_000)
    Xm, ym = m.X_train[:rows], m.y_train[:rows]
    assert Xm.shape[1] == MULTINOMIAL_FEATURES
    return {
        "gaussian": (lambda mod: _call(mod, "_gaussian_block", 0, X, y, None, "GaussianNB"),
                     lambda: GaussianNB().fit(X, y)),
        "gaussian-weighted": (
            lambda mod: _call(mod, "_gaussian_block", 0, X, y, w, "GaussianNB"),
            lambda: GaussianNB().fit(X, y, sample_weight=w)),
        "gaussian-20-classes": (
            lambda mod: _call(mod, "_gaussian_block", 0, X, y20, None, "GaussianNB"),
            lambda: GaussianNB().fit(X, y20)),
        "multinomial": (
            lambda mod: _call(mod, "_count_block", 0, Xm, ym, None, None, True, "MultinomialNB"),
            lambda: MultinomialNB().fit(Xm, ym)),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.micro_naive_bayes",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=21)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--baseline", help="path of an older dml/naive_bayes/_kernels.py (before "
                                      "the package split: dml/naive_bayes.py) to time as well")
    p.add_argument("--cases", nargs="+", help="subset of the cases (default: all)")
    args = p.parse_args(argv)

    from threadpoolctl import threadpool_limits

    from dml.naive_bayes import _kernels as current

    modules = {"dml": current}
    if args.baseline:
        modules["dml-baseline"] = _load(args.baseline)
    all_cases = cases(args.rows)
    selected = args.cases or list(all_cases)
    fns = {}
    for case in selected:
        kernel, sk = all_cases[case]
        for label, mod in modules.items():
            fns[(case, label)] = (lambda kernel=kernel, mod=mod: kernel(mod))
        fns[(case, "sklearn")] = sk
    items = list(fns.items())
    times = {k: [] for k in fns}
    with threadpool_limits(1):
        for _, f in items:  # warm-up
            f()
        for r in range(args.repeat):
            for key, f in items[r % len(items):] + items[:r % len(items)]:
                t = time.perf_counter()
                f()
                times[key].append(time.perf_counter() - t)
    print(f"{args.rows:,} rows, {args.repeat} interleaved repeats, one thread; times in ms")
    print(f"{'case':22s} {'implementation':14s} {'median':>8s} {'min':>8s} {'vs sklearn':>10s}")
    for case in selected:
        ref = np.median(times[(case, "sklearn")])
        for label in [*modules, "sklearn"]:
            v = times[(case, label)]
            print(f"{case:22s} {label:14s} {np.median(v) * 1e3:8.1f} {np.min(v) * 1e3:8.1f} "
                  f"{np.median(v) / ref:9.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
