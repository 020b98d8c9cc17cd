"""Level-wise growth of many histogram trees at once over persisted, binned row blocks.

The binned blocks are held in groups of consecutive blocks (:func:`dml._block_groups.
hold_in_groups`: a few per cluster, not one per block), and every step below is one task per
group, so a level costs the same few tasks at 8 blocks as at 1,024. Per level, for all open
nodes of all trees being grown together:

1. *route* (a task per group): the rows of the nodes split at the previous level move to a
   child; the node assignment of each of the group's blocks (rows × trees, int32) is a new
   persisted result, never a mutated worker state, so a retried task computes the same thing;
2. *histograms* (a task per group, then one per key range): each block counts the weighted
   class counts (classification) or ``(w, w·y, w·y²)`` (regression) of its rows in every open
   node, feature and bin; the blocks' results are summed in the fixed reduction tree over all
   blocks (:func:`dml._block_groups.range_reduce` inside a group, :func:`dml._block_groups.
   finish_tree` over the groups), so the sums, and the trees, are the same bit for bit however
   the blocks are grouped;
3. *split*: the best split of every open node, vectorised over nodes, features and bins.

When every node sees every feature (``max_features`` = all, e.g. a single tree), only the smaller
child of a pair of open siblings is counted; the other is the parent's histogram minus it, and
the split is found on the client, which keeps the parents' histograms. With per-node feature
sampling the siblings draw different features, so both are counted; then each key range of the
merged histograms is split on a worker (:func:`split_kernel`) and only the chosen splits travel.
At deep levels, when a node's rows are a smaller message than the blocks' histograms of it
(:func:`_rows_are_smaller`), the blocks send the rows and the split is found straight from them
(:func:`split_rows_kernel`).

Missing values (bin :data:`~dml.tree._binning.MISSING`): for every candidate threshold both
directions are scored and the missing rows go to the child with the higher gain (the learned
default direction). When a node had no missing values for the chosen feature, or both directions
score the same, missing values go to the child with the larger weight.
"""
from __future__ import annotations

import numpy as np
from dask import delayed, persist

from dml._block_groups import FANIN, finish_tree, range_reduce
from dml._blocks import block_rng, broadcast, compute
from dml.tree import _kernels
from dml.tree._split import (_EPS, GrowSpec, _can_split_many, _finish_splits, _pack,
                              node_weight, split_kernel, split_level, weighted_impurity)

# --------------------------------------------------------------------------------------------
# worker kernels
# --------------------------------------------------------------------------------------------

def init_assign(part, n_trees):
    return np.zeros((part[0].shape[0], n_trees), dtype=np.int32)


def boot_kernel(index, part, seed, tree_ids):
    """Poisson(1) bootstrap multiplicities, one column per tree, from each tree's own stream."""
    n = part[0].shape[0]
    out = np.empty((n, len(tree_ids)), dtype=np.uint8)
    for j, t in enumerate(tree_ids):
        out[:, j] = np.minimum(block_rng(seed, "bootstrap", int(t), index).poisson(1.0, n), 255)
    return out


def route_kernel(part, assign, route):
    """Move the rows of the nodes split at the previous level to their child."""
    feature, thr, mleft, left, right, cat_idx, bitsets = route
    return _kernels.route(part[0], assign, feature, thr, mleft, left, right, cat_idx, bitsets)


def _group_by_slot(assign, slot_map, w, boot, S):
    """``(count, rows, wts)``: the (row, tree) entries of positive weight grouped by slot
    (:func:`dml.tree._kernels.group_by_slot`); slot ``s`` holds ``count[s]:count[s + 1]``."""
    w = np.asarray(w, dtype=np.float64)
    has_boot = boot is not None
    bt = boot if has_boot else np.zeros((1, 1), dtype=np.uint8)
    count = np.zeros(S + 1, dtype=np.int64)
    rows, wts = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    _kernels.group_by_slot(assign, slot_map, w, bt, has_boot, count, rows, wts, False)
    np.cumsum(count, out=count)
    m = int(count[S])
    rows, wts = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.float64)
    _kernels.group_by_slot(assign, slot_map, w, bt, has_boot, count[:S].copy(), rows, wts, True)
    return count, rows, wts


