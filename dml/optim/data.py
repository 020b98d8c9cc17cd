"""Training data as the solvers see it: prepared row blocks, a validation part, persistence.

:func:`prepare` turns validated :class:`~dml._blocks.Blocks` into :class:`TrainingData`:

* every block goes through the problem's ``prepare_block`` on its worker (label encoding, class
  weights), once;
* with a ``validation_fraction``, every block sets aside a seeded random subset of its own rows
  (``block_rng(seed, "validation", block)``; ``round(fraction · rows)`` of them), so the split
  needs no shuffle across workers and is the same for any number of workers;
* the prepared blocks are persisted in worker memory when they fit (``persist="auto"``: the
  data's size is at most half of the cluster's memory), otherwise every pass re-reads them from
  the source (a Parquet dataset larger than the cluster, for instance).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, replace

import dask
import numpy as np
from dask import delayed
from dask.base import tokenize

from dml._block_groups import Groups, ask_scheduler_workers, scheduler_workers
from dml._blocks import Blocks, block_rng, map_delayed
from dml._graph import fit_memo
from dml.optim.streams import join_in_place, join_rows_in_place

__all__ = ["TrainingData", "prepare", "hold", "should_persist", "cluster_memory", "worker_limits",
           "n_validation", "join_fits", "stream_groups", "JOIN_FRACTION"]

#: Persist when the data takes at most this fraction of the cluster's memory.
PERSIST_FRACTION = 0.5


def _workers() -> dict:
    """The scheduler's description of each worker of the current cluster now (empty: no
    client)."""
    from dml.runtime import active_client

    client = active_client()
    return {} if client is None else ask_scheduler_workers(client)


def worker_limits() -> list:
    """The memory limits of the current cluster's workers (empty: no client or no limits),
    asked once per fit (:func:`dml._graph.fit_memo`): a worker's limit is fixed when it
    starts."""
    from dml.runtime import active_client

    def ask():
        client = active_client()
        workers = {} if client is None else scheduler_workers(client)
        limits = [int(w.get("memory_limit") or 0) for w in workers.values()]
        return limits if limits and all(limits) else []

    return fit_memo(("worker-memory-limits", id(active_client())), ask)


def smallest_worker_memory() -> int | None:
    """The smallest worker memory limit of the current cluster in bytes, or None (no client,
    or workers without a limit): what one task may at most hold."""
    limits = worker_limits()
    return min(limits) if limits else None


def worker_memory() -> list[tuple[int, int]]:
    """(memory limit, process memory) in bytes of every worker of the current cluster; empty
    without a client or when a worker has no limit. The process memory is the worker's resident
    size at its last heartbeat: what a new task cannot use (imported modules, compiled kernels,
    data it holds, heap kept from earlier work), whatever its limit."""
    workers = _workers().values()
    pairs = [(int(w.get("memory_limit") or 0), int(w.get("metrics", {}).get("memory") or 0))
             for w in workers]
    return pairs if pairs and all(limit for limit, _ in pairs) else []


def cluster_memory() -> int:
    """Total worker memory of the current cluster in bytes (this machine's without a client)."""
    limits = worker_limits()
    if limits:
        return sum(limits)
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:  # pragma: no cover - psutil comes with distributed
        return 8 * 2**30


def fits_persist_budget(nbytes: int) -> bool:
    """Whether ``nbytes`` of persisted blocks fit the cluster's persist budget
    (:data:`PERSIST_FRACTION` of its worker memory)."""
    return nbytes <= PERSIST_FRACTION * cluster_memory()


def should_persist(blocks: Blocks, persist) -> bool:
    """Resolve ``persist`` ("auto", True or False) for these blocks."""
    if persist is True or persist is False:
        return persist
    if persist != "auto":
        raise ValueError(f"persist must be 'auto', True or False, got {persist!r}")
    itemsize = 8
    return fits_persist_budget(blocks.n_samples * (blocks.n_features + 2) * itemsize)


def hold(blocks: Blocks, persist, streams: tuple | None = None, reduce: tuple | None = None,
         join_rows: bool = False) -> Blocks:
    """``blocks`` persisted (held in groups, see :meth:`Blocks.persist`) when ``persist``
    resolves to True: for fits that read the data again after a first pass (classes, then
    training), so that the blocks are validated once and every pass is cheap.

    With ``streams = (batch_size, stream_steps)`` of the SGD fit to come and the blocks'
    lengths known, the groups are that fit's task groups (:func:`stream_groups`): its tasks
    then read one group each, where it is, and no row moves again. With ``join_rows`` too
    (a problem whose preparation gives X back as it is, without per-block noise), each
    stream's rows X are joined in place while the groups are made
    (:func:`dml.optim.streams.join_rows_in_place`), so the preparation, once the first pass
    has told what it needs (the classes), joins only y and the weights: one copy of the rows
    fewer for the blocks that crossed from another worker (copied once more to be aligned),
    and the copy made while rows still arrive for other groups instead of after the round
    trip of the first pass.

    ``reduce = (kernel, combine)``: the first pass's reduction, made in the groups' tasks
    (:meth:`Blocks.persist`): ``blocks.map_reduce(kernel, combine=combine)`` then reads what
    they made, the same result bit for bit."""
    if not should_persist(blocks, persist):
        return blocks
    if streams is not None and blocks.known_lengths is not None:
        bounds, starts = stream_groups(blocks.known_lengths, blocks.n_features, *streams,
                                       join=join_rows)
        then = None if starts is None else (join_rows_in_place, (starts,))
        return blocks.persist(bounds=bounds, then=then, reduce=reduce)
    return blocks.persist(reduce=reduce)


def n_validation(n_rows: int, fraction: float) -> int:
    """Validation rows a block of ``n_rows`` sets aside."""
    return int(np.floor(fraction * n_rows + 0.5))


@dataclass
class TrainingData:
    """Prepared training (and validation) blocks plus their row counts."""

    train: Blocks
    validation: Blocks | None
    lengths: np.ndarray
    validation_lengths: np.ndarray | None
    persisted: bool

    @property
    def n_train(self) -> int:
        return int(self.lengths.sum())


def _aligned(a):
    # Arrays rebuilt from network frames (scattered or transferred blocks) can start at an odd
    # address; NumPy and BLAS then take slow unaligned paths (4x slower matrix products
    # measured). One copy here, persisted, fixes every later pass.
    if isinstance(a, np.ndarray) and not a.flags.aligned:
        return np.array(a, order="K")
    return a


def _prepare_part(part, problem, index, seed, fraction):
    X, y, w = part
    X, Y, w = problem.prepare_block(_aligned(X), y, w)
    X, Y, w = _aligned(X), _aligned(Y), _aligned(w)
    if not fraction:
        return (X, Y, w), None
    n = X.shape[0]
    order = block_rng(seed, "validation", index).permutation(n)
    k = n_validation(n, fraction)
    val, tr = np.sort(order[:k]), np.sort(order[k:])

    def take(idx):
        return (X[idx], Y[idx], None if w is None else w[idx])

    return take(tr), take(val)


#: Persisted training rows are joined into one array per stream (held for the fit) only while
#: a copy of them would take at most this fraction of the persist budget.
JOIN_FRACTION = 0.5


def join_fits(problem, n_rows: int, n_features: int) -> bool:
    """Whether a stream's persisted blocks may be joined into one array for the fit
    (:func:`dml.optim.streams.join_streams`): memory to spare, and no per-block noise
    (dropout draws its generator per block)."""
    if getattr(problem, "stochastic", False):
        return False
    return fits_persist_budget(int(n_rows) * (int(n_features) + 2) * 8 / JOIN_FRACTION)


def stream_groups(lengths, n_features: int, batch_size: int, stream_steps: int | None,
                  problem=None, join: bool = False):
    """(block bounds, stream starts or None) of groups to hold the blocks in for the task
    groups SGD will walk ``lengths`` in (:func:`dml.optim.streams.task_groups`, as
    :class:`dml.optim.engine.StreamRunner` groups them): a task group's blocks are a run of
    whole held groups, so its task reads them where they are, with no slice. The stream
    starts are given when the streams will be joined (:func:`join_fits`; ``problem`` None:
    never, unless ``join`` says that the problem to come will join them, whose memory is
    then checked the same way)."""
    from dml._block_groups import default_n_groups, default_n_tasks, group_size
    from dml.optim.streams import stream_layout, task_groups

    layout = stream_layout(lengths, batch_size, stream_steps)
    groups = task_groups(layout.n_streams, default_n_tasks())
    # Each task group held as a few groups cut at its streams' starts, as many in all as the
    # default grouping makes (16 at 1,024 blocks on two threads): a worker's group tasks then
    # overlap fetching their inputs with the others' work, and every stream still lies in one
    # held group (joined in place). The task group's gathering reads them where they are.
    n = layout.starts[-1]
    per = max(1, round(-(-n // group_size(n, default_n_groups())) / len(groups)))
    bounds = [0]
    for r in groups:
        m = min(len(r), per)
        bounds.extend(layout.starts[r.start + len(r) * k // m] for k in range(1, m + 1))
    join = ((problem is not None or join)
            and join_fits(problem, int(np.sum(lengths)), n_features))
    return bounds, (layout.starts if join else None)


def prepare(problem, blocks: Blocks, *, seed: int = 0, validation_fraction: float | None = None,
            persist="auto", config=None) -> TrainingData:
    """Prepare (and persist when it fits) the blocks for training; see the module docstring.

    With the fit's ``config`` (:class:`~dml.optim.engine.SGDConfig`), persisted blocks are
    held in SGD's task groups (:func:`stream_groups`), each stream's rows joined in place
    (:func:`dml.optim.streams.join_in_place`): the fit's tasks then read one group each,
    where it is, and no row moves again. Without it (or with a validation part), in the
    default groups."""
    fraction = float(validation_fraction or 0.0)
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"validation_fraction must be in (0, 1), got {validation_fraction}")
    lengths = np.asarray(blocks.lengths, dtype=np.int64)
    if fraction:
        val_lengths = np.array([n_validation(int(n), fraction) for n in lengths], dtype=np.int64)
        if val_lengths.sum() == 0:
            raise ValueError(f"{blocks.spec.estimator}: validation_fraction={fraction} sets aside "
                             f"no rows of {int(lengths.sum())}; raise it or disable "
                             "early_stopping")
        if (lengths - val_lengths).sum() == 0:
            raise ValueError(f"{blocks.spec.estimator}: validation_fraction={fraction} leaves no "
                             "training rows")
    else:
        val_lengths = None
    train_lengths = lengths - (val_lengths if val_lengths is not None else 0)
    do_persist = should_persist(blocks, persist)
    fused = None
    plan = (stream_groups(train_lengths, blocks.n_features, config.batch_size,
                          config.stream_steps, problem)
            if do_persist and not fraction and config is not None else None)
    if do_persist and not fraction and blocks.groups is None:
        # Blocks not held yet: validated and prepared in the same group task, and only the
        # prepared groups held (no pass, graph or copy in memory for the validated blocks).
        fused = (blocks.persist(then=(_prepare_training, (problem, seed))) if plan is None else
                 blocks.persist(then=(_prepare_streams, (problem, seed, plan[1])),
                                bounds=plan[0]))
    if fused is not None:
        tb, vb = fused, None
    elif do_persist:
        # Persisted data is held in groups of blocks: each pass then runs one task per group.
        held = blocks.persist()
        # Held in SGD's task groups already (Blocks.persist with those bounds): each
        # stream's blocks joined in place as they are prepared.
        same = (plan is not None and held.groups is not None
                and list(held.groups.bounds) == list(plan[0]))
        tb, vb = _prepare_groups(problem, held, seed, fraction, plan[1] if same else None)
    else:
        tb, vb = _prepare_blocks(problem, blocks, seed, fraction, persist=False)
    tb = replace(tb, known_lengths=train_lengths)
    vb = replace(vb, known_lengths=val_lengths) if fraction else None
    return TrainingData(tb, vb, train_lengths, val_lengths, do_persist)


def _prepare_group(group, start, problem, seed, fraction):
    out = [_prepare_part(part, problem, start + j, seed, fraction) for j, part in enumerate(group)]
    return tuple(o[0] for o in out), tuple(o[1] for o in out)


def _prepare_training(group, start, problem, seed):
    """A group's blocks prepared for training (no validation part)."""
    return tuple(_prepare_part(part, problem, start + j, seed, 0.0)[0]
                 for j, part in enumerate(group))


def _prepare_streams(group, start, problem, seed, starts):
    """:func:`_prepare_training`, then every stream's blocks joined in place (``starts``: the
    streams' first blocks; None: not joined)."""
    out = _prepare_training(group, start, problem, seed)
    return out if starts is None else join_in_place(out, start, starts)


def _prepare_blocks(problem, blocks: Blocks, seed: int, fraction: float, persist: bool):
    """``_prepare_part`` per block: one task each (persisted or not)."""
    prepared = [delayed(_prepare_part, pure=True)(p, problem, i, seed, fraction)
                for i, p in enumerate(blocks.parts)]
    train = [delayed(operator.getitem, pure=True)(p, 0) for p in prepared]
    val = [delayed(operator.getitem, pure=True)(p, 1) for p in prepared] if fraction else []
    if persist:
        out = dask.persist(*train, *val)
        train, val = list(out[:len(train)]), list(out[len(train):])
    return (replace(blocks, parts=train, groups=None),
            replace(blocks, parts=val, groups=None) if fraction else None)


def _prepare_groups(problem, blocks: Blocks, seed: int, fraction: float, starts=None):
    """``_prepare_part`` on persisted blocks: one task per group (per block when ungrouped);
    with the streams' ``starts``, their blocks joined in place (:func:`_prepare_streams`)."""
    if blocks.groups is None:
        return _prepare_blocks(problem, blocks, seed, fraction, persist=True)
    g = blocks.groups
    if fraction:
        prepared = g.map_group(_prepare_group, problem, seed, fraction)
        train = map_delayed(operator.getitem, prepared, 0)
        val = map_delayed(operator.getitem, prepared, 1)
    elif starts is not None:  # the training blocks only, each stream's joined in place
        train, val = g.map_group(_prepare_streams, problem, seed, starts), []
    else:  # the training blocks only: no task to take them out of a pair
        train, val = g.map_group(_prepare_training, problem, seed), []
    out = dask.persist(*train, *val)
    token = None if g.token is None else tokenize(g.token, problem, seed, fraction)
    # A group's task reads one group: it runs where that group is (the groups' placement).
    tg = Groups(out[:len(train)], g.bounds, g.size,
                token=None if token is None else f"train-{token}", workers=g.workers)
    tb = replace(blocks, parts=tg.block_parts(), groups=tg)
    if not fraction:
        return tb, None
    vg = Groups(out[len(train):], g.bounds, g.size,
                token=None if token is None else f"validation-{token}", workers=g.workers)
    return tb, replace(blocks, parts=vg.block_parts(), groups=vg)
