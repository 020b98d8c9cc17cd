"""Distributed k-means: Lloyd's algorithm where only the centres travel.

The driver in this module keeps the centres on the client. Each Lloyd iteration is one
map-reduce over the persisted blocks: every block returns its per-cluster weighted sums, weights
and partial inertia (:func:`dml.cluster._lloyd.lloyd_block`), the results are added in a fixed
tree order and the client divides. Several runs (``n_init`` restarts, or the models of a range
of ``k`` for the elbow and gap statistic, on several data sets) advance in lockstep: all their
reductions of one iteration go to the scheduler in a single :func:`dml._blocks.compute` call,
and one task per block serves every run on that block. The training blocks are prepared once
(centred, persisted, grouped by worker) by :mod:`dml.cluster._prepared`.
"""
from __future__ import annotations

import functools
import logging
import warnings
from dataclasses import dataclass, field

import dask
import dask.array as da
import numpy as np
from dask import delayed
from dask._task_spec import Task
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin,
                          TransformerMixin)
from sklearn.exceptions import ConvergenceWarning

from dml._blocks import BlockSpec, block_rng, compute, is_sparse, is_sparse_dask, seed_from
from dml._graph import layer_graph, new_name, task_ref
from dml._param_validation import RANDOM_STATE, Integral, Interval, Real, StrOptions
from dml._typing import Any, ArrayLike, Self
from dml.base import DaskEstimatorMixin, TransformOutputMixin, check_is_fitted, fit_context
from dml.cluster import _chain, _init, _init_groups, _lloyd, _sparse
from dml.cluster._prepared import (Prepared, group_call, in_block_order, map_combine, prepare,
                                   tree_combine)
from dml.optim.progress import make_progress

__all__ = ["KMeans"]

logger = logging.getLogger("dml.cluster")

_INITS = ("k-means||", "k-means++", "random")


# --------------------------------------------------------------------------------------------
# Lloyd in lockstep
# --------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Run:
    """One Lloyd run: its data set, current centres (centred coordinates) and bookkeeping."""

    data: Prepared
    centres: np.ndarray
    max_iter: int
    tol: float
    n_iter: int = 0
    done: bool = False
    history: list = field(default_factory=list)
    inertia: float | None = None
    labels: object = None
    counts: np.ndarray | None = None


def _relocate(sums, wsum, cand, d):
    """scikit-learn's empty-cluster rule on the reduced sums, in its order of operations."""
    empty = np.flatnonzero(wsum == 0)
    if len(empty) == 0 or len(cand["dist"]) == 0 or cand["dist"][0] == 0:
        # No distance > 0: more clusters than distinct points; relocating is pointless.
        return
    for idx, new in enumerate(empty[:len(cand["dist"])]):
        x, w, old = _sparse.as_dense(cand["x"][idx]).ravel(), cand["w"][idx], cand["label"][idx]
        sums[old, :d] -= x * w
        sums[new, :d] = x * w
        wsum[new] = w
        wsum[old] -= w


def _by_data(runs):
    groups: dict[int, tuple[Prepared, list[Run]]] = {}
    for r in runs:
        groups.setdefault(id(r.data), (r.data, []))[1].append(r)
    return list(groups.values())


