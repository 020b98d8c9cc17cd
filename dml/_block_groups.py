"""Persisted blocks held in groups: one task per group of consecutive blocks, not per block.

A pass over many small blocks costs the scheduler about a millisecond per task whatever the
arithmetic, so at a thousand blocks the task count, not the data, sets a fit's time.
:meth:`dml._blocks.Blocks.persist` therefore keeps validated blocks in worker memory as a few
objects, each a tuple of consecutive blocks, and the passes over them run one task per group.

Group sizes are powers of :data:`FANIN`, the fan-in of :func:`dml._blocks.tree_reduce`, and
groups start at multiples of their size. A group is then an aligned subtree of the reduction tree
over the blocks: a task reduces its own blocks for as many levels as the subtree has, and the
usual tree finishes over the group results. Every combine sees the same operands in the same order
as with one task per block, so reductions are the same bit for bit however the blocks are grouped.
"""
from __future__ import annotations

import bisect
import collections
import itertools
import math
import operator
import os
from collections.abc import Callable, Sequence

import dask
import numpy as np
from dask._task_spec import Task, TaskRef
from dask.sizeof import sizeof
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

from dml._graph import (LinkedTasks, broadcast, fit_memo, layer_graph, new_name, reduce_levels,
                        task_argument, task_prefix, task_ref, tree_depth, tree_reduce)

#: Fan-in of the reduction tree the groups align with (``tree_reduce``'s default).
FANIN = 8


def group_size(n_blocks: int, n_groups: int) -> int:
    """Blocks per group: the largest power of :data:`FANIN` that still leaves at least
    ``n_groups`` groups (1: no grouping).

    Examples
    --------
    >>> group_size(1024, 4), group_size(256, 4), group_size(64, 4), group_size(8, 4)
    (64, 64, 8, 1)
    """
    g = 1
    while g * FANIN <= n_blocks and math.ceil(n_blocks / (g * FANIN)) >= n_groups:
        g *= FANIN
    return g


def default_n_tasks() -> int:
    """Worker threads of the current cluster (cores without one): as many tasks as run at once,
    e.g. the long-lived tasks of a collective run, which take a thread each for the whole run."""
    from dml.runtime import active_client

    client = active_client()
    threads = None
    if client is not None:
        try:
            threads = sum(cluster_threads(client).values())
        except Exception:  # noqa: BLE001 - a client that cannot answer: assume a small cluster
            threads = 2
    if not threads:
        threads = os.cpu_count() or 2
    return max(int(threads), 1)


def default_n_groups() -> int:
    """Groups to make: two per worker thread of the current cluster (per core without one), so
    every thread has work and a slow task does not hold up a whole pass."""
    return 2 * default_n_tasks()


def ask_scheduler_workers(client) -> dict:
    """The scheduler's description of every worker now (``Client.scheduler_info``: address ->
    threads, memory limit, last heartbeat's metrics, ...), one round trip."""
    try:
        return client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:  # older distributed: no n_workers argument
        return client.scheduler_info()["workers"]


def scheduler_workers(client) -> dict:
    """:func:`ask_scheduler_workers`, asked once per fit (:func:`dml._graph.fit_memo`): the
    workers' threads and memory limits are both read from this one answer, a round trip
    fewer than asking for each (what changes during a fit, such as the workers' memory in
    use, must be asked with :func:`ask_scheduler_workers`)."""
    return fit_memo(("scheduler-workers", id(client)), lambda: ask_scheduler_workers(client))


def cluster_threads(client) -> dict:
    """Worker -> threads (what ``client.nthreads()`` answers), asked once per fit
    (:func:`scheduler_workers`). Used for how many groups to make and where to place them,
    neither of which changes a result; a worker lost later in the fit is not waited for
    (:func:`persist_placed` only prefers a worker)."""
    return fit_memo(("nthreads", id(client)), lambda: {
        a: int(w.get("nthreads") or 0) for a, w in scheduler_workers(client).items()})