def _hist_sparse(xb, y, grouped, feat_sel, nb, n_channels, classify):
    """:func:`dml.tree._kernels.hist_sparse` of grouped entries, with its arrays allocated
    here: ``(keys, sums)``."""
    feat_sel = np.ascontiguousarray(feat_sel, dtype=np.int64)
    S, F = feat_sel.shape
    nb, C = int(nb), int(n_channels)
    cells = F * (nb + 1)
    cap = min(len(grouped[1]) * F, S * cells)
    keys, sums = np.empty(cap, dtype=np.int64), np.empty((cap, C), dtype=np.float64)
    n = _kernels.hist_sparse(xb, y, *grouped, feat_sel, nb, C, bool(classify), keys, sums,
                             np.zeros((cells, C), dtype=np.float64),
                             np.zeros(cells, dtype=np.bool_), np.empty(cells, dtype=np.int64))
    return keys[:n], sums[:n]  # leading slices: no copy (the unused tail goes with them)


def hist_kernel(part, assign, boot, slot_map, feat_sel, nb, n_channels, classify):
    """Sparse histograms of the rows in the requested slots.

    Returns ``(keys, sums)``: ``key = (slot · F + k) · (nb + 1) + bin`` for the occupied
    (slot, feature, bin) cells and their channel sums (class weights, or w, w·y, w·y²).
    """
    xb, y, w = part
    grouped = _group_by_slot(assign, slot_map, w, boot, len(feat_sel))
    return _hist_sparse(xb, y, grouped, feat_sel, nb, n_channels, classify)


def combine_sparse(parts):
    """Sum sparse histograms (sorted keys) key by key; the result's keys are sorted too."""
    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    keys = np.concatenate([p[0] for p in parts])
    vals = np.concatenate([p[1] for p in parts])
    if len(parts) <= 8:
        # A linear merge of the sorted runs (tree_reduce combines at most 8 at a time).
        offsets = np.cumsum([0] + [len(p[0]) for p in parts]).astype(np.int64)
        vals = np.ascontiguousarray(vals, dtype=np.float64)
        out_k = np.empty(len(keys), dtype=np.int64)
        out_v = np.empty(vals.shape, dtype=np.float64)
        n = _kernels.merge_sum(keys.astype(np.int64, copy=False), vals, offsets, out_k, out_v,
                               offsets[:-1].copy(), np.empty(vals.shape[1], dtype=np.float64))
        return out_k[:n], out_v[:n]  # leading slices, no copy
    # Sorted runs: a stable sort merges them in about linear time.
    o = np.argsort(keys, kind="stable")
    keys = keys[o]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[starts], np.add.reduceat(vals[o], starts, axis=0)


#: The per-level histograms are merged in this many key ranges, each its own reduction, so that
#: the merge (deep levels: about as many cells as rows × trees × features) runs on all workers
#: rather than on one. Each key still sums the same blocks in the same order: the result does
#: not depend on it.
MERGE_RANGES = 4


def _call_hist_ranges(part, assign, boot, key_bounds, *args):
    """:func:`hist_kernel`'s result cut at ``key_bounds`` into ``len(key_bounds) - 1`` pieces."""
    keys, vals = hist_kernel(part, assign, boot, *args)
    cut = np.searchsorted(keys, key_bounds)
    return tuple((keys[cut[i]:cut[i + 1]], vals[cut[i]:cut[i + 1]])
                 for i in range(len(key_bounds) - 1))


#: A node's rows (slot, bins of its features, target, weight) take about ``F + 20`` bytes per
#: row; each block's histogram of it ``8 · (C + 1)`` bytes per occupied (feature, bin) cell, up
#: to ``F`` per row of the block. Once nodes have few rows per block, the rows are the smaller
#: message and :func:`_rows_are_smaller` sends them instead.
ROW_BYTES_EXTRA = 20


