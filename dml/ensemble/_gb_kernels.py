"""Numba kernels of the gradient-boosted trees: gradient histograms (on the workers) and the
split scan (on the client).

A histogram holds, per (node, feature, bin), the sums of the gradients, of the hessians and the
row count, in float64; missing values (bin 255) are counted in bin ``nb`` (one past the last
real bin). The split scan is scikit-learn's ``Splitter`` (HistGradientBoosting): bins scanned
left to right with missing values going right, and, for features that had missing values in
training, right to left with missing values going left; a split must leave ``min_samples_leaf``
rows and ``min_hessian_to_split`` hessian on each side and a positive gain

    gain = -G²/(H + λ) + G_L²/(H_L + λ) + G_R²/(H_R + λ)

(written as scikit-learn computes it, from the node values ``-G / (H + λ + 1e-15)``).
"""
from __future__ import annotations

import numpy as np

from dml._numba import kernel, prefetch
from dml.tree._binning import MISSING as _MISSING  # numba freezes the global as a constant

#: How far ahead (in rows of a node's list) :func:`grow_pass` asks for a row's bins (and
#: gradients) while counting, and for its split feature's bin while routing. The rows of a
#: node are scattered over the block, so without it every row is a cache miss the hardware
#: cannot foresee (about a fifth of the kernel's time on the ``gbt`` benchmark's data). Only
#: the speed depends on them.
PREFETCH_COUNT, PREFETCH_ROUTE = 8, 32


