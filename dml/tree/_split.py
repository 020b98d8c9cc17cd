"""The split search of the histogram trees: node impurities and the best split of every open
node of a level, from its histograms (:func:`split_level`, :func:`split_kernel`) or, through
:func:`dml.tree._grow.split_rows_kernel`, from its rows.

Growth itself (routing the rows, counting and merging the histograms, the level loop) is
:mod:`dml.tree._grow`; everything here works on the merged statistics of nodes and is the same
on the client (sibling subtraction) and on a worker (a key range of a level). See
docs/trees.md for the criteria, the missing-value direction and the categorical splits.
"""
from __future__ import annotations

import numpy as np

from dml.tree import _kernels

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


def _chan_sum(stats, f=None):
    # A loop over the (few) channels: NumPy's reduction over a short last axis is slow.
    out = None
    for c in range(stats.shape[-1]):
        v = stats[..., c] if f is None else f(stats[..., c])
        # ``out + v`` makes a new array, so the first channel need not be copied.
        out = v if out is None else out + v
    return out.copy() if f is None and stats.shape[-1] == 1 else out


def weighted_impurity(stats: np.ndarray, criterion: str) -> np.ndarray:
    """``n · I(node)`` for statistics on the last axis (class weights, or w, w·y, w·y²)."""
    stats = np.asarray(stats, dtype=np.float64)
    if criterion == "squared_error":
        w, s, q = stats[..., 0], stats[..., 1], stats[..., 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            out = q - np.where(w > 0, s * s / np.where(w > 0, w, 1.0), 0.0)
        return np.maximum(out, 0.0)
    n = _chan_sum(stats)
    if criterion == "gini":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(n > 0, n - _chan_sum(stats, np.square) / np.where(n > 0, n, 1.0),
                            0.0)
    # entropy / log_loss, in bits
    return _xlog2x(n) - _chan_sum(stats, _xlog2x)


def node_weight(stats: np.ndarray, criterion: str) -> np.ndarray:
    stats = np.asarray(stats)
    return stats[..., 0] if criterion == "squared_error" else _chan_sum(stats)


# --------------------------------------------------------------------------------------------
# split search
# --------------------------------------------------------------------------------------------

class GrowSpec:
    """Everything the grower needs besides the data (plain attributes)."""

    def __init__(self, *, classify, n_channels, criterion, max_depth, min_samples_split,
                 min_samples_leaf, min_impurity_decrease, max_features, n_bins, is_cat, edges,
                 seed, n_rows=None):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        self.nb = int(max(1, np.max(n_bins))) if len(n_bins) else 1

    def lite(self) -> GrowSpec:
        """A copy without the bin edges, which :func:`split_level` does not need: small enough
        to travel inside every split task."""
        out = object.__new__(GrowSpec)
        out.__dict__.update(self.__dict__, edges=None)
        return out


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


def _best_splits(s_i, k_i, b_i, vals, M, tot, feat_sel, spec: GrowSpec, n_root):
    """Best split of every node from its sparse histogram.

    ``s_i, k_i, b_i, vals``: the occupied non-missing (node, selected feature, bin) cells, sorted
    by node, feature, bin; ``M`` (nodes, F, C): the missing bin; ``tot`` (nodes, C). Only
    occupied bins are candidate thresholds (an empty bin repeats the previous split). Returns
    per node (valid, gain, k, bin, missing_left, left, right, categories_left).
    """
    crit = spec.criterion
    S, F = feat_sel.shape
    C = tot.shape[1]
    if crit in ("gini", "squared_error") and not np.any(spec.is_cat):
        return _best_splits_fused(s_i, k_i, b_i, vals, M, tot, spec, n_root)
    seg = s_i * F + k_i
    cat_entry = spec.is_cat[feat_sel[s_i, k_i]]
    if cat_entry.any():
        # Categories ordered by the node's target frequency (or mean): then a threshold scan.
        if spec.classify:
            cls = np.argmax(tot, axis=-1)[s_i]
            ratio = vals[np.arange(len(vals)), cls] / vals.sum(axis=1)
        else:
            ratio = vals[:, 1] / vals[:, 0]
        second = np.where(cat_entry, ratio, b_i.astype(np.float64))
        o = np.lexsort((second, seg))
        s_i, k_i, b_i, vals, seg = s_i[o], k_i[o], b_i[o], vals[o], seg[o]
    csum = np.cumsum(vals, axis=0)
    first = np.r_[True, seg[1:] != seg[:-1]] if len(seg) else np.zeros(0, bool)
    start = np.maximum.accumulate(np.where(first, np.arange(len(seg)), 0)) if len(seg) else \
        np.zeros(0, np.int64)
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

    if crit in ("gini", "squared_error"):
        # One fused pass instead of a dozen full-size temporaries (entropy keeps NumPy's log2).
        g1, g2 = _kernels.split_scores(np.ascontiguousarray(L), np.ascontiguousarray(T_),
                                       np.ascontiguousarray(Mv, dtype=np.float64), has_m,
                                       np.ascontiguousarray(parent, dtype=np.float64), msl,
                                       crit == "squared_error")
    else:
        g1 = score(L)                                  # missing right
        g2 = np.where(has_m, score(L + Mv), -np.inf)   # missing left
    g = np.maximum(g1, g2)
    gain = np.full(S, -np.inf)
    k = np.zeros(S, dtype=np.int64)
    p = np.zeros(S, dtype=np.int64)
    mleft = np.zeros(S, dtype=bool)
    left = np.zeros((S, C))
    cats = [None] * S
    if len(g):
        # Best candidate per node (entries are grouped by node); ties go to the first
        # (lowest feature, then bin).
        starts_n = np.flatnonzero(np.r_[True, s_i[1:] != s_i[:-1]])
        seg_max = np.maximum.reduceat(g, starts_n)
        node_of = np.repeat(np.arange(len(starts_n)), np.diff(np.r_[starts_n, len(g)]))
        cand = np.flatnonzero(g == seg_max[node_of])
        best = cand[np.r_[True, node_of[cand][1:] != node_of[cand][:-1]]]
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
        for j in np.nonzero(cat_entry[best])[0]:
            e = best[j]
            end = e + 1
            while end < len(seg) and seg[end] == seg[e]:
                end += 1
            cats[sl[j]] = (b_i[start[e]:e + 1], b_i[start[e]:end])
    right = tot - left
    valid = np.isfinite(gain) & (gain / n_root + _EPS >= spec.min_impurity_decrease)
    return valid, gain, k, p, mleft, left, right, cats


def _finish_splits(sl, g1, g2, kb, pb, Lb, Mb, tot, crit, gain, k, p, mleft, left):
    """Fill the outputs of nodes ``sl`` from their best candidates: gains ``g1``/``g2``
    (missing rows right/left), feature ``kb``, bin ``pb``, left statistics ``Lb`` and missing
    bin ``Mb``. Missing rows go to the better side, or on a tie to the heavier child."""
    gain[sl] = np.maximum(g1, g2)
    k[sl], p[sl] = kb, pb
    use_left = g2 > g1
    tie = (g2 == g1) | ~(node_weight(Mb, crit) > 0)
    heavier_left = node_weight(Lb, crit) >= node_weight(tot[sl] - Lb - Mb, crit)
    ml = np.where(tie, heavier_left, use_left)
    mleft[sl] = ml
    left[sl] = np.where(ml[:, None], Lb + Mb, Lb)


def _best_splits_fused(s_i, k_i, b_i, vals, M, tot, spec: GrowSpec, n_root):
    """:func:`_best_splits` without categorical features, for gini and squared error: the
    candidate scan is one numba pass (:func:`dml.tree._kernels.best_candidates`) instead of
    a dozen full-size NumPy temporaries; same operations, same results."""
    crit = spec.criterion
    S, C = tot.shape
    gain = np.full(S, -np.inf)
    k = np.zeros(S, dtype=np.int64)
    p = np.zeros(S, dtype=np.int64)
    mleft = np.zeros(S, dtype=bool)
    left = np.zeros((S, C))
    if len(s_i):
        best, gains = np.empty(S, dtype=np.int64), np.empty((3, S), dtype=np.float64)
        Lb = np.empty((S, C), dtype=np.float64)
        nn = _kernels.best_candidates(
            np.ascontiguousarray(s_i, dtype=np.int64), np.ascontiguousarray(k_i, dtype=np.int64),
            np.ascontiguousarray(vals, dtype=np.float64),
            np.ascontiguousarray(tot, dtype=np.float64), np.ascontiguousarray(M, dtype=np.float64),
            np.ascontiguousarray(weighted_impurity(tot, crit)), max(spec.min_samples_leaf, 0),
            crit == "squared_error", best, gains, Lb, np.zeros((3, C), dtype=np.float64))
        best, g1, g2, Lb = best[:nn], gains[0, :nn], gains[1, :nn], Lb[:nn]
        sl = s_i[best]
        _finish_splits(sl, g1, g2, k_i[best], b_i[best], Lb, M[sl, k_i[best]], tot, crit,
                       gain, k, p, mleft, left)
    right = tot - left
    valid = np.isfinite(gain) & (gain / n_root + _EPS >= spec.min_impurity_decrease)
    return valid, gain, k, p, mleft, left, right, [None] * S


def split_level(s_i, loc, vals, feat_sel, depth, n_root, spec: GrowSpec):
    """The splits of ``P`` nodes from their sparse histograms.

    ``s_i, loc, vals``: the occupied cells, sorted by node ``s_i`` (0..P-1) and local key
    ``loc = k · (nb + 1) + bin`` (``k`` indexes the node's row of ``feat_sel``); ``depth``,
    ``n_root`` (per node; NaN: the node is a root and its own weight is the reference) as in
    :func:`grow_trees`. Nodes are independent of each other except for the running sums of
    :func:`_best_splits`, so the caller fixes how nodes are grouped.

    Returns ``(tot, idx, feature, bin, missing_left, gain, left_impurity, right_impurity,
    left_splittable, right_splittable, left, right, cats)``: ``tot`` (P, C) the node totals,
    then one entry per node ``idx`` that is split.
    """
    C, nb = spec.n_channels, spec.nb
    B = nb + 1
    P = len(feat_sel)
    k_i, b_i = np.divmod(loc, B)
    tot = np.zeros((P, C))
    z = k_i == 0
    for c in range(C):
        tot[:, c] = np.bincount(s_i[z], weights=vals[z, c], minlength=P)
    miss = b_i == nb
    F = feat_sel.shape[1]
    Mh = np.zeros((P, F, C))
    Mh[s_i[miss], k_i[miss]] = vals[miss]
    nm = ~miss
    n_root = np.where(np.isnan(n_root), node_weight(tot, spec.criterion), n_root)
    splittable, _ = _can_split_many(tot, depth, spec)
    sel = np.nonzero(splittable)[0]
    ent = nm & splittable[s_i]
    remap = np.full(P, -1)
    remap[sel] = np.arange(len(sel))
    valid, gain, k, p, mleft, left, right, cats = _best_splits(
        remap[s_i[ent]], k_i[ent], b_i[ent], vals[ent], Mh[sel], tot[sel], feat_sel[sel],
        spec, n_root[sel])
    return _pack(tot, sel, valid, gain, k, p, mleft, left, right, cats, feat_sel, depth, spec)


def _pack(tot, sel, valid, gain, k, p, mleft, left, right, cats, feat_sel, depth, spec):
    """:func:`split_level`'s result from the splits of nodes ``sel``."""
    depth_sel = depth[sel] + 1
    l_ok, l_imp = _can_split_many(left, depth_sel, spec)
    r_ok, r_imp = _can_split_many(right, depth_sel, spec)
    vj = np.nonzero(valid)[0]
    return (tot, sel[vj], feat_sel[sel[vj], k[vj]], p[vj], mleft[vj], gain[vj], l_imp[vj],
            r_imp[vj], l_ok[vj], r_ok[vj], left[vj], right[vj], [cats[j] for j in vj])


def split_kernel(merged, first_key, feat_sel, depth, n_root, spec: GrowSpec):
    """:func:`split_level` on a worker, for one key range of a level's merged histograms
    (global keys from ``first_key``: the range's first node)."""
    keys, vals = merged
    FB = feat_sel.shape[1] * (spec.nb + 1)
    s_i, loc = np.divmod(keys - first_key, FB)
    return split_level(s_i, loc, vals, feat_sel, depth, n_root, spec)