def _call_rows_ranges(part, assign, boot, slot_bounds, slot_map, feat_sel):
    """The entries of the requested slots as rows (see :func:`dml.tree._kernels.rows_by_slot`),
    cut at ``slot_bounds`` into ``len(slot_bounds) - 1`` pieces ``(slot, bins, y, w)``."""
    xb, y, w = part
    feat_sel = np.ascontiguousarray(feat_sel, dtype=np.int64)
    count, rows, wts = _group_by_slot(assign, slot_map, w, boot, len(feat_sel))
    slot = np.empty(len(rows), dtype=np.int32)
    bins = np.empty((len(rows), feat_sel.shape[1]), dtype=np.uint8)
    _kernels.rows_by_slot(xb, count, rows, feat_sel, slot, bins)
    ys = y[rows]
    cut = np.searchsorted(slot, slot_bounds)
    return tuple((slot[cut[i]:cut[i + 1]], bins[cut[i]:cut[i + 1]], ys[cut[i]:cut[i + 1]],
                  wts[cut[i]:cut[i + 1]]) for i in range(len(slot_bounds) - 1))


def combine_rows(parts):
    """Concatenate the rows of several blocks in block order (the parts' order): grouped by
    slot later, stably (:func:`split_rows_kernel`), within a slot they are in block order,
    then row order."""
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(4))


def route_group(group, assign, route, n_trees):
    """:func:`route_kernel` on every block of a group (``assign`` None: the first level's, every
    row at its trees' roots; ``route`` None: the assignments as they are)."""
    if assign is None:
        assign = [init_assign(part, n_trees) for part in group]
    if route is None:  # nothing to move
        return tuple(assign)
    return tuple(route_kernel(part, a, route) for part, a in zip(group, assign))


def boot_group(group, start, seed, tree_ids):
    """:func:`boot_kernel` on every block of a group (its first block is block ``start``)."""
    return tuple(boot_kernel(start + j, part, seed, tree_ids) for j, part in enumerate(group))


def _combine_each(combine):
    def combine_ranges(parts):
        return tuple(combine([p[r] for p in parts]) for r in range(len(parts[0])))
    return combine_ranges


def ranges_group(group, assign, boot, start, n_blocks, n_trees, use_rows, bounds, *args):
    """The group's blocks' histograms (or, ``use_rows``, rows) of the requested slots, cut into
    ``len(bounds) - 1`` key ranges (:func:`_call_hist_ranges`, :func:`_call_rows_ranges`), each
    range reduced over the group's blocks into the pieces of the fixed block tree
    (:func:`dml._block_groups.range_reduce`; one dict per range). A block's results are
    combined as soon as its siblings' are made, so the group never holds all of them."""
    if assign is None:
        assign = [None] * len(group)
    boot = boot if boot is not None else [None] * len(group)
    call, combine = ((_call_rows_ranges, combine_rows) if use_rows
                     else (_call_hist_ranges, combine_sparse))
    per_block = (call(part, a if a is not None else init_assign(part, n_trees), bt, bounds,
                      *args) for part, a, bt in zip(group, assign, boot))
    pieces = range_reduce(per_block, start, n_blocks, _combine_each(combine), FANIN,
                          count=len(group))
    return tuple({node: v[r] for node, v in pieces.items()} for r in range(len(bounds) - 1))


def finish_ranges(n_blocks, use_rows, *pieces):
    """One key range merged over all blocks from every group's pieces of it."""
    return finish_tree(pieces, n_blocks, combine_rows if use_rows else combine_sparse, FANIN)