@kernel(nogil=True)
def grow_pass(xb, g, h, use, order, nstart, ncount, feature, thr, mleft, left, right, cat_idx,
              bitsets, slot_map, out, stack, top, merges):
    """A wave on one block: the rows of the nodes split since the last wave move one level
    down, then the used rows of the counted nodes are added to their histograms.

    The rows are kept partitioned by node (LightGBM's ``DataPartition``, scikit-learn's
    ``sample_indices``): ``order[t]`` lists the rows of tree ``t`` grouped by node, each node's
    rows in increasing order from ``nstart[t, node]`` (``ncount[t, node]`` of them; a split
    node has none, its rows are its children's). So routing reads only the rows of the split
    nodes (a stable split of each one's range into its children's), and counting a node reads
    only its rows. ``order`` is rewritten in place (the caller copies it first where the input
    must stay as it was); returns the new ``(order, nstart, ncount)``.

    The histograms (S, d, nb + 1, 3) of (Σg, Σh, count), missing values in bin ``nb``, are
    counted into entry ``top`` of a stack of partial sums over a group's blocks (entry 0 is
    ``out``, entry ``i > 0`` is ``stack[i]``), zeroed first; then ``merges`` times the top
    entry is added into the one below it (the blocks' pairwise tree order, see
    :func:`dml.ensemble._gb_grow.count_group`), as ``below += top``.

    ``feature[t, node] >= 0`` marks a split (``mleft``, ``cat_idx``/``bitsets`` and ``thr``
    send a row left, as :func:`dml.tree._kernels.route` does); ``slot_map[t, node]`` is the
    slot of a node of tree ``t`` (-1: not counted); ``g`` and ``h`` have one column per tree.
    A node's rows are added in increasing order, so the sums do not depend on how the work is
    arranged.
    """
    n, d = xb.shape
    T, M = feature.shape
    cap = max(M, slot_map.shape[1], nstart.shape[1])
    # np.empty filled by element loops, not np.zeros then slice assignment: numba compiles a
    # general array-to-array slice assignment into a large amount of broadcasting code (seconds
    # of a fresh worker's first fit), and each np.zeros a zero fill of its own.
    ns = np.empty((T, cap), dtype=np.int64)
    nc = np.empty((T, cap), dtype=np.int64)
    for t in range(T):
        for a in range(cap):
            ns[t, a] = nstart[t, a] if a < nstart.shape[1] else 0
            nc[t, a] = ncount[t, a] if a < ncount.shape[1] else 0
    right_rows = np.empty(n, dtype=np.int32)
    for t in range(T):
        for a in range(M):
            f = feature[t, a]
            if f < 0:
                continue
            lo, hi = left[t, a], right[t, a]
            th, ml, ci = np.int64(thr[t, a]), mleft[t, a], cat_idx[t, a]
            first = ns[t, a]
            nl = 0
            nr = 0
            stop = first + nc[t, a]
            for i in range(first, stop):
                r = order[t, i]
                if i + PREFETCH_ROUTE < stop:
                    prefetch(xb, order[t, i + PREFETCH_ROUTE], f)
                b = xb[r, f]
                go = np.int64(b) <= th
                if ci >= 0:
                    go = bitsets[ci, b]
                if b == _MISSING:
                    go = ml
                # Whether a row goes left depends on its bins, so a branch on it would be
                # mispredicted about every other row: both lists get the row, one keeps it.
                # In place: the left rows are written at or before the position read.
                order[t, first + nl] = r
                right_rows[nr] = r
                nl += go
                nr += 1 - go
            for i in range(nr):
                order[t, first + nl + i] = right_rows[i]
            nc[t, a] = 0  # its rows are its children's now
            ns[t, lo] = first
            nc[t, lo] = nl
            ns[t, hi] = first + nl
            nc[t, hi] = nr
    nb = out.shape[2] - 1
    flat = (out if top == 0 else stack[top]).reshape(-1)
    for k in range(flat.shape[0]):  # (not np.zeros: see ns above)
        flat[k] = 0.0
    # Offset of a byte's bin in a feature's histogram: the missing byte goes to bin nb (no
    # branch per cell). Rows and offsets are unsigned below: numba tests every signed index for
    # a negative value (Python's wrap-around) before an access, a compare and select on each of
    # the histogram loop's twelve accesses per feature; unsigned ones skip it (a tenth of the
    # loop's time).
    lut = np.empty(256, dtype=np.uint64)
    for b in range(256):
        lut[b] = 3 * min(b, nb)
    lut[_MISSING] = 3 * nb
    step = 3 * (nb + 1)
    quad = np.empty(4, dtype=np.uint64)
    u1, u2, ustep = np.uint64(1), np.uint64(2), np.uint64(step)
    for t in range(slot_map.shape[0]):
        for a in range(slot_map.shape[1]):
            s = slot_map[t, a]
            if s < 0:
                continue
            i, end = ns[t, a], ns[t, a] + nc[t, a]
            # Four used rows at a time: four independent chains of additions per feature (the
            # loop is bound by the histogram's loads and stores, not by arithmetic); where two of
            # them fall in one bin the earlier row is still added first.
            while True:
                m = 0
                while m < 4 and i < end:
                    r = order[t, i]
                    if i + PREFETCH_COUNT < end:
                        # A row's bins may span two cache lines.
                        ahead = order[t, i + PREFETCH_COUNT]
                        prefetch(xb, ahead, 0)
                        prefetch(xb, ahead, d - 1)
                        prefetch(g, ahead, t)
                        prefetch(h, ahead, t)
                    i += 1
                    quad[m] = np.uint64(r)
                    m += use[r]
                k = np.uint64(s * d * step)
                if m < 4:  # the node's last used rows, one at a time
                    for q in range(m):
                        r0 = quad[q]
                        g0, h0 = np.float64(g[r0, t]), np.float64(h[r0, t])
                        k = np.uint64(s * d * step)
                        for j in range(d):
                            k0 = k + lut[xb[r0, j]]
                            flat[k0] += g0
                            flat[k0 + u1] += h0
                            flat[k0 + u2] += 1.0
                            k += ustep
                    break
                r0, r1, r2, r3 = quad[0], quad[1], quad[2], quad[3]
                g0, h0 = np.float64(g[r0, t]), np.float64(h[r0, t])
                g1, h1 = np.float64(g[r1, t]), np.float64(h[r1, t])
                g2, h2 = np.float64(g[r2, t]), np.float64(h[r2, t])
                g3, h3 = np.float64(g[r3, t]), np.float64(h[r3, t])
                for j in range(d):
                    k0 = k + lut[xb[r0, j]]
                    k1 = k + lut[xb[r1, j]]
                    k2 = k + lut[xb[r2, j]]
                    k3 = k + lut[xb[r3, j]]
                    flat[k0] += g0
                    flat[k0 + u1] += h0
                    flat[k0 + u2] += 1.0
                    flat[k1] += g1
                    flat[k1 + u1] += h1
                    flat[k1 + u2] += 1.0
                    flat[k2] += g2
                    flat[k2 + u1] += h2
                    flat[k2 + u2] += 1.0
                    flat[k3] += g3
                    flat[k3 + u1] += h3
                    flat[k3 + u2] += 1.0
                    k += ustep
    # The merges while this block's sums are still in the cache (no pass of their own, no
    # array per block): the same additions, in the same order, as the tree of the blocks.
    for q in range(merges):
        src = stack[top - q].reshape(-1)
        dst = (out if top - q - 1 == 0 else stack[top - q - 1]).reshape(-1)
        for k in range(dst.shape[0]):
            dst[k] += src[k]
    return order, ns, nc


