"""Shared distributed mechanics: aligned row blocks, map-then-tree-reduce, broadcast, random streams.

Every estimator in dml goes through this module, so it is the one place that knows how Dask
collections are cut into row blocks and how per-block results come back:

* :func:`as_blocks` accepts NumPy, pandas, ``dask.array`` or ``dask.dataframe`` for X and
  array/Series/column name for y and sample_weight, checks them, realigns y and sample_weight to
  X's row partitions and returns :class:`Blocks`.
* :meth:`Blocks.map_reduce` maps a per-block kernel (plain NumPy/pandas code) with small broadcast
  parameters over the blocks and combines the results in a fixed tree order, so the answer depends
  on the partitioning only, never on which worker finished first.
* :meth:`Blocks.map_blocks` maps a kernel lazily and returns a Dask array (predict/transform).
* :func:`block_rng` derives the random generator of one (purpose, epoch, block, ...) from
  ``random_state``.

Everything runs on whatever Dask scheduler is current (a ``distributed.Client`` or the threaded
scheduler); nothing here creates a client.
"""
from __future__ import annotations

import hashlib
import numbers
import pickle
import uuid
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask import delayed
from dask._task_spec import Task, TaskRef
from dask.base import tokenize
from dask.delayed import Delayed, unpack_collections
from dask.highlevelgraph import HighLevelGraph
from sklearn.exceptions import DataConversionWarning

__all__ = [
    "Blocks", "BlockSpec", "MisalignedBlocksError", "as_blocks", "tree_add", "tree_reduce",
    "compute", "broadcast", "map_delayed", "seed_from", "block_rng", "is_dask",
    "default_block_rows", "check_x_layout", "extract_block", "compute_lengths", "column_names",
    "with_known_rows", "is_numeric_dtype",
]

#: Target size of one block when dml itself cuts local (NumPy/pandas) data into blocks. A fixed
#: number (not Dask's configurable chunk size) so the partitioning, and hence any stochastic
#: fit, does not change with the user's Dask configuration.
BLOCK_BYTES = 128 * 2**20


def is_dask(obj) -> bool:
    """True for Dask arrays, dataframes and series."""
    return isinstance(obj, (da.Array, dd.DataFrame, dd.Series))


def default_block_rows(n_features: int, itemsize: int = 8) -> int:
    """Rows per block when dml cuts local data: about :data:`BLOCK_BYTES` per block."""
    return max(1, BLOCK_BYTES // max(1, n_features * itemsize))


# --------------------------------------------------------------------------------------------
# Random streams
# --------------------------------------------------------------------------------------------

def seed_from(random_state) -> int:
    """Turn a ``random_state`` (None, int, RandomState, Generator) into one integer seed.

    Call it once at the start of a fit and derive everything from the result, so that all blocks
    of that fit agree. ``None`` draws fresh entropy (the fit is then not reproducible, as in
    scikit-learn).
    """
    if random_state is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(random_state, (numbers.Integral, np.integer)):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    raise TypeError(
        f"random_state must be None, an int, a numpy RandomState or Generator; got "
        f"{type(random_state).__name__}")


def _purpose_id(purpose: str) -> int:
    # A stable hash: Python's hash() of a str changes between processes.
    return int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:4], "little")


def block_rng(seed: int, purpose: str, *indices: int) -> np.random.Generator:
    """The generator of one (purpose, epoch, block, ...) derived from ``seed``.

    Examples
    --------
    >>> a = block_rng(0, "shuffle", 3, 1).random()
    >>> b = block_rng(0, "shuffle", 3, 1).random()
    >>> a == b, a == block_rng(0, "shuffle", 3, 2).random()
    (True, False)
    """
    entropy = [int(seed), _purpose_id(purpose), *(int(i) for i in indices)]
    return np.random.default_rng(np.random.SeedSequence(entropy))


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
    """A fresh graph-layer name ``prefix-<random hex>`` (never reused across computations)."""
    return f"{prefix}-{uuid.uuid4().hex}"


