"""Task graphs for per-block work: one layer per map, fixed-order tree reductions, broadcast.

Everything that builds a Dask graph for the block core lives here: :func:`map_delayed` (one task
per part), :func:`tree_reduce` (consecutive groups of ``split_every``, so floating-point sums do
not depend on scheduling), :func:`broadcast` (small parameters embedded in the tasks, large ones
one shared key) and :func:`compute`. Layers are named after the function their tasks run
(:func:`task_prefix`), so the dashboard and the scheduler's task groups say which kernel runs.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import math
import numbers
import pickle
import re
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
from dask import delayed
from dask._task_spec import Task, TaskRef, convert_legacy_graph
from dask.delayed import Delayed, unpack_collections
from dask.highlevelgraph import HighLevelGraph

__all__ = ["is_dask", "tree_add", "tree_reduce", "tree_depth", "reduce_levels", "map_delayed",
           "compute", "broadcast",
           "new_name", "task_prefix", "layer_graph", "task_argument", "task_ref",
           "LinkedTasks", "INLINE_BYTES", "frozen_heap", "fit_scope", "fit_memo"]


def is_dask(obj) -> bool:
    """True for Dask arrays, dataframes and series."""
    return isinstance(obj, (da.Array, dd.DataFrame, dd.Series))


_FROZEN_LOCK = threading.Lock()
_frozen_depth = 0


@contextlib.contextmanager
def frozen_heap():
    """Keep the objects that exist on entry out of Python's full garbage collections until the
    outermost exit (``gc.freeze`` / ``gc.unfreeze``); usable as a decorator.

    A fit on a thousand blocks builds graphs of tens of thousands of small objects on the
    client, and the scheduler of a ``LocalCluster`` runs in the same process: enough new
    objects that a full collection starts while the fit sets up, and it walks every object of
    the process (imported modules, the scheduler's state, the caller's data), 0.13-0.19 s
    measured in most fits of the ``sgd_partitions`` benchmark at 1,024 blocks, on the path to
    the first epoch. Frozen, those objects are skipped: collections during the fit walk only
    the fit's own objects. Nothing is freed later than it would be by reference counting, and
    cyclic garbage among the frozen objects is collected after the exit. A process that froze
    objects itself (``gc.freeze`` before forking, for instance) is left as it is, as is one
    with the collector disabled.
    """
    global _frozen_depth
    with _FROZEN_LOCK:
        own = _frozen_depth > 0 or (gc.isenabled() and gc.get_freeze_count() == 0)
        if own:
            if _frozen_depth == 0:
                gc.freeze()
            _frozen_depth += 1
    try:
        yield
    finally:
        if own:
            with _FROZEN_LOCK:
                _frozen_depth -= 1
                if _frozen_depth == 0:
                    gc.unfreeze()


#: Per thread, the facts of each fit running in it (innermost last); see :func:`fit_scope`.
_fits = threading.local()


@contextlib.contextmanager
def fit_scope():
    """One estimator's fit, for :func:`fit_memo`: facts about the cluster asked once per fit
    rather than once per decision. Each fit (a search's inner fits too) keeps its own facts,
    for as long as it runs and in its own thread, so a long search on a cluster that grows or
    shrinks asks again for every fit."""
    stack = getattr(_fits, "stack", None)
    if stack is None:
        stack = _fits.stack = []
    stack.append({})
    try:
        yield
    finally:
        stack.pop()


def fit_memo(key, compute: Callable[[], Any]):
    """``compute()``, kept under ``key`` until the current :func:`fit_scope` exits (outside a
    fit, or in a thread the fit did not start in: computed on every call).

    For facts that do not change while a fit runs but cost a scheduler round trip each: the
    workers' memory limits were asked three to five times in every SGD fit (whether to hold
    the blocks, to persist the prepared blocks, to join the streams), each a round trip through
    the client's event loop that waited behind the fit's own graph submissions.
    """
    stack = getattr(_fits, "stack", None)
    if not stack:
        return compute()
    facts = stack[-1]
    if key not in facts:
        facts[key] = compute()
    return facts[key]


# --------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------

def tree_add(parts: Sequence[Any]):
    """Element-wise sum of equally shaped nested results (arrays, numbers, tuples, lists, dicts).

    ``None`` entries are skipped, so an empty block may return ``None``.
    """
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    first = parts[0]
    if isinstance(first, dict):
        return {k: tree_add([p[k] for p in parts]) for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(tree_add(list(z)) for z in zip(*parts))
    total = first.copy() if isinstance(first, np.ndarray) else first
    for p in parts[1:]:
        total = total + p
    return total


def _combine(combine, *parts):
    return combine(list(parts))


# --------------------------------------------------------------------------------------------
# Graph building
# --------------------------------------------------------------------------------------------
# Graphs are written as one layer of tasks with precomputed keys rather than one ``delayed``
# call per task: ``delayed`` tokenises every argument of every call (the kernel, the block, the
# broadcast parameters), which cost milliseconds per block on the client and grew every round
# with the partition count.

def new_name(prefix: str) -> str:
    """A fresh graph-layer name ``prefix-<random hex>`` (never reused across computations).

    Fresh rather than a hash of the inputs: a key that recurs in consecutive computations (the
    same round's parameters, the same score) can reach the scheduler while it still releases
    that key from the previous computation, which trips its transition checks. The random part
    names no data, so it cannot change a result.
    """
    return f"{prefix}-{uuid.uuid4().hex}"


def task_prefix(func: Callable) -> str:
    """The name of the function a task runs, as the first words of its key.

    Dask groups tasks by the start of their keys (``dask.utils.key_split``): the dashboard's
    task stream, progress bars and the scheduler's task groups show those words. Naming layers
    after the kernel makes them say ``moments-kernel-block`` or ``merge-pairs-reduce`` instead
    of a generic helper. ``functools.partial`` is unwrapped. Underscores become hyphens because
    ``key_split`` reads only letters after the first word: when Dask fuses a chain of tasks (the
    input chunk, the block check, the kernel) it joins their names, and ``_`` would cut the
    kernel's name off there.

    Examples
    --------
    >>> import functools
    >>> task_prefix(functools.partial(_combine, sum)), task_prefix(lambda x: x)
    ('combine', 'lambda')
    >>> task_prefix(tree_add)
    'tree-add'
    """
    while isinstance(func, functools.partial):
        func = func.func
    name = getattr(func, "__name__", None) or type(func).__name__
    return re.sub(r"[\W_]+", "-", name).strip("-") or "task"


def layer_graph(name: str, layer: dict, deps: Sequence) -> HighLevelGraph:
    """A graph of the new ``layer`` on top of the graphs of ``deps`` (each merged once)."""
    layers: dict = {}
    dependencies: dict = {}
    own: set = set()
    # The graphs seen, by id, kept alive until the end: some collections build a new graph on
    # every ``__dask_graph__()`` call (a ``delayed`` leaf does), and a freed graph's id can be
    # reused by the next one, which would then be skipped and its layer left out.
    seen: dict = {}
    for d in deps:
        own.update(d.__dask_layers__())
        g = d.__dask_graph__()
        if id(g) in seen:
            continue
        seen[id(g)] = g
        if not isinstance(g, HighLevelGraph):
            g = HighLevelGraph.from_collections(d.__dask_layers__()[0], g, dependencies=())
        layers.update(g.layers)
        dependencies.update(g.dependencies)
    if not layers:
        return HighLevelGraph({name: layer}, {name: set()})
    # Keep only the upstream tasks the new layer needs, by walking task dependencies (as the
    # scheduler does): a layer-by-layer cull can leave tasks nothing here reads (a block task
    # fused into a kernel task, say). distributed does not cull such graphs; if one of those
    # tasks is still on the scheduler while its own inputs are gone, distributed 2026.8 fails
    # the graph half-way ("KeyError" in update_graph) and a later computation then trips its
    # "assert ts.priority".
    upstream = dict(HighLevelGraph(layers, dependencies))
    converted = convert_legacy_graph(upstream, all_keys=set(upstream) | set(layer))
    needed: set = set()
    todo = [d for t in convert_legacy_graph(layer, all_keys=set(upstream) | set(layer)).values()
            for d in t.dependencies]
    while todo:
        k = todo.pop()
        if k in needed or k not in upstream:
            continue
        needed.add(k)  # persisted data (a Future) has no converted task but must stay
        if k in converted:
            todo.extend(converted[k].dependencies)
    inputs = f"{name}-inputs"
    return HighLevelGraph({inputs: {k: upstream[k] for k in needed}, name: layer},
                          {inputs: set(), name: {inputs}})


def task_argument(obj, deps: list):
    """``obj`` as a task argument: Dask collections inside it become references (once per call)."""
    if isinstance(obj, Delayed):
        deps.append(obj)
        return TaskRef(obj.key)
    if isinstance(obj, (list, tuple, dict, set)) or is_dask(obj):
        task, collections = unpack_collections(obj)
        if collections:
            deps.extend(collections)
            return task
    return obj


def task_ref(obj, deps: list):
    """A reference to a Delayed (or None) as a task argument."""
    if obj is None:
        return None
    deps.append(obj)
    return TaskRef(obj.key)


class LinkedTasks:
    """One graph of tasks that read each other's results, built task by task and computed in
    one submission: the chained iterations of k-means (:mod:`dml.cluster._chain`) and the
    chained DSGD epochs of matrix factorisation (:mod:`dml.recommender._solvers`).

    A loop that runs one step per client round trip pays, per step, the graph's construction,
    its submission and the gathering of the results. Written as linked tasks, where a step's
    task takes the previous step's task results as arguments, consecutive steps cost one
    scheduler hop each. :meth:`add` returns the new task's reference, which later tasks take as
    an argument; :meth:`arg` turns a ``Delayed`` (persisted data, a broadcast parameter) into
    one; :meth:`compute` computes one task and everything it depends on.

    Examples
    --------
    >>> from operator import add, mul
    >>> chain = LinkedTasks("example")
    >>> x = chain.add(("x", 0), add, 1, 2)
    >>> for t in range(1, 4):
    ...     x = chain.add(("x", t), mul, x, 2)
    >>> chain.compute(x)
    24
    """

    def __init__(self, prefix: str):
        self.name = new_name(prefix)
        self.layer: dict = {}
        self.deps: list = []

    def arg(self, obj):
        """``obj`` as a task argument (see :func:`task_argument`)."""
        return task_argument(obj, self.deps)

    def add(self, key: tuple, func: Callable, *args) -> TaskRef:
        """A task ``func(*args)`` under ``(name, *key)``; returns its reference."""
        full = (self.name, *key)
        if full in self.layer:
            raise ValueError(f"LinkedTasks: the key {key!r} is already used")
        self.layer[full] = Task(full, func, *args)
        return TaskRef(full)

    def compute(self, ref: TaskRef):
        """The result of the task ``ref`` (computing what it needs of the graph)."""
        return compute(self.delayed(ref)[0])[0]

    def delayed(self, *refs: TaskRef) -> list[Delayed]:
        """The tasks ``refs`` as Delayed objects of one graph (to persist or compute later)."""
        graph = layer_graph(self.name, self.layer, self.deps)
        return [Delayed(r.key, graph, layer=self.name) for r in refs]


def map_delayed(func: Callable, parts: Sequence[Delayed], *args, name: str | None = None,
                with_index: bool = False) -> list[Delayed]:
    """``func(part, *args)`` for every Delayed part: one graph layer, one task per part.

    The cheap form of ``[delayed(func)(p, *args) for p in parts]``: the arguments are converted
    once, not tokenised per task. With ``with_index=True`` the task calls
    ``func(part, index, *args)``. Keys are fresh for every call.

    Examples
    --------
    >>> from dask import delayed
    >>> parts = [delayed(i) for i in range(3)]
    >>> import dask
    >>> dask.compute(*map_delayed(pow, parts, 2))
    (0, 1, 4)
    """
    name = name or new_name(task_prefix(func))
    deps: list = []
    args = tuple(task_argument(a, deps) for a in args)
    layer = {}
    for i, p in enumerate(parts):
        ref = task_ref(p, deps)
        key = (name, i)
        layer[key] = (Task(key, func, ref, i, *args) if with_index else
                      Task(key, func, ref, *args))
    graph = layer_graph(name, layer, deps)
    return [Delayed((name, i), graph, layer=name) for i in range(len(parts))]


def tree_depth(n: int, fanin: int = 8) -> int:
    """Levels of :func:`tree_reduce`'s tree over ``n`` leaves (at least one: even one leaf is
    combined once)."""
    levels = 1
    n = math.ceil(n / fanin)
    while n > 1:
        n = math.ceil(n / fanin)
        levels += 1
    return levels


def reduce_levels(values: list, combine: Callable, levels: int, fanin: int = 8):
    """``levels`` levels of :func:`tree_reduce`'s tree over computed ``values`` (consecutive
    groups of ``fanin``), for reductions finished on a worker or on the client."""
    for _ in range(levels):
        values = [combine(values[i:i + fanin]) for i in range(0, len(values), fanin)]
    return values


def tree_reduce(parts: list[Delayed], combine: Callable = tree_add,
                split_every: int = 8) -> Delayed:
    """Combine delayed results in a fixed tree: consecutive groups of ``split_every``, in order.

    The grouping depends only on the number of parts, so floating-point results are reproducible
    whatever the scheduling. Even one part goes through ``combine`` once, so every result has the
    same form. The layer is named after ``combine`` (``<combine>-reduce``).

    Examples
    --------
    >>> from dask import delayed
    >>> tree_reduce([delayed(i) for i in range(10)], sum, split_every=4).compute()
    45
    """
    if not parts:
        raise ValueError("nothing to reduce: the data has no blocks")
    if split_every < 2:
        raise ValueError("split_every must be at least 2")
    name = new_name(f"{task_prefix(combine)}-reduce")
    deps: list = []
    level = [task_ref(p, deps) for p in parts]
    layer = {}
    depth = 0
    while True:
        groups = [level[i:i + split_every] for i in range(0, len(level), split_every)]
        level = []
        for j, group in enumerate(groups):
            key = (name, depth, j)
            layer[key] = Task(key, _combine, combine, *group)
            level.append(TaskRef(key))
        depth += 1
        if len(level) == 1:
            break
    graph = layer_graph(name, layer, deps)
    return Delayed(level[0].key, graph, layer=name)


def compute(*objs):
    """``dask.compute`` on the current scheduler, for several results in one pass over the data."""
    return dask.compute(*objs)


#: Parameters up to this size are embedded in each block task; larger ones become one graph key
#: that the workers fetch once. Embedding saves a dependency fetch (tens of milliseconds under
#: load) per task, which dominates for scalars and small arrays.
INLINE_BYTES = 64 * 2**10


def _nbytes(obj) -> int:
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if obj is None or isinstance(obj, (numbers.Number, str, bytes, np.generic, np.dtype, type,
                                       slice, range)) or callable(obj):
        return 64
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(_nbytes(k) + _nbytes(v) for k, v in obj.items())
    try:  # anything else (a fitted model, a dataclass): its pickled size is what would travel
        return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        return INLINE_BYTES + 1


def broadcast(obj):
    """Ship a parameter to the block tasks: embedded when small, else one graph key.

    The key is unique to this call (``pure=False``) rather than a content hash: a hashed key
    recurs across consecutive computations (the same dtype, the same centres), and a graph that
    re-submits a key the scheduler is still releasing from the previous computation can trip
    the scheduler's transition checks ("assert ts.priority"), failing the fit. Within one graph
    the blocks still share the one key.
    """
    if isinstance(obj, Delayed) or _nbytes(obj) <= INLINE_BYTES:
        return obj
    return delayed(obj, pure=False, traverse=False)