@kernel(nogil=True, inline="always")
def _value(G, H, l2):
    return -G / (H + l2 + 1e-15)


@kernel(nogil=True, inline="always")
def _gain(GL, HL, GR, HR, loss_node, l2):
    vl = _value(GL, HL, l2)
    vr = _value(GR, HR, l2)
    gain = loss_node
    gain -= GL * vl
    gain -= GR * vr
    return gain


@kernel(nogil=True)
def best_splits(hist, G, H, N, n_bins, has_missing, feat_mask, min_samples_leaf, min_hessian,
                l2):
    """Best split of each slot (scikit-learn's scan; ties keep the first feature, then bin).

    Returns an (S, 7) float64 array, per slot: ``gain`` (-1 when no valid split),
    ``feature``, ``bin``, ``missing_left`` (0 or 1) and the left child's ``G_L, H_L, N_L``
    (one array, not seven: the caller reads them as Python floats, and a kernel returning
    seven arrays paid for boxing each of them, twice a wave).
    """
    S, d, _, _ = hist.shape
    # np.empty and a loop, not np.full/np.zeros: numba compiles each of those (per dtype) on a
    # fresh worker's first fit, about 0.4 CPU s here.
    out = np.empty((S, 7))
    for s in range(S):
        out[s, 0] = -1.0
        for c in range(1, 7):
            out[s, c] = 0.0
    for s in range(S):
        Gs, Hs, Ns = G[s], H[s], N[s]
        loss_node = Gs * _value(Gs, Hs, l2)
        for f in range(d):
            if not feat_mask[s, f]:
                continue
            best = -1.0
            found = False
            bb, bml, bgl, bhl, bnl = 0, False, 0.0, 0.0, 0.0
            hm = has_missing[f]
            end = n_bins[f] - 1 + (1 if hm else 0)
            gl = 0.0
            hl = 0.0
            nl = 0.0
            for b in range(end):
                gl += hist[s, f, b, 0]
                hl += hist[s, f, b, 1]
                nl += hist[s, f, b, 2]
                nr = Ns - nl
                hr = Hs - hl
                gr = Gs - gl
                if nl < min_samples_leaf:
                    continue
                if nr < min_samples_leaf:
                    break
                if hl < min_hessian:
                    continue
                if hr < min_hessian:
                    break
                gain = _gain(gl, hl, gr, hr, loss_node, l2)
                if gain > best and gain > 0.0:
                    found = True
                    best = gain
                    bb, bml, bgl, bhl, bnl = b, False, gl, hl, nl
            if hm:
                gr = 0.0
                hr = 0.0
                nr = 0.0
                for b in range(n_bins[f] - 2, -1, -1):
                    gr += hist[s, f, b + 1, 0]
                    hr += hist[s, f, b + 1, 1]
                    nr += hist[s, f, b + 1, 2]
                    nl = Ns - nr
                    hl = Hs - hr
                    gl = Gs - gr
                    if nr < min_samples_leaf:
                        continue
                    if nl < min_samples_leaf:
                        break
                    if hr < min_hessian:
                        continue
                    if hl < min_hessian:
                        break
                    gain = _gain(gl, hl, gr, hr, loss_node, l2)
                    if gain > best and gain > 0.0:
                        found = True
                        best = gain
                        bb, bml, bgl, bhl, bnl = b, True, gl, hl, nl
            if found and best > out[s, 0]:
                out[s, 0] = best
                out[s, 1] = f
                out[s, 2] = bb
                out[s, 3] = 1.0 if bml else 0.0
                out[s, 4] = bgl
                out[s, 5] = bhl
                out[s, 6] = bnl
    return out