def _graph(name: str, layer: dict, deps: Sequence) -> HighLevelGraph:
    """A graph of the new ``layer`` on top of the graphs of ``deps`` (each merged once)."""
    layers: dict = {}
    dependencies: dict = {}
    own: set = set()
    seen: set = set()
    for d in deps:
        own.update(d.__dask_layers__())
        g = d.__dask_graph__()
        if id(g) in seen:
            continue
        seen.add(id(g))
        if not isinstance(g, HighLevelGraph):
            g = HighLevelGraph.from_collections(d.__dask_layers__()[0], g, dependencies=())
        layers.update(g.layers)
        dependencies.update(g.dependencies)
    layers[name] = layer
    dependencies[name] = own
    return HighLevelGraph(layers, dependencies)


def _as_argument(obj, deps: list):
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


def _ref(obj, deps: list):
    """A reference to a Delayed (or None) as a task argument."""
    if obj is None:
        return None
    deps.append(obj)
    return TaskRef(obj.key)


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
    name = name or new_name(getattr(func, "__name__", "map"))
    deps: list = []
    args = tuple(_as_argument(a, deps) for a in args)
    layer = {}
    for i, p in enumerate(parts):
        ref = _ref(p, deps)
        key = (name, i)
        layer[key] = (Task(key, func, ref, i, *args) if with_index else
                      Task(key, func, ref, *args))
    graph = _graph(name, layer, deps)
    return [Delayed((name, i), graph, layer=name) for i in range(len(parts))]


