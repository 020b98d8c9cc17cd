"""Aligned row blocks: X, y and sample_weight cut into the same row blocks, ready for kernels.

Every estimator in dml gets its data through this module, the one place that knows how input
collections are cut into row blocks:

* :func:`as_blocks` (in :mod:`dml._block_input`, re-exported here) accepts NumPy, pandas,
  ``dask.array`` or ``dask.dataframe`` for X and array/Series/column name for y and
  sample_weight, checks them, realigns y and sample_weight to X's row partitions and returns
  :class:`Blocks`.
* :meth:`Blocks.map_reduce` maps a per-block kernel (plain NumPy/pandas code) with small broadcast
  parameters over the blocks and combines the results in a fixed tree order, so the answer depends
  on the partitioning only, never on which worker finished first.
* :meth:`Blocks.map_blocks` maps a kernel lazily and returns a Dask array (predict/transform).

The mechanics live beside it, one job per module: :mod:`dml._graph` builds the task graphs (map
layers, fixed-order tree reductions, broadcast), :mod:`dml._block_checks` validates one block on
its worker, :mod:`dml._random` derives the per-block random generators. Their names are
re-exported here for the modules that import them from ``dml._blocks``.

Everything runs on whatever Dask scheduler is current (a ``distributed.Client`` or the threaded
scheduler); nothing here creates a client.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask._task_spec import Task, TaskRef
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from dml._block_checks import (BlockSpec, MisalignedBlocksError, check_x_layout, extract_block,
                               extract_frame, is_numeric_dtype, is_sparse, is_sparse_dask,
                               to_csr)
from dml._graph import (INLINE_BYTES, broadcast, compute, is_dask, layer_graph, map_delayed,
                        new_name, task_argument, task_prefix, task_ref, tree_add, tree_depth,
                        tree_reduce)
from dml._random import block_rng, seed_from

__all__ = [
    "Blocks", "as_blocks", "default_block_rows", "compute_lengths", "column_names",
    "with_known_rows", "register_fusable", "sparse_blocks", "empty_csr", "SPARSE_META",
    # re-exported from their own modules (see the module docstring)
    "BlockSpec", "MisalignedBlocksError", "extract_block", "check_x_layout", "is_numeric_dtype",
    "is_sparse", "is_sparse_dask", "to_csr",
    "tree_add", "tree_reduce", "compute", "broadcast", "map_delayed", "is_dask", "INLINE_BYTES",
    "seed_from", "block_rng",
]

#: Target size of one block when dml itself cuts local (NumPy/pandas) data into blocks. A fixed
#: number (not Dask's configurable chunk size) so the partitioning, and hence any stochastic
#: fit, does not change with the user's Dask configuration.
BLOCK_BYTES = 128 * 2**20


def default_block_rows(n_features: int, itemsize: int = 8) -> int:
    """Rows per block when dml cuts local data: about :data:`BLOCK_BYTES` per block."""
    return max(1, BLOCK_BYTES // max(1, n_features * itemsize))


#: The meta of a Dask array of CSR blocks (what :func:`sparse_blocks` and sparse transforms give).
SPARSE_META = sp.csr_matrix((0, 0))


def _sparse_rows(X) -> int:
    """Rows per block of a local sparse X: about :data:`BLOCK_BYTES` of stored entries."""
    per_row = max(1.0, X.nnz / max(X.shape[0], 1)) * (X.dtype.itemsize + X.indices.itemsize)
    return max(1, int(BLOCK_BYTES // per_row))


def empty_csr(n_features: int, dtype=np.float64) -> sp.csr_matrix:
    """A CSR matrix with no rows: the meta of a Dask array of CSR blocks, the block of an empty
    partition."""
    return sp.csr_matrix((0, int(n_features)), dtype=dtype)


def sparse_blocks(X, chunks=None, *, kernel: Callable | None = None, args: tuple = (),
                  n_features: int | None = None, dtype=None, lengths=None,
                  name: str | None = None) -> da.Array:
    """A Dask array whose blocks are scipy CSR matrices: the one form of sparse data in dml.

    Two sources give it:

    * a local sparse matrix ``X`` cut into row blocks of ``chunks`` rows (``X`` stays one graph
      key, each block a row slice of it);
    * a sequence ``X`` of delayed partitions (documents, lines of a libsvm file) and a
      ``kernel(part, index, *args)`` that turns partition ``index`` into a CSR matrix of
      ``n_features`` columns, mapped over the partitions as one graph layer (``args`` are shared
      by every task: a large one is one key).

    Parameters
    ----------
    X : scipy.sparse matrix or array, or sequence of Delayed
    chunks : int or tuple of int, optional
        Local X: rows per block (an int), or the row length of every block.
    kernel : callable, optional
        Partitions: the partition → CSR function.
    args : tuple, default=()
        Partitions: the kernel's further arguments.
    n_features : int, optional
        Partitions: the number of columns of every block.
    dtype : dtype, optional
        Partitions: the dtype of the blocks' values.
    lengths : array-like of int, optional
        Partitions: the rows of each partition when known (else the row chunks are NaN).
    name : str, optional
        Partitions: the graph layer's name (default: after the kernel).

    Returns
    -------
    dask.array.Array
        Row blocks as CSR (all columns in one block); its meta is an empty CSR matrix.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sparse_blocks(sp.random(10, 4, density=0.3, format="csr", random_state=0), 4)
    >>> A.chunks, type(A.blocks[1].compute()).__name__
    (((4, 4, 2), (4,)), 'csr_matrix')
    """
    if kernel is None:
        X = to_csr(X)
        rows = chunks if isinstance(chunks, int) else tuple(int(c) for c in chunks)
        return da.from_array(X, chunks=(rows, X.shape[1]), asarray=False, name=False,
                             meta=X[:0])
    name = name or new_name(f"{task_prefix(kernel)}-block")
    deps: list = []
    args = tuple(task_argument(broadcast(a), deps) for a in args)
    layer = {}
    for i, p in enumerate(X):
        key = (name, i, 0)
        layer[key] = Task(key, kernel, task_ref(p, deps), i, *args)
    graph = layer_graph(name, layer, deps)
    rows = (tuple(int(r) for r in lengths) if lengths is not None else (np.nan,) * len(X))
    return da.Array(graph, name, (rows, (int(n_features),)), meta=empty_csr(n_features, dtype))


# --------------------------------------------------------------------------------------------
# Kernel tasks over blocks
# --------------------------------------------------------------------------------------------

#: Functions whose block task a standalone reduction runs inside its kernel task (see
#: :meth:`Blocks.map_parts`): pure, cheap validation whose output only that kernel reads.
_FUSABLE = {extract_block, extract_frame}


def register_fusable(func: Callable) -> Callable:
    """Mark a block-making function (like :func:`extract_block`) as fusable into kernel tasks."""
    _FUSABLE.add(func)
    return func


def _call(kernel, with_index, part, index, *args):
    xb, yb, wb = part
    if with_index:
        return kernel(index, xb, yb, wb, *args)
    return kernel(xb, yb, wb, *args)


def _fusable_task(part: Delayed):
    """The task making ``part`` when it is an unpersisted, fusable block task, else None."""
    graph = part.__dask_graph__()
    if not isinstance(graph, HighLevelGraph):
        return None
    layer = graph.layers.get(part.__dask_layers__()[0])
    task = layer.get(part.key) if layer is not None and hasattr(layer, "get") else None
    if isinstance(task, Task) and task.func in _FUSABLE:
        return task
    return None


# --------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------

@dataclass(init=False)
class Blocks:
    """Row blocks of X with aligned y and sample_weight, ready for per-block kernels.

    Build it with :func:`as_blocks`. Each element of ``parts`` is a delayed ``(X_block, y_block,
    w_block)`` tuple, already validated by :class:`BlockSpec` on the worker that made it.

    Attributes
    ----------
    parts : list of Delayed
        One delayed (X, y, w) tuple per row block, in row order.
    n_features : int
    feature_names : ndarray of str or None
        Column names when X was a dataframe with string column names.
    local : bool
        True when X was NumPy/pandas: estimators then return NumPy results, as scikit-learn does.
    spec : BlockSpec
        The validation every block went through.
    has_y, has_weight : bool
        Whether y / sample_weight were given.
    dtypes : pandas Series or None
        Column dtypes of dataframe input.
    known_lengths : ndarray of int or None
        Rows per block when known without computing anything (local data, Dask arrays with
        known chunks, or after :attr:`lengths` computed them); None otherwise.
    lengths : ndarray of int
        Rows per block (computed once, on first use, when the input did not say).
    groups : Groups or None
        After :meth:`persist`: the blocks held in worker memory as groups of consecutive
        blocks, which the passes read one task per group (see :mod:`dml._block_groups`).
    """

    parts: list
    n_features: int
    feature_names: np.ndarray | None
    local: bool
    spec: BlockSpec
    has_y: bool = False
    has_weight: bool = False
    dtypes: Any = None
    known_lengths: np.ndarray | None = field(default=None, repr=False)
    #: For blocks paired partition by partition without known lengths: builds the realigned
    #: blocks (computing lengths) if a block turns out misaligned.
    _realign: Callable | None = field(default=None, repr=False)
    groups: Any = field(default=None, repr=False)

    def __init__(self, parts, n_features, feature_names, local, spec, has_y=False,
                 has_weight=False, dtypes=None, known_lengths=None, _realign=None, groups=None,
                 *, _lengths=None):
        # ``_lengths`` is the former name of ``known_lengths``, accepted for callers not yet
        # updated (``dataclasses.replace(blocks, _lengths=...)``).
        self.parts = parts
        self.n_features = n_features
        self.feature_names = feature_names
        self.local = local
        self.spec = spec
        self.has_y = has_y
        self.has_weight = has_weight
        self.dtypes = dtypes
        self.known_lengths = known_lengths if _lengths is None else _lengths
        self._realign = _realign
        self.groups = groups

    @property
    def _lengths(self):  # former name, see __init__
        return self.known_lengths

    @property
    def npartitions(self) -> int:
        return len(self.parts)

    @property
    def lengths(self) -> np.ndarray:
        if self.known_lengths is None:
            self.known_lengths = (self.groups.lengths() if self.groups is not None else
                                  np.asarray(compute(*map_delayed(_block_len, self.parts)),
                                             dtype=np.int64))
        return self.known_lengths

    @property
    def n_samples(self) -> int:
        return int(self.lengths.sum())

    def persist(self, n_groups: int | None = None, then: tuple | None = None,
                bounds: Sequence[int] | None = None, reduce: tuple | None = None) -> Blocks:
        """Keep the validated blocks in worker memory (for estimators that make several passes).

        Many blocks are held as groups of consecutive blocks, at least ``n_groups`` of them
        (default: two per worker thread of the current cluster), so that later passes run one
        task per group instead of one per block: at a thousand small blocks the scheduler's
        per-task cost, not the arithmetic, sets a pass's time. Results do not depend on the
        grouping (see :mod:`dml._block_groups`).

        ``then = (func, args)`` applies ``func(group, start, *args)`` (``group`` a tuple of
        blocks, ``start`` the index of its first block) inside each group's task and holds its
        result instead of the validated blocks: a pass that only transforms the blocks for a
        later one (preparing them for training) costs no task, graph or copy of its own.
        ``func`` must return a tuple of as many blocks; with ``then`` the result is None when
        the blocks are too few to group (the caller transforms them itself).

        ``bounds`` (``[0, ..., n_blocks]``) holds the blocks in groups of any consecutive
        blocks instead: group ``g`` holds blocks ``bounds[g] .. bounds[g + 1] - 1`` (the blocks
        a pass reads together, such as a task group of SGD's streams), whatever their number.

        ``reduce = (kernel, combine)`` makes the group's pieces of the reduction
        ``map_reduce(kernel, combine=combine)`` in the group's task too, from the validated
        blocks (before ``then``): that pass (a classifier's classes) then reads the pieces, a
        small task per group, instead of the blocks (:meth:`Groups.reduce`), and its result is
        the same bit for bit. Ignored when the blocks are too few to group.
        """
        from dml._block_groups import (Groups, default_n_groups, group_size, hold_reducing,
                                       persist_placed_where)

        if self.groups is not None:
            if then is not None:
                raise ValueError("Blocks.persist(then=...) needs blocks not yet persisted")
            return self
        n = len(self.parts)
        if bounds is not None:
            bounds = self._checked_bounds(bounds)
            size = int(np.diff(bounds).max())
        else:
            size = group_size(n, default_n_groups() if n_groups is None else n_groups)
            if size == 1:
                if then is not None:
                    return None
                return replace(self, parts=list(dask.persist(*self.parts)))
            bounds = [*range(0, n, size), n]
        prefix = "group-blocks" if then is None else f"{task_prefix(then[0])}-group"
        applied = then
        if reduce is not None:
            applied = (hold_reducing, (n, reduce[0], reduce[1], None if then is None else then[0],
                                       () if then is None else tuple(then[1])))
        name, layer, graph = self._group_layer(bounds, applied, prefix)
        # Consecutive groups on one worker (where most of their blocks already are): the passes
        # that read runs of groups (SGD's streams) then find them there.
        objects, where = persist_placed_where(
            [Delayed((name, g), graph, layer=name) for g in range(len(layer))],
            [layer[(name, g)].dependencies for g in range(len(layer))])
        # The groups' contents are named by the blocks' keys (content-derived for validated
        # input) and what was applied to them: a cache key across persists of the same data.
        token = tokenize("group-blocks", key_runs([p.key for p in self.parts]), bounds,
                         None if then is None else then)
        groups = Groups(objects, bounds, size, token=token, workers=where, reduced=reduce)
        return replace(self, parts=groups.block_parts(), groups=groups)

    def map_groups(self, bounds: Sequence[int], func: Callable, *args) -> list:
        """``func(group, start, *args)`` held in worker memory for every group of consecutive
        blocks ``bounds[g] .. bounds[g + 1] - 1`` (``group`` the tuple of those blocks,
        validated inside the group's task; ``start`` its first block), placed as
        :meth:`persist` places its groups: one task per group, whatever it returns (unlike
        ``persist(then=...)``, not necessarily a block per block). Returns the persisted
        results as Delayed objects, in group order."""
        from dml._block_groups import persist_placed_where

        if self.groups is not None:
            raise ValueError("Blocks.map_groups needs blocks not yet persisted")
        name, layer, graph = self._group_layer(self._checked_bounds(bounds), (func, args))
        objects, _ = persist_placed_where(
            [Delayed((name, g), graph, layer=name) for g in range(len(layer))],
            [layer[(name, g)].dependencies for g in range(len(layer))])
        return list(objects)

    def _checked_bounds(self, bounds: Sequence[int]) -> list:
        n = len(self.parts)
        bounds = [int(b) for b in bounds]
        if bounds[0] != 0 or bounds[-1] != n or any(np.diff(bounds) < 1):
            raise ValueError(f"bounds must rise from 0 to {n}, got {bounds}")
        return bounds

    def _group_layer(self, bounds: Sequence[int], then: tuple | None, prefix: str | None = None):
        """(name, layer, graph) of one task per group ``bounds[g] .. bounds[g + 1] - 1`` of
        the blocks: the group's blocks as a tuple, or ``then[0](tuple, start, *then[1])``
        (tasks named ``prefix``, by default after ``then[0]``)."""
        from dml._block_groups import collect

        if prefix is None:
            prefix = "group-blocks" if then is None else f"{task_prefix(then[0])}-group"
        name = new_name(prefix)
        deps: list = []
        extra = () if then is None else tuple(task_argument(broadcast(a), deps)
                                              for a in then[1])
        layer = {}
        for g in range(len(bounds) - 1):
            refs = []
            for p in self.parts[bounds[g]:bounds[g + 1]]:
                # Validation runs inside the group's task: no task of its own per block.
                task = _fusable_task(p)
                if task is not None:
                    refs.append(Task(None, task.func, *task.args, **task.kwargs))
                    deps.extend(_task_deps(p, task))
                else:
                    refs.append(task_ref(p, deps))
            if then is None:
                layer[(name, g)] = Task((name, g), collect, *refs)
            else:
                layer[(name, g)] = Task((name, g), then[0], Task(None, collect, *refs),
                                        bounds[g], *extra)
        return name, layer, layer_graph(name, layer, deps)

    def reduce_in_groups(self, kernel: Callable, *args, combine: Callable = tree_add,
                         compute_now: bool = True):
        """:meth:`map_reduce` over blocks not held in worker memory, one task per group of
        consecutive blocks (as :meth:`persist` makes them) that validates its blocks and
        reduces them over its subtree of the fixed tree; the tree finishes over the group
        results. The same operands in the same order as one task per block, so the same
        result bit for bit, for a few tasks instead of one per block: a first pass over a
        thousand small blocks, before they are held, costs milliseconds a task otherwise.
        A group's blocks are in one task's memory at once, so this is for data that fits in
        the workers' memory (that is about to be held anyway); data larger than memory
        streams through :meth:`map_reduce`.

        Examples
        --------
        >>> import numpy as np
        >>> b = as_blocks(np.arange(12.0).reshape(6, 2), block_rows=2)
        >>> b.reduce_in_groups(lambda x, y, w: x.sum(axis=0))
        array([30., 36.])
        """
        from dml._block_groups import (FANIN, default_n_groups, group_reduce, group_size,
                                       subtree_levels)

        n = len(self.parts)
        size = group_size(n, default_n_groups()) if self.groups is None else 1
        if size == 1 or self._realign is not None:
            return self.map_reduce(kernel, *args, combine=combine, compute_now=compute_now)
        levels = subtree_levels(size, n)
        _, layer, graph = self._group_layer(
            [*range(0, n, size), n], (group_reduce, (kernel, False, combine, levels, *args)))
        outs = [Delayed(key, graph, layer=key[0]) for key in layer]
        out = outs[0] if levels >= tree_depth(n) else tree_reduce(outs, combine, FANIN)
        return out.compute() if compute_now else out

    def map_parts(self, kernel: Callable, *args, with_index: bool = False,
                  fuse: bool = False) -> list[Delayed]:
        """Apply ``kernel(X, y, w, *args)`` to every block; returns one Delayed per block.

        ``args`` are broadcast (:func:`broadcast`): small ones embedded in each task, large ones
        one graph key shared by all block tasks. With ``with_index=True`` the kernel is called
        as ``kernel(block_index, X, y, w, *args)`` (e.g. to derive its random generator with
        :func:`block_rng`).

        With ``fuse=True`` a block that is not in worker memory is validated inside the kernel's
        task instead of a task of its own (half the tasks of a one-pass fit). Only for results
        that are the sole reader of the blocks in their computation: another reduction computed
        together would validate the blocks again.

        The tasks are named after the kernel (``<kernel>-block``, see
        :func:`~dml._graph.task_prefix`), so the dashboard shows which kernel runs.
        """
        return self._map_parts(kernel, args, with_index, fuse, task_prefix(kernel))

    def _map_parts(self, kernel, args, with_index, fuse, prefix) -> list[Delayed]:
        name = new_name(f"{prefix}-block")
        deps: list = []
        args = tuple(task_argument(broadcast(a), deps) for a in args)
        if self.groups is not None:
            return self.groups.map_blocks(kernel, with_index, args, deps, name)
        layer = {}
        for i, p in enumerate(self.parts):
            task = _fusable_task(p) if fuse else None
            if task is not None:
                ref = Task(None, task.func, *task.args, **task.kwargs)
                deps.extend(_task_deps(p, task))
            else:
                ref = task_ref(p, deps)
            key = (name, i)
            layer[key] = Task(key, _call, kernel, with_index, ref, i, *args)
        graph = layer_graph(name, layer, deps)
        return [Delayed((name, i), graph, layer=name) for i in range(len(self.parts))]

    def map_reduce(self, kernel: Callable, *args, combine: Callable = tree_add,
                   split_every: int = 8, with_index: bool = False, compute_now: bool = True):
        """Map ``kernel`` over the blocks and combine the results in a fixed tree order.

        Parameters
        ----------
        kernel : callable
            ``kernel(X_block, y_block, w_block, *args)`` returning a small result (arrays,
            numbers, or nested tuples/dicts of them). ``y_block``/``w_block`` are None when absent.
        *args
            Broadcast parameters.
        combine : callable, default :func:`tree_add`
            Combines a list of results into one; must be associative for the tree to be valid.
        split_every : int, default 8
            Fan-in of the reduction tree.
        with_index : bool, default False
            Pass the block index as the first kernel argument.
        compute_now : bool, default True
            Return the computed result (one graph: each block validated inside its kernel
            task); with False return a Delayed, so that several reductions can run in one pass
            over the data with :func:`compute`.

        Examples
        --------
        >>> import numpy as np
        >>> b = as_blocks(np.arange(12.0).reshape(6, 2), block_rows=2)
        >>> b.map_reduce(lambda x, y, w: x.sum(axis=0))
        array([30., 36.])
        """
        if self.groups is not None and split_every == self.groups.fanin:
            deps: list = []
            task_args = tuple(task_argument(broadcast(a), deps) for a in args)
            out = self.groups.reduce(kernel, with_index, task_args, deps, combine,
                                     f"{task_prefix(kernel)}-group")
        else:
            out = tree_reduce(self.map_parts(kernel, *args, with_index=with_index,
                                             fuse=compute_now), combine, split_every)
        if not compute_now:
            return out
        try:
            return out.compute()
        except MisalignedBlocksError:
            if self._realign is None:
                raise
            # Paired optimistically and the partitions differ: realign once (this raises the
            # clear total-length error when the lengths differ) and run again.
            fixed = self._realign()
            self.parts, self.known_lengths, self._realign = (fixed.parts, fixed.known_lengths,
                                                             None)
            self.groups = None
            return self.map_reduce(kernel, *args, combine=combine, split_every=split_every,
                                   with_index=with_index)

    def fold(self, kernel: Callable, init, *args, compute_now: bool = True):
        """Carry a small state through the blocks in row order: ``state = kernel(state, X, y,
        w, *args)`` for block 0, 1, ... (sequential algorithms such as incremental PCA).

        One task per block, each run where its block lives: only the state travels. ``init``
        is the state before the first block (a plain value or a Delayed).

        Examples
        --------
        >>> import numpy as np
        >>> b = as_blocks(np.arange(6.0).reshape(3, 2), block_rows=1)
        >>> b.fold(lambda s, x, y, w: s + [float(x[0, 0])], [])
        [0.0, 2.0, 4.0]
        """
        name = new_name(f"{task_prefix(kernel)}-fold")
        deps: list = []
        args = tuple(task_argument(broadcast(a), deps) for a in args)
        state = task_argument(init, deps)
        layer = {}
        for i, p in enumerate(self.parts):
            key = (name, i)
            layer[key] = Task(key, _fold_call, kernel, state, task_ref(p, deps), *args)
            state = TaskRef(key)
        if not layer:
            return init
        graph = layer_graph(name, layer, deps)
        out = Delayed((name, len(self.parts) - 1), graph, layer=name)
        return out.compute() if compute_now else out

    def rows_at(self, indices) -> np.ndarray:
        """The X rows at global ``indices`` (in that order), shape (len(indices), d), as NumPy.

        For fits that start from a handful of training rows (the means of a mixture, the
        landmark rows of a Nyström map): the blocks stay where they are and only the picked
        rows travel, in one map-reduce.

        Examples
        --------
        >>> import numpy as np
        >>> b = as_blocks(np.arange(12.0).reshape(6, 2), block_rows=4)
        >>> b.rows_at([5, 0])
        array([[10., 11.],
               [ 0.,  1.]])
        """
        indices = np.asarray(indices, dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        found = dict(self.map_reduce(_rows_in_block, np.unique(indices), offsets,
                                     combine=_concat_lists, with_index=True))
        return np.stack([found[int(i)] for i in indices])

    def map_blocks(self, kernel: Callable, *args, dtype, tail_shape: tuple = (),
                   meta=None) -> da.Array:
        """Lazily apply ``kernel(X_block, *args)`` per block; the results form a Dask array.

        The kernel returns an array with one row per row of the block and trailing shape
        ``tail_shape`` (``()`` for a vector). ``meta`` describes a block of the output when it
        is not a NumPy array (e.g. a CSR matrix for a sparse transform).
        """
        known = self.known_lengths is not None
        outs = self._map_parts(_x_only, (kernel, *args), False, False, task_prefix(kernel))
        pieces = [da.from_delayed(o, shape=((int(self.known_lengths[i]) if known else np.nan),
                                             *tail_shape), dtype=dtype,
                                  **({} if meta is None else {"meta": meta}))
                  for i, o in enumerate(outs)]
        return da.concatenate(pieces, axis=0) if len(pieces) > 1 else pieces[0]


def _rows_in_block(index, xb, yb, wb, rows, offsets):
    start = int(offsets[index])
    local = rows[(rows >= start) & (rows < start + xb.shape[0])]
    return [(int(r), xb[r - start].copy()) for r in local]


def _concat_lists(parts):
    return [x for p in parts for x in p]


def _task_deps(part: Delayed, task: Task) -> list:
    """Collections standing for the inputs of a fused block task (for the graph merge)."""
    return [_Keyed(part.__dask_graph__(), k) for k in task.dependencies]


class _Keyed:
    """A key of an existing graph, as a dependency for :func:`~dml._graph.layer_graph`."""

    __slots__ = ("_graph", "_key")

    def __init__(self, graph, key):
        self._graph, self._key = graph, key

    def __dask_graph__(self):
        return self._graph

    def __dask_layers__(self):
        # The layers of the graph the fused task read from: all of them (culled at compute).
        return tuple(self._graph.layers)


def _fold_call(kernel, state, part, *args):
    xb, yb, wb = part
    return kernel(state, xb, yb, wb, *args)


def _x_only(xb, yb, wb, kernel, *args):
    return kernel(xb, *args)


def _block_len(part) -> int:
    return int(part[0].shape[0])


def key_runs(keys: list) -> list:
    """``keys`` written as runs: ``(name, first index, count, rest)`` for consecutive keys
    ``(name, i, *rest)``, ``i = first .. first + count - 1`` (a Dask collection's partitions),
    other keys as they are. The same list of keys gives the same runs and the runs give back
    the list, so a hash of the runs names the keys; it costs a loop where hashing a thousand
    keys one by one cost tens of milliseconds of a fit's set-up.

    Examples
    --------
    >>> key_runs([("x", 0, 0), ("x", 1, 0), ("x", 2, 0), ("y", 5), "z"])
    [('x', 0, 3, (0,)), ('y', 5, 1, ()), 'z']
    """
    out: list = []
    for k in keys:
        if (isinstance(k, tuple) and len(k) >= 2 and isinstance(k[0], str)
                and type(k[1]) is int):
            if out and isinstance(out[-1], list):
                name, first, count, rest = out[-1]
                if name == k[0] and k[1] == first + count and rest == k[2:]:
                    out[-1][2] += 1
                    continue
            out.append([k[0], k[1], 1, k[2:]])
        else:
            out.append(k)
    return [tuple(r) if isinstance(r, list) else r for r in out]


# Building blocks from user input has its own module; its names are part of this one's
# interface (imported last: that module builds on the classes above).
from dml._block_input import (as_blocks, column_names, compute_lengths,  # noqa: E402
                              with_known_rows)
