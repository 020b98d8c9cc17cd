"""How the blocks of a fit are walked: streams, rounds and the tasks that run them.

Partition-parallel SGD runs several models side by side and combines them. How many, and how
often they are combined, decides how much a model learns per epoch; how the work is cut into
Dask tasks decides what a round costs. The two are kept apart here:

* A **stream** is a run of consecutive blocks walked in order by one model: each block's rows in
  that block's own shuffled order (``block_rng(seed, "shuffle", epoch, block)``), one block after
  the other. A stream's epoch is the concatenation of those rows cut into mini-batches of
  ``batch_size`` rows: a batch may take the tail of one block and the head of the next, so a
  stream of ``n`` rows takes ``ceil(n / batch_size)`` steps however many blocks it walks, and
  only its last batch is short. :func:`make_streams` cuts the blocks into streams of at least
  ``stream_steps`` mini-batch steps per epoch each, so the sequential depth of a stream — the
  number of steps one model takes per epoch — does not shrink when the data comes in more,
  smaller partitions. The number of streams (the parallel width) therefore grows with the
  number of rows, not with the number of partitions: ``n_rows / (stream_steps · batch_size)``
  streams at most.
* A **round** is a segment of every stream's epoch: each stream takes up to ``local_steps``
  steps from the round's starting parameters, then the streams' results are combined
  (:mod:`dml.optim.engine` says how). :func:`round_plans` lays out an epoch's rounds.
* A **task group** is a run of consecutive streams computed by one Dask task per round
  (:func:`group_size`). The streams' results are summed in a fixed binary tree; groups are
  aligned subtrees of it (``2**k`` consecutive streams starting at a multiple of ``2**k``), so a
  group's partial sum is bit for bit the value the tree has at that node and the client finishes
  the tree over the groups' values: the model does not depend on the grouping, which is chosen
  from the cluster's size to keep a round's task count near the number of worker threads rather
  than the number of blocks.

Everything here depends only on the block lengths and the configuration, never on the cluster,
except the grouping, which does not change any number.
"""
from __future__ import annotations

import collections
import functools
import threading
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dml._graph import reduce_levels, tree_depth
from dml._random import block_rng

__all__ = ["StreamLayout", "make_streams", "RoundSpec", "round_plans", "group_size",
           "subtree_reduce", "tree_levels", "SPLIT_EVERY", "JOINED", "round_order", "EqualShares",
           "StreamRanges", "spread_order", "join_streams", "block_order", "task_groups",
           "join_in_place", "join_rows_in_place", "stream_layout"]

#: Fan-in of the reduction tree over the streams: binary, so task groups can be any power of two
#: (finer than powers of 8 for balancing a few dozen streams over a cluster's threads).
SPLIT_EVERY = 2


