"""Numba kernels for the per-block work of tree growth: sparse node histograms and routing.

They replace NumPy formulations that built index arrays of ``rows × trees × features`` entries
and then counted them with ``np.bincount`` / ``pd.factorize`` (several passes over large
temporaries, which dominated the forest's fit time). The loops here visit each entry once.

Floating-point sums are accumulated in the same order as the NumPy formulations did (for each
histogram cell, its rows in increasing row order, starting from 0.0), so the histograms, and
therefore the grown trees, are bitwise the same.
"""
from __future__ import annotations

import numpy as np

from dml._numba import kernel
from dml.tree._binning import MISSING as _MISSING  # numba freezes the global as a constant


@kernel(nogil=True)
def hist_sparse(xb, y, count, rows, wts, feat_sel, nb, C, classify, keys, sums, grid, seen,
                touched):
    """Sparse histograms of the entries of every requested slot, as grouped by
    :func:`group_by_slot`.

    Parameters
    ----------
    xb : ndarray of uint8, shape (n, d)
        Binned block (255 = missing).
    y : ndarray, shape (n,)
        Class index (intp) when ``classify``, else the float64 target.
    count, rows, wts : ndarray
        Slot ``s`` holds the entries ``count[s]:count[s + 1]``: their rows and weights.
    feat_sel : ndarray of int, shape (S, F)
        Features counted in each slot.
    nb : int
        Bins per feature besides missing; missing values are counted in bin ``nb``.
    C : int
        Channels: the number of classes, or 3 for regression (w, w·y, w·y²).
    classify : bool
    keys, sums : ndarray of int64 (cap,) and float64 (cap, C)
        Output, ``cap >= min(entries · F, S · F · (nb + 1))``: ``(slot · F + k) · (nb + 1) +
        bin`` of the occupied cells, sorted, and their channel sums.
    grid, seen, touched : ndarray
        Scratch: zeros of shape (F · (nb + 1), C), False (F · (nb + 1)), any (F · (nb + 1)).
        Left as given.

    Returns
    -------
    int
        The number of occupied cells written to ``keys`` and ``sums``.

    The caller allocates every array: numba compiles its array constructors once per type,
    which cost about as much as the loops on a worker's first fit.
    """
    S, F = feat_sel.shape
    B = nb + 1
    # One slot at a time into a small dense grid (features × bins × channels); only the cells
    # touched are read out, sorted, and reset.
    out = 0
    for s in range(S):
        nt = 0
        for e in range(count[s], count[s + 1]):
            r = rows[e]
            wt = wts[e]
            for k in range(F):
                b = np.int64(xb[r, feat_sel[s, k]])
                if b == _MISSING:
                    b = nb
                cell = k * B + b
                if not seen[cell]:
                    seen[cell] = True
                    touched[nt] = cell
                    nt += 1
                if classify:
                    grid[cell, np.int64(y[r])] += wt
                else:
                    yr = np.float64(y[r])
                    wy = wt * yr
                    grid[cell, 0] += wt
                    grid[cell, 1] += wy
                    grid[cell, 2] += wy * yr
        if nt > 64 and nt * 16 >= F * B:
            # Many cells: reading the flags in order is cheaper than sorting.
            j = 0
            for cell in range(F * B):
                if seen[cell]:
                    touched[j] = cell
                    j += 1
        else:
            # np.int64: numba would also compile a copy for the constant 0 that nt starts as.
            _sort_prefix(touched, np.int64(nt))
        base = np.int64(s) * F * B
        for i in range(nt):
            cell = touched[i]
            keys[out] = base + cell
            for c in range(C):
                sums[out, c] = grid[cell, c]
                grid[cell, c] = 0.0
            seen[cell] = False
            out += 1
    return out


@kernel(nogil=True)
def _sort_prefix(a, n):
    """Sort ``a[:n]`` (distinct integers) in place, without allocating: insertion sort for the
    handful of cells of a deep node, heapsort above. numba's ``np.sort`` would do the same job
    but costs over a second of compilation on a worker's first fit; the sorted order of
    distinct keys is unique, so the histograms do not change.
    """
    if n <= 64:
        for i in range(1, n):
            v = a[i]
            j = i - 1
            while j >= 0 and a[j] > v:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = v
        return
    # Heapsort in one loop (no helper called with a constant: numba would compile a copy of it
    # per constant): first sift every inner node down (build the max-heap), then repeatedly
    # swap the maximum to the end and sift the new root down.
    start = n // 2
    end = n
    while end > 1:
        if start > 0:
            start -= 1
        else:
            end -= 1
            v = a[0]
            a[0] = a[end]
            a[end] = v
        root = start
        while True:
            child = 2 * root + 1
            if child >= end:
                break
            if child + 1 < end and a[child + 1] > a[child]:
                child += 1
            if a[root] >= a[child]:
                break
            v = a[root]
            a[root] = a[child]
            a[child] = v
            root = child


