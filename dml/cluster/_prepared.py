"""k-means training data: the blocks centred, augmented and persisted once, grouped by worker.

:func:`prepare` turns validated blocks into :class:`Prepared` data for Lloyd iterations (one
statistics pass, the prepared blocks made where their input lives), and :func:`map_combine`
runs a kernel over the blocks of several prepared data sets in one scheduler call, one task
per worker thread (:func:`placement_groups`), combining the per-block results on the client in
a fixed order. Used by :class:`~dml.cluster.KMeans` and the model selection of
:mod:`dml.cluster._selection`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import dask
import numpy as np
from dask import delayed

from dml._block_groups import ask_scheduler_workers, default_n_groups, group_size
from dml._blocks import Blocks, compute
from dml._graph import reduce_levels, tree_depth
from dml.base import check_weights_not_all_zero
from dml.cluster import _lloyd
from dml.optim.data import fits_persist_budget, should_persist

__all__ = ["Prepared", "prepare", "map_combine", "tree_combine", "group_call",
           "placement_groups", "input_placement"]


@dataclass
class Prepared:
    """Training blocks centred on the data mean, augmented with ones, persisted on the workers.

    Attributes
    ----------
    blocks : Blocks
        Parts ``(X − mean | 1, None, w)``.
    offsets : ndarray of int
        Global index of each block's first row (length ``n_blocks + 1``).
    mean : ndarray (d,), float64
        The column means that were subtracted (unweighted, as scikit-learn's).
    variance : float
        Mean of the per-feature variances (scikit-learn's ``tol`` scale).
    wxsq : float
        ``Σ w‖x − mean‖²``: the inertia of a Lloyd step is this plus the kernel's partial sum.
    lo, hi : ndarray (d,) or None
        Bounding box of the centred data (None for sparse data).
    """

    blocks: Blocks
    offsets: np.ndarray
    n: int
    d: int
    dtype: np.dtype
    mean: np.ndarray
    variance: float
    wxsq: float
    wsum: float
    lo: np.ndarray
    hi: np.ndarray
    #: Blocks processed by one task in a Lloyd iteration (see :func:`placement_groups`).
    groups: list = field(default_factory=list)
    #: False when the blocks are read from the source at every pass (larger than memory).
    persisted: bool = True

    def __post_init__(self):
        if self.blocks.groups is not None:
            # Held as groups of consecutive blocks (Blocks.persist): a task reads one group.
            bounds = self.blocks.groups.bounds
            self.groups = [list(range(bounds[g], bounds[g + 1])) for g in range(len(bounds) - 1)]
        elif not self.groups:
            self.groups = placement_groups(self.blocks.parts)

    @property
    def parts(self):
        return self.blocks.parts

    def group_inputs(self) -> list:
        """What each task of a pass reads, in the order of :attr:`groups`: one held group
        object (a tuple of its blocks) per group, or the list of the group's block parts."""
        if self.blocks.groups is not None:
            return list(self.blocks.groups.objects)
        return [[self.parts[i] for i in g] for g in self.groups]

    @property
    def init_groups(self) -> list | None:
        """``(group input, block indices)`` per group for the initialisations' group tasks
        (:mod:`._init_groups`), or None: data read from storage at every pass (a group's
        blocks would be in one task's memory at once) or every group a single block."""
        if not self.persisted or all(len(g) == 1 for g in self.groups):
            return None
        return list(zip(self.group_inputs(), self.groups))


def placement_groups(parts) -> list[list[int]]:
    """Blocks grouped by the worker (and thread) that holds them, in block order.

    Each Lloyd iteration then runs one task per worker thread instead of one per block: on a
    distributed cluster every task costs milliseconds of scheduling, which is most of an
    iteration's time when the blocks are small. Placement only decides how the work is batched;
    the per-block results are combined in block order on the client, so the result does not
    depend on it. Without a distributed client (or for blocks that are not persisted), one
    block per task.
    """
    single = [[i] for i in range(len(parts))]
    client = _distributed_client()
    if client is None:
        return single
    try:
        who = client.who_has(list(parts))
        workers = ask_scheduler_workers(client)
    except Exception:  # noqa: BLE001 - an optimisation only: fall back to one block per task
        return single
    by_worker: dict[str, list[int]] = {}
    for i, p in enumerate(parts):
        holders = sorted(who.get(p.key, ()))
        if not holders:
            return single
        by_worker.setdefault(holders[0], []).append(i)
    groups = []
    for w in sorted(by_worker):
        idx = by_worker[w]
        threads = max(1, min(int(workers.get(w, {}).get("nthreads", 1)), len(idx)))
        groups += [[int(i) for i in chunk] for chunk in np.array_split(idx, threads)]
    return groups


def _distributed_client():
    """The current distributed client when Dask computes on it, else None."""
    from dml.runtime import active_client

    client = active_client()
    if client is None or dask.base.get_scheduler() != client.get:
        return None
    return client


def input_placement(parts) -> list[str] | None:
    """The worker holding most of the persisted input of each block, or None.

    None when there is no distributed client or some block's input is not in worker memory
    (lazy input: the scheduler then places the prepared blocks itself).
    """
    client = _distributed_client()
    if client is None:
        return None
    try:
        from distributed import futures_of, wait

        # The blocks of one collection share its graph, and futures_of walks a whole graph:
        # once per distinct graph, not once per block (quadratic at hundreds of blocks). The
        # graphs are kept in the dict so that no id is reused while it is built.
        graphs: dict = {}
        for p in parts:
            g = p.__dask_graph__()
            graphs.setdefault(id(g), (g, p))
        futures = {f.key: f for _, p in graphs.values() for f in futures_of(p)}
        if not futures:
            return None
        wait(list(futures.values()))  # still computing: their place is not known yet
        who = client.who_has(list(futures.values()))
        nbytes = client.nbytes(list(futures))
        placement = []
        for p in parts:
            graph = p.__dask_graph__()
            load: dict[str, int] = {}
            seen, todo = set(), [p.key]
            while todo:
                key = todo.pop()
                if key in seen:
                    continue
                seen.add(key)
                if key in futures:
                    for w in who.get(key, ())[:1]:
                        load[w] = load.get(w, 0) + int(nbytes.get(key, 1) or 1)
                    continue
                task = graph.get(key) if hasattr(graph, "get") else None
                todo.extend(getattr(task, "dependencies", ()) or ())
            if not load:
                return None
            placement.append(max(sorted(load), key=load.get))
        return placement
    except Exception:  # noqa: BLE001 - an optimisation only: let the scheduler place them
        return None


def tree_combine(values: list, combine, split_every: int = 8):
    """:func:`dml._blocks.tree_reduce`'s fixed tree, applied on the client to computed values."""
    return reduce_levels(list(values), combine, tree_depth(len(values), split_every),
                         split_every)[0]


def in_block_order(groups, group_results, pick=None) -> list:
    """The per-block results of one task per group of blocks (``group_results[g]``: group
    ``groups[g]``'s results, in that group's block order) as one list in block order;
    ``pick`` maps each result first (e.g. to one field)."""
    per_block = [None] * sum(len(g) for g in groups)
    for g, res in zip(groups, group_results):
        for i, r in zip(g, res):
            per_block[i] = r if pick is None else pick(r)
    return per_block


def group_call(kernel, parts, *args):
    """Run ``kernel`` on several blocks of one worker; per-block results in block order."""
    return [kernel(p[0], p[1], p[2], *args) for p in parts]


def map_combine(data_and_args, kernel, combine):
    """One scheduler call: ``kernel`` over every block of several data sets, combined per set.

    ``data_and_args`` is a list of ``(Prepared, args)``. Tasks carry their (small) arguments
    inline and run one per group of blocks (a held group, or a placement group of blocks held
    one by one); the per-block results are combined on the client in :func:`tree_combine`'s
    fixed order.
    """
    tasks, layout = [], []
    for data, args in data_and_args:
        layout.append((data, len(tasks)))
        tasks += [delayed(group_call, pure=False)(kernel, inputs, *args)
                  for inputs in data.group_inputs()]
    results = compute(*tasks)
    return [tree_combine(in_block_order(data.groups, results[first:first + len(data.groups)]),
                         combine)
            for data, first in layout]


def _mean_of(stats, d):
    if stats is None or stats["n"] == 0:
        return np.zeros(d)
    return stats["sum"] / stats["n"]


def _nnz(xb, yb, wb):
    return int(xb.nnz)


def prepare_group(group, start, mean):
    """:func:`._lloyd.prepare_block` on every block of a held group (inside the group's task)."""
    return tuple(_lloyd.prepare_block(part, mean) for part in group)


def prepare(blocks: Blocks, name: str = "KMeans", sparse: bool = False,
            also=None) -> Prepared | tuple[Prepared, tuple]:
    """Centre, augment and persist the training blocks, then one statistics pass.

    ``also`` (optional) is called with the prepared parts, the block offsets and the groups of
    :attr:`Prepared.init_groups` (None when the blocks are not persisted) and returns
    Delayed objects of further kernels on the prepared blocks (the initial centres of
    :class:`~dml.cluster.KMeans`). When the data is too large to persist they are computed in
    the statistics pass (each prepared block read once for both), otherwise after it; either
    way ``(prepared, their values)`` is returned instead of ``prepared``.

    Blocks enough to group are held as groups of consecutive blocks
    (:meth:`dml._blocks.Blocks.persist`): after the pass for the mean, one task per group
    validates, centres and holds its blocks, and every later pass runs one task per group.
    Otherwise, when the input blocks are already in worker memory, each prepared block is made
    on the worker that holds its input (so the Lloyd tasks stay as balanced as the user's data);
    else one graph computes the mean and persists the prepared blocks. ``sparse``: the
    blocks are CSR; they are not centred (the mean is zero) and their memory is judged by their
    stored values.
    """
    lengths = blocks.lengths
    persisted = True
    n = int(lengths.sum())
    if n == 0:
        raise ValueError(f"{name}: X has 0 samples; at least one is required")
    d = blocks.n_features
    if sparse:
        mean = np.zeros(d)
        # One task per block: whether the data fits in memory is not known yet (a group's
        # blocks are in one task's memory at once).
        nnz = blocks.map_reduce(_nnz)
        # CSR: a value and a column index per stored entry, a row pointer and weight per row.
        fits = fits_persist_budget(int(nnz) * 12 + n * 16)
    else:
        fits = should_persist(blocks, "auto")
        # Data to be held anyway is read a group of blocks per task; data larger than memory
        # streams a block per task.
        reduce = blocks.reduce_in_groups if fits else blocks.map_reduce
        sums = reduce(_lloyd.block_sums, compute_now=False)
        mean = delayed(_mean_of, pure=True)(sums, d)
    grouped = None
    if (fits and blocks.groups is None
            and group_size(len(blocks.parts), default_n_groups()) > 1):
        # Many blocks: held as groups of consecutive blocks, made and prepared one task per
        # group (validation, centring and persisting), and every later pass reads a group per
        # task. A task per block cost ~13 ms of set-up and ~0.3 ms per Lloyd iteration for
        # every block (benchmarks/kmeans_partitions.py). None: too few blocks to group.
        (mean,) = compute(mean)
        grouped = blocks.persist(then=(prepare_group, (mean,)))
    placement = None if grouped is not None else input_placement(blocks.parts)
    if grouped is not None:
        parts = grouped.parts
    elif not fits:
        # Larger than the cluster's memory (DESIGN principle 3): the prepared blocks stay lazy
        # and every pass re-reads them from the source instead of persisting them all.
        (mean,) = compute(mean)
        parts = [delayed(_lloyd.prepare_block, pure=True)(p, mean) for p in blocks.parts]
        persisted = False
    elif placement is None:
        parts = [delayed(_lloyd.prepare_block, pure=True)(p, mean) for p in blocks.parts]
        *parts, mean = dask.persist(*parts, mean)
    else:
        (mean,) = compute(mean)
        parts = [delayed(_lloyd.prepare_block, pure=True)(p, mean) for p in blocks.parts]
        for worker in sorted(set(placement)):
            idx = [i for i, w in enumerate(placement) if w == worker]
            done = dask.persist(*[parts[i] for i in idx], workers=[worker],
                                allow_other_workers=True)
            for i, p in zip(idx, done):
                parts[i] = p
    # groups=None unless grouped above: the passes must read the prepared parts, not groups of
    # the input blocks.
    prepared = (replace(grouped, known_lengths=lengths) if grouped is not None else
                replace(blocks, parts=list(parts), known_lengths=lengths, groups=None))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    stats_d = prepared.map_reduce(_lloyd.prepared_stats, combine=_lloyd.combine_prepared_stats,
                                  compute_now=False)
    # Read from storage, the blocks cost a pass per computation: the further kernels share
    # the statistics pass (Dask reads a block once for all the tasks of one computation).
    # Persisted, they run after the weight checks below, which they may rely on.
    fused = also(list(parts), offsets, None) if also is not None and not persisted else ()
    first = (delayed(_group_dtype, pure=True)(grouped.groups.objects[0]) if grouped is not None
             else delayed(_dtype_of, pure=True)(parts[0]))
    mean, stats, dtype, *fused = compute(mean, stats_d, first, *fused)
    if stats["wmin"] < 0:
        raise ValueError(f"{name}: sample_weight contains negative values; weights must be >= 0")
    check_weights_not_all_zero(stats["wsum"], name)
    data = Prepared(prepared, offsets, n, d, np.dtype(dtype), np.asarray(mean, dtype=np.float64),
                    _lloyd.mean_variance(stats, n), float(stats["wxsq"]),
                    float(stats["wsum"]), stats["lo"], stats["hi"], persisted=persisted)
    if also is None:
        return data
    if persisted:
        fused = compute(*also(data.parts, offsets, data.init_groups))
    return data, tuple(fused)


def _dtype_of(part):
    return part[0].dtype


def _group_dtype(group):
    return group[0][0].dtype