@dataclass(frozen=True)
class StreamLayout:
    """Streams as runs of consecutive blocks.

    Attributes
    ----------
    starts : tuple of int
        First block of every stream, plus the number of blocks at the end: stream ``s`` walks
        the blocks ``starts[s] .. starts[s + 1] - 1``.
    block_steps : tuple of int
        ``ceil(rows / batch_size)`` of every block (what the block alone would take).
    block_rows : tuple of int
        Training rows of every block.
    batch_size : int
        Rows per mini-batch.
    """

    starts: tuple
    block_steps: tuple
    block_rows: tuple
    batch_size: int

    @property
    def n_streams(self) -> int:
        return len(self.starts) - 1

    def blocks(self, s: int) -> range:
        return range(self.starts[s], self.starts[s + 1])

    def steps(self, s: int) -> int:
        """Mini-batch steps per epoch of stream ``s``: its rows cut into batches across its
        blocks' boundaries."""
        return -(-self.rows(s) // self.batch_size)

    def rows(self, s: int) -> int:
        return int(sum(self.block_rows[b] for b in self.blocks(s)))

    @functools.cached_property
    def all_rows(self) -> np.ndarray:
        """:meth:`rows` of every stream (int64, computed once: planners ask for them per
        round, and 10,000 streams made that the cost of planning)."""
        ends = np.concatenate([[0], np.cumsum(self.block_rows, dtype=np.int64)])
        starts = np.asarray(self.starts, dtype=np.intp)
        out = ends[starts[1:]] - ends[starts[:-1]]
        out.flags.writeable = False
        return out

    @functools.cached_property
    def all_steps(self) -> np.ndarray:
        """:meth:`steps` of every stream (int64, computed once)."""
        out = -(-self.all_rows // self.batch_size)
        out.flags.writeable = False
        return out

    def segments(self, s: int, first: int, last: int) -> list:
        """``[(block, lo, hi)]``: the rows of stream steps ``first .. last - 1`` of stream
        ``s``, in order, as ranges of positions in each block's epoch order (rows ``lo .. hi - 1``
        of the block's permutation). Steps are ``batch_size`` consecutive stream rows, so a range
        may start or end inside a batch that continues in the neighbouring block.

        Examples
        --------
        >>> layout = make_streams([5, 5, 5], batch_size=4, stream_steps=None)
        >>> layout.segments(0, 0, 2)
        [(0, 0, 5)]
        >>> make_streams([5, 5, 5], batch_size=4, stream_steps=4).segments(0, 1, 3)
        [(0, 4, 5), (1, 0, 5), (2, 0, 2)]
        """
        a, e = first * self.batch_size, last * self.batch_size
        out = []
        offset = 0
        for b in self.blocks(s):
            n = self.block_rows[b]
            lo, hi = max(a - offset, 0), min(e - offset, n)
            if lo < hi:
                out.append((b, lo, hi))
            offset += n
            if offset >= e:
                break
        return out


def stream_layout(lengths, batch_size: int, stream_steps: int | None) -> StreamLayout:
    """:func:`make_streams`, worked out once per fit (:func:`dml._graph.fit_memo`): holding the
    blocks, preparing them and the engine all need the layout of the same lengths."""
    from dml._graph import fit_memo

    lengths = tuple(int(n) for n in lengths)
    return fit_memo(("stream-layout", lengths, int(batch_size), stream_steps),
                    lambda: make_streams(lengths, batch_size, stream_steps))


def make_streams(lengths, batch_size: int, stream_steps: int | None) -> StreamLayout:
    """Cut consecutive blocks into streams of about ``stream_steps`` steps per epoch each, as
    equal in rows as the block boundaries allow.

    Stream ``k`` of ``W`` ends at the block boundary nearest to ``(k + 1) · rows / W``, every
    stream holding at least one block; ``W`` is the largest number up to ``⌊rows / need⌋``
    (``need``: the rows of ``stream_steps`` batches; batches run across block boundaries:
    :meth:`StreamLayout.segments`) for which the shortest stream has at least :data:`BALANCE`
    of the longest one's rows (one stream always qualifies, and so does one stream per block:
    blocks of ``need`` rows or more are each a stream). Streams of equal length matter:
    averaged rounds (:mod:`dml.optim.engine`) need every stream in every round, and a stream
    left to walk on alone after the others have ended would decide the model by itself
    (docs/partition_parallel_sgd.md, "Streams of equal length"). ``stream_steps=None`` makes
    every block a stream (the layout of plain local SGD).

    Examples
    --------
    >>> make_streams([100, 100, 100, 100, 30], batch_size=10, stream_steps=20).starts
    (0, 2, 5)
    >>> make_streams([500, 10], batch_size=10, stream_steps=20).starts
    (0, 2)
    >>> make_streams([100, 100], batch_size=10, stream_steps=None).starts
    (0, 1, 2)
    >>> make_streams([750] * 32, batch_size=32, stream_steps=128).starts  # 7, 6, 6, 7, 6 blocks
    (0, 6, 13, 19, 26, 32)
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    B = int(batch_size)
    steps = -(-lengths // B)
    n = len(lengths)
    if stream_steps is None:
        starts = list(range(n + 1))
    else:
        # A stream of `need` rows fills stream_steps batches (its last one may be short).
        need = (int(stream_steps) - 1) * B + 1
        ends = np.cumsum(lengths)
        total = int(ends[-1]) if n else 0
        starts = [0, n]
        for W in range(min(n, total // need), 0, -1):
            starts = _balanced_starts(ends, W)
            rows = np.diff(np.concatenate([[0], ends[np.array(starts[1:]) - 1]]))
            # One block per stream cannot be evened out: blocks of `need` rows or more stay
            # streams of their own (so a fold's blocks cut as the whole data's do).
            if W == n and lengths.min() >= need or rows.min() >= BALANCE * rows.max():
                break
    return StreamLayout(tuple(int(s) for s in starts), tuple(int(s) for s in steps),
                        tuple(int(n) for n in lengths), B)


#: The shortest stream has at least this fraction of the longest one's rows: the most streams
#: for which the block boundaries allow that.
BALANCE = 0.75


def _balanced_starts(ends, W: int) -> list:
    """Start blocks of ``W`` streams (and the end), each stream ending at the block boundary
    nearest to its equal share of the rows (``ends``: cumulative block rows); every stream
    holds at least one block."""
    n = len(ends)
    total = float(ends[-1])
    starts = [0]
    for k in range(1, W):
        target = k * total / W
        b = int(np.searchsorted(ends, target))  # first block whose end reaches the target
        if b > 0 and target - ends[b - 1] <= ends[min(b, n - 1)] - target:
            b -= 1
        starts.append(min(max(b + 1, starts[-1] + 1), n - (W - k)))
    starts.append(n)
    return starts


@dataclass(frozen=True)
class RoundSpec:
    """One round of an epoch: which stream steps it covers and how the streams are weighted."""

    #: Stream steps ``first .. first + local_steps - 1`` (each stream stops at its own end).
    first: int
    local_steps: int
    #: Per stream: its share of the round's rows (0: the stream has no steps left).
    weights: tuple
    #: Per stream: steps it takes in this round.
    taken: tuple
    #: Per stream: its first step in this round (empty: ``first`` for every stream).
    firsts: tuple = ()

    @property
    def total_steps(self) -> int:
        return int(sum(self.taken))

    def span(self, s: int) -> tuple[int, int]:
        """Stream ``s``'s steps in this round: ``first .. last - 1``."""
        first = self.firsts[s] if self.firsts else self.first
        return first, first + self.taken[s]


@dataclass(frozen=True)
class EqualShares:
    """Rounds in which every stream walks the same share of its epoch: in round ``r`` of
    ``rounds``, a stream of ``n`` steps takes its steps ``⌊n r / rounds⌋ .. ⌊n (r + 1) /
    rounds⌋ − 1``. Streams of different lengths then take part in every round and end in the
    same one (averaged rounds: :mod:`dml.optim.engine`)."""

    rounds: int


@dataclass(frozen=True)
class StreamRanges:
    """Rounds in which ranges of streams walk their whole epoch, the streams taken in
    :func:`spread_order`: the round ending at ``ends[r]`` runs the streams at positions
    ``ends[r − 1] .. ends[r] − 1`` of that order (from 0), each all its steps, while the others
    sit out; the next round starts from their average. The first epoch of averaged rounds while
    the schedule's memory is short (:mod:`dml.optim.averaged_rounds`)."""

    ends: tuple


def spread_order(n: int) -> np.ndarray:
    """The streams ``0 .. n − 1`` in bit-reversed order: every prefix is spread evenly over the
    aligned power-of-two subtrees of the reduction tree, which are the task groups
    (:func:`task_groups`), so the few streams of a :class:`StreamRanges` round run on as many
    worker threads as they can.

    Examples
    --------
    >>> spread_order(6).tolist()
    [0, 4, 2, 1, 5, 3]
    """
    if n <= 1:
        return np.arange(n)
    bits = int(n - 1).bit_length()
    idx = np.arange(1 << bits)
    rev = np.zeros_like(idx)
    for b in range(bits):
        rev |= ((idx >> b) & 1) << (bits - 1 - b)
    return rev[rev < n]


def round_plans(layout: StreamLayout, local_steps) -> list:
    """The rounds of one epoch: every stream takes ``local_steps`` steps per round (None: its
    whole epoch in one round; a tuple: round ``r`` takes ``local_steps[r]`` steps, the last
    length repeating; :class:`EqualShares`: each stream the same share of its own steps).
    Streams with no steps left sit out with weight 0; the others are weighted by their rows.

    Examples
    --------
    >>> layout = make_streams([10, 30, 20], batch_size=5, stream_steps=None)
    >>> [r.taken for r in round_plans(layout, 4)]
    [(2, 4, 4), (0, 2, 0)]
    >>> [r.taken for r in round_plans(layout, (1, 5))]
    [(1, 1, 1), (1, 5, 3)]
    >>> [(r.firsts, r.taken) for r in round_plans(layout, EqualShares(2))]
    [((0, 0, 0), (1, 3, 2)), ((1, 3, 2), (1, 3, 2))]
    """
    steps = layout.all_steps
    rows = layout.all_rows.astype(np.float64)
    if isinstance(local_steps, EqualShares):
        return _equal_share_rounds(steps, rows, max(int(local_steps.rounds), 1))
    if isinstance(local_steps, StreamRanges):
        return _range_rounds(steps, rows, local_steps.ends)
    longest = int(steps.max()) if len(steps) else 0
    if isinstance(local_steps, tuple):
        lengths = [max(int(n), 1) for n in local_steps] or [1]
    else:
        lengths = [max(longest if local_steps is None else int(local_steps), 1)]
    out = []
    first = 0
    while first < longest:
        L = lengths[min(len(out), len(lengths) - 1)]
        taken = np.clip(steps - first, 0, L)
        weights = _round_weights(rows, taken > 0)
        out.append(RoundSpec(first, L, weights, tuple(taken.tolist())))
        first += L
    return out


def _round_weights(rows, active) -> tuple:
    """Each active stream's share of the round's rows (the weight of its model in the round's
    average), 0 for the streams that sit the round out."""
    return tuple(np.where(active, rows / float(rows[active].sum()), 0.0).tolist())


def _equal_share_rounds(steps, rows, R: int) -> list:
    """:func:`round_plans` for :class:`EqualShares` (``R`` rounds)."""
    out = []
    for r in range(R):
        lo, hi = steps * r // R, steps * (r + 1) // R
        taken = hi - lo
        if not taken.any():
            continue
        weights = _round_weights(rows, taken > 0)
        out.append(RoundSpec(int(lo.min()), int(taken.max()), weights,
                             tuple(taken.tolist()), tuple(lo.tolist())))
    return out


def _range_rounds(steps, rows, ends) -> list:
    """:func:`round_plans` for :class:`StreamRanges`."""
    out, lo = [], 0
    order = spread_order(len(steps))
    for hi in ends:
        active = np.zeros(len(steps), dtype=bool)
        active[order[lo:hi]] = True
        taken = np.where(active, steps, 0)
        weights = _round_weights(rows, active)
        out.append(RoundSpec(0, int(taken.max()), weights, tuple(taken.tolist()),
                             (0,) * len(steps)))
        lo = hi
    return out


def group_size(n_streams: int, n_tasks: int) -> int:
    """Streams per task group: the largest power of :data:`SPLIT_EVERY` that still leaves at
    least ``n_tasks`` groups (1 when there are fewer streams than that), so groups are aligned
    subtrees of the reduction tree and every worker thread has work.

    Examples
    --------
    >>> group_size(1000, 8), group_size(58, 4), group_size(9, 4), group_size(3, 4)
    (128, 16, 2, 1)
    >>> group_size(58, 1)   # one task: one group of all streams
    64
    """
    g = 1
    while g < n_streams and -(-n_streams // (g * SPLIT_EVERY)) >= max(int(n_tasks), 1):
        g *= SPLIT_EVERY
    return g


def task_groups(n_streams: int, n_tasks: int) -> list:
    """The streams of every task group (:func:`group_size`), as ranges.

    Examples
    --------
    >>> task_groups(5, 2)      # groups of 4 streams (a power of 2) leave 2 groups
    [range(0, 4), range(4, 5)]
    """
    size = group_size(n_streams, n_tasks)
    return [range(a, min(a + size, n_streams)) for a in range(0, n_streams, size)]


def tree_levels(n: int) -> int:
    """Levels of the reduction tree over ``n`` leaves (none for one leaf)."""
    return tree_depth(n, SPLIT_EVERY) if n > 1 else 0


def subtree_reduce(values: list, combine, levels: int):
    """Reduce ``values`` (the leaves of one aligned subtree, in order) as the fixed tree does:
    ``levels`` levels of consecutive groups of :data:`SPLIT_EVERY`. ``None`` leaves are skipped
    by ``combine`` (:func:`dml._blocks.tree_add`)."""
    level = reduce_levels(list(values), combine, levels, SPLIT_EVERY)
    assert len(level) == 1
    return level[0]


#: Key of a stream's rows joined into one array in the object a group task reads
#: (:class:`dml.optim.engine.StreamRunner`, ``join=True``): ``parts[(JOINED, s)] = (X, Y, w)``.
JOINED = "stream"


#: Rows of the block orders :func:`block_order` keeps per worker process (8 bytes each).
ORDER_CACHE_ROWS = 2**21
_orders: collections.OrderedDict = collections.OrderedDict()
_orders_rows = [0]
_orders_lock = threading.Lock()


def block_order(seed: int, epoch: int, block: int, n: int) -> np.ndarray:
    """Block ``block``'s shuffled order of its ``n`` rows in ``epoch``:
    ``block_rng(seed, "shuffle", epoch, block).permutation(n)``, read-only.

    A block that straddles rounds is read by each of them, and most of a draw's cost is
    building the generator (tens of microseconds, against a few for the permutation of a few
    hundred rows): thousands of draws in a fit on a thousand blocks. So the worker process keeps
    the orders it drew last (up to :data:`ORDER_CACHE_ROWS` rows, least recently used out
    first); a kept order is the same array the draw gives. It is read-only, and numba types a
    read-only array apart from a writable one: a compiled kernel that takes the order gets a
    writable copy (as :func:`dml.optim.sparse_steps.lazy_sgd_steps` does), so it keeps the one
    signature the workers' warm-up compiles.

    Examples
    --------
    >>> a = block_order(0, 1, 3, 5)
    >>> b = block_rng(0, "shuffle", 1, 3).permutation(5)
    >>> a is block_order(0, 1, 3, 5), np.array_equal(a, b)
    (True, True)
    """
    key = (int(seed), int(epoch), int(block), int(n))
    with _orders_lock:
        order = _orders.get(key)
        if order is not None:
            _orders.move_to_end(key)
            return order
    order = block_rng(seed, "shuffle", epoch, block).permutation(n)
    order.setflags(write=False)
    if n <= ORDER_CACHE_ROWS // 4:
        with _orders_lock:
            if key not in _orders:
                _orders[key] = order
                _orders_rows[0] += n
                while _orders_rows[0] > ORDER_CACHE_ROWS:
                    _, old = _orders.popitem(last=False)
                    _orders_rows[0] -= len(old)
    return order


def round_order(layout: StreamLayout, s: int, plan) -> np.ndarray:
    """Positions in stream ``s``'s joined rows of the rows its steps of ``plan``'s round take,
    in order: every block's rows in the block's own epoch order, as
    :func:`dml.optim._round_kernels.stream_steps_run` walks them block by block.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> layout = make_streams([3, 3, 3], batch_size=2, stream_steps=4)
    >>> layout.starts                                  # one stream of three 3-row blocks
    (0, 3)
    >>> plan = SimpleNamespace(seed=0, epoch=1, span=lambda s: (1, 3))
    >>> order = round_order(layout, 0, plan)           # steps 1, 2: rows 2 .. 5 of the stream
    >>> len(order), int(order[0]) < 3, sorted(order[1:].tolist()) == [3, 4, 5]
    (4, True, True)
    """
    pieces = []
    offset = 0
    segments = iter(layout.segments(s, *plan.span(s)))
    segment = next(segments, None)
    for b in layout.blocks(s):
        if segment is None:
            break
        n = layout.block_rows[b]
        if segment[0] == b:
            _, lo, hi = segment
            perm = block_order(plan.seed, plan.epoch, b, n)
            pieces.append(perm[lo:hi] + offset)
            segment = next(segments, None)
        offset += n
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


def join_streams(parts: dict, streams) -> dict:
    """``parts`` (``{block: (X, Y, w)}``) with the blocks of every stream ``(s, first block,
    end block)`` of ``streams`` joined into one array under ``(JOINED, s)``. A stream of one
    block keeps the block itself (no copy); streams with a sparse block keep their blocks.
    Blocks that are already consecutive views of one joined array (:func:`join_in_place`)
    give that array, without a copy."""
    out = {}
    for s, lo, hi in streams:
        pieces = [parts[b] for b in range(lo, hi)]
        if not all(isinstance(p[0], np.ndarray) for p in pieces):
            out.update((b, parts[b]) for b in range(lo, hi))
        else:
            out[(JOINED, s)] = (pieces[0] if len(pieces) == 1 else
                                _joined_already(pieces) or _join_rows(pieces))
    return out


def join_in_place(blocks, start: int, starts, rows_only: bool = False) -> tuple:
    """``blocks`` (consecutive blocks, the first block ``start``; ``starts``: the streams'
    first blocks, :attr:`StreamLayout.starts`) with the dense blocks of every stream joined
    into one array and given back as consecutive views of it: the same blocks, and
    :func:`join_streams` then takes the stream's rows without copying them. Held this way,
    a group of streams is both its blocks and its joined streams, in one copy of the rows.

    With ``rows_only`` only X is joined (y and w stay as they are): a classifier's validated
    blocks are held so while its classes are found, before y can be encoded. Rows that are
    already one array's consecutive views (joined so when held) are not copied again: the
    preparation then joins only the encoded y and the weights.

    Examples
    --------
    >>> blocks = [(np.full((2, 1), float(b)), np.zeros(2), None) for b in range(3)]
    >>> held = join_in_place(blocks, 0, (0, 3))            # one stream of three blocks
    >>> joined = join_streams(dict(enumerate(held)), [(0, 0, 3)])[(JOINED, 0)]
    >>> joined[0] is held[1][0].base, joined[0].ravel().tolist()
    (True, [0.0, 0.0, 1.0, 1.0, 2.0, 2.0])
    """
    out = list(blocks)
    end = start + len(blocks)
    first = int(np.searchsorted(starts, start, side="right")) - 1
    for s in range(max(first, 0), len(starts) - 1):
        lo, hi = max(starts[s], start), min(starts[s + 1], end)
        if lo >= end:
            break
        pieces = blocks[lo - start:hi - start]
        if hi - lo < 2 or not all(isinstance(p[0], np.ndarray) for p in pieces):
            continue
        Xs, Ys, ws = zip(*pieces)
        X = _whole(Xs)
        if X is None:
            X = np.concatenate(Xs)
        if not rows_only:
            Y, w = np.concatenate(Ys), None if ws[0] is None else np.concatenate(ws)
        offset = 0
        for j, p in enumerate(pieces):
            n = p[0].shape[0]
            out[lo - start + j] = ((X[offset:offset + n], p[1], p[2]) if rows_only else
                                   (X[offset:offset + n], Y[offset:offset + n],
                                    None if w is None else w[offset:offset + n]))
            offset += n
    return tuple(out)


def join_rows_in_place(blocks, start: int, starts) -> tuple:
    """:func:`join_in_place` of the rows X only (a group task's ``then``)."""
    return join_in_place(blocks, start, starts, rows_only=True)


def _whole(arrays):
    """The array ``arrays`` are consecutive row views of, covering all of it, or None."""
    base = arrays[0].base
    if not isinstance(base, np.ndarray) or base.ndim != arrays[0].ndim:
        return None
    at = base.__array_interface__["data"][0]
    rows = 0
    for a in arrays:
        if (a.base is not base or a.__array_interface__["data"][0] != at
                or a.shape[1:] != base.shape[1:] or a.strides != base.strides):
            return None
        at += a.shape[0] * base.strides[0]
        rows += a.shape[0]
    return base if rows == base.shape[0] else None


def _joined_already(pieces):
    """``(X, Y, w)`` of the joined array the pieces are views of (:func:`join_in_place`), or
    None when they are not."""
    Xs, Ys, ws = zip(*pieces)
    X, Y = _whole(Xs), _whole(Ys)
    if X is None or Y is None:
        return None
    if all(w is None for w in ws):
        return X, Y, None
    w = None if any(w is None for w in ws) else _whole(ws)
    return None if w is None else (X, Y, w)


def _join_rows(pieces):
    """``(X, Y, w)`` of row pieces (dense or CSR) one after the other: a mini-batch out of
    consecutive blocks, or the stacked search's blocks side by side."""
    Xs, Ys, ws = zip(*pieces)
    X = (sp.vstack(Xs, format="csr") if sp.issparse(Xs[0]) else np.concatenate(Xs))
    w = None if ws[0] is None else np.concatenate(ws)
    return X, np.concatenate(Ys), w