def lloyd(runs: list[Run], progress=None) -> None:
    """Advance all runs to convergence (or ``max_iter``).

    Per run and iteration, as scikit-learn's ``_kmeans_single_lloyd``: assign with the current
    centres, relocate empty clusters, average, and stop when the total squared centre shift is
    ``<= tol`` (an unchanged assignment gives a zero shift, scikit-learn's strict convergence).
    ``history`` gets the inertia of each assignment step. ``progress`` (a display of
    :mod:`dml.optim.progress`, or None) gets one record per iteration: the lowest inertia of
    the runs, which is also logged at INFO on the ``dml.cluster`` logger.

    Runs on one persisted data set advance in chains of iterations submitted as one graph
    (:mod:`dml.cluster._chain`); otherwise (several data sets, data read from storage) one
    scheduler call per iteration serves all runs.
    """
    for r in runs:
        if r.max_iter < 1:
            r.done = True
    # A cluster that stays empty (more clusters than distinct points) halts every chain at
    # its first link: after a halt, chains restart short and double while they run through.
    chain_length = _chain.ITERS_PER_SUBMIT
    while True:
        active = [r for r in runs if not r.done]
        if not active:
            return
        groups = _by_data(active)
        if len(groups) == 1 and groups[0][0].persisted and chain_length > 1:
            data, group = groups[0]
            n_iters = min(chain_length, max(r.max_iter - r.n_iter for r in group),
                          _chain.max_links(group, data.d, len(data.groups)))
            ran = _chain.run_chain(data, group, n_iters)
            for used, sums in ran:
                group = [r for r in group if not r.done]
                if len(used) != len(group) or not all(
                        np.array_equal(u, r.centres) for u, r in zip(used, group)):
                    raise RuntimeError("KMeans: the chained Lloyd iterations diverged from the "
                                       "client's replay; this is a bug in dml, please report it")
                _apply_iteration([(data, group)], [sums])
                _report(runs, progress)
            if len(ran) < n_iters and any(not r.done for r in group):
                chain_length = 1  # halted by an empty cluster: one plain iteration next
            continue
        chain_length = min(2 * chain_length, _chain.ITERS_PER_SUBMIT)
        results = map_combine([(data, ([r.centres for r in group],)) for data, group in groups],
                              _lloyd.lloyd_block, _lloyd.combine_lloyd)
        results = [_sparse.dense_sums(res) for res in results]
        _apply_iteration(groups, results)
        _report(runs, progress)


def _report(runs, progress) -> None:
    """One progress record for the iteration just applied (lockstep runs: the best one)."""
    iteration = max(r.n_iter for r in runs)
    inertia = min(r.history[-1] for r in runs if r.history)
    logger.info("KMeans iteration %d: inertia %.6g", iteration, inertia)
    if progress is not None:
        progress.update({"epoch": iteration, "objective": inertia, "unit": "iteration"})


def _apply_iteration(groups, results) -> None:
    """One iteration's update of the runs from their reduced sums: history, relocation of
    empty clusters, new centres, the stopping rule."""
    steps = []
    for (data, group), result in zip(groups, results):
        for r, sums in zip(group, result):
            steps.append((r, sums, sums[:, -1].copy()))
            r.history.append(_lloyd.step_inertia(sums, r.centres, data.wxsq))
    _relocate_empty([s for s in steps if np.any(s[2] == 0)])
    for r, sums, wsum in steps:
        sums[:, -1] = wsum
        r.centres, r.n_iter, r.done = _chain.next_centres(
            r.centres, sums, r.data.d, r.data.dtype, r.tol, r.n_iter, r.max_iter)


def _relocate_empty(steps):
    """One extra pass for the runs that lost a cluster: the globally farthest rows."""
    if not steps:
        return
    groups: dict[int, list] = {}
    for s in steps:
        groups.setdefault(id(s[0].data), []).append(s)
    reductions = []
    for group in groups.values():
        data = group[0][0].data
        n_far = [int(np.sum(s[2] == 0)) for s in group]
        reductions.append(data.blocks.map_reduce(
            _lloyd.relocation_block, [s[0].centres for s in group], n_far, data.offsets,
            combine=functools.partial(_lloyd.merge_candidates, n_far=n_far), with_index=True,
            compute_now=False))
    results = compute(*reductions)
    for group, cands in zip(groups.values(), results):
        for (r, sums, wsum), cand in zip(group, cands):
            _relocate(sums, wsum, cand, r.data.d)