def tree_reduce(parts: list[Delayed], combine: Callable = tree_add, split_every: int = 8) -> Delayed:
    """Combine delayed results in a fixed tree: consecutive groups of ``split_every``, in order.

    The grouping depends only on the number of parts, so floating-point results are reproducible
    whatever the scheduling. Even one part goes through ``combine`` once, so every result has the
    same form.

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
    name = new_name("tree-reduce")
    deps: list = []
    level = [_ref(p, deps) for p in parts]
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
    graph = _graph(name, layer, deps)
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


# --------------------------------------------------------------------------------------------
# Block validation (runs on the workers)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BlockSpec:
    """What a block must look like once extracted; checked on the worker that holds it.

    Parameters
    ----------
    numeric : bool
        Convert X to a 2-D NumPy array of a numeric dtype. When False, X blocks are passed as they
        are (pandas DataFrame for dataframe input, NumPy array otherwise) and the estimator's
        kernels check their values: the NaN/inf checks below apply to numeric X only.
    dtype : tuple of dtypes or None
        Accepted float dtypes; other numeric input is cast to the first. ``None`` keeps the dtype.
    allow_nan : bool
        Accept NaN in X (estimators that implement a missing-value rule). inf is never accepted.
    y_numeric : bool
        y must be numeric and finite (regression targets).
    estimator : str
        Name used in error messages.
    """

    numeric: bool = True
    dtype: tuple | None = (np.float64, np.float32)
    allow_nan: bool = False
    y_numeric: bool = False
    estimator: str = "estimator"


def _as_numeric_block(xb, spec: BlockSpec, index: int) -> np.ndarray:
    if isinstance(xb, pd.DataFrame):
        bad = [c for c, t in xb.dtypes.items() if not is_numeric_dtype(t)]
        if bad:
            raise TypeError(_non_numeric_message(bad, spec))
        if any(_is_nullable(t) for t in xb.dtypes):
            # Nullable pandas dtypes: pd.NA becomes NaN so the NaN rule below applies.
            xb = xb.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            xb = xb.to_numpy()
    xb = np.asarray(xb)
    if xb.dtype.kind in "OSUa":
        try:
            xb = xb.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{spec.estimator}: X contains non-numeric values ({exc}); encode categorical "
                "features first, e.g. with dml.preprocessing.OneHotEncoder") from None
    if xb.dtype.kind == "b":
        xb = xb.astype(np.float64)
    if xb.dtype.kind == "c":
        raise ValueError(f"{spec.estimator}: Complex data not supported; pass the real part "
                         "(X.real) or split real and imaginary parts into separate features")
    if xb.dtype.kind not in "iuf":
        raise TypeError(f"{spec.estimator}: X has dtype {xb.dtype}, expected numbers")
    if spec.dtype is not None and xb.dtype not in spec.dtype:
        xb = xb.astype(spec.dtype[0])
    if xb.ndim != 2:
        raise ValueError(f"{spec.estimator}: expected a 2-D block of X, got {xb.ndim}-D")
    if xb.dtype.kind == "f":
        _check_finite(xb, "X", spec, index)
    return xb


def is_numeric_dtype(t) -> bool:
    """True for a numeric pandas/NumPy dtype that dml can use as a feature (not categorical).

    Examples
    --------
    >>> import pandas as pd
    >>> is_numeric_dtype(pd.Int64Dtype()), is_numeric_dtype(pd.CategoricalDtype([1, 2]))
    (True, False)
    """
    return pd.api.types.is_numeric_dtype(t) and not isinstance(t, pd.CategoricalDtype)


def _is_nullable(t) -> bool:
    return isinstance(t, pd.api.extensions.ExtensionDtype) and not isinstance(t, pd.CategoricalDtype)


def _non_numeric_message(columns, spec: BlockSpec) -> str:
    return (f"{spec.estimator}: X has non-numeric columns {list(columns)}; encode them first "
            "(for example with dml.preprocessing.OneHotEncoder) or drop them")


def _check_finite(a: np.ndarray, what: str, spec: BlockSpec, index: int, allow_nan=None) -> None:
    allow_nan = spec.allow_nan if allow_nan is None else allow_nan
    if a.size == 0:
        return
    # One sum is far cheaper than isfinite over the block; only look closer when it is not finite.
    s = np.sum(a, dtype=np.float64) if a.dtype.kind == "f" else 0.0
    if np.isfinite(s):
        return
    if np.isinf(a).any():
        raise ValueError(f"{spec.estimator}: Input {what} contains infinity (row block {index}). "
                         "Replace or drop infinite values before fitting.")
    if not allow_nan and np.isnan(a).any():
        hint = ("" if what != "X" else
                " Impute or drop missing values first, or use an estimator that handles them"
                " (e.g. naive Bayes with missing='ignore').")
        raise ValueError(f"{spec.estimator}: Input {what} contains NaN (row block {index}).{hint}")
    # Otherwise: allowed NaN, or finite values whose float64 sum overflowed.


class MisalignedBlocksError(ValueError):
    """A block of y or sample_weight does not have as many rows as the matching block of X."""


def _as_vector(vb, what: str, n: int, spec: BlockSpec, index: int, numeric: bool):
    if vb is None:
        return None
    if isinstance(vb, (pd.Series, pd.DataFrame, pd.Index)):
        vb = vb.to_numpy()
    vb = np.asarray(vb)
    if vb.ndim == 2 and vb.shape[1] == 1:
        vb = vb.ravel()
    if vb.ndim != 1:
        raise ValueError(f"{spec.estimator}: {what} must be 1-D, got shape {vb.shape}")
    if len(vb) != n:
        raise MisalignedBlocksError(
            f"{spec.estimator}: row block {index} of X has {n} rows but the matching block of "
            f"{what} has {len(vb)}; {what} is not aligned with X. Pass {what} with the same "
            "partitioning as X (or as a column name of X's dataframe).")
    if numeric:
        if vb.dtype.kind in "OSU":
            try:
                vb = vb.astype(np.float64)
            except (TypeError, ValueError):
                raise TypeError(f"{spec.estimator}: {what} must be numeric") from None
        if vb.dtype.kind == "f":
            _check_finite(vb, what, spec, index, allow_nan=False)
    else:
        if vb.dtype.kind == "f" and not np.isfinite(vb).all():
            bad = "NaN" if np.isnan(vb).any() else "infinity"
            raise ValueError(f"{spec.estimator}: Input {what} contains {bad} (row block {index}); "
                             f"every row needs a finite {what} value.")
        if vb.dtype.kind == "O" and pd.isna(vb).any():
            raise ValueError(f"{spec.estimator}: Input {what} contains missing values (row block "
                             f"{index}); every row needs a {what} value.")
    return vb


def extract_block(xb, yb, wb, spec: BlockSpec, index: int):
    """Validate one block of (X, y, sample_weight) and return the ``(X, y, w)`` tuple.

    This is what every block task of :func:`as_blocks` runs on the worker that holds the block,
    and what estimators call directly on local data (one block, ``index=0``) so that local and
    Dask input pass the same checks.

    Parameters
    ----------
    xb : ndarray or DataFrame
        The rows of X.
    yb, wb : array-like or None
        The matching rows of y and sample_weight.
    spec : BlockSpec
        What the block must look like.
    index : int
        Block index, quoted in error messages.

    Returns
    -------
    tuple
        ``(X, y, w)``; X a 2-D NumPy array when ``spec.numeric``, y and w 1-D arrays or None.

    Raises
    ------
    MisalignedBlocksError
        When y or w does not have as many rows as X.

    Examples
    --------
    >>> import numpy as np
    >>> xb, yb, wb = extract_block(np.ones((2, 3), dtype=np.int64), [0, 1], None, BlockSpec(), 0)
    >>> xb.dtype, yb.tolist(), wb
    (dtype('float64'), [0, 1], None)
    """
    if spec.numeric:
        xb = _as_numeric_block(xb, spec, index)
    elif not isinstance(xb, pd.DataFrame):
        xb = np.asarray(xb)
        if xb.ndim != 2:
            raise ValueError(f"{spec.estimator}: expected a 2-D block of X, got {xb.ndim}-D")
        if xb.dtype.kind == "c":
            # Estimators with their own value checks (trees, categorical NB) would otherwise
            # drop the imaginary part silently or report a misleading error.
            raise ValueError(f"{spec.estimator}: Complex data not supported; pass the real part "
                             "(X.real) or split real and imaginary parts into separate features")
    n = xb.shape[0]
    yb = _as_vector(yb, "y", n, spec, index, numeric=spec.y_numeric)
    wb = _as_vector(wb, "sample_weight", n, spec, index, numeric=True)
    return xb, yb, wb


def _extract_frame(part: pd.DataFrame, features, ycol, wcol, spec: BlockSpec, index: int,
                   yb=None, wb=None):
    """:func:`extract_block` of a dataframe partition: y/w from its columns or given."""
    if ycol is not None:
        yb = part[ycol]
    if wcol is not None:
        wb = part[wcol]
    return extract_block(part[features], yb, wb, spec, index)


#: Functions whose block task a standalone reduction runs inside its kernel task (see
#: :meth:`Blocks.map_parts`): pure, cheap validation whose output only that kernel reads.
_FUSABLE = {extract_block, _extract_frame}


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

    def persist(self, n_groups: int | None = None) -> "Blocks":
        """Keep the validated blocks in worker memory (for estimators that make several passes).

        Many blocks are held as groups of consecutive blocks, at least ``n_groups`` of them
        (default: two per worker thread of the current cluster), so that later passes run one
        task per group instead of one per block: at a thousand small blocks the scheduler's
        per-task cost, not the arithmetic, sets a pass's time. Results do not depend on the
        grouping (see :mod:`dml._block_groups`).
        """
        from dml._block_groups import Groups, collect, default_n_groups, group_size

        if self.groups is not None:
            return self
        n = len(self.parts)
        size = group_size(n, default_n_groups() if n_groups is None else n_groups)
        if size == 1:
            return replace(self, parts=list(dask.persist(*self.parts)))
        bounds = [*range(0, n, size), n]
        name = new_name("group-blocks")
        deps: list = []
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
                    refs.append(_ref(p, deps))
            layer[(name, g)] = Task((name, g), collect, *refs)
        graph = _graph(name, layer, deps)
        objects = dask.persist(*[Delayed((name, g), graph, layer=name) for g in range(len(layer))])
        groups = Groups(objects, bounds, size)
        return replace(self, parts=groups.block_parts(), groups=groups)

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
        """
        name = new_name(f"{getattr(kernel, '__name__', 'kernel')}-block")
        deps: list = []
        args = tuple(_as_argument(broadcast(a), deps) for a in args)
        if self.groups is not None:
            return self.groups.map_blocks(kernel, with_index, args, deps, name)
        layer = {}
        for i, p in enumerate(self.parts):
            task = _fusable_task(p) if fuse else None
            if task is not None:
                ref = Task(None, task.func, *task.args, **task.kwargs)
                deps.extend(_task_deps(p, task))
            else:
                ref = _ref(p, deps)
            key = (name, i)
            layer[key] = Task(key, _call, kernel, with_index, ref, i, *args)
        graph = _graph(name, layer, deps)
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
            task_args = tuple(_as_argument(broadcast(a), deps) for a in args)
            out = self.groups.reduce(kernel, with_index, task_args, deps, combine,
                                     f"{getattr(kernel, '__name__', 'kernel')}-group")
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

    def map_blocks(self, kernel: Callable, *args, dtype, tail_shape: tuple = ()) -> da.Array:
        """Lazily apply ``kernel(X_block, *args)`` per block; the results form a Dask array.

        The kernel returns an array with one row per row of the block and trailing shape
        ``tail_shape`` (``()`` for a vector).
        """
        known = self.known_lengths is not None
        outs = self.map_parts(_x_only, kernel, *args)
        pieces = [da.from_delayed(o, shape=((int(self.known_lengths[i]) if known else np.nan),
                                             *tail_shape), dtype=dtype)
                  for i, o in enumerate(outs)]
        return da.concatenate(pieces, axis=0) if len(pieces) > 1 else pieces[0]


