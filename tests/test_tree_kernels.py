"""The numba tree kernels equal, bit for bit, the NumPy formulations they replaced (kept here as
references): the grown trees must not depend on which implementation counted the histograms."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dml.tree._binning import MISSING
from dml.tree._grow import combine_sparse, hist_kernel, route_kernel


def ref_route_kernel(part, assign, route):
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


def _sparse_sum(key, weights, size, cls=None, C=1):
    """Sums per occupied key: ``(keys, sums)`` with sums of shape (u, C) for class counts
    (``cls`` given, one weight vector) or (u, len(weights)) otherwise."""
    if size * C <= max(4 * key.size, 1 << 16):
        idx = key if cls is None else key * C + cls
        h = np.stack([np.bincount(idx, weights=wc, minlength=size * C) for wc in weights],
                     axis=-1)
        if cls is not None:
            h = h.reshape(size, C)
        nz = np.flatnonzero(h.any(axis=1))
        return nz.astype(np.int64), h[nz]
    # Deep levels: many nodes but few rows each; hashing beats a mostly empty dense grid.
    codes, uniq = pd.factorize(key)
    u = len(uniq)
    if cls is None:
        h = np.stack([np.bincount(codes, weights=wc, minlength=u) for wc in weights], axis=-1)
    else:
        h = np.bincount(codes * C + cls, weights=weights[0], minlength=u * C).reshape(u, C)
    uniq = np.asarray(uniq, dtype=np.int64)
    o = np.argsort(uniq)
    return uniq[o], h[o]


def ref_hist_kernel(part, assign, boot, slot_map, feat_sel, nb, n_channels, classify):
    """Sparse histograms of the rows in the requested slots.

    Returns ``(keys, sums)``: ``key = (slot · F + k) · (nb + 1) + bin`` for the occupied
    (slot, feature, bin) cells and their channel sums (class weights, or w, w·y, w·y²).
    """
    xb, y, w = part
    S, F = feat_sel.shape
    B = nb + 1
    slots = slot_map[np.arange(assign.shape[1])[None, :], assign]
    r, t = np.nonzero(slots >= 0)
    s = slots[r, t]
    wt = w[r] if boot is None else w[r] * boot[r, t]
    keep = wt > 0
    r, s, wt = r[keep], s[keep], wt[keep]
    if F == xb.shape[1] and (feat_sel == np.arange(F)).all():
        bins = xb[r]
    else:
        bins = xb[r[:, None], feat_sel[s]]
    if nb < MISSING:
        lut = np.arange(256, dtype=np.int64)
        lut[MISSING] = nb
        bins = lut[bins]
    key = ((s[:, None].astype(np.int64) * F + np.arange(F)) * B + bins).ravel()
    wr = np.repeat(wt, F)
    size = S * F * B
    yr = np.repeat(y[r], F)
    if classify:
        return _sparse_sum(key, [wr], size, cls=yr, C=n_channels)
    return _sparse_sum(key, [wr, wr * yr, wr * yr * yr], size)


def ref_combine(parts):
    keys = np.concatenate([p[0] for p in parts])
    vals = np.concatenate([p[1] for p in parts])
    o = np.argsort(keys, kind="stable")
    keys = keys[o]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[starts], np.add.reduceat(vals[o], starts, axis=0)


def _block(rng, n, d, nb, missing):
    xb = rng.integers(0, nb, size=(n, d)).astype(np.uint8)
    if missing:
        xb[rng.random((n, d)) < 0.15] = MISSING
    return xb


@pytest.mark.parametrize("classify", [True, False])
@pytest.mark.parametrize("boot", [True, False])
@pytest.mark.parametrize("n_slots", [3, 400])
def test_hist_kernel_equals_numpy(classify, boot, n_slots):
    rng = np.random.default_rng(n_slots + 2 * boot + classify)
    n, d, T, nb = 500, 7, 5, 20
    xb = _block(rng, n, d, nb, missing=True)
    y = rng.integers(0, 3, n).astype(np.intp) if classify else rng.normal(size=n) * 3.7
    w = rng.random(n) * 2.3
    w[rng.random(n) < 0.05] = 0.0  # zero-weight rows are skipped
    bt = rng.poisson(1.0, size=(n, T)).astype(np.uint8) if boot else None
    M = 2 * n_slots // T + 2
    assign = rng.integers(0, M, size=(n, T)).astype(np.int32)
    slot_map = np.full((T, M), -1, dtype=np.int32)
    cells = rng.permutation(T * M)[:min(n_slots, T * M)]
    slot_map.ravel()[cells] = np.arange(len(cells))
    F = 3
    feat_sel = np.sort(np.argsort(rng.random((len(cells), d)), axis=1)[:, :F], axis=1)
    C = 3
    got = hist_kernel((xb, y, w), assign, bt, slot_map, feat_sel, nb, C, classify)
    want = ref_hist_kernel((xb, y, w), assign, bt, slot_map, feat_sel, nb, C, classify)
    assert np.array_equal(got[0], want[0])
    assert np.array_equal(got[1], want[1])


def test_route_kernel_equals_numpy():
    rng = np.random.default_rng(1)
    n, d, T, M = 400, 6, 4, 9
    xb = _block(rng, n, d, 30, missing=True)
    assign = rng.integers(0, M, size=(n, T)).astype(np.int32)
    feature = np.where(rng.random((T, M)) < 0.6, rng.integers(0, d, (T, M)), -2).astype(np.int32)
    thr = rng.integers(0, 30, (T, M)).astype(np.int32)
    mleft = rng.random((T, M)) < 0.5
    left = rng.integers(M, 3 * M, (T, M)).astype(np.int32)
    right = left + 1
    cat_idx = np.where(rng.random((T, M)) < 0.3, rng.integers(0, 4, (T, M)), -1).astype(np.int32)
    bits = rng.random((4, 256)) < 0.5
    route = (feature, thr, mleft, left, right, cat_idx, bits)
    assert np.array_equal(route_kernel((xb,), assign, route),
                          ref_route_kernel((xb,), assign, route))


def test_combine_sparse_equals_numpy():
    # Magnitudes that make the summation order visible (1e16 + 1 == 1e16).
    rng = np.random.default_rng(2)
    for _ in range(200):
        P, C = int(rng.integers(2, 9)), int(rng.integers(1, 4))
        parts = []
        for _ in range(P):
            k = np.unique(rng.integers(0, 40, int(rng.integers(0, 30)))).astype(np.int64)
            v = rng.choice([1e16, -1e16, 1.0, 0.1, 3.3e-5], size=(len(k), C)) * \
                rng.random((len(k), C))
            parts.append((k, v))
        got, want = combine_sparse(parts), ref_combine(parts)
        assert np.array_equal(got[0], want[0])
        assert np.array_equal(got[1], want[1])


@pytest.mark.parametrize("crit", ["gini", "squared_error"])
def test_split_scores_equal_numpy(crit):
    from dml.tree._split import node_weight, weighted_impurity
    from dml.tree._kernels import split_scores

    rng = np.random.default_rng(3)
    N, C = 5000, (3 if crit == "squared_error" else 4)
    T_ = rng.random((N, C)) * 50.0
    if crit == "squared_error":
        T_[:, 1] = rng.normal(size=N) * 40.0
        T_[:, 2] = T_[:, 1] ** 2 / T_[:, 0] + rng.random(N) * 30.0
    L = T_ * rng.random((N, 1)) * 0.8
    Mv = T_ * rng.random((N, 1)) * 0.2
    Mv[rng.random(N) < 0.3] = 0.0
    L[:50] = T_[:50]  # empty right side
    parent = weighted_impurity(T_, crit)
    has_m = node_weight(Mv, crit) > 0
    msl = 3

    def score(left):  # the NumPy formulation of _best_splits
        right = T_ - left
        nl, nr = node_weight(left, crit), node_weight(right, crit)
        g = parent - weighted_impurity(left, crit) - weighted_impurity(right, crit)
        ok = (nl >= msl) & (nr >= msl) & (nl > 0) & (nr > 0)
        return np.where(ok, g, -np.inf)

    g1, g2 = split_scores(L, T_, Mv, has_m, parent, msl, crit == "squared_error")
    assert np.array_equal(g1, score(L))
    assert np.array_equal(g2, np.where(has_m, score(L + Mv), -np.inf))


@pytest.mark.parametrize("crit", ["gini", "squared_error"])
def test_fused_best_splits_equal_numpy_path(crit):
    # The NumPy path runs when some feature is categorical; marking one that no node uses
    # categorical leaves the arithmetic unchanged, so both paths must agree bit for bit.
    from dml.tree._split import GrowSpec, _best_splits

    rng = np.random.default_rng(4)
    S, d, F, nb = 300, 9, 3, 12
    C = 3 if crit == "squared_error" else 2
    feat_sel = np.sort(np.argsort(rng.random((S, d - 1)), axis=1)[:, :F], axis=1)
    s_i, k_i, b_i = (a.ravel() for a in np.meshgrid(np.arange(S), np.arange(F), np.arange(nb),
                                                    indexing="ij"))
    keep = rng.random(len(s_i)) < 0.4
    s_i, k_i, b_i = s_i[keep], k_i[keep], b_i[keep]
    vals = rng.random((len(s_i), C)) * rng.choice([0.3, 1.7, 5.0], size=(len(s_i), 1))
    if crit == "squared_error":
        vals[:, 1] = rng.normal(size=len(s_i)) * vals[:, 0]
        vals[:, 2] = vals[:, 1] ** 2 / vals[:, 0] + rng.random(len(s_i))
    M = rng.random((S, F, C)) * (rng.random((S, F, 1)) < 0.3)
    if crit == "squared_error":
        M[..., 2] = M[..., 1] ** 2 / np.where(M[..., 0] > 0, M[..., 0], 1) + M[..., 0]
    tot = np.zeros((S, C))
    for c in range(C):
        z = k_i == 0
        tot[:, c] = np.bincount(s_i[z], weights=vals[z, c], minlength=S)
    tot += M[:, 0]
    kw = dict(classify=crit == "gini", n_channels=C, criterion=crit, max_depth=None,
              min_samples_split=2, min_samples_leaf=1, min_impurity_decrease=0.0,
              max_features=F, n_bins=np.full(d, nb), edges=[np.arange(nb - 1.0)] * d, seed=0)
    fused = _best_splits(s_i, k_i, b_i, vals, M, tot, feat_sel,
                         GrowSpec(is_cat=np.zeros(d, bool), **kw), np.full(S, 10.0))
    is_cat = np.zeros(d, bool)
    is_cat[d - 1] = True  # never selected
    ref = _best_splits(s_i, k_i, b_i, vals, M, tot, feat_sel, GrowSpec(is_cat=is_cat, **kw),
                       np.full(S, 10.0))
    assert fused[0].any()
    for a, b in zip(fused[:7], ref[:7]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("crit", ["gini", "squared_error"])
def test_split_from_rows_equals_histogram_path(crit):
    # Deep levels send rows instead of histograms; the fused pass from the rows to the best
    # split must give what counting their histograms and scanning them gives (integer weights:
    # every sum is exact, so bit for bit). The histogram path runs when some feature is
    # categorical; marking one that no node uses changes nothing else.
    from dml.tree._grow import split_rows_kernel
    from dml.tree._split import GrowSpec

    rng = np.random.default_rng(7)
    S, d, F, nb, m = 40, 9, 3, 12, 3000
    classify = crit == "gini"
    C = 2 if classify else 3
    slot = np.sort(rng.integers(0, S, m)).astype(np.int32) + 5  # the range starts at slot 5
    bins = rng.integers(0, nb, (m, F)).astype(np.uint8)
    bins[rng.random((m, F)) < 0.05] = MISSING
    ys = rng.integers(0, 2, m).astype(np.intp) if classify else rng.integers(-3, 4, m) * 1.0
    wts = rng.integers(1, 4, m).astype(np.float64)
    # Blocks' rows arrive concatenated, each block grouped by slot: shuffle two "blocks".
    half = m // 2
    order = np.r_[np.argsort(slot[:half], kind="stable"), half + np.argsort(slot[half:],
                                                                           kind="stable")]
    merged = (slot[order], bins[order], ys[order], wts[order])
    feat_sel = np.sort(np.argsort(rng.random((S, d - 1)), axis=1)[:, :F], axis=1)
    depth = np.full(S, 3)
    kw = dict(classify=classify, n_channels=C, criterion=crit, max_depth=None,
              min_samples_split=2, min_samples_leaf=3, min_impurity_decrease=0.0,
              max_features=F, n_bins=np.full(d, nb), edges=None, seed=0)
    is_cat = np.zeros(d, bool)
    fused = split_rows_kernel(merged, 5, feat_sel, depth, np.full(S, 500.0),
                              GrowSpec(is_cat=is_cat, **kw))
    is_cat[d - 1] = True  # never selected
    ref = split_rows_kernel(merged, 5, feat_sel, depth, np.full(S, 500.0),
                            GrowSpec(is_cat=is_cat, **kw))
    assert len(fused[1]) > S // 2
    for a, b in zip(fused[:12], ref[:12]):
        assert np.array_equal(a, b)


def test_sort_prefix_sorts_the_prefix_in_place():
    # The histogram kernels' own sort (insertion sort for deep nodes' few cells, heapsort above
    # 64): the cells must come out in the order np.sort gives, the rest of the buffer untouched.
    from dml.tree._kernels import _sort_prefix

    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 3, 63, 64, 65, 66, 127, 128, 129, 500, 1001):
        a = rng.permutation(5 * n + 20)[:n + 9].astype(np.int64)
        b = a.copy()
        _sort_prefix(b, np.int64(n))
        np.testing.assert_array_equal(b[:n], np.sort(a[:n]))
        np.testing.assert_array_equal(b[n:], a[n:])


def test_rows_in_slot_order_equals_stable_argsort():
    # The rows path groups the merged rows by slot with this counting sort; it must give what
    # a stable argsort of the slots and the gathers gave (the order of a node's sums).
    from dml.tree._kernels import rows_in_slot_order

    rng = np.random.default_rng(1)
    for m, S, first in ((0, 3, 0), (1, 1, 5), (500, 7, 40), (3000, 300, 2)):
        slot = (rng.integers(0, S, m) + first).astype(np.int32)
        bins = rng.integers(0, 256, (m, 4)).astype(np.uint8)
        for y in (rng.integers(0, 3, m).astype(np.int64), rng.normal(size=m)):
            w = rng.random(m)
            local = np.empty(m, dtype=np.int64)
            out = np.empty_like(bins), np.empty_like(y), np.empty(m)
            rows_in_slot_order(slot, first, bins, y, w, np.zeros(S + 1, dtype=np.int64), local,
                               *out)
            o = np.argsort(slot, kind="stable")
            np.testing.assert_array_equal(local, slot[o] - first)
            for got, ref in zip(out, (bins[o], y[o], w[o])):
                np.testing.assert_array_equal(got, ref)


def test_binning_and_sketch_kernels_equal_numpy():
    """bin_numeric's bins are np.searchsorted's (side="left"), and the sketch's radix sort gives
    np.sort's values: edges and values of every scale, duplicates, NaN, -0.0, subnormals, huge
    values, one or no edge."""
    from dml.tree._binning import _sorted, bin_kernel

    rng = np.random.default_rng(0)
    for trial in range(60):
        n, d = int(rng.integers(1, 200)), 5
        scale = rng.choice([1.0, 0.5, 1e-300, 1e300])
        x = rng.integers(-6, 6, (n, d)).astype(float) * scale
        x[rng.random(x.shape) < 0.1] = np.nan
        x[rng.random(x.shape) < 0.05] = -0.0
        x[rng.random(x.shape) < 0.02] = rng.choice([5e-324, -1.7e308, 1.7e308])
        edges = []
        for j in range(d):
            e = np.unique(rng.integers(-7, 7, int(rng.integers(0, 20))) * rng.choice([1, 0.5])
                          * scale)
            if trial % 3 == 0:  # every distinct value an edge
                e = np.unique(np.concatenate([e, x[:, j][~np.isnan(x[:, j])]]))
            edges.append(e[:254])
        bins = bin_kernel(x if trial % 2 else np.asfortranarray(x), np.zeros(n), None, edges,
                          np.zeros(d, bool), [None] * d, None, None, "t")[0]
        for j in range(d):
            want = np.searchsorted(edges[j], x[:, j], side="left")
            want[np.isnan(x[:, j])] = MISSING
            np.testing.assert_array_equal(bins[:, j], want)
            v = x[:, j][~np.isnan(x[:, j])]
            np.testing.assert_array_equal(_sorted(v), np.sort(v))
