"""Choosing the number of clusters: the elbow curve and the gap statistic (see docs/clustering.md).

Both fit k-means for every ``k`` of a range. The fits run together: one initialisation graph per
data set serves every ``k`` (k-means|| candidates are drawn once with the oversampling of the
largest ``k`` and reduced to each ``k`` on the client; k-means++ and random seeds of the largest
``k`` are nested, their first ``k`` rows are the seeds for ``k``), and all the Lloyd runs then
advance in lockstep, one :func:`dml._blocks.compute` call per iteration for all of them, one
task per block serving every run on that block.
"""
from __future__ import annotations

import numbers
from dataclasses import replace

import dask
import numpy as np
from dask import delayed
from sklearn.utils import Bunch

from dml._blocks import BlockSpec, as_blocks, compute, seed_from
from dml.cluster import _lloyd
from dml.cluster._init import row_uniforms, stream_key
from dml._param_validation import check_scalar
from dml.cluster._kmeans import (Prepared, Run, finish, init_centres, init_graph, lloyd, prepare,
                                 run_seed)

__all__ = ["elbow", "gap_statistic"]


def _ks(n_clusters, n, name):
    if isinstance(n_clusters, (numbers.Integral, np.integer)):
        n_clusters = range(1, int(n_clusters) + 1)
    ks = [check_scalar(k, "n_clusters", name, minimum=1, integer=True) for k in n_clusters]
    if not ks:
        raise ValueError(f"{name}: n_clusters is empty; pass e.g. range(1, 11)")
    if len(set(ks)) != len(ks) or ks != sorted(ks):
        raise ValueError(f"{name}: n_clusters must be increasing without repeats, got {ks}")
    if ks[-1] > n:
        raise ValueError(f"{name}: n_samples={n} should be >= the largest n_clusters={ks[-1]}")
    return ks


def _fit_range(datasets: list[Prepared], ks, *, init, n_init, max_iter, tol,
               oversampling_factor, init_rounds, seed):
    """Best final inertia and its iteration count, shape (n_datasets, n_ks), all fits together."""
    if not isinstance(init, str):
        raise TypeError("init must be 'k-means||', 'k-means++' or 'random' when fitting a range "
                        "of n_clusters")
    kmax = ks[-1]
    graphs, keys = [], []
    for di, data in enumerate(datasets):
        for i in range(n_init):
            s = run_seed(seed, "kmeans-range", di, i)
            graphs.append(init_graph(data, init, kmax, s, oversampling_factor=oversampling_factor,
                                     init_rounds=init_rounds))
            keys.append((di, i, s))
    results = compute(*graphs)
    runs = []
    for (di, i, s), res in zip(keys, results):
        data = datasets[di]
        t = tol * data.variance if tol else 0.0
        for ki, k in enumerate(ks):
            if init == "k-means||":
                centres = init_centres(init, res, k, run_seed(s, "k", k), data)
            else:
                centres = np.ascontiguousarray(res[:k], dtype=data.dtype)
            runs.append((di, ki, Run(data, centres, max_iter, t)))
    lloyd([r for _, _, r in runs])
    finish([r for _, _, r in runs])
    inertia = np.full((len(datasets), len(ks)), np.inf)
    n_iter = np.zeros((len(datasets), len(ks)), dtype=int)
    for di, ki, r in runs:
        if r.inertia < inertia[di, ki]:
            inertia[di, ki], n_iter[di, ki] = r.inertia, r.n_iter
    return inertia, n_iter


def elbow(X, n_clusters=10, *, sample_weight=None, init="k-means||", n_init=1, max_iter=300,
          tol=1e-4, oversampling_factor=2.0, init_rounds=5, random_state=None):
    """Inertia of k-means for every ``k`` of a range, all fitted together.

    Parameters
    ----------
    X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
    n_clusters : int or iterable of int, default=10
        The values of ``k`` (increasing); an int ``K`` means ``1 .. K``.
    sample_weight : optional
        Row weights, as for :meth:`KMeans.fit`.
    init, n_init, max_iter, tol, oversampling_factor, init_rounds, random_state
        As for :class:`~dml.cluster.KMeans` (``n_init`` runs per ``k``, best inertia kept).

    Returns
    -------
    Bunch
        ``n_clusters`` (ndarray of the k values), ``inertia`` (the best final inertia for each
        k), ``n_iter``.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.cluster import elbow
    >>> X = np.r_[np.zeros((20, 2)), np.full((20, 2), 10.0)] + np.tile([[0, 1], [1, 0]], (20, 1))
    >>> curve = elbow(X, n_clusters=3, random_state=0)
    >>> curve.n_clusters
    array([1, 2, 3])
    >>> np.round(curve.inertia, 1)
    array([2020.,   20.,   10.])
    """
    name = "elbow"
    blocks = as_blocks(X, None, sample_weight, spec=BlockSpec(estimator=name))
    ks = _ks(n_clusters, blocks.n_samples, name)
    n_init = check_scalar(n_init, "n_init", name, minimum=1, integer=True)
    data = prepare(blocks, name)
    max_iter = check_scalar(max_iter, "max_iter", name, minimum=1, integer=True)
    tol = check_scalar(tol, "tol", name, minimum=0.0)
    inertia, n_iter = _fit_range(
        [data], ks, init=init, n_init=n_init, max_iter=max_iter,
        tol=tol, oversampling_factor=oversampling_factor,
        init_rounds=init_rounds, seed=seed_from(random_state))
    return Bunch(n_clusters=np.asarray(ks), inertia=inertia[0], n_iter=n_iter[0])