def _task_deps(part: Delayed, task: Task) -> list:
    """Collections standing for the inputs of a fused block task (for the graph merge)."""
    return [_Keyed(part.__dask_graph__(), k) for k in task.dependencies]


class _Keyed:
    """A key of an existing graph, as a dependency for :func:`_graph`."""

    __slots__ = ("_graph", "_key")

    def __init__(self, graph, key):
        self._graph, self._key = graph, key

    def __dask_graph__(self):
        return self._graph

    def __dask_layers__(self):
        # The layers of the graph the fused task read from: all of them (culled at compute).
        return tuple(self._graph.layers)


def _x_only(xb, yb, wb, kernel, *args):
    return kernel(xb, *args)


def _block_len(part) -> int:
    return int(part[0].shape[0])


# --------------------------------------------------------------------------------------------
# Building blocks from user input
# --------------------------------------------------------------------------------------------

def column_names(columns) -> np.ndarray | None:
    """``feature_names_in_`` of a dataframe's columns: an object array when all are strings.

    As in scikit-learn, non-string column names record no feature names (None).

    Examples
    --------
    >>> column_names(["a", "b"]), column_names([0, 1])
    (array(['a', 'b'], dtype=object), None)
    """
    names = list(columns)
    if names and all(isinstance(c, str) for c in names):
        return np.asarray(names, dtype=object)
    return None