#: A category (or the missing values) takes part in a categorical split only with at least this
#: much hessian (in rows when the hessians are 1); it also smooths the ordering ratio below.
#: scikit-learn's ``MIN_CAT_SUPPORT`` (LightGBM's ``cat_smooth``).
MIN_CAT_SUPPORT = 10.0


@kernel(nogil=True)
def best_split_categorical(hist, G, H, N, n_bins, has_missing, min_samples_leaf, min_hessian,
                           l2):
    """Best split of one categorical feature of one node, as scikit-learn's ``Splitter``.

    ``hist`` is the feature's (nb + 1, 3) histogram (missing values in the last bin). The
    categories with enough support (the missing values count as one more category when the
    feature had some in training) are ordered by ``Σg / (Σh + MIN_CAT_SUPPORT)`` and scanned
    as if they were ordered values: the first ``i`` go left, from the left end up to the
    middle, then the last ``i`` from the right end up to just before the middle; categories of
    too little support always go right. Sorting by that ratio is what makes a scan of
    ``k - 1`` cuts find (nearly) the best of the ``2**(k-1)`` partitions (Fisher's grouping).

    Returns ``gain`` (-1 without a valid split), ``G_L, H_L, N_L``, the (256,) mask of the bins
    that go left, and whether the missing values go left.
    """
    miss = hist.shape[0] - 1
    m = n_bins + (1 if has_missing else 0)
    bins = np.empty(m, dtype=np.int64)
    ratio = np.empty(m, dtype=np.float64)
    support = N / H
    k = 0
    for b in range(m):
        bb = b if b < n_bins else miss
        hb = hist[bb, 1]
        if hb * support >= MIN_CAT_SUPPORT:
            bins[k] = bb
            ratio[k] = hist[bb, 0] / (hb + MIN_CAT_SUPPORT)
            k += 1
    left = np.zeros(256, dtype=np.bool_)
    if k <= 1:
        return -1.0, 0.0, 0.0, 0.0, left, False
    order = np.argsort(ratio[:k], kind="mergesort")
    loss_node = G * _value(G, H, l2)
    best = -1.0
    best_i, best_dir = 0, 1
    bgl, bhl, bnl = 0.0, 0.0, 0.0
    for direction in (1, -1):
        middle = (k + 1) // 2 if direction == 1 else (k + 1) // 2 - 1
        gl = 0.0
        hl = 0.0
        nl = 0.0
        for i in range(middle):
            pos = i if direction == 1 else k - 1 - i
            bb = bins[order[pos]]
            nl += hist[bb, 2]
            hl += hist[bb, 1]
            gl += hist[bb, 0]
            nr = N - nl
            hr = H - hl
            gr = G - gl
            if nl < min_samples_leaf or hl < min_hessian:
                continue
            if nr < min_samples_leaf or hr < min_hessian:
                break
            gain = _gain(gl, hl, gr, hr, loss_node, l2)
            if gain > best and gain > 0.0:
                best = gain
                best_i, best_dir = pos, direction
                bgl, bhl, bnl = gl, hl, nl
    mleft = False
    if best > 0.0:
        lo, hi = (0, best_i + 1) if best_dir == 1 else (best_i, k)
        for pos in range(lo, hi):
            bb = bins[order[pos]]
            if bb == miss:
                mleft = True
            else:
                left[bb] = True
    return best, bgl, bhl, bnl, left, mleft