def contiguous_placement(n_groups: int, threads: dict, held: Sequence[dict]) -> list:
    """The worker of every group: consecutive groups on one worker, each worker a run of groups
    in proportion to its threads, the runs given to the workers that already hold most of
    their inputs (``held[g]``: worker -> bytes of the inputs of group ``g`` it holds).

    A pass reads a run of consecutive blocks as one object (the streams of SGD gather
    consecutive groups), so groups placed at random would pull about half of the data from
    the other workers when the passes gather them; in runs, only a run's two ends do.

    Examples
    --------
    >>> contiguous_placement(4, {"a": 1, "b": 1}, [{}, {}, {"a": 3}, {"a": 1}])
    ['b', 'b', 'a', 'a']
    >>> contiguous_placement(3, {"a": 2, "b": 1}, [{}] * 3)
    ['a', 'a', 'b']
    """
    workers = sorted(threads)
    orders = (list(itertools.permutations(workers)) if len(workers) <= 4 else [workers])
    best, best_local = None, -1
    for order in orders:
        total = sum(max(int(threads[w]), 1) for w in order)
        out, acc = [], 0
        for w in order:
            lo = round(n_groups * acc / total)
            acc += max(int(threads[w]), 1)
            out.extend([w] * (round(n_groups * acc / total) - lo))
        local = sum(held[g].get(w, 0) for g, w in enumerate(out))
        if local > best_local:
            best, best_local = out, local
    return best


def persist_placed(objects: Sequence[Delayed], inputs: Sequence[Sequence]) -> list:
    """``dask.persist(*objects)`` with consecutive objects on one worker
    (:func:`contiguous_placement`; ``inputs[g]`` are the keys object ``g`` reads). Where they
    run changes no result; a worker that is gone or busy is not waited for (the placement is
    a preference). Without a ``distributed`` cluster of several workers: plain ``persist``."""
    return persist_placed_where(objects, inputs)[0]


def persist_placed_where(objects: Sequence[Delayed], inputs: Sequence[Sequence]):
    """:func:`persist_placed`, and the worker each object was placed on (None when not
    placed: no cluster of several workers)."""
    from dml._collective import cluster_client

    client = cluster_client()
    # Even one object is placed: then the client knows where it is before it runs (an SGD
    # run over one group of streams is submitted on top of it: dml.optim.collective_rounds).
    threads = cluster_threads(client) if client is not None and objects else {}
    if len(threads) < 2:
        return list(dask.persist(*objects)), None
    keys = sorted({k for ks in inputs for k in ks}, key=str)
    # The scheduler's own call: Client.who_has takes futures only (keys would be walked as
    # containers and find none).
    who = client.sync(client.scheduler.who_has, keys=keys) if keys else {}
    # Weighed by bytes: a group of one block goes where its X is, not its y (a tie by count).
    there = [k for k in keys if who.get(k)]
    size = client.sync(client.scheduler.nbytes, keys=there, summary=False) if there else {}
    held = [collections.Counter() for _ in inputs]
    for counter, ks in zip(held, inputs):
        for k in ks:
            for a in who.get(k, ()):
                counter[a] += max(int(size.get(k, 1)), 1)
    where = contiguous_placement(len(objects), threads, held)
    placed = _placed_layer(objects, where)
    if placed is not None:
        # One submission: the graph is pickled and sent once, not once per worker with all
        # of its inputs (two thousand block futures at 1,024 blocks) each time.
        return list(client.persist(placed)), where
    out = [None] * len(objects)
    for w in sorted(set(where)):
        mine = [g for g, a in enumerate(where) if a == w]
        done = client.persist([objects[g] for g in mine], workers=[w], allow_other_workers=True)
        for g, d in zip(mine, done):
            out[g] = d
    return out, where


def task_inputs(part: Delayed) -> list:
    """The keys the task of ``part`` reads (where they are held is where a group of such
    parts would rather run: the ``inputs`` of :func:`persist_placed`), or its own key."""
    task = part.__dask_graph__().get(part.key)
    return list(getattr(task, "dependencies", ())) or [part.key]