def _lengths_of(obj) -> np.ndarray | None:
    """Known partition lengths of a Dask collection, or None."""
    if isinstance(obj, da.Array):
        rows = obj.chunks[0]
        return None if any(np.isnan(r) for r in rows) else np.asarray(rows, dtype=np.int64)
    return None


def compute_lengths(*objs) -> list[np.ndarray]:
    """Rows of every partition of several Dask collections, in one computation.

    Parameters
    ----------
    *objs : dask.array.Array, dask.dataframe.DataFrame or Series
        Row-partitioned collections (arrays by their first axis).

    Returns
    -------
    list of ndarray of int64
        One array of partition lengths per collection.

    Examples
    --------
    >>> import dask.array as da
    >>> [a.tolist() for a in compute_lengths(da.ones((5, 2), chunks=2))]
    [[2, 2, 1]]
    """
    tasks = []
    for o in objs:
        if isinstance(o, (dd.DataFrame, dd.Series)):
            tasks.append(o.map_partitions(len, meta=(None, "int64")))
        else:
            tasks.append(map_delayed(len, _delayed_parts(o)))
    results = compute(*tasks)
    return [np.asarray(list(r), dtype=np.int64) for r in results]


def _column_vector_warning(what: str) -> None:
    if what == "y":
        warnings.warn("A column-vector y was passed when a 1d array was expected. Please change "
                      "the shape of y to (n_samples,), for example using ravel().",
                      DataConversionWarning, stacklevel=4)


def _as_dask_vector(v, what: str):
    """y / sample_weight as a 1-D Dask array or Series (not yet aligned)."""
    if isinstance(v, dd.DataFrame):
        if len(v.columns) != 1:
            raise ValueError(f"{what} must be one column, got a dataframe with "
                             f"{len(v.columns)} columns")
        v = v[v.columns[0]]
    if isinstance(v, (dd.Series, da.Array)):
        if isinstance(v, da.Array):
            if v.ndim == 2 and v.shape[1] == 1:
                _column_vector_warning(what)
                v = v[:, 0]
            if v.ndim != 1:
                raise ValueError(f"{what} must be 1-D, got a Dask array of shape {v.shape}")
        return v
    if isinstance(v, (pd.Series, pd.DataFrame)):
        v = v.to_numpy()
    v = np.asarray(v)
    if v.ndim == 2 and v.shape[1] == 1:
        _column_vector_warning(what)
        v = v.ravel()
    if v.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {v.shape}")
    return v


