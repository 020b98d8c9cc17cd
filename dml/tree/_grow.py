"""Level-wise growth of many histogram trees at once over persisted, binned row blocks.

Per level, for all open nodes of all trees being grown together:

1. *route* (one task per block): the rows of the nodes split at the previous level move to a
   child; the per-block node assignment (rows × trees, int32) is a new persisted result, never a
   mutated worker state, so a retried task computes the same thing;
2. *histograms* (one map-reduce): each block counts, with ``np.bincount`` over combined
   ``(slot, feature, bin, class)`` indices, the weighted class counts (classification) or
   ``(w, w·y, w·y²)`` (regression) of its rows in every open node; the block results are summed
   in the fixed tree order;
3. *split* (client): the best split of every open node, vectorised over nodes, features and bins.

When every node sees every feature (``max_features`` = all, e.g. a single tree), only the smaller
child of a pair of open siblings is counted; the other is the parent's histogram minus it.
With per-node feature sampling the siblings draw different features, so both are counted.

Missing values (bin :data:`~dml.tree._binning.MISSING`): for every candidate threshold both
directions are scored and the missing rows go to the child with the higher gain (the learned
default direction). When a node had no missing values for the chosen feature, or both directions
score the same, missing values go to the child with the larger weight.
"""
from __future__ import annotations

import numpy as np
from dask import delayed, persist

from dml._blocks import block_rng, broadcast, compute, tree_reduce
from dml.tree._binning import MISSING

#: Histogram entries (float64) per map-reduce; more open nodes are split into several reductions.
HIST_ENTRIES = 1 << 22
_EPS = np.finfo(np.float64).eps


# --------------------------------------------------------------------------------------------
# impurity
# --------------------------------------------------------------------------------------------

def _xlog2x(a):
    a = np.asarray(a, dtype=np.float64)
    out = np.zeros_like(a)
    pos = a > 0
    out[pos] = a[pos] * np.log2(a[pos])
    return out