def hold_in_groups(parts: Sequence[Delayed], n_groups: int) -> tuple[list, list]:
    """``parts`` (one per block) persisted as groups of consecutive blocks, each a tuple of its
    blocks' parts (:func:`collect`), placed with :func:`persist_placed`; returns the groups and
    their bounds (:func:`block_ranges`). The per-block results are not kept: once the groups
    hold them they are released."""
    bounds = block_ranges(len(parts), max(1, n_groups))
    ranges = list(zip(bounds[:-1], bounds[1:]))
    groups = persist_placed(
        [dask.delayed(collect, pure=True)(*parts[lo:hi]) for lo, hi in ranges],
        [[k for p in parts[lo:hi] for k in task_inputs(p)] for lo, hi in ranges])
    return list(groups), bounds


def _placed_layer(objects: Sequence[Delayed], where: Sequence[str]) -> list | None:
    """``objects`` over a copy of their graph whose layer carries each task's worker as a
    loose restriction (the scheduler's per-key ``workers`` and ``allow_other_workers``
    annotations: what ``persist(workers=[w], allow_other_workers=True)`` sets for all of its
    tasks), or None when the objects are not exactly the tasks of one layer of one graph."""
    graph = objects[0].__dask_graph__()
    name = objects[0].__dask_layers__()[0]
    if not isinstance(graph, HighLevelGraph) or name not in graph.layers:
        return None
    if any(o.__dask_graph__() is not graph or o.__dask_layers__() != (name,) for o in objects):
        return None
    layer = graph.layers[name]
    by_key = {o.key: w for o, w in zip(objects, where)}
    if len(layer) != len(by_key) or any(k not in by_key for k in layer):
        return None
    placed = _annotated(graph, name, by_key)
    return [Delayed(o.key, placed, layer=name) for o in objects]


def _annotated(graph: HighLevelGraph, name: str, where: dict) -> HighLevelGraph:
    """``graph`` with every task of its layer ``name`` preferring the worker ``where[key]``
    (the scheduler's per-key ``workers`` and ``allow_other_workers`` annotations)."""
    by_key = {k: [w] for k, w in where.items()}
    annotated = MaterializedLayer(dict(graph.layers[name]), annotations={
        "workers": by_key.__getitem__, "allow_other_workers": True})
    return HighLevelGraph({**graph.layers, name: annotated}, graph.dependencies)


# ---------------------------------------------------------------- task functions
def collect(*parts):
    """A group: its blocks as one tuple."""
    return parts


def _apply(kernel, with_index, part, index, args):
    xb, yb, wb = part
    if with_index:
        return kernel(index, xb, yb, wb, *args)
    return kernel(xb, yb, wb, *args)


def subtree_levels(size: int, n_blocks: int) -> int:
    """Levels of the fixed reduction tree (``tree_reduce``'s, fan-in :data:`FANIN`) that an
    aligned group of ``size`` consecutive blocks out of ``n_blocks`` holds: its own subtree,
    never more than the whole tree."""
    return min(round(math.log(size, FANIN)), tree_depth(n_blocks))


def group_reduce(group, start, kernel, with_index, combine, levels, *args):
    """The kernel over one group's blocks, reduced over the group's ``levels`` subtree levels."""
    vals = [_apply(kernel, with_index, part, start + j, args) for j, part in enumerate(group)]
    out = reduce_levels(vals, combine, levels)
    assert len(out) == 1
    return out[0]


def group_range_reduce(group, start, n_blocks, kernel, with_index, combine, *args):
    """The kernel over one group's blocks (a group of any consecutive blocks), as the pieces of
    the fixed reduction tree its blocks hold (:func:`range_reduce`)."""
    vals = (_apply(kernel, with_index, part, start + j, args) for j, part in enumerate(group))
    return range_reduce(vals, start, n_blocks, combine, FANIN, count=len(group))