def finish(runs: list[Run], labels: bool = False) -> None:
    """Final E-step: labels consistent with the final centres and the exact inertia.

    The inertia is ``Σ w‖x − c‖²`` from the differences, as scikit-learn computes it. With
    ``labels=True`` each run gets ``labels``: a Dask array of one label chunk per data block,
    read from the final tasks' results kept on the workers (a NumPy array for local data,
    fetched with the statistics); without, only inertias and cluster sizes travel. One task
    per group of blocks (a held group, or a placement group of blocks held one by one).
    """
    groups = _by_data(runs)
    if not labels:
        results = map_combine([(data, ([r.centres for r in group],)) for data, group in groups],
                              _lloyd.final_stats_block, _lloyd.combine_final)
        for (data, group), (inertia, counts) in zip(groups, results):
            for i, r in enumerate(group):
                r.inertia, r.counts = float(inertia[i]), counts[i]
        return
    if all(data.blocks.local for data, _ in groups):
        _finish_local(groups)
        return
    tasks, extracts = [], []
    for data, group in groups:
        centres = [r.centres for r in group]
        done = dask.persist(*[delayed(group_call, pure=False)(
            _lloyd.final_block, inputs, centres) for inputs in data.group_inputs()])
        tasks.append(done)
        extracts.append([delayed(_lloyd.stats_of_group, pure=False)(t) for t in done])
    computed = compute(*[e for ex in extracts for e in ex])
    pos = 0
    for (data, group), done in zip(groups, tasks):
        _set_final_stats(data, group, computed[pos:pos + len(done)], lambda r: r)
        pos += len(done)
        where = {i: (t, j) for g, t in zip(data.groups, done) for j, i in enumerate(g)}
        for r_idx, r in enumerate(group):
            r.labels = _labels_array(where, r_idx, data.blocks.lengths)


def _finish_local(groups) -> None:
    """:func:`finish` with labels for local (NumPy) data: the labels come back with the
    statistics in one computation, as NumPy arrays (a column of the data the client holds
    anyway), instead of being kept on the workers and fetched by a second one."""
    computed = compute(*[delayed(group_call, pure=False)(_lloyd.final_block, inputs,
                                                         [r.centres for r in group])
                         for data, group in groups for inputs in data.group_inputs()])
    pos = 0
    for data, group in groups:
        # Per block: (labels, inertia, counts), as _lloyd.final_block returns them.
        per_block = _set_final_stats(data, group, computed[pos:pos + len(data.groups)],
                                     lambda r: r[1:])
        pos += len(data.groups)
        for r_idx, r in enumerate(group):
            r.labels = np.concatenate([res[0][r_idx] for res in per_block])


def _set_final_stats(data, group, group_results, stats_of) -> list:
    """Set the inertia and cluster sizes of each run in ``group`` from the final tasks'
    results (``group_results``: one list of per-block results per group of blocks, in the
    data's group order; ``stats_of`` picks a block's (inertia, counts) out of its result),
    added in the fixed tree order; returns the per-block results in block order."""
    per_block = in_block_order(data.groups, group_results)
    inertia, counts = tree_combine([stats_of(r) for r in per_block], _lloyd.combine_final)
    for r_idx, r in enumerate(group):
        r.inertia, r.counts = float(inertia[r_idx]), counts[r_idx]
    return per_block


def _labels_array(where: dict, r_idx: int, lengths) -> da.Array:
    """Run ``r_idx``'s labels, one chunk per data block read out of the persisted task that
    computed them (``where[i]``: that task and the block's place in it), as one graph layer:
    a Delayed and ``from_delayed`` per block cost about a millisecond each on the client."""
    name = new_name("kmeans-labels")
    deps: list = []
    layer = {(name, i): Task((name, i), _lloyd.labels_in_group, task_ref(where[i][0], deps),
                             where[i][1], r_idx)
             for i in range(len(lengths))}
    return da.Array(layer_graph(name, layer, deps), name,
                    chunks=(tuple(int(n) for n in lengths),), dtype=np.int32)



# --------------------------------------------------------------------------------------------
# Initialisation
# --------------------------------------------------------------------------------------------

def run_seed(seed: int, purpose: str, *indices: int) -> int:
    return int(block_rng(seed, purpose, *indices).integers(0, 2**63))


