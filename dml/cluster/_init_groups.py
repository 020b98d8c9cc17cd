"""The initialisations of :mod:`._init` with one task per group of blocks and step.

Prepared data held in groups of blocks (or in placement groups of blocks held one by one, see
:class:`~._prepared.Prepared`) runs each step of an initialisation as one task per group, which
applies :mod:`._init`'s per-block kernel to each of its blocks (each block's distances stay in
that task's result, on the worker), and one task that combines the per-block results in the
fixed tree of :func:`dml._blocks.tree_reduce` (:func:`~._prepared.tree_combine`, in block
order). So the numbers are those of the per-block graphs of :mod:`._init`, bit for bit, while
the tasks per step grow with the groups, not the blocks: k-means|| on 64 blocks was ~3,100
tasks (7.5 s on an in-process cluster for 2,048 rows), a task per block and round.

``groups`` is a list of ``(group input, block indices)``: what one task reads (a held group
object, or the list of the group's block parts) and the blocks it holds, in order.
"""
from __future__ import annotations

import functools

import numpy as np
from dask import delayed

from dml._graph import tree_add
from dml.cluster import _init
from dml.cluster._init import stream_key

__all__ = ["random_init", "kmeans_plusplus_init", "kmeans_parallel_candidates"]


# --------------------------------------------------------------------------------------------
# Group tasks: a per-block kernel of _init on each block of a group, results in block order
# --------------------------------------------------------------------------------------------

def _tops(parts, key: int, starts, m: int):
    return [_init._top_rows(p, None, key, int(s), m) for p, s in zip(parts, starts)]


def _update(parts, states, centres):
    return [_init._update(p, None if states is None else states[j][0], centres)
            for j, p in enumerate(parts)]


def _oversample(parts, states, phi: float, ell: float, key: int, starts):
    return [_init._oversample(p, st[0], phi, ell, key, int(s))
            for p, st, s in zip(parts, states, starts)]


def _nearest_weights(parts, candidates):
    return [_init._nearest_weights(p, candidates) for p in parts]


def _update_and_pick(parts, states, centre, key: int, starts, trials: int):
    return [_init._update_and_pick(p, None if states is None else states[j][0], centre, key,
                                   int(s), trials)
            for j, (p, s) in enumerate(zip(parts, starts))]


def _potentials(parts, states, candidates):
    return [_init._potentials(p, st[0], candidates) for p, st in zip(parts, states)]


def _combined(combine, field, index, *group_results):
    """The per-block results of all groups (entry ``field`` of each, or the whole result),
    put back in block order and combined in :func:`~dml._blocks.tree_reduce`'s fixed tree."""
    from dml.cluster._prepared import in_block_order, tree_combine

    pick = None if field is None else (lambda r: r[field])
    return tree_combine(in_block_order(index, group_results, pick), combine)


# --------------------------------------------------------------------------------------------
# Graph builders (return Delayed), as in _init
# --------------------------------------------------------------------------------------------

def _layout(groups, offsets):
    index = [list(g) for _, g in groups]
    starts = [[int(offsets[i]) for i in g] for g in index]
    return [inp for inp, _ in groups], index, starts


def _merged_tops(inputs, index, starts, key: int, m: int):
    tops = [delayed(_tops, pure=True)(inp, key, s, m) for inp, s in zip(inputs, starts)]
    return delayed(_combined, pure=True)(functools.partial(_init._merge_top, m=m), None, index,
                                         *tops)


def random_init(groups, offsets, k: int, seed: int):
    """:func:`._init.random_init` over groups of blocks."""
    inputs, index, starts = _layout(groups, offsets)
    return delayed(_init._x_of, pure=True)(
        _merged_tops(inputs, index, starts, stream_key(seed, "kmeans-random"), k))


def kmeans_plusplus_init(groups, offsets, k: int, seed: int, n_local_trials: int | None = None):
    """:func:`._init.kmeans_plusplus_init` over groups of blocks."""
    inputs, index, starts = _layout(groups, offsets)
    trials = n_local_trials or 2 + int(np.log(k))
    centre = delayed(_init._first_x, pure=True)(
        _merged_tops(inputs, index, starts, stream_key(seed, "kmeans++", 0), 1))
    centres = [centre]
    states = [None] * len(inputs)
    for j in range(1, k):
        key = stream_key(seed, "kmeans++", j)
        states = [delayed(_update_and_pick, pure=True)(inp, st, centre, key, s, trials)
                  for inp, st, s in zip(inputs, states, starts)]
        candidates = delayed(_init._x_of, pure=True)(delayed(_combined, pure=True)(
            functools.partial(_init._merge_top, m=trials), 1, index, *states))
        if trials > 1:
            pots = delayed(_combined, pure=True)(tree_add, None, index, *[
                delayed(_potentials, pure=True)(inp, st, candidates)
                for inp, st in zip(inputs, states)])
            centre = delayed(_init._best_candidate, pure=True)(candidates, pots)
        else:
            centre = delayed(_init._first_row, pure=True)(candidates)
        centres.append(centre)
    return delayed(_init._stack, pure=True)(centres)


def kmeans_parallel_candidates(groups, offsets, ell: float, rounds: int, seed: int):
    """:func:`._init.kmeans_parallel_candidates` over groups of blocks."""
    inputs, index, starts = _layout(groups, offsets)
    first = delayed(_init._as_matrix, pure=True)(delayed(_init._first_x, pure=True)(
        _merged_tops(inputs, index, starts, stream_key(seed, "kmeans||", 0), 1)))
    chosen = [first]
    states = [delayed(_update, pure=True)(inp, None, first) for inp in inputs]
    for r in range(1, rounds + 1):
        phi = delayed(_combined, pure=True)(tree_add, 1, index, *states)
        key = stream_key(seed, "kmeans||", r)
        sampled = [delayed(_oversample, pure=True)(inp, st, phi, ell, key, s)
                   for inp, st, s in zip(inputs, states, starts)]
        new = delayed(_combined, pure=True)(_init._concat_rows, None, index, *sampled)
        chosen.append(new)
        if r < rounds:
            states = [delayed(_update, pure=True)(inp, st, new)
                      for inp, st in zip(inputs, states)]
    candidates = delayed(_init._concat_rows, pure=True)(chosen)
    weights = delayed(_combined, pure=True)(tree_add, None, index, *[
        delayed(_nearest_weights, pure=True)(inp, candidates) for inp in inputs])
    return delayed(_init._pair, pure=True)(candidates, weights)