def _to_array(v, lengths: np.ndarray | None):
    """A vector (NumPy, Dask array or Series) as a Dask array with the given row chunks."""
    if isinstance(v, dd.Series):
        return v.to_dask_array(lengths=list(lengths) if lengths is not None else None)
    if isinstance(v, da.Array):
        return with_known_rows(v, lengths)
    return da.from_array(v, chunks=(tuple(lengths),) if lengths is not None else -1, name=False)


def with_known_rows(arr: da.Array, lengths) -> da.Array:
    """``arr`` with unknown (NaN) row chunks labelled with their computed lengths.

    ``lengths`` come from :func:`compute_lengths` of this very array; ``arr`` is returned
    unchanged when its row chunks are already known (or ``lengths`` is None).

    Dask cannot rechunk along a dimension of unknown chunk sizes, but the lengths computed from
    these very blocks describe them exactly, so the array is only relabelled (nothing computed).
    """
    if lengths is None or not any(np.isnan(c) for c in arr.chunks[0]):
        return arr
    return da.Array(arr.dask, arr.name, (tuple(int(r) for r in lengths),) + arr.chunks[1:],
                    meta=arr._meta)


def check_x_layout(X, name: str = "estimator"):
    """Client-side checks of X's type and shape (no data is read); returns X, array-likes as NumPy.

    Raises the errors that need no look at the values: wrong type, 1-D/3-D X, no features.
    """
    if isinstance(X, (list, tuple)) or (
            not isinstance(X, (np.ndarray, pd.DataFrame, da.Array, dd.DataFrame, pd.Series,
                               dd.Series)) and hasattr(X, "__array__")
            and not hasattr(X, "tocsr")):
        X = np.asarray(X)
    if not isinstance(X, (np.ndarray, pd.DataFrame, da.Array, dd.DataFrame)):
        if isinstance(X, (pd.Series, dd.Series)):
            raise ValueError(f"{name}: expected 2-D X (one row per sample), got a Series. Pass a "
                             "one-column DataFrame instead, e.g. X.to_frame().")
        if hasattr(X, "toarray") or hasattr(X, "tocsr"):
            raise TypeError(f"{name}: sparse matrices are not supported yet; pass a dense "
                            "array or a Dask array.")
        raise TypeError(f"{name}: X must be a NumPy array, pandas DataFrame, Dask array or Dask "
                        f"DataFrame, got {type(X).__name__}")
    if isinstance(X, (np.ndarray, da.Array)):
        if X.ndim == 1:
            raise ValueError(
                f"{name}: expected a 2-D X, got a 1-D array of shape {X.shape}. Reshape your "
                "data with X.reshape(-1, 1) if it has a single feature or X.reshape(1, -1) if it "
                "is a single sample.")
        if X.ndim != 2:
            raise ValueError(f"{name}: expected a 2-D X, got a {X.ndim}-D array of shape "
                             f"{X.shape}")
    n_features = len(X.columns) if isinstance(X, (pd.DataFrame, dd.DataFrame)) else X.shape[1]
    if n_features == 0:
        # scikit-learn's wording, which its estimator checks look for.
        raise ValueError(f"{name}: Found array with 0 feature(s) (shape={tuple(X.shape)}) while "
                         "a minimum of 1 is required.")
    return X