@kernel(nogil=True)
def group_by_slot(assign, slot_map, w, boot, has_boot, count, rows, wts, fill):
    """Counting sort of the (row, tree) entries of positive weight by slot, in two calls.

    The slot of row ``r`` in tree ``t`` is ``slot_map[t, assign[r, t]]`` (-1: not counted); an
    entry's weight is ``w[r] · boot[r, t]`` (``w[r]`` unless ``has_boot``). Without ``fill``,
    ``count`` (S + 1 zeros) gets the number of entries of slot ``s`` at ``s + 1``; the caller
    takes its cumulative sum (slot ``s`` then holds entries ``count[s]:count[s + 1]``) and
    calls again with ``fill``, ``count`` a copy of the first ``S`` of those offsets (advanced
    in place), and ``rows``, ``wts`` of the total length, which get each entry's row and
    weight. Within a slot the rows stay in increasing order (a slot belongs to one tree): the
    summation order of the NumPy formulation.
    """
    n, T = assign.shape
    for r in range(n):
        for t in range(T):
            s = slot_map[t, assign[r, t]]
            if s >= 0:
                wt = w[r] * boot[r, t] if has_boot else w[r]
                if wt > 0:
                    if fill:
                        rows[count[s]] = r
                        wts[count[s]] = wt
                        count[s] += 1
                    else:
                        count[s + 1] += 1


@kernel(nogil=True)
def rows_in_slot_order(slot, first_slot, bins, y, w, count, local, bins_out, y_out, w_out):
    """The merged rows of a slot range grouped by slot, keeping their order within a slot
    (a stable counting sort, with the gathers, in two passes over the rows).

    ``slot`` (int32): each row's global slot, from ``first_slot`` up to ``first_slot + S``;
    ``bins``, ``y``, ``w``: the rows' bins (uint8, rows × F), targets and weights. ``count``:
    scratch, ``S + 1`` zeros. Fills ``local`` (int64, the slot minus ``first_slot``),
    ``bins_out``, ``y_out``, ``w_out`` in slot order: what ``np.argsort(kind="stable")`` of
    the slots and four gathers produced, in one pass instead of five.
    """
    m, F = bins.shape
    S = count.shape[0] - 1
    for e in range(m):
        count[slot[e] - first_slot + 1] += 1
    for s in range(S):
        count[s + 1] += count[s]
    for e in range(m):
        s = slot[e] - first_slot
        d = count[s]
        count[s] = d + 1
        local[d] = s
        for k in range(F):
            bins_out[d, k] = bins[e, k]
        y_out[d] = y[e]
        w_out[d] = w[e]


@kernel(nogil=True)
def rows_by_slot(xb, count, rows, feat_sel, slot, bins):
    """The entries of every requested slot as rows: for nodes whose rows take fewer bytes than
    their histograms (deep levels), the rows travel and the histograms are built where they
    are merged.

    ``count``, ``rows``: the entries grouped by slot (:func:`group_by_slot`). Fills ``slot``
    (int32, per entry) and ``bins`` (uint8, entries × F: each entry's bins of its slot's
    features ``feat_sel[slot]``).
    """
    S, F = feat_sel.shape
    for s in range(S):
        for e in range(count[s], count[s + 1]):
            slot[e] = s
            r = rows[e]
            for k in range(F):
                bins[e, k] = xb[r, feat_sel[s, k]]


@kernel(nogil=True)
def route(xb, assign, feature, thr, mleft, left, right, cat_idx, bitsets):
    """New node assignment: rows of nodes with a split (``feature >= 0``) move to a child.

    A missing value follows ``mleft``; a categorical split sends the categories in its bitset
    row left; a numeric one sends ``bin <= thr`` left.
    """
    n, T = assign.shape
    new = assign.copy()
    for r in range(n):
        for t in range(T):
            a = assign[r, t]
            f = feature[t, a]
            if f < 0:
                continue
            b = xb[r, f]
            if b == _MISSING:
                go = mleft[t, a]
            else:
                ci = cat_idx[t, a]
                if ci >= 0:
                    go = bitsets[ci, b]
                else:
                    go = np.int64(b) <= thr[t, a]
            new[r, t] = left[t, a] if go else right[t, a]
    return new