def split_rows_kernel(merged, first_slot, feat_sel, depth, n_root, spec: GrowSpec):
    """:func:`split_level` for one slot range of a level whose rows were merged instead of
    their histograms. Gini and squared error without categorical features: one numba pass from
    each node's rows to its best split (:func:`dml.tree._kernels.best_from_rows`); otherwise
    the histograms are counted here with the blocks' kernel. Either way a node's sums run over
    its rows in block order, then row order."""
    slot, bins, ys, wts = (np.ascontiguousarray(a) for a in merged)
    S, F = feat_sel.shape
    # Grouped by slot, stably: within a slot the rows keep their order (block order, then row
    # order), and the scans below read each slot's rows sequentially.
    local = np.empty(len(slot), dtype=np.int64)
    out = np.empty_like(bins), np.empty_like(ys), np.empty(len(wts), dtype=np.float64)
    _kernels.rows_in_slot_order(slot.astype(np.int32, copy=False), int(first_slot), bins, ys,
                                wts.astype(np.float64, copy=False),
                                np.zeros(S + 1, dtype=np.int64), local, *out)
    bins, ys, wts = out
    crit = spec.criterion
    if crit in ("gini", "squared_error") and not np.any(spec.is_cat):
        # One pass from the rows to each node's best split (no histogram cells in between).
        C, B = int(spec.n_channels), int(spec.nb) + 1
        tot, Lb, Mb = (np.zeros((S, C), dtype=np.float64) for _ in range(3))
        kb, pb = np.full(S, -1, dtype=np.int64), np.zeros(S, dtype=np.int64)
        g1, g2 = gains = np.full((2, S), -np.inf)
        _kernels.best_from_rows(
            local, bins, ys, np.ascontiguousarray(wts, dtype=np.float64), int(spec.nb), C,
            bool(spec.classify), max(spec.min_samples_leaf, 0), crit == "squared_error", tot, kb,
            pb, gains, Lb, Mb, np.zeros((B, C), dtype=np.float64), np.zeros(B, dtype=np.bool_),
            np.empty(B, dtype=np.int64), np.empty((1, C), dtype=np.float64))
        n_root = np.where(np.isnan(n_root), node_weight(tot, crit), n_root)
        splittable, _ = _can_split_many(tot, depth, spec)
        sel = np.nonzero(splittable & (kb >= 0))[0]
        C = tot.shape[1]
        gain = np.full(len(sel), -np.inf)
        k = np.zeros(len(sel), dtype=np.int64)
        p = np.zeros(len(sel), dtype=np.int64)
        mleft = np.zeros(len(sel), dtype=bool)
        left = np.zeros((len(sel), C))
        _finish_splits(np.arange(len(sel)), g1[sel], g2[sel], kb[sel], pb[sel], Lb[sel],
                       Mb[sel], tot[sel], crit, gain, k, p, mleft, left)
        right = tot[sel] - left
        valid = np.isfinite(gain) & (gain / n_root[sel] + _EPS >= spec.min_impurity_decrease)
        return _pack(tot, sel, valid, gain, k, p, mleft, left, right, [None] * len(sel),
                     feat_sel, depth, spec)
    ident = np.broadcast_to(np.arange(F, dtype=np.int64), (S, F)).copy()
    grouped = _group_by_slot(local.astype(np.int32).reshape(-1, 1),
                             np.arange(S, dtype=np.int32).reshape(1, -1), wts, None, S)
    keys, vals = _hist_sparse(bins, ys, grouped, ident, spec.nb, spec.n_channels,
                              spec.classify)
    s_i, loc = np.divmod(keys, F * (spec.nb + 1))
    return split_level(s_i, loc, vals, feat_sel, depth, n_root, spec)


def _rows_are_smaller(trees, pending, roots, spec: GrowSpec, F: int, n_blocks: int) -> bool:
    """Whether this level's rows are a smaller message than its histograms, by each node's
    expected row count (its weight's share of its tree's root times the rows of the data),
    spread evenly over the blocks: every block sends its own histogram of a node, with up to
    ``F`` cells per row and at most ``F · (nb + 1)``. Depends only on the grown nodes, so the
    choice (which only changes the order in which a node's rows are summed, see
    :func:`split_rows_kernel`) is the same on any cluster."""
    if spec.n_rows is None or not len(pending):
        return False
    t_idx = np.fromiter((t for t, _ in pending), np.int64, len(pending))
    w = node_weight(np.stack([trees[t].stats[n] for t, n in pending]), spec.criterion)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(roots[t_idx] > 0, w / roots[t_idx], 0.0) * spec.n_rows
    per_block = np.minimum(r / n_blocks * F, F * (spec.nb + 1))
    cells = n_blocks * per_block * 8 * (spec.n_channels + 1)
    return float((r * (F + ROW_BYTES_EXTRA)).sum()) < float(cells.sum())


# --------------------------------------------------------------------------------------------
# client side
# --------------------------------------------------------------------------------------------

class _Tree:
    """A tree being grown: node arrays as lists."""

    def __init__(self):
        self.left, self.right, self.feature, self.thr_bin = [], [], [], []
        self.threshold, self.mleft, self.cat_index = [], [], []
        self.stats, self.impurity, self.depth = [], [], []
        self.bitsets = []

    def add(self, stats, depth, criterion, impurity=None):
        self.left.append(-1)
        self.right.append(-1)
        self.feature.append(-2)
        self.thr_bin.append(0)
        self.threshold.append(np.nan)
        self.mleft.append(False)
        self.cat_index.append(-1)
        self.stats.append(stats)
        if impurity is None:
            n = float(node_weight(stats, criterion))
            impurity = float(weighted_impurity(stats, criterion)) / n if n > 0 else 0.0
        self.impurity.append(impurity)
        self.depth.append(depth)
        return len(self.left) - 1