def as_blocks(X, y=None, sample_weight=None, *, spec: BlockSpec | None = None,
              block_rows: int | None = None, require_y: bool = False) -> Blocks:
    """Check X (and y, sample_weight) and cut them into aligned row blocks.

    Parameters
    ----------
    X : ndarray, DataFrame, dask.array.Array or dask.dataframe.DataFrame, shape (n, d)
        Dask arrays keep their row chunks (columns are put into one chunk); Dask dataframes
        keep their partitions. Local data is cut into blocks of ``block_rows`` rows (default:
        about 128 MiB per block).
    y, sample_weight : array-like, Series, Dask array/Series, str or None
        One entry per row of X. A string names a column of X's dataframe; that column is then
        not a feature. Realigned to X's row blocks when partitioned differently.
    spec : BlockSpec, optional
        Validation applied to every block on the worker that holds it.
    block_rows : int, optional
        Rows per block when X is local data.
    require_y : bool, default False
        Raise when y is None (supervised estimators).

    Returns
    -------
    Blocks
    """
    spec = spec or BlockSpec()
    name = spec.estimator
    if require_y and y is None:
        raise ValueError(f"{name} requires y to be passed, but the target y is None")
    X = check_x_layout(X, name)
    local = isinstance(X, (np.ndarray, pd.DataFrame))
    ycol = y if isinstance(y, str) else None
    wcol = sample_weight if isinstance(sample_weight, str) else None
    if (ycol or wcol) and not isinstance(X, (pd.DataFrame, dd.DataFrame)):
        raise TypeError(f"{name}: y/sample_weight given as a column name "
                        f"({ycol or wcol!r}) but X is not a DataFrame")

    # ---- a dataframe with target/weight columns stays one collection: one read per block ----
    if isinstance(X, (pd.DataFrame, dd.DataFrame)):
        missing = [c for c in (ycol, wcol) if c is not None and c not in X.columns]
        if missing:
            raise ValueError(f"{name}: column(s) {missing} not found in X; available columns: "
                             f"{list(X.columns)}")
        features = [c for c in X.columns if c not in (ycol, wcol)]
        if not features:
            raise ValueError(f"{name}: X has no feature columns left")
        if spec.numeric:
            bad = [c for c in features if not is_numeric_dtype(X.dtypes[c])]
            if bad:
                raise TypeError(_non_numeric_message(bad, spec))
        feature_names = column_names(features)
        dtypes = X.dtypes[features]
        if isinstance(X, pd.DataFrame):
            X = dd.from_pandas(X, npartitions=_n_local_blocks(len(X), len(features), block_rows),
                               sort=False)
        yv = None if (y is None or ycol) else _as_dask_vector(y, "y")
        wv = None if (sample_weight is None or wcol) else _as_dask_vector(sample_weight,
                                                                           "sample_weight")
        if yv is None and wv is None:
            xparts = X[features + [c for c in (ycol, wcol) if c]].to_delayed()
            parts = _extract_parts(xparts, None, None, spec, (features, ycol, wcol))
            return Blocks(parts, len(features), feature_names, local, spec,
                          has_y=y is not None, has_weight=sample_weight is not None,
                          dtypes=dtypes)
        # Separate y or weights: align them to X's partitions by row counts.
        return _aligned_blocks(X, features, ycol, wcol, yv, wv, spec, feature_names, local,
                               dtypes, y is not None, sample_weight is not None)

    # ---- arrays ----
    n_features = int(X.shape[1])
    if isinstance(X, np.ndarray):
        rows = block_rows or default_block_rows(n_features, max(X.dtype.itemsize, 1))
        # name=False: a random key instead of hashing all of X (as long as a small fit).
        X = da.from_array(X, chunks=(min(rows, max(len(X), 1)), n_features), name=False)
    elif len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    yv = None if y is None else _as_dask_vector(y, "y")
    wv = None if sample_weight is None else _as_dask_vector(sample_weight, "sample_weight")
    return _aligned_blocks(X, None, None, None, yv, wv, spec, None, local, None,
                           y is not None, sample_weight is not None)