class Held(Sequence):
    """A group's blocks (read as the group's tuple is: by index, slice, length, iteration)
    and the :func:`range_reduce` pieces of one reduction its task made from them while
    holding them (``pieces``): a pass that needs only that reduction then reads the pieces
    (:func:`held_pieces`), not the blocks. Not a tuple subclass: Dask's local schedulers
    rebuild a tuple held in a graph as a plain tuple, which would drop the pieces."""

    __slots__ = ("blocks", "pieces")

    def __init__(self, blocks: tuple, pieces: dict):
        self.blocks = tuple(blocks)
        self.pieces = pieces

    def __getitem__(self, index):
        return self.blocks[index]

    def __len__(self) -> int:
        return len(self.blocks)

    def __iter__(self):
        return iter(self.blocks)

    def __reduce__(self):
        return Held, (self.blocks, self.pieces)


@sizeof.register(Held)
def _sizeof_held(held: Held) -> int:
    # The scheduler's memory accounting and transfer decisions need the blocks' bytes.
    return sizeof(held.blocks) + sizeof(held.pieces)


def hold_reducing(group, start, n_blocks, kernel, combine, then, then_args):
    """The group's task with a reduction on the way (``Blocks.persist(reduce=...)``): the
    pieces of the fixed reduction tree ``kernel(X, y, w)`` over its blocks make
    (:func:`range_reduce`, as :func:`group_range_reduce` would make them in a task of its
    own), and the group itself, or ``then(group, start, *then_args)``."""
    pieces = range_reduce((kernel(*part) for part in group), start, n_blocks, combine, FANIN,
                          count=len(group))
    return Held(group if then is None else then(group, start, *then_args), pieces)


def held_pieces(group: Held) -> dict:
    """The pieces a group's task reduced on the way (:func:`hold_reducing`)."""
    return group.pieces


def finish_pieces(n_blocks, combine, *pieces):
    """The root of the reduction tree over ``n_blocks`` blocks from every group's
    :func:`range_reduce` pieces (as a task: the pieces are its arguments)."""
    return finish_tree(pieces, n_blocks, combine, FANIN)


def block_call(group, j, kernel, with_index, index, *args):
    """The kernel on block ``j`` of a group (block ``index`` of the data)."""
    return _apply(kernel, with_index, group[j], index, args)


def group_lengths(group):
    """Rows of each block of a group."""
    return [int(part[0].shape[0]) for part in group]


def group_map(group, start, func, *args):
    """``func(part, block_index, *args)`` for every block of a group, as a new group."""
    return tuple(func(part, start + j, *args) for j, part in enumerate(group))


def group_slice(lo, hi, start, group):
    """``{block index: part}`` for the blocks of ``group`` (its first block ``start``) in
    ``lo .. hi - 1``."""
    return {start + j: part for j, part in enumerate(group) if lo <= start + j < hi}


def gather_range(lo, hi, bounds, first_group, *groups):
    """``{block index: part}`` for blocks ``lo .. hi - 1`` out of the groups that hold them
    (``groups`` starting at group ``first_group``; ``bounds`` the groups' block bounds). A
    group given as a dict is already a :func:`group_slice` of the range."""
    out = {}
    for k, group in enumerate(groups):
        if isinstance(group, dict):
            out.update(group)
            continue
        start = bounds[first_group + k]
        for j, part in enumerate(group):
            if lo <= start + j < hi:
                out[start + j] = part
    return out


def gather_then(then, arg, lo, hi, bounds, first_group, *groups):
    """``then(gather_range(lo, hi, ...), arg)``: a gathered range transformed in the task that
    gathers it (no task, hop or held object of its own for the bare range)."""
    return then(gather_range(lo, hi, bounds, first_group, *groups), arg)


# ---------------------------------------------------------------- graph builders
class BlockParts(Sequence):
    """The blocks of :class:`Groups` as a sequence of Delayed (``Blocks.parts``): its length
    is known at once, the Delayed objects and their graph layer are made on first access."""

    def __init__(self, groups: Groups):
        self._groups = groups
        self._parts: list | None = None

    def _built(self) -> list:
        if self._parts is None:
            self._parts = self._groups._block_parts()
        return self._parts

    def __len__(self) -> int:
        return self._groups.n_blocks

    def __getitem__(self, index):
        return self._built()[index]

    def __iter__(self):
        return iter(self._built())