def weighted_impurity(stats: np.ndarray, criterion: str) -> np.ndarray:
    """``n · I(node)`` for per-node statistics on the last axis (class weights or w, w·y, w·y²)."""
    if criterion == "squared_error":
        w, s, q = stats[..., 0], stats[..., 1], stats[..., 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            out = q - np.where(w > 0, s * s / np.where(w > 0, w, 1.0), 0.0)
        return np.maximum(out, 0.0)
    n = stats.sum(axis=-1)
    if criterion == "gini":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(n > 0, n - (stats * stats).sum(axis=-1) / np.where(n > 0, n, 1.0), 0.0)
    # entropy / log_loss, in bits
    return _xlog2x(n) - _xlog2x(stats).sum(axis=-1)


def node_weight(stats: np.ndarray, criterion: str) -> np.ndarray:
    return stats[..., 0] if criterion == "squared_error" else stats.sum(axis=-1)


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
    xb = part[0]
    t_all = np.arange(assign.shape[1])[None, :]
    f = feature[t_all, assign]
    r, t = np.nonzero(f >= 0)
    if r.size == 0:
        return assign
    a = assign[r, t]
    b = xb[r, f[r, t]]
    miss = b == MISSING
    go = np.where(miss, mleft[t, a], b <= thr[t, a])
    ci = cat_idx[t, a]
    cat = (ci >= 0) & ~miss
    if cat.any():
        go[cat] = bitsets[ci[cat], b[cat]]
    new = assign.copy()
    new[r, t] = np.where(go, left[t, a], right[t, a])
    return new


def hist_kernel(part, assign, boot, slot_map, feat_sel, nb, n_channels, classify):
    """Histograms (slot, feature, bin, channel) of the rows in the requested slots."""
    xb, y, w = part
    S, F = feat_sel.shape
    B = nb + 1
    slots = slot_map[np.arange(assign.shape[1])[None, :], assign]
    r, t = np.nonzero(slots >= 0)
    s = slots[r, t]
    wt = w[r] if boot is None else w[r] * boot[r, t]
    keep = wt > 0
    r, s, wt = r[keep], s[keep], wt[keep]
    size = S * F * B
    if F == xb.shape[1] and (feat_sel == np.arange(F)).all():
        bins = xb[r]
    else:
        bins = xb[r[:, None], feat_sel[s]]
    if nb < MISSING:
        lut = np.arange(256, dtype=np.int64)
        lut[MISSING] = nb
        bins = lut[bins]
    base = (s[:, None].astype(np.int64) * F + np.arange(F)) * B + bins
    wr = np.repeat(wt, F)
    if classify:
        idx = base * n_channels + y[r][:, None]
        h = np.bincount(idx.ravel(), weights=wr, minlength=size * n_channels)
        return h.reshape(S, F, B, n_channels)
    yr = np.repeat(y[r], F)
    flat = base.ravel()
    h = np.stack([np.bincount(flat, weights=wr, minlength=size),
                  np.bincount(flat, weights=wr * yr, minlength=size),
                  np.bincount(flat, weights=wr * yr * yr, minlength=size)], axis=-1)
    return h.reshape(S, F, B, 3)


def _call_hist(part, assign, boot, *args):
    return hist_kernel(part, assign, boot, *args)


# --------------------------------------------------------------------------------------------
# client side
# --------------------------------------------------------------------------------------------

class GrowSpec:
    """Everything the grower needs besides the data (plain attributes)."""

    def __init__(self, *, classify, n_channels, criterion, max_depth, min_samples_split,
                 min_samples_leaf, min_impurity_decrease, max_features, n_bins, is_cat, edges,
                 seed):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        self.nb = int(max(1, np.max(n_bins))) if len(n_bins) else 1


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


def _can_split_many(stats, depth, spec: GrowSpec):
    """Vectorised: which nodes (rows of ``stats``) at ``depth`` may still be split."""
    n = node_weight(stats, spec.criterion)
    wi = weighted_impurity(stats, spec.criterion)
    with np.errstate(divide="ignore", invalid="ignore"):
        imp = np.where(n > 0, wi / np.where(n > 0, n, 1.0), 0.0)
    ok = (n >= spec.min_samples_split) & (n >= 2 * spec.min_samples_leaf) & (n > 0) & (imp > _EPS)
    if spec.max_depth is not None:
        ok &= np.asarray(depth) < spec.max_depth
    return ok, imp


def _can_split(stats, depth, spec: GrowSpec):
    n = float(node_weight(stats, spec.criterion))
    if spec.max_depth is not None and depth >= spec.max_depth:
        return False
    if n < spec.min_samples_split or n < 2 * spec.min_samples_leaf or n <= 0:
        return False
    return float(weighted_impurity(stats, spec.criterion)) / n > _EPS


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


def _best_splits(H, tot, feat_sel, spec: GrowSpec, n_root):
    """Best split of every slot: (gain, k, pos, missing_left, left_stats, right_stats, order)."""
    crit = spec.criterion
    S, F, B, C = H.shape
    nb = B - 1
    Hb = H[:, :, :nb]
    M = H[:, :, nb]
    feats = feat_sel
    is_cat = spec.is_cat[feats]  # (S, F)
    order = None
    if is_cat.any():
        if spec.classify:
            cls = np.argmax(tot, axis=-1)
            num = np.take_along_axis(Hb, cls[:, None, None, None], axis=3)[..., 0]
            den = Hb.sum(-1)
        else:
            num, den = Hb[..., 1], Hb[..., 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            key = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.inf)
        key = np.where(is_cat[..., None], key, np.arange(nb)[None, None, :])
        order = np.argsort(key, axis=2, kind="stable")
        Hb = np.take_along_axis(Hb, order[..., None], axis=2)
    # Only non-empty bins are candidate thresholds (an empty bin repeats the previous split):
    # deep nodes hold few rows, so this is far smaller than the dense (slot, feature, bin) grid.
    s_i, k_i, b_i = np.nonzero(node_weight(Hb, crit) > 0)
    vals = Hb[s_i, k_i, b_i]
    seg = s_i * F + k_i
    csum = np.cumsum(vals, axis=0)
    first = np.r_[True, seg[1:] != seg[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(seg)), 0))
    before = np.where((start > 0)[:, None], csum[np.maximum(start - 1, 0)], 0.0)
    L = csum - before
    T_ = tot[s_i]
    parent = weighted_impurity(tot, crit)[s_i]
    msl = max(spec.min_samples_leaf, 0)
    Mv = M[s_i, k_i]
    has_m = node_weight(Mv, crit) > 0

    def score(left):
        right = T_ - left
        nl, nr = node_weight(left, crit), node_weight(right, crit)
        g = parent - weighted_impurity(left, crit) - weighted_impurity(right, crit)
        ok = (nl >= msl) & (nr >= msl) & (nl > 0) & (nr > 0)
        return np.where(ok, g, -np.inf)

    g1 = score(L)                            # missing right
    g2 = np.where(has_m, score(L + Mv), -np.inf)  # missing left
    g = np.maximum(g1, g2)
    gain = np.full(S, -np.inf)
    k = np.zeros(S, dtype=np.int64)
    p = np.zeros(S, dtype=np.int64)
    mleft = np.zeros(S, dtype=bool)
    left = np.zeros((S, C))
    if len(g):
        # Best candidate per slot; ties go to the first (lowest feature, then bin).
        order_c = np.lexsort((np.arange(len(g)), -g, s_i))
        first_c = np.r_[True, s_i[order_c][1:] != s_i[order_c][:-1]]
        best = order_c[first_c]
        sl = s_i[best]
        gain[sl] = g[best]
        k[sl], p[sl] = k_i[best], b_i[best]
        use_left = g2[best] > g1[best]
        tie = (g2[best] == g1[best]) | ~has_m[best]
        Lb, Mb = L[best], Mv[best]
        heavier_left = node_weight(Lb, crit) >= node_weight(tot[sl] - Lb - Mb, crit)
        ml = np.where(tie, heavier_left, use_left)
        mleft[sl] = ml
        left[sl] = np.where(ml[:, None], Lb + Mb, Lb)
    right = tot - left
    valid = np.isfinite(gain) & (gain / n_root + _EPS >= spec.min_impurity_decrease)
    return valid, gain, k, p, mleft, left, right, order