@kernel(nogil=True)
def merge_sum(keys, vals, offsets, out_k, out_v, pos, acc):
    """Sum sparse histograms given as sorted runs ``keys[offsets[p]:offsets[p + 1]]`` (unique
    keys within a run) key by key; the result's keys are sorted.

    A key found in runs ``p0 < p1 < ...`` gets ``v0 + ((0 + v1) + v2 + ...)``: exactly what
    ``np.add.reduceat`` over a stable sort of the concatenation computed (NumPy reduces the
    elements after the first with its pairwise sum, which is sequential below 8 terms; callers
    pass at most 8 runs), so the merged histograms are bitwise those of the NumPy version.

    Writes the result to ``out_k`` (int64) and ``out_v`` (float64, C columns), at least as long
    as ``keys``, and returns its length; ``pos`` (a copy of ``offsets[:-1]``) and ``acc``
    (C floats) are scratch.
    """
    P = offsets.shape[0] - 1
    C = vals.shape[1]
    o = 0
    while True:
        best = -1
        bk = np.int64(0)
        for p in range(P):
            if pos[p] < offsets[p + 1]:
                k = keys[pos[p]]
                if best < 0 or k < bk:
                    best = p
                    bk = k
        if best < 0:
            break
        cnt = 0
        for p in range(P):  # run order: the order of the stable sort
            i = pos[p]
            if i < offsets[p + 1] and keys[i] == bk:
                if cnt == 0:
                    for c in range(C):
                        out_v[o, c] = vals[i, c]
                        acc[c] = 0.0
                else:
                    for c in range(C):
                        acc[c] += vals[i, c]
                cnt += 1
                pos[p] = i + 1
        if cnt > 1:
            for c in range(C):
                out_v[o, c] = out_v[o, c] + acc[c]
        out_k[o] = bk
        o += 1
    return o


@kernel(nogil=True)
def _weight_impurity(v, squared_error):
    """``(node weight, n · impurity)`` of one statistics row, with NumPy's operation order:
    channel sums left to right, ``n - Σ v² / n`` (gini) or ``max(q - s² / w, 0)``.

    A plain call, not ``inline="always"``: numba's inlining re-types the body at each of its
    call sites (about 1.4 CPU s more to compile the tree kernels on a worker's first fit);
    warm forest fits measured equally fast either way, with the same trees.
    """
    if squared_error:
        w = v[0]
        out = v[2] - (v[1] * v[1] / w if w > 0 else 0.0)
        if out < 0.0:
            out = 0.0
        return w, out
    n = v[0]
    sq = v[0] * v[0]
    for c in range(1, v.shape[0]):
        n = n + v[c]
        sq = sq + v[c] * v[c]
    return n, (n - sq / n if n > 0 else 0.0)


@kernel(nogil=True)
def _side_gain(L, Mv, T_, missing_left, parent, msl, squared_error):
    """Gain of one candidate: left statistics ``L`` (+ the missing bin ``Mv`` when the missing
    rows go left), right = totals ``T_`` − left; ``-inf`` when a side is empty or lighter than
    ``msl``. Shared by :func:`split_scores`, :func:`best_candidates` and
    :func:`best_from_rows` so all score a split with the same operations, in the same order.

    The operations of :func:`_weight_impurity` applied to the left and right rows, written out
    on scalars: no scratch rows written and read back per candidate, which made this the
    larger part of the rows path's split search (about 40% less time in
    :func:`best_from_rows` at deep levels). Every value, and its rounding, is unchanged.
    """
    if squared_error:
        l0 = L[0] + Mv[0] if missing_left else L[0]
        l1 = L[1] + Mv[1] if missing_left else L[1]
        l2 = L[2] + Mv[2] if missing_left else L[2]
        r0 = T_[0] - l0
        r1 = T_[1] - l1
        r2 = T_[2] - l2
        nl = l0
        il = l2 - (l1 * l1 / l0 if l0 > 0 else 0.0)
        if il < 0.0:
            il = 0.0
        nr = r0
        ir = r2 - (r1 * r1 / r0 if r0 > 0 else 0.0)
        if ir < 0.0:
            ir = 0.0
    else:
        # Channel sums left to right, as _weight_impurity: n and sum of squares.
        lc = L[0] + Mv[0] if missing_left else L[0]
        rc = T_[0] - lc
        nl = lc
        sql = lc * lc
        nr = rc
        sqr = rc * rc
        for c in range(1, L.shape[0]):
            lc = L[c] + Mv[c] if missing_left else L[c]
            rc = T_[c] - lc
            nl = nl + lc
            sql = sql + lc * lc
            nr = nr + rc
            sqr = sqr + rc * rc
        il = nl - sql / nl if nl > 0 else 0.0
        ir = nr - sqr / nr if nr > 0 else 0.0
    ok = (nl >= msl) and (nr >= msl) and (nl > 0) and (nr > 0)
    return (parent - il) - ir if ok else -np.inf