def init_graph(data: Prepared, method: str, k: int, seed: int, *, oversampling_factor=2.0,
               init_rounds=5):
    """Delayed initialisation of one run; k-means|| returns the candidates and their weights.

    On data held in groups of several blocks (``data.init_groups``) each step runs one task
    per group (:mod:`._init_groups`), otherwise one per block (:mod:`._init`): the same
    numbers either way."""
    groups = data.init_groups
    if groups is not None:
        if method == "random":
            return _init_groups.random_init(groups, data.offsets, k, seed)
        if method == "k-means++":
            return _init_groups.kmeans_plusplus_init(groups, data.offsets, k, seed)
        return _init_groups.kmeans_parallel_candidates(groups, data.offsets,
                                                       oversampling_factor * k, init_rounds, seed)
    if method == "random":
        return _init.random_init(data.parts, data.offsets, k, seed)
    if method == "k-means++":
        return _init.kmeans_plusplus_init(data.parts, data.offsets, k, seed)
    return _init.kmeans_parallel_candidates(data.parts, data.offsets, oversampling_factor * k,
                                            init_rounds, seed)


def init_centres(method: str, result, k: int, seed: int, data: Prepared) -> np.ndarray:
    """Turn a computed :func:`init_graph` result into ``k`` centres (centred coordinates)."""
    if method == "k-means||":
        candidates, weights = result
        centres = _init.weighted_kmeans_plusplus(candidates, weights, k, seed)
    else:
        centres = result
    return np.ascontiguousarray(_sparse.as_dense(centres, data.dtype))


@dataclass
class _PartsView:
    """What :func:`init_graph` reads of a :class:`Prepared`: its parts, block offsets and
    (held data) its groups of blocks."""

    parts: list
    offsets: np.ndarray
    init_groups: list | None = None


# --------------------------------------------------------------------------------------------
# Estimator
# --------------------------------------------------------------------------------------------