def _uniform_part(key, start, n, lo, hi, dtype):
    """One block of a reference data set: uniform over the box, prepared like training blocks."""
    d = len(lo)
    u = row_uniforms(key, start * d, n * d).reshape(n, d)
    x = (lo + u * (hi - lo)).astype(dtype)
    return _lloyd.prepare_block((x, None, None), np.zeros(d))


def gap_statistic(X, n_clusters=10, *, n_references=10, init="k-means||", n_init=1,
                  max_iter=300, tol=1e-4, oversampling_factor=2.0, init_rounds=5,
                  random_state=None):
    """Gap statistic of Tibshirani, Walther and Hastie (2001) over a range of ``k``.

    ``Gap(k) = E*[log W*_k] − log W_k``, where ``W_k`` is the within-cluster sum of squares (the
    k-means inertia) of X and ``E*`` the mean over ``n_references`` data sets drawn uniformly
    over X's bounding box (same rows and partitioning as X, generated on the workers). The
    chosen ``k`` is the smallest with ``Gap(k) ≥ Gap(k+1) − s_{k+1}``, ``s_k = sd_k·√(1 + 1/B)``
    (``sd_k``: standard deviation of ``log W*_k`` over the B references); when no ``k``
    qualifies, the one with the largest gap. All ``(B + 1) × len(n_clusters)`` fits run
    together. The references hold ``n_references`` times X's memory on the workers.

    Parameters
    ----------
    X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
    n_clusters : int or iterable of int, default=10
        The values of ``k`` (increasing); an int ``K`` means ``1 .. K``.
    n_references : int, default=10
        Number of uniform reference data sets B.
    init, n_init, max_iter, tol, oversampling_factor, init_rounds, random_state
        As for :class:`~dml.cluster.KMeans`.

    Returns
    -------
    Bunch
        ``n_clusters``, ``inertia`` (W_k), ``log_w``, ``reference_log_w`` (B × K),
        ``expected_log_w``, ``gap``, ``gap_std`` (s_k), ``best_n_clusters``.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.cluster import gap_statistic
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(c, 0.3, size=(40, 2)) for c in (0, 5, 10)])
    >>> result = gap_statistic(X, n_clusters=5, n_references=5, random_state=0)
    >>> int(result.best_n_clusters)
    3
    """
    name = "gap_statistic"
    blocks = as_blocks(X, spec=BlockSpec(estimator=name))
    ks = _ks(n_clusters, blocks.n_samples, name)
    n_refs = check_scalar(n_references, "n_references", name, minimum=1, integer=True)
    data = prepare(blocks, name)
    seed = seed_from(random_state)
    refs = _references(data, n_refs, seed)
    n_init = check_scalar(n_init, "n_init", name, minimum=1, integer=True)
    max_iter = check_scalar(max_iter, "max_iter", name, minimum=1, integer=True)
    inertia, _ = _fit_range(
        [data] + refs, ks, init=init, n_init=n_init, max_iter=max_iter,
        tol=check_scalar(tol, "tol", name, minimum=0.0), oversampling_factor=oversampling_factor,
        init_rounds=init_rounds, seed=seed)
    log_w = np.log(inertia[0])
    ref_log_w = np.log(inertia[1:])
    expected = ref_log_w.mean(axis=0)
    gap = expected - log_w
    s = ref_log_w.std(axis=0) * np.sqrt(1.0 + 1.0 / n_refs)
    ok = [i for i in range(len(ks) - 1) if gap[i] >= gap[i + 1] - s[i + 1]]
    best = ks[ok[0]] if ok else ks[int(np.argmax(gap))]
    return Bunch(n_clusters=np.asarray(ks), inertia=inertia[0], log_w=log_w,
                 reference_log_w=ref_log_w, expected_log_w=expected, gap=gap, gap_std=s,
                 best_n_clusters=best)


def _references(data: Prepared, n_refs: int, seed: int) -> list[Prepared]:
    """Uniform reference data sets over the bounding box, generated and kept on the workers."""
    lengths = np.diff(data.offsets)
    dtype = data.dtype
    all_parts = []
    for b in range(n_refs):
        key = stream_key(seed, "gap-reference", b)
        all_parts.append([delayed(_uniform_part, pure=True)(key, int(data.offsets[i]),
                                                             int(lengths[i]), data.lo, data.hi,
                                                             dtype)
                          for i in range(len(lengths))])
    persisted = dask.persist(*[p for parts in all_parts for p in parts])
    nb = len(lengths)
    blocks = [replace(data.blocks, parts=list(persisted[b * nb:(b + 1) * nb]), has_weight=False,
                      groups=None)
              for b in range(n_refs)]
    stats = compute(*[bl.map_reduce(_lloyd.prepared_stats,
                                    combine=_lloyd.combine_prepared_stats, compute_now=False)
                      for bl in blocks])
    return [Prepared(bl, data.offsets, data.n, data.d, dtype, np.zeros(data.d),
                     _lloyd.mean_variance(st, data.n), float(st["wxsq"]), float(data.n),
                     st["lo"], st["hi"])
            for bl, st in zip(blocks, stats)]