@kernel(nogil=True)
def split_scores(L, T_, Mv, has_m, parent, msl, squared_error):
    """Gains of every candidate split, missing values right (``g1``) and left (``g2``).

    Row ``i``: the left statistics ``L[i]`` (non-missing rows up to the threshold), the node's
    total ``T_[i]``, its missing-bin statistics ``Mv[i]`` and weighted impurity ``parent[i]``.
    A side lighter than ``msl`` or empty gives ``-inf``; ``g2`` is ``-inf`` without missing
    values. Equal, bit for bit, to the NumPy formulation in :func:`dml.tree._split._best_splits`
    (no fused multiply-adds: numba does not contract without ``fastmath``).
    """
    N = L.shape[0]
    g1 = np.empty(N, dtype=np.float64)
    g2 = np.empty(N, dtype=np.float64)
    for i in range(N):
        for side in range(2):
            if side == 1 and not has_m[i]:
                g2[i] = -np.inf
                continue
            g = _side_gain(L[i], Mv[i], T_[i], side == 1, parent[i], msl, squared_error)
            if side == 0:
                g1[i] = g
            else:
                g2[i] = g
    return g1, g2


@kernel(nogil=True)
def best_candidates(s_i, k_i, vals, tot, M, parent, msl, squared_error, best, gains, Lb, work):
    """The best candidate split of every node, in one pass over its sparse histogram cells.

    ``s_i, k_i, vals``: the occupied non-missing cells sorted by (node, feature, bin); ``tot``
    (nodes, C), ``M`` (nodes, F, C): totals and missing bins; ``parent`` (nodes,): weighted
    impurities. Per cell the left statistics are ``csum - csum[before the feature's first
    cell]`` with ``csum`` the running sum over all cells (as ``np.cumsum`` then a subtraction:
    not a per-feature restart, which would round differently), scored with the missing rows
    right (``g1``) and left (``g2``) as :func:`split_scores`. Ties go to the first cell.

    Outputs, for the ``nn`` nodes present (the return value), in node order: ``best[:nn]``
    (int64) the index of each one's best cell, ``gains[0, :nn]`` and ``gains[1, :nn]`` its
    gains (``gains``: float64, shape (3, nodes), row 2 scratch) and ``Lb[:nn]`` (float64,
    nodes × C) its left statistics (missing rows excluded). ``work``: scratch, (3, C) zeros.
    """
    N, C = vals.shape
    g1b = gains[0]
    g2b = gains[1]
    gbest = gains[2]
    csum = work[0]
    before = work[1]
    L = work[2]
    nn = -1
    for i in range(N):
        s = s_i[i]
        if i == 0 or s != s_i[i - 1] or k_i[i] != k_i[i - 1]:
            for c in range(C):
                before[c] = csum[c] if i > 0 else 0.0
        for c in range(C):
            csum[c] = csum[c] + vals[i, c] if i > 0 else vals[i, c]
            L[c] = csum[c] - before[c]
        k = k_i[i]
        has_m, _ = _weight_impurity(M[s, k], squared_error)
        g1 = -np.inf
        g2 = -np.inf
        for side in range(2):
            if side == 1 and not has_m > 0:
                break
            g = _side_gain(L, M[s, k], tot[s], side == 1, parent[s], msl, squared_error)
            if side == 0:
                g1 = g
            else:
                g2 = g
        g = g1 if g1 >= g2 else g2
        if i == 0 or s != s_i[i - 1]:
            nn += 1
            gbest[nn] = -np.inf
            best[nn] = -1
        if best[nn] < 0 or g > gbest[nn]:
            best[nn] = i
            gbest[nn] = g
            g1b[nn] = g1
            g2b[nn] = g2
            for c in range(C):
                Lb[nn, c] = L[c]
    return nn + 1