class Groups:
    """Persisted groups of consecutive blocks: the group objects and their block bounds.

    Attributes
    ----------
    objects : list of Delayed
        One tuple of blocks per group, in memory on the workers.
    bounds : tuple of int
        Group ``g`` holds blocks ``bounds[g] .. bounds[g + 1] - 1``.
    size : int
        Blocks per group (the last may hold fewer), a power of :data:`FANIN`; or, for groups
        of any consecutive blocks (:attr:`aligned` False: the groups of SGD's streams,
        :meth:`dml._blocks.Blocks.persist` with ``bounds``), the most blocks a group holds.
    workers : list of str or None
        The worker each group was placed on (a preference the scheduler follows while the
        worker is up; :func:`persist_placed_where`), or None when not placed.
    token : str or None
        Names the groups' contents (a hash of the blocks they were made from and of what was
        applied to them), or None when unknown. The objects' keys are fresh for every persist
        (see :func:`dml._graph.new_name`), so results cached per data set (the curvature of
        summed SGD rounds) are keyed by this instead.
    reduced : tuple or None
        ``(kernel, combine)`` of a reduction the groups' own tasks already made on the way
        (each object a :class:`Held` carrying its pieces; ``Blocks.persist(reduce=...)``):
        :meth:`reduce` of that kernel then reads the pieces instead of the blocks.
    """

    fanin = FANIN

    def __init__(self, objects: Sequence[Delayed], bounds: Sequence[int], size: int,
                 token: str | None = None, workers: Sequence[str] | None = None,
                 reduced: tuple | None = None):
        self.reduced = reduced
        self.objects = list(objects)
        self.bounds = tuple(int(b) for b in bounds)
        self.size = int(size)
        self.token = token
        self.workers = None if workers is None else list(workers)
        #: Whether the groups are aligned subtrees of the reduction tree (``size`` a power of
        #: FANIN, group ``g`` starting at block ``g · size``); otherwise reductions go through
        #: :func:`range_reduce` (the same tree, the same numbers).
        self.aligned = (self.size == FANIN ** round(math.log(max(self.size, 1), FANIN))
                        and all(b == g * self.size for g, b in enumerate(self.bounds[:-1])))

    @property
    def n_blocks(self) -> int:
        return self.bounds[-1]

    @property
    def levels(self) -> int:
        """Levels of the reduction tree inside one aligned group (:func:`subtree_levels`)."""
        return subtree_levels(self.size, self.n_blocks)

    def owner(self, block: int) -> int:
        """The group holding ``block``."""
        if self.aligned:
            return block // self.size
        return bisect.bisect_right(self.bounds, block) - 1

    def _ref(self, g: int) -> TaskRef:
        return TaskRef(self.objects[g].key)

    def _layer(self, prefix: str, n: int, make: Callable, deps: Sequence = ()) -> list[Delayed]:
        """``n`` tasks ``make(key, k)`` as one new graph layer over the groups (and ``deps``)."""
        name = new_name(prefix)
        layer = {(name, k): make((name, k), k) for k in range(n)}
        graph = layer_graph(name, layer, [*self.objects, *deps])
        return [Delayed((name, k), graph, layer=name) for k in range(n)]

    def block_parts(self) -> Sequence[Delayed]:
        """One Delayed per block (an item of its group's tuple), built when first read: the
        passes over held blocks read the groups, so most fits never index a block (a layer of
        a thousand tasks and Delayed objects, about 10 ms of the client's time per persist at
        1,024 blocks, for nothing)."""
        return BlockParts(self)

    def _block_parts(self) -> list[Delayed]:
        def make(key, i):
            g = self.owner(i)
            return Task(key, operator.getitem, self._ref(g), i - self.bounds[g])

        return self._layer("block-of-group", self.n_blocks, make)

    def map_group(self, func: Callable, *args) -> list[Delayed]:
        """``func(group, start, *args)`` per group (``args`` broadcast as for block kernels)."""
        deps: list = []
        args = tuple(task_argument(broadcast(a), deps) for a in args)
        return self._layer(task_prefix(func), len(self.objects),
                           lambda key, g: Task(key, func, self._ref(g), self.bounds[g], *args),
                           deps)

    def map_blocks(self, kernel: Callable, with_index: bool, args: tuple, deps: Sequence,
                   prefix: str) -> list[Delayed]:
        """``kernel`` on every block: one task per block, reading its group."""
        def make(key, i):
            g = self.owner(i)
            return Task(key, block_call, self._ref(g), i - self.bounds[g], kernel, with_index,
                        i, *args)

        return self._layer(prefix, self.n_blocks, make, deps)

    def reduce(self, kernel: Callable, with_index: bool, args: tuple, deps: Sequence,
               combine: Callable, prefix: str) -> Delayed:
        """The kernel over every block, reduced by ``tree_reduce``'s tree: each group's subtree
        in the group's task, the rest of the tree over the group results. Groups of any
        consecutive blocks reduce their blocks into the pieces of the tree they hold
        (:func:`range_reduce`), which one task finishes (:func:`finish_tree`): the same tree,
        the same numbers.

        When the groups' tasks made this very reduction while holding the blocks
        (:attr:`reduced`), each group gives its pieces (:func:`held_pieces`, a small task
        where the group is) and one task finishes the tree: the same pieces of the same tree,
        so the same numbers, without reading a block again."""
        if (self.reduced is not None and self.reduced[0] is kernel
                and self.reduced[1] is combine and not with_index and not args):
            outs = self._layer(f"{prefix}-held", len(self.objects),
                               lambda key, g: Task(key, held_pieces, self._ref(g)))
            return dask.delayed(finish_pieces, pure=True)(self.n_blocks, combine, *outs)
        if not self.aligned:
            n = self.n_blocks
            outs = self._layer(prefix, len(self.objects),
                               lambda key, g: Task(key, group_range_reduce, self._ref(g),
                                                   self.bounds[g], n, kernel, with_index,
                                                   combine, *args),
                               deps)
            return dask.delayed(finish_pieces, pure=True)(n, combine, *outs)
        levels = self.levels
        outs = self._layer(prefix, len(self.objects),
                           lambda key, g: Task(key, group_reduce, self._ref(g), self.bounds[g],
                                               kernel, with_index, combine, levels, *args),
                           deps)
        if levels == tree_depth(self.n_blocks):  # one group held the whole tree
            return outs[0]
        return tree_reduce(outs, combine, FANIN)

    def lengths(self) -> np.ndarray:
        """Rows per block (one small task per group)."""
        per_group = dask.compute(*self.map_group(group_lengths))
        return np.asarray([n for g in per_group for n in g], dtype=np.int64)

    def gather(self, ranges: Sequence[tuple[int, int]],
               then: tuple[Callable, Sequence] | None = None) -> list[Delayed]:
        """Per ``(lo, hi)`` block range, a Delayed ``{block index: part}`` read from the groups
        holding those blocks (one task per range). With ``then = (func, args)`` range ``k``
        gives ``func(that dict, args[k])`` instead, computed in the same task.

        A group the range covers only in part is first cut down to the range's blocks by a
        small task of its own (:func:`group_slice`), which runs where the group is: when the
        range's task runs on another worker, only those blocks travel, not the whole group
        (a quarter of the data at 256 blocks on 2 workers, for a few of its blocks).

        When the groups were placed (``workers``), every range's task is placed on the worker
        holding most of its blocks (:meth:`range_workers`) and every slice where its group
        is: where the scheduler would run them, but known to the client before they run."""
        prefix = "gather-blocks" if then is None else f"gather-{task_prefix(then[0])}"
        name, slice_name = new_name(prefix), new_name("group-slice")
        at = self.range_workers(ranges)
        layer: dict = {}
        slice_group: dict = {}  # slice key -> the group it cuts (it runs where that group is)
        for k, (lo, hi) in enumerate(ranges):
            first, last = self.owner(lo), self.owner(max(hi - 1, lo))
            refs = []
            for g in range(first, last + 1):
                if lo <= self.bounds[g] and self.bounds[g + 1] <= hi:
                    refs.append(self._ref(g))
                else:
                    # A task group of its own per slice: the scheduler treats a group of
                    # many tasks over few inputs as "root-ish" and places its tasks wherever
                    # a thread is free, moving the whole group to cut it (seen at 256
                    # blocks); a one-task group goes where its input is.
                    key = (f"{slice_name}-{k}-{g}", 0)
                    layer[key] = Task(key, group_slice, lo, hi, self.bounds[g], self._ref(g))
                    slice_group[key] = g
                    refs.append(TaskRef(key))
            key = (name, k)
            if then is None:
                layer[key] = Task(key, gather_range, lo, hi, self.bounds, first, *refs)
            else:
                layer[key] = Task(key, gather_then, then[0], then[1][k], lo, hi, self.bounds,
                                  first, *refs)
        graph = layer_graph(name, layer, self.objects)
        if at is not None:
            # Each range's task where most of its blocks are, each slice where its group is:
            # where the scheduler would put them, but now the client knows it before they run
            # (an SGD run is submitted on top of them without waiting:
            # dml.optim.collective_rounds).
            where = {(name, k): w for k, w in enumerate(at)}
            where.update((key, self.workers[g]) for key, g in slice_group.items())
            graph = _annotated(graph, name, where)
        return [Delayed((name, k), graph, layer=name) for k in range(len(ranges))]

    def range_workers(self, ranges: Sequence[tuple[int, int]]) -> list | None:
        """Per ``(lo, hi)`` block range, the worker holding most of its blocks (the first
        such group's on a tie), or None when the groups were not placed.

        Examples
        --------
        >>> groups = Groups([None] * 4, [0, 8, 16, 24, 30], 8, workers=["a", "a", "b", "b"])
        >>> groups.range_workers([(0, 12), (12, 30), (6, 20)])
        ['a', 'b', 'a']
        >>> parts = groups.block_parts()  # built on first access, not here
        >>> len(parts), parts._parts is None
        (30, True)
        """
        if self.workers is None:
            return None
        out = []
        for lo, hi in ranges:
            count: dict = {}
            for g in range(self.owner(lo), self.owner(max(hi - 1, lo)) + 1):
                n = min(hi, self.bounds[g + 1]) - max(lo, self.bounds[g])
                count[self.workers[g]] = count.get(self.workers[g], 0) + max(n, 0)
            out.append(max(count, key=count.get))  # dicts keep order: ties go to the first
        return out