class KMeans(TransformOutputMixin, DaskEstimatorMixin, ClassNamePrefixFeaturesOutMixin,
             TransformerMixin, ClusterMixin, BaseEstimator):
    """K-means clustering by distributed Lloyd iterations (see docs/clustering.md).

    Each Lloyd iteration is one pass over the persisted row blocks in which every block returns
    its per-cluster sums, weights and inertia; only the centres travel. From the same initial
    centres the result equals scikit-learn's ``KMeans(init=C0, n_init=1, algorithm="lloyd")``
    (labels, centres, inertia, ``n_iter_``) whatever the partitioning: the same centring of the
    data, assignment rule (ties to the lowest index), empty-cluster relocation (the points
    farthest from their centres, found by a distributed top-k), ``tol`` definition, final
    assignment step and inertia.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters.
    init : {"k-means||", "k-means++", "random"} or array of shape (n_clusters, n_features), \
default="k-means||"
        ``"k-means||"`` (Bahmani et al. 2012, the scalable default): ``init_rounds`` rounds that
        each keep every row with probability ``ℓ·w·D(x)²/φ`` (``ℓ = oversampling_factor ·
        n_clusters``), the candidates weighted by the weight of the rows nearest to them, then
        weighted k-means++ and Lloyd on the candidates on the client. ``"k-means++"``: exact
        sequential k-means++ (one pass per centre, all in one Dask graph). ``"random"``:
        ``n_clusters`` rows sampled without replacement with probability ∝ sample_weight.
        Random choices are keyed by the global row index, so they do not depend on the
        partitioning.
    n_init : "auto" or int, default="auto"
        Number of initialisations; the run with the lowest final inertia is kept (ties: the
        first). ``"auto"``: 10 for ``init="random"``, else 1 (scikit-learn's rule). The runs
        advance together: one scheduler call per Lloyd iteration serves all of them.
    max_iter : int, default=300
        Maximum number of Lloyd iterations per run.
    tol : float, default=1e-4
        Convergence when the sum of squared centre shifts is ``<= tol · mean(var(X, axis=0))``
        (scikit-learn's definition).
    oversampling_factor : float, default=2.0
        k-means|| oversampling ``ℓ / n_clusters``.
    init_rounds : int, default=5
        Number of k-means|| oversampling rounds.
    random_state : int, RandomState, Generator or None, default=None
        Seed of every random choice. Same data, partitioning and seed give the same model on any
        cluster.
    verbose : int, default=0
        Above 0: show a progress line per Lloyd iteration on stderr (plain lines when stderr
        is not a terminal). Every iteration is also logged at INFO on the ``dml.cluster``
        logger.
    progress : None, False, "text", "notebook", callable or object, default=None
        Progress display (see :mod:`dml.optim.progress`); "notebook": an HTML bar in Jupyter.
        A callable gets one record per iteration: ``{"epoch": iteration, "objective":
        inertia, "unit": "iteration"}``.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Centres, in X's float dtype (float32 input stays float32).
    labels_ : ndarray or dask.array.Array of shape (n_samples,), int32
        Cluster of each training row: NumPy for NumPy/pandas input, a Dask array (persisted on
        the workers) for Dask input.
    inertia_ : float
        Sum of weighted squared distances of the rows to their centres (a true squared-distance
        sum, unlike dask-ml's).
    n_iter_ : int
        Lloyd iterations of the kept run.
    inertia_history_ : ndarray of shape (n_iter_,)
        Inertia of every assignment step of the kept run (centres at the start of the iteration
        and the labels they induce); Lloyd's algorithm never increases it (up to round-off,
        which float32 sums make visible).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.cluster import KMeans
    >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
    >>> km = KMeans(n_clusters=2, init=np.array([[1.0, 2.0], [10.0, 2.0]])).fit(X)
    >>> km.labels_
    array([0, 0, 0, 1, 1, 1], dtype=int32)
    >>> km.cluster_centers_
    array([[ 1.,  2.],
           [10.,  2.]])
    >>> km.predict(np.array([[0.0, 0.0], [12.0, 3.0]]))
    array([0, 1], dtype=int32)
    >>> float(km.inertia_)
    16.0
    """

    # Sparse X trains without densifying a block (docs/clustering.md, "Sparse data").
    _block_spec = BlockSpec(accept_sparse=True)

    def __init__(self, n_clusters=8, *, init="k-means||", n_init="auto", max_iter=300,
                 tol=1e-4, oversampling_factor=2.0, init_rounds=5, random_state=None,
                 verbose=0, progress=None):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.oversampling_factor = oversampling_factor
        self.init_rounds = init_rounds
        self.random_state = random_state
        self.verbose = verbose
        self.progress = progress

    # ---- parameters ----
    _parameter_constraints = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        # A callable would need all of X in one process.
        "init": [StrOptions(set(_INITS)), "array-like"],
        "n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "oversampling_factor": [Interval(Real, 0, None, closed="neither")],
        "init_rounds": [Interval(Integral, 1, None, closed="left")],
        "random_state": RANDOM_STATE,
        "verbose": ["verbose"],
        "progress": "no_validation",  # checked by dml.optim.progress.make_progress
    }

    def _n_init(self) -> int:
        """The number of initialisations: "auto" is 10 for ``init="random"``, else 1."""
        if self.n_init == "auto":
            n_init = 10 if isinstance(self.init, str) and self.init == "random" else 1
        else:
            n_init = int(self.n_init)
        if not isinstance(self.init, str) and n_init != 1:
            warnings.warn(f"Explicit initial center position passed: performing only one init "
                          f"in {type(self).__name__} instead of n_init={n_init}.",
                          RuntimeWarning, stacklevel=3)
            n_init = 1
        return n_init

    def _init_array(self, d, dtype):
        name = type(self).__name__
        init = np.asarray(self.init)
        if init.dtype.kind not in "iuf":
            raise TypeError(f"{name}: init array must be numeric, got dtype {init.dtype}")
        if init.ndim != 2 or init.shape[0] != self.n_clusters:
            raise ValueError(f"{name}: the shape of the initial centers {init.shape} does not "
                             f"match the number of clusters {self.n_clusters}; pass an array "
                             f"of shape ({self.n_clusters}, {d})")
        if init.shape[1] != d:
            raise ValueError(f"{name}: the shape of the initial centers {init.shape} does not "
                             f"match the number of features of the data {d}; pass an array of "
                             f"shape ({self.n_clusters}, {d})")
        if not np.all(np.isfinite(init)):
            raise ValueError(f"{name}: the initial centers contain NaN or infinity")
        return init.astype(dtype)

    # ---- fit ----
    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None,
            sample_weight: ArrayLike | None = None) -> Self:
        """Compute k-means clustering.

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
        y : ignored
            Not used; a column name of X's dataframe is left out of the features.
        sample_weight : array-like, Dask array/Series or column name, optional
            Weight of each row (non-negative). Used by Lloyd and by the built-in
            initialisations (not by an explicit init array), as in scikit-learn.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.cluster import KMeans
        >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
        >>> km = KMeans(n_clusters=2, init=np.array([[1.0, 2.0], [10.0, 2.0]]))
        >>> km.fit(X).cluster_centers_
        array([[ 1.,  2.],
               [10.,  2.]])
        """
        n_init = self._n_init()
        # y is ignored; a column name (the `dml` command's target) is only kept out of X.
        blocks = self._fit_blocks(X, y if isinstance(y, str) else None, sample_weight,
                                  require_y=False)
        if not isinstance(self.init, str):
            self._init_array(blocks.n_features, np.float64)  # shape errors before any pass
        n = int(blocks.lengths.sum())
        if n < self.n_clusters:
            raise ValueError(f"{type(self).__name__}: n_samples={n} should be >= "
                             f"n_clusters={self.n_clusters}; ask for fewer clusters")
        seed = seed_from(self.random_state)
        sparse = is_sparse(X) or is_sparse_dask(X)
        seeds = [run_seed(seed, "kmeans-run", i) for i in range(n_init)]
        if isinstance(self.init, str):
            # The initial centres are computed with the data statistics (one pass for both
            # when the data is read from storage at every pass).
            data, inits = prepare(blocks, type(self).__name__, sparse=sparse,
                                  also=functools.partial(self._init_graphs, seeds))
        else:
            data, inits = prepare(blocks, type(self).__name__, sparse=sparse), None
        runs = self._initial_runs(data, seeds, inits)
        progress = make_progress(self.progress, self.verbose)
        if progress is not None:
            progress.start(self.max_iter, desc=type(self).__name__)
        try:
            lloyd(runs, progress)
        finally:
            if progress is not None:
                progress.close()
        finish(runs, labels=True)
        best = min(range(len(runs)), key=lambda i: (runs[i].inertia, i))
        run = runs[best]
        self.cluster_centers_ = (run.centres.astype(np.float64) + data.mean).astype(data.dtype)
        self.inertia_ = run.inertia
        self.n_iter_ = run.n_iter
        self.inertia_history_ = np.asarray(run.history)
        self._n_features_out = self.n_clusters
        labels = run.labels
        if data.blocks.local:
            self.labels_ = labels  # NumPy already (_finish_local)
        else:
            (self.labels_,) = dask.persist(labels)
        if np.count_nonzero(run.counts) < self.n_clusters:
            warnings.warn(f"Number of distinct clusters ({np.count_nonzero(run.counts)}) found "
                          f"smaller than n_clusters ({self.n_clusters}). Possibly due to "
                          "duplicate points in X.", ConvergenceWarning, stacklevel=2)
        return self

    def _init_graphs(self, seeds, parts, offsets, init_groups=None):
        """Delayed initialisations, one per seed, on prepared parts (see :func:`init_graph`)."""
        data = _PartsView(parts, offsets, init_groups)
        return [init_graph(data, self.init, self.n_clusters, s,
                           oversampling_factor=self.oversampling_factor,
                           init_rounds=self.init_rounds) for s in seeds]

    def _initial_runs(self, data: Prepared, seeds: list, results) -> list[Run]:
        """One run per seed from the computed initialisations ``results`` (None for an
        array ``init``: a single run from it)."""
        tol = self.tol * data.variance if self.tol else 0.0
        if not isinstance(self.init, str):
            init = self._init_array(data.d, np.float64) - data.mean
            return [Run(data, np.ascontiguousarray(init.astype(data.dtype)), self.max_iter, tol)]
        return [Run(data, init_centres(self.init, res, self.n_clusters, s, data),
                    self.max_iter, tol) for res, s in zip(results, seeds)]

    # ---- inference ----
    def _centres(self):
        check_is_fitted(self, "cluster_centers_")
        return self.cluster_centers_

    def predict(self, X: ArrayLike) -> Any:
        """Index of the closest centre for each row.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        labels : ndarray or dask.array.Array of shape (n_samples,)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.cluster import KMeans
        >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
        >>> km = KMeans(n_clusters=2, init=np.array([[1.0, 2.0], [10.0, 2.0]]))
        >>> km.fit(X).predict(np.array([[0.0, 0.0], [12.0, 3.0]]))
        array([0, 1], dtype=int32)
        """
        centres = self._centres()
        return self._blockwise(X, _lloyd.predict_block, centres, dtype=np.int32)

    def fit_predict(self, X: ArrayLike, y: ArrayLike | None = None,
                    sample_weight: ArrayLike | None = None) -> Any:
        """Fit, then return ``labels_``: the closest centre of each training row.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : None
            Ignored; present for the scikit-learn API.
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each row in the centres' means (a column name of X's dataframe is accepted).

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            The fitted ``labels_``.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.cluster import KMeans
        >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
        >>> km = KMeans(n_clusters=2, init=np.array([[1.0, 2.0], [10.0, 2.0]]))
        >>> km.fit_predict(X)
        array([0, 0, 0, 1, 1, 1], dtype=int32)
        """
        return self.fit(X, sample_weight=sample_weight).labels_

    def transform(self, X: ArrayLike) -> Any:
        """Euclidean distance of each row to every centre.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples.

        Returns
        -------
        distances : ndarray or dask.array.Array of shape (n_samples, n_clusters)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.cluster import KMeans
        >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
        >>> km = KMeans(n_clusters=2, init=np.array([[1.0, 2.0], [10.0, 2.0]]))
        >>> km.fit(X).transform(X[:2]).round(3)
        array([[0.  , 9.  ],
               [2.  , 9.22]])
        """
        centres = self._centres()
        dtype = np.float32 if centres.dtype == np.float32 else np.float64
        return self._blockwise(X, _lloyd.transform_block, centres, dtype=dtype,
                               tail_shape=(len(centres),))

    def fit_transform(self, X: ArrayLike, y: ArrayLike | None = None,
                      sample_weight: ArrayLike | None = None) -> Any:
        """Fit, then return :meth:`transform` of X.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : None
            Ignored; present for the scikit-learn API.
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each row in the centres' means (a column name of X's dataframe is accepted).

        Returns
        -------
        distances : ndarray or dask.array.Array of shape (n_samples, n_clusters)
            Distance of each row to every fitted centre (lazy for Dask input).

        Examples
        --------
        >>> import numpy as np
        >>> from dml.cluster import KMeans
        >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
        >>> km = KMeans(n_clusters=2, init=np.array([[1.0, 2.0], [10.0, 2.0]]))
        >>> km.fit_transform(X).shape
        (6, 2)
        """
        return self.fit(X, sample_weight=sample_weight).transform(X)

    def score(self, X: ArrayLike, y: ArrayLike | None = None,
              sample_weight: ArrayLike | None = None) -> float:
        """Opposite of the (weighted) inertia of X for the fitted centres: higher is better.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The rows to score.
        y : None or str, default=None
            Ignored, except that a column name of X's dataframe is then not used as a feature.
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each row's squared distance.

        Returns
        -------
        score : float
            Minus the sum of the (weighted) squared distances to the closest centre.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.cluster import KMeans
        >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
        >>> km = KMeans(n_clusters=2, init=np.array([[1.0, 2.0], [10.0, 2.0]]))
        >>> km.fit(X).score(X)
        -16.0
        """
        centres = self._centres()
        blocks = self._fit_blocks(X, y if isinstance(y, str) else None, sample_weight,
                                  reset=False, require_y=False)
        return -float(blocks.map_reduce(_lloyd.score_block, centres))