@kernel(nogil=True)
def best_from_rows(slot, bins, y, w, nb, C, classify, msl, squared_error, tot, bk, bb, gains,
                   Lb, Mb, grid, seen, touched, work):
    """Totals and best candidate split of every slot, straight from its rows.

    The rows (grouped by ``slot``; ``bins`` (rows × F) the bins of the slot's features, ``y``,
    ``w``) are counted one slot and feature
    at a time into a small dense grid whose occupied non-missing bins are then scanned in
    order, as :func:`best_candidates` scans the cells of a merged histogram: the same
    candidates, scored by the same :func:`_side_gain`, ties to the first (lowest feature, then
    bin). Sums run over the rows in their order, so with integer weights (counts, bootstrap
    multiplicities) every number equals the histogram path's.

    Outputs, per slot (the caller initialises them): ``tot`` (S × C zeros) its totals; ``bk``,
    ``bb`` (int64, -1 and 0) the feature (column of ``bins``) and bin of its best candidate
    (-1: none); ``gains`` (2 × S, -inf) that candidate's gains with the missing rows right and
    left (-inf: not a valid split); ``Lb``, ``Mb`` (S × C zeros) its left statistics (missing
    rows excluded) and its feature's missing bin. Scratch: ``grid`` ((nb + 1) × C zeros),
    ``seen`` (nb + 1 False), ``touched`` (nb + 1 int64), ``work`` (1 × C floats).
    """
    m, F = bins.shape
    B = nb + 1
    g1b = gains[0]
    g2b = gains[1]
    L = work[0]
    e0 = 0
    while e0 < m:
        s = slot[e0]
        e1 = e0
        while e1 < m and slot[e1] == s:
            e1 += 1
        for e in range(e0, e1):
            if classify:
                tot[s, np.int64(y[e])] += w[e]
            else:
                yr = np.float64(y[e])
                wy = w[e] * yr
                tot[s, 0] += w[e]
                tot[s, 1] += wy
                tot[s, 2] += wy * yr
        _, parent = _weight_impurity(tot[s], squared_error)
        gbest = -np.inf
        for k in range(F):
            nt = 0
            for e in range(e0, e1):
                b = np.int64(bins[e, k])
                if b == _MISSING:
                    b = nb
                if not seen[b]:
                    seen[b] = True
                    touched[nt] = b
                    nt += 1
                if classify:
                    grid[b, np.int64(y[e])] += w[e]
                else:
                    yr = np.float64(y[e])
                    wy = w[e] * yr
                    grid[b, 0] += w[e]
                    grid[b, 1] += wy
                    grid[b, 2] += wy * yr
            if nt <= 32:
                _sort_prefix(touched, np.int64(nt))
            else:
                j = 0
                for b in range(B):
                    if seen[b]:
                        touched[j] = b
                        j += 1
            Mv = grid[nb]
            has_m, _ = _weight_impurity(Mv, squared_error)
            for c in range(C):
                L[c] = 0.0
            first = True
            for i in range(nt):
                b = touched[i]
                if b == nb:
                    continue
                for c in range(C):
                    L[c] = grid[b, c] if first else L[c] + grid[b, c]
                first = False
                # side == 1, not the literals False/True: numba would compile _side_gain once
                # per literal (a second each on a worker's first fit).
                g1 = -np.inf
                g2 = -np.inf
                for side in range(2):
                    if side == 1 and not has_m > 0:
                        break
                    g = _side_gain(L, Mv, tot[s], side == 1, parent, msl, squared_error)
                    if side == 0:
                        g1 = g
                    else:
                        g2 = g
                g = g1 if g1 >= g2 else g2
                if bk[s] < 0 or g > gbest:
                    gbest = g
                    bk[s] = k
                    bb[s] = b
                    g1b[s] = g1
                    g2b[s] = g2
                    for c in range(C):
                        Lb[s, c] = L[c]
                        Mb[s, c] = Mv[c]
            for i in range(nt):
                b = touched[i]
                seen[b] = False
                for c in range(C):
                    grid[b, c] = 0.0
        e0 = e1