# ---------------------------------------------------------------- chained steps
def _step_output(result, k):
    return result[k]


def chain_steps(fixed: Sequence[Delayed], carried: Sequence[Delayed], state, step: Callable,
                group_args: Sequence, n_steps: int, finish: Callable, prefix: str = "chain"):
    """``n_steps`` steps of an iterative algorithm as one graph, without a client round trip per
    step.

    Step ``t`` is one task per group ``g``::

        carried[g], state[g], partial[g] = step(fixed[g], carried[g], state[g], group_args[g],
                                                *partials of every group at step t - 1)

    ``state`` is the algorithm's client-side state (every group keeps its own replica, given
    ``state`` at the start): from the previous step's partials each group computes the same
    next decision with the same deterministic code (none at the first step: the decision the
    state holds), then applies it to its blocks. ``fixed`` are the groups' read-only data,
    ``carried`` their data rewritten by the steps; both stay on the worker that holds them.
    Only the partials (e.g. a group's pieces of the block tree, :func:`range_reduce`) travel,
    so a step costs a scheduler hop or two rather than a graph submission and a round trip
    through the client.

    Returns the last step's ``carried`` (one Delayed per group) and a Delayed of
    ``finish(state of group 0, *partials of the last step)``, from which the client continues.
    """
    if n_steps < 1:
        raise ValueError("chain_steps needs at least one step")
    chain = LinkedTasks(prefix)
    fixed_refs = [task_ref(f, chain.deps) for f in fixed]
    carried_refs = [task_ref(c, chain.deps) for c in carried]
    states = [chain.arg(broadcast(state))] * len(carried_refs)
    partials: list = []
    group_refs: list = []
    for t in range(n_steps):
        new_partials = []
        group_refs = []
        for g in range(len(carried_refs)):
            gref = chain.add(("group", t, g), step, fixed_refs[g], carried_refs[g], states[g],
                             group_args[g], *partials)
            group_refs.append(gref)
            # The next step's task indexes this output itself (no task of its own): the
            # carried data and state never leave the worker.
            carried_refs[g] = Task(None, _step_output, gref, 0)
            states[g] = Task(None, _step_output, gref, 1)
            new_partials.append(chain.add(("partial", t, g), _step_output, gref, 2))
        partials = new_partials
    carried_out = [chain.add(("carried", g), _step_output, gref, 0)
                   for g, gref in enumerate(group_refs)]
    result = chain.add(("finish",), finish, states[0], *partials)
    *carried_delayed, result_delayed = chain.delayed(*carried_out, result)
    return carried_delayed, result_delayed