def _route_arrays(trees):
    M = max(len(t.left) for t in trees)
    T = len(trees)
    feature = np.full((T, M), -2, dtype=np.int32)
    thr = np.zeros((T, M), dtype=np.int32)
    mleft = np.zeros((T, M), dtype=bool)
    left = np.zeros((T, M), dtype=np.int32)
    right = np.zeros((T, M), dtype=np.int32)
    cat_idx = np.full((T, M), -1, dtype=np.int32)
    bitsets = []
    for i, t in enumerate(trees):
        k = len(t.left)
        feature[i, :k] = t.feature
        thr[i, :k] = t.thr_bin
        mleft[i, :k] = t.mleft
        left[i, :k] = t.left
        right[i, :k] = t.right
        ci = np.asarray(t.cat_index, dtype=np.int32)
        cat_idx[i, :k] = np.where(ci >= 0, ci + len(bitsets), -1)
        bitsets.extend(t.bitsets)
    bits = np.asarray(bitsets, dtype=bool).reshape(-1, 256)
    return feature, thr, mleft, left, right, cat_idx, bits


def _only_new_splits(route, new_split):
    """Routing needs only the nodes split at the last level (earlier ones hold no rows)."""
    feature = route[0].copy()
    feature[~new_split] = -2
    return (feature,) + route[1:]


def _split_node_hist(keys, vals, n_slots, FB):
    """Global sparse result -> per slot (local keys k·B + b, sums), keys sorted."""
    slot, local = np.divmod(keys, FB)  # keys are sorted
    bounds = np.searchsorted(slot, np.arange(n_slots + 1))
    return [(local[bounds[i]:bounds[i + 1]], vals[bounds[i]:bounds[i + 1]])
            for i in range(n_slots)]


def _minus(parent, child, crit):
    pk, pv = parent
    ck, cv = child
    v = pv.copy()
    v[np.searchsorted(pk, ck)] -= cv
    w = node_weight(v, crit)
    keep = w > 1e-9 * max(float(node_weight(pv, crit).sum()), 1.0) / max(len(pv), 1)
    return pk[keep], v[keep]