def _n_local_blocks(n: int, d: int, block_rows: int | None) -> int:
    rows = block_rows or default_block_rows(max(d, 1))
    return max(1, -(-n // rows))


def _npartitions(obj) -> int | None:
    if isinstance(obj, (dd.DataFrame, dd.Series)):
        return obj.npartitions
    if isinstance(obj, da.Array):
        return len(obj.chunks[0])
    return None  # local: one piece


def _delayed_parts(obj) -> list:
    """One Delayed per row partition of a Dask collection."""
    if isinstance(obj, (dd.DataFrame, dd.Series)):
        return list(obj.to_delayed(optimize_graph=False))
    # optimize_graph=False keeps the keys that X, y and w share (e.g. y derived from X), so a
    # common source is computed once.
    return list(obj.to_delayed(optimize_graph=False)[(slice(None),) + (0,) * (obj.ndim - 1)])


def _aligned_blocks(X, features, ycol, wcol, yv, wv, spec, feature_names, local, dtypes,
                    has_y, has_w, force_lengths: bool = False) -> Blocks:
    """Blocks from X plus separately given y / sample_weight, realigned to X's rows.

    Row counts are only computed when they are needed: when y/sample_weight are partitioned
    differently from X and some partition lengths are unknown. Collections with the same number
    of partitions but unknown lengths (typically columns of one dataframe, or a transform's
    output and the target of the same frame) are paired partition by partition without an extra
    pass; the per-block check in :func:`extract_block` then catches any misalignment with a clear error.
    """
    name = spec.estimator
    frame = isinstance(X, dd.DataFrame)
    if frame:
        X = X[features + [c for c in (ycol, wcol) if c]]
    vectors = [v for v in (yv, wv) if v is not None]
    known = {id(o): (_lengths_of(o) if isinstance(o, da.Array) else
                     (np.asarray([len(o)]) if isinstance(o, np.ndarray) else None))
             for o in [X, *vectors]}
    unknown = [o for o in [X, *vectors] if known[id(o)] is None]
    paired = (not force_lengths and bool(unknown)
              and all(_npartitions(v) == _npartitions(X) for v in vectors))
    if paired:
        xparts = _delayed_parts(X)
        ys = _delayed_parts(yv) if yv is not None else None
        ws = _delayed_parts(wv) if wv is not None else None
        xlens = known[id(X)]
    else:
        if unknown:
            for o, lens in zip(unknown, compute_lengths(*unknown)):
                known[id(o)] = lens
        xlens = known[id(X)]
        n = int(xlens.sum())
        for v, what in ((yv, "y"), (wv, "sample_weight")):
            if v is not None and int(known[id(v)].sum()) != n:
                raise ValueError(f"{name}: X has {n} rows but {what} has "
                                 f"{int(known[id(v)].sum())}; {what} needs one entry per row "
                                 "of X.")

        def aligned(v):
            if v is None:
                return None
            arr = _to_array(v, known[id(v)] if not isinstance(v, np.ndarray) else None)
            if tuple(arr.chunks[0]) != tuple(xlens):
                arr = arr.rechunk((tuple(int(r) for r in xlens),))
            return _delayed_parts(arr)

        ys, ws = aligned(yv), aligned(wv)
        if not frame:
            X = with_known_rows(X, xlens)
            if tuple(X.chunks[0]) != tuple(xlens):
                X = X.rechunk((tuple(int(r) for r in xlens), X.shape[1]))
        xparts = _delayed_parts(X)
    parts = _extract_parts(xparts, ys, ws, spec, (features, ycol, wcol) if frame else None)
    n_features = len(features) if frame else int(X.shape[1])
    realign = None
    if paired and vectors:
        def realign():
            return _aligned_blocks(X, features, ycol, wcol, yv, wv, spec, feature_names, local,
                                   dtypes, has_y, has_w, force_lengths=True)
    return Blocks(parts, n_features, feature_names, local, spec, has_y=has_y, has_weight=has_w,
                  dtypes=dtypes,
                  known_lengths=None if xlens is None else np.asarray(xlens, dtype=np.int64),
                  _realign=realign)


def _extract_parts(xparts, ys, ws, spec: BlockSpec, frame: tuple | None) -> list[Delayed]:
    """One validation task per block: :func:`extract_block` (or its dataframe form).

    The layer name is a hash of the input keys and the spec, so the same input gives the same
    blocks (as ``delayed(pure=True)`` did) without tokenising every task.
    """
    name = "extract-block-" + tokenize(
        [p.key for p in xparts], None if ys is None else [p.key for p in ys],
        None if ws is None else [p.key for p in ws], spec, frame)
    deps: list = []
    layer = {}
    for i, xp in enumerate(xparts):
        key = (name, i)
        x = _ref(xp, deps)
        yb = _ref(ys[i], deps) if ys is not None else None
        wb = _ref(ws[i], deps) if ws is not None else None
        if frame is not None:
            layer[key] = Task(key, _extract_frame, x, *frame, spec, i, yb, wb)
        else:
            layer[key] = Task(key, extract_block, x, yb, wb, spec, i)
    graph = _graph(name, layer, deps)
    return [Delayed((name, i), graph, layer=name) for i in range(len(xparts))]