# ---------------------------------------------------------------- any contiguous ranges
def _level_count(n: int, fanin: int, level: int) -> int:
    return -(-n // fanin ** level)


def range_reduce(values, lo: int, n: int, combine: Callable, fanin: int,
                 count: int | None = None) -> dict:
    """The nodes of the fixed reduction tree over ``n`` blocks (``tree_reduce``'s: consecutive
    groups of ``fanin``, level by level) that lie wholly inside blocks ``lo .. lo + count - 1``,
    reduced from those blocks' ``values``; only the largest such nodes are kept, as
    ``{(level, index): value}``. :func:`finish_tree` completes the tree from these pieces, so
    blocks can be grouped in any consecutive ranges and the total is the same bit for bit.

    ``values`` may be an iterator (``count`` then gives its length): each node is combined as
    soon as its last child is made, so a group holds at most ``fanin`` values per tree level at
    once, not one per block (per-block histograms can be many times a block's size).

    Examples
    --------
    >>> add = lambda xs: "(" + "+".join(xs) + ")"
    >>> pieces = range_reduce(iter(["b", "c"]), 1, 3, add, 2, count=2)  # blocks 1, 2 of 3
    >>> pieces
    {(0, 1): 'b', (1, 1): '(c)'}
    >>> finish_tree([range_reduce(["a"], 0, 3, add, 2), pieces], 3, add, 2)
    '((a+b)+(c))'
    """
    if count is None:
        values = list(values)
        count = len(values)
    hi = lo + count
    depth = tree_depth(n, fanin)
    out: dict = {}
    for j, v in zip(range(lo, hi), values):
        out[(0, j)] = v
        L, k = 0, j
        while L < depth:
            parent, size = k // fanin, fanin ** (L + 1)
            last = min(parent * fanin + fanin, _level_count(n, fanin, L)) - 1
            if k != last or parent * size < lo or min((parent + 1) * size, n) > hi:
                break  # the parent still lacks children, or reaches outside the range
            out[(L + 1, parent)] = combine([out.pop((L, c))
                                            for c in range(parent * fanin, last + 1)])
            L, k = L + 1, parent
    return out


def finish_tree(pieces, n: int, combine: Callable, fanin: int):
    """The root of the reduction tree over ``n`` blocks from the :func:`range_reduce` pieces of
    groups covering all blocks."""
    have: dict = {}
    for p in pieces:
        have.update(p)

    def node(L, j):
        if (L, j) in have:
            return have[(L, j)]
        below = _level_count(n, fanin, L - 1)
        return combine([node(L - 1, c) for c in range(j * fanin, min(j * fanin + fanin, below))])

    return node(tree_depth(n, fanin), 0)


def block_ranges(n_blocks: int, n_groups: int) -> list:
    """``n_groups`` (at most ``n_blocks``) consecutive ranges of blocks of near-equal sizes, as
    bounds ``[0, ..., n_blocks]``."""
    g = max(1, min(int(n_groups), n_blocks))
    return [int(b) for b in np.linspace(0, n_blocks, g + 1).round()]