def grow_trees(binned, boot, n_trees, tree_ids, spec: GrowSpec, n_root=None,
               need_assign=False):
    """Grow ``n_trees`` trees together; returns (trees, importances, final assignments).

    ``n_root`` is the weighted row count that ``min_impurity_decrease`` is relative to (per
    tree: its root weight when None).
    """
    crit = spec.criterion
    trees = [_Tree() for _ in range(n_trees)]
    d = len(spec.n_bins)
    all_feats = spec.max_features >= d
    subtract = all_feats
    assign = [delayed(init_assign, pure=True)(p, n_trees) for p in binned]
    C, nb = spec.n_channels, spec.nb
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
    F = d if all_feats else spec.max_features
    per_slot = F * (nb + 1) * C
    chunk = max(1, HIST_ENTRIES // per_slot)
    while pending:
        if route is not None:
            params = broadcast(_only_new_splits(route, new_split))
            assign = list(persist(*[delayed(route_kernel, pure=True)(p, a, params)
                                    for p, a in zip(binned, assign)]))
        to_count = [key for key in pending if key not in derived]
        M = max(len(tr.left) for tr in trees)
        feat_of = {}
        for (t, n) in pending:
            if all_feats:
                feat_of[(t, n)] = np.arange(d)
            else:
                rng = block_rng(spec.seed, "features", int(tree_ids[t]), n)
                feat_of[(t, n)] = np.sort(rng.choice(d, spec.max_features, replace=False))
        groups = [to_count[i:i + chunk] for i in range(0, len(to_count), chunk)]
        reductions = []
        for grp in groups:
            slot_map = np.full((n_trees, M), -1, dtype=np.int32)
            for s, (t, n) in enumerate(grp):
                slot_map[t, n] = s
            feat_sel = np.stack([feat_of[key] for key in grp])
            args = [broadcast(slot_map), broadcast(feat_sel), nb, C, spec.classify]
            boots = boot if boot is not None else [None] * len(binned)
            parts = [delayed(_call_hist, pure=True)(p, a, bt, *args)
                     for p, a, bt in zip(binned, assign, boots)]
            reductions.append(tree_reduce(parts))
        results = []
        batch = max(1, (HIST_ENTRIES * 2) // (chunk * per_slot))
        for i in range(0, len(reductions), batch):
            results.extend(compute(*reductions[i:i + batch]))
        hists = {}
        for grp, H in zip(groups, results):
            for s, key in enumerate(grp):
                hists[key] = H[s]
        for key, (parent, small) in derived.items():
            hists[key] = parent - hists[small]
        derived = {}
        keys = pending
        H = np.stack([hists[k] for k in keys])
        tot = H[:, 0].sum(axis=1)
        if level == 0:
            for i, (t, n) in enumerate(keys):
                trees[t].stats[0] = tot[i]
                w = float(node_weight(tot[i], crit))
                roots[t] = w
                trees[t].impurity[0] = (float(weighted_impurity(tot[i], crit)) / w
                                        if w > 0 else 0.0)
        feat_sel = np.stack([feat_of[k] for k in keys])
        splittable, _ = _can_split_many(tot, [trees[t].depth[n] for (t, n) in keys], spec)
        new_split = np.zeros((n_trees, M), dtype=bool)
        next_pending = []
        idx = np.nonzero(splittable)[0]
        for lo in range(0, len(idx), chunk):
            sel = idx[lo:lo + chunk]
            nroot = roots[[keys[i][0] for i in sel]] if n_root is None else np.full(len(sel),
                                                                                     n_root)
            valid, gain, k, p, mleft, left, right, order = _best_splits(
                H[sel], tot[sel], feat_sel[sel], spec, nroot)
            depth_sel = np.array([trees[keys[i][0]].depth[keys[i][1]] for i in sel]) + 1
            l_ok, l_imp = _can_split_many(left, depth_sel, spec)
            r_ok, r_imp = _can_split_many(right, depth_sel, spec)
            wl, wr = node_weight(left, crit), node_weight(right, crit)
            for j in np.nonzero(valid)[0]:
                i = sel[j]
                t, n = keys[i]
                tr = trees[t]
                f = int(feat_sel[i, k[j]])
                dep = int(depth_sel[j])
                tr.feature[n] = f
                tr.mleft[n] = bool(mleft[j])
                pos = int(p[j])
                if spec.is_cat[f]:
                    bits = np.zeros(256, dtype=bool)
                    occupied = H[i, k[j], :nb].sum(-1) > 0
                    chosen = order[j, k[j], :pos + 1]
                    bits[chosen[occupied[chosen]]] = True
                    if mleft[j]:
                        bits[:nb][~occupied] = True
                    tr.cat_index[n] = len(tr.bitsets)
                    tr.bitsets.append(bits)
                else:
                    tr.thr_bin[n] = pos
                    e = spec.edges[f]
                    tr.threshold[n] = float(e[pos]) if pos < len(e) else np.inf
                importances[t, f] += gain[j]
                ln = tr.add(left[j], dep, crit, float(l_imp[j]))
                rn = tr.add(right[j], dep, crit, float(r_imp[j]))
                tr.left[n], tr.right[n] = ln, rn
                new_split[t, n] = True
                if l_ok[j]:
                    next_pending.append((t, ln))
                if r_ok[j]:
                    next_pending.append((t, rn))
                if subtract and l_ok[j] and r_ok[j]:
                    small, big = (ln, rn) if wl[j] <= wr[j] else (rn, ln)
                    derived[(t, big)] = (hists[(t, n)], (t, small))
        pending = next_pending
        if pending or (need_assign and new_split.any()):
            route = _route_arrays(trees)
            pad = route[0].shape[1] - new_split.shape[1]
            new_split = np.concatenate([new_split, np.zeros((n_trees, pad), dtype=bool)], axis=1)
        level += 1
    if need_assign and route is not None and new_split.any():
        params = broadcast(_only_new_splits(route, new_split))
        assign = list(persist(*[delayed(route_kernel, pure=True)(p, a, params)
                                for p, a in zip(binned, assign)]))
    return trees, importances, assign