def grow_trees(groups, bounds, boot, n_trees, tree_ids, spec: GrowSpec, n_root=None,
               need_assign=False, persist_assign=True, on_level=None):
    """Grow ``n_trees`` trees together; returns (trees, importances, final assignments).

    ``groups`` hold the binned blocks (per group a tuple of blocks ``(bins, y, w)``; group
    ``g`` holds blocks ``bounds[g] .. bounds[g + 1] - 1``), ``boot`` the blocks' bootstrap
    counts in the same groups (or None); the final assignments are per group too.

    ``n_root`` is the weighted row count that ``min_impurity_decrease`` is relative to (per
    tree: its root weight when None). With ``persist_assign=False`` (data larger than the
    cluster's memory) the node assignments are not kept on the workers: each level recomputes
    them from the root along with the (re-read) binned block. ``on_level(level, n_open)`` is
    called after each level with the number of nodes left to split (progress reports).
    """
    crit = spec.criterion
    trees = [_Tree() for _ in range(n_trees)]
    d = len(spec.n_bins)
    all_feats = spec.max_features >= d
    subtract = all_feats
    n_blocks, starts = int(bounds[-1]), [int(b) for b in bounds[:-1]]
    assign = [None] * len(groups)  # every row at its trees' roots
    C, nb = spec.n_channels, spec.nb
    B = nb + 1
    F = d if all_feats else spec.max_features
    zero = np.zeros(C)
    for tr in trees:
        tr.add(zero, 0, crit)  # stats filled in from the first histograms
    pending = [(t, 0) for t in range(n_trees)]
    derived = {}  # (t, big) -> (parent histogram, (t, small))
    route = None
    new_split = None
    importances = np.zeros((n_trees, d))
    roots = np.zeros(n_trees)
    level = 0
    boots = boot if boot is not None else [None] * len(groups)
    while pending:
        if route is not None:
            params = broadcast(_only_new_splits(route, new_split))
            assign = [delayed(route_group, pure=True)(g, a, params, n_trees)
                      for g, a in zip(groups, assign)]
            if persist_assign:
                assign = list(persist(*assign))
        to_count = [key for key in pending if key not in derived]
        M_nodes = max(len(tr.left) for tr in trees)
        slot_map = np.full((n_trees, M_nodes), -1, dtype=np.int32)
        if all_feats:
            feat_sel = np.broadcast_to(np.arange(d), (len(to_count), d)).copy()
        else:
            # One generator per (tree, level); its nodes draw in node order. Every pending node
            # is counted here (to_count is pending).
            t_arr = np.fromiter((t for t, _ in pending), np.int64, len(pending))
            n_arr = np.fromiter((n for _, n in pending), np.int64, len(pending))
            order = np.lexsort((n_arr, t_arr))
            trees_here, counts = np.unique(t_arr, return_counts=True)
            draws = []
            for t, c in zip(trees_here.tolist(), counts.tolist()):
                rng = block_rng(spec.seed, "features", int(tree_ids[t]), level)
                draws.append(np.sort(np.argsort(rng.random((c, d)), axis=1)
                                     [:, :spec.max_features], axis=1))
            feat_sel = np.empty((len(pending), spec.max_features), dtype=np.int64)
            feat_sel[order] = np.concatenate(draws)
        t_c = np.fromiter((t for t, _ in to_count), np.int64, len(to_count))
        n_c = np.fromiter((n for _, n in to_count), np.int64, len(to_count))
        slot_map[t_c, n_c] = np.arange(len(to_count), dtype=np.int32)
        args = [broadcast(slot_map), broadcast(feat_sel), nb, C, spec.classify]
        # Slot ranges: whole slots per range, so the concatenated ranges are the sorted result.
        R = MERGE_RANGES
        bounds_s = np.linspace(0, len(to_count), R + 1).astype(np.int64)
        key_bounds = bounds_s * (F * B)
        key_bounds[-1] = np.iinfo(np.int64).max
        use_rows = not subtract and level > 0 and _rows_are_smaller(
            trees, pending, roots, spec, F, n_blocks)
        cut, extra = (bounds_s, args[:2]) if use_rows else (key_bounds, args)
        parts = [delayed(ranges_group, pure=True, nout=R)(
            g, a, bt, lo, n_blocks, n_trees, use_rows, cut, *extra)
            for g, a, bt, lo in zip(groups, assign, boots, starts)]
        merged = [delayed(finish_ranges, pure=True)(n_blocks, use_rows,
                                                    *[pt[r] for pt in parts])
                  for r in range(R)]
        keys = pending
        P = len(keys)
        depth_p = np.array([trees[t].depth[n] for (t, n) in keys], dtype=np.int64)
        nroot_p = (roots[[t for (t, _) in keys]] if n_root is None
                   else np.full(P, float(n_root)))
        if level == 0 and n_root is None:
            nroot_p[:] = np.nan  # the roots' own weights, known once counted
        if subtract:
            merged = compute(*merged)
            keys_ = np.concatenate([m[0] for m in merged])
            vals_ = np.concatenate([m[1] for m in merged])
            hists = dict(zip(to_count, _split_node_hist(keys_, vals_, len(to_count), F * B)))
            for key, (parent, small) in derived.items():
                hists[key] = _minus(parent, hists[small], crit)
            derived = {}
            lens = [len(hists[kk][0]) for kk in keys]
            loc = np.concatenate([hists[kk][0] for kk in keys]) if P else np.zeros(0, np.int64)
            vals = np.concatenate([hists[kk][1] for kk in keys]) if P else np.zeros((0, C))
            s_i = np.repeat(np.arange(P), lens)
            feat_p = np.broadcast_to(np.arange(d), (P, d)).copy()
            res = [split_level(s_i, loc, vals, feat_p, depth_p, nroot_p, spec)]
            offsets = [0]
        else:
            # Every pending node was counted (to_count is pending), so the slot ranges are node
            # ranges: each range's splits are found on a worker, beside its merged histograms,
            # and only the chosen splits travel to the client.
            lite = broadcast(spec.lite())
            offsets = bounds_s[:-1].tolist()
            res = compute(*[
                delayed(split_rows_kernel if use_rows else split_kernel, pure=True)(
                    merged[r], int(bounds_s[r]) * (1 if use_rows else F * B),
                                                 feat_sel[bounds_s[r]:bounds_s[r + 1]],
                                                 depth_p[bounds_s[r]:bounds_s[r + 1]],
                                                 nroot_p[bounds_s[r]:bounds_s[r + 1]], lite)
                for r in range(R)])
        tot = np.concatenate([r_[0] for r_ in res])
        if level == 0:
            for i, (t, n) in enumerate(keys):
                trees[t].stats[0] = tot[i]
                w = float(node_weight(tot[i], crit))
                roots[t] = w
                trees[t].impurity[0] = (float(weighted_impurity(tot[i], crit)) / w
                                        if w > 0 else 0.0)
        new_split = np.zeros((n_trees, M_nodes), dtype=bool)
        next_pending = []
        # Python scalars, read once: NumPy scalar indexing per split dominated this loop (tens
        # of thousands of splits per level at depth 10+ of 50 trees). Same values.
        sel_l = np.concatenate([r_[1] + o for r_, o in zip(res, offsets)]).tolist()
        f_l, pos_l, ml_l, gain_l, limp_l, rimp_l, lok_l, rok_l = (
            np.concatenate([r_[c] for r_ in res]).tolist() for c in range(2, 10))
        left = np.concatenate([r_[10] for r_ in res])
        right = np.concatenate([r_[11] for r_ in res])
        cats = [c_ for r_ in res for c_ in r_[12]]
        wl, wr = node_weight(left, crit), node_weight(right, crit)
        dep_l = (depth_p[sel_l] + 1).tolist()
        is_cat = np.asarray(spec.is_cat, dtype=bool).tolist()
        for q in range(len(sel_l)):
            j = q
            i = sel_l[q]
            t, n = keys[i]
            tr = trees[t]
            f = f_l[q]
            dep = dep_l[q]
            tr.feature[n] = f
            tr.mleft[n] = ml_l[q]
            pos = pos_l[q]
            if is_cat[f]:
                chosen, occupied = cats[j]
                bits = np.zeros(256, dtype=bool)
                bits[chosen] = True
                if ml_l[q]:
                    bits[:nb] = True
                    bits[np.setdiff1d(occupied, chosen)] = False
                tr.cat_index[n] = len(tr.bitsets)
                tr.bitsets.append(bits)
            else:
                tr.thr_bin[n] = pos
                e = spec.edges[f]
                tr.threshold[n] = float(e[pos]) if pos < len(e) else np.inf
            importances[t, f] += gain_l[q]
            ln = tr.add(left[j], dep, crit, limp_l[q])
            rn = tr.add(right[j], dep, crit, rimp_l[q])
            tr.left[n], tr.right[n] = ln, rn
            new_split[t, n] = True
            if lok_l[q]:
                next_pending.append((t, ln))
            if rok_l[q]:
                next_pending.append((t, rn))
            if subtract and lok_l[q] and rok_l[q]:
                small, big = (ln, rn) if wl[j] <= wr[j] else (rn, ln)
                derived[(t, big)] = (hists[(t, n)], (t, small))
        pending = next_pending
        if on_level is not None:
            on_level(level, len(pending))
        if pending or (need_assign and new_split.any()):
            route = _route_arrays(trees)
            pad = route[0].shape[1] - new_split.shape[1]
            new_split = np.concatenate([new_split, np.zeros((n_trees, pad), dtype=bool)], axis=1)
        level += 1
    if need_assign and route is not None and new_split.any():
        params = broadcast(_only_new_splits(route, new_split))
        assign = [delayed(route_group, pure=True)(g, a, params, n_trees)
                  for g, a in zip(groups, assign)]
        if persist_assign:
            assign = list(persist(*assign))
    if need_assign and any(a is None for a in assign):  # nothing was split: all at the roots
        assign = [delayed(route_group, pure=True)(g, None, None, n_trees) if a is None else a
                  for g, a in zip(groups, assign)]
    return trees, importances, assign
