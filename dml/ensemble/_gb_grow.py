"""One boosting round: best-first growth of the round's trees from distributed gradient
histograms, in a few *waves* (steps of the chained graph of :mod:`dml.ensemble._gb_chain`).

The workers keep, per block, the binned features and targets and a *state*: raw predictions,
float32 gradients and hessians (already multiplied by the sample weight) and the mask of rows
used this round, and the rows grouped by node (:func:`init_nodes`). A wave routes the rows of
newly split nodes to their children (reading only those nodes' rows) and returns the
histograms (Σg, Σh, count per node, feature and bin) of the requested nodes, summed over the
blocks in a fixed order.

Best-first growth, as scikit-learn's ``TreeGrower``: the open node with the largest gain is
split next; a child's best split is computed from its histogram as soon as the node is split.
Doing one wave per split would cost a wave per leaf, so each wave also *speculatively*
expands the best few open nodes that may still be split (:data:`SPECULATE_MIN`,
:data:`SPECULATE_SHARE`; not those that cannot be, given the leaves left and the splits known
to come first): their children's histograms are counted in the same pass. Splits are then
committed in exactly scikit-learn's order; a speculative expansion that is never committed is
discarded (its rows keep the value of the leaf they are in). The grown tree does not depend on
the speculation, only the number of waves does (about the depth of the tree).

Sibling subtraction: of two children whose histograms are needed only the smaller (by row
count) is counted; the other is the parent's histogram minus it.
"""
from __future__ import annotations

import copy
import functools
import heapq

import numpy as np

from dml._blocks import block_rng
from dml._graph import tree_depth
from dml.ensemble import _gb_kernels

#: Hessian below which a side of a split is refused (scikit-learn's ``min_hessian_to_split``).
MIN_HESSIAN = 1e-3

#: How many open nodes of a tree a wave expands ahead of time, at most: ``SPECULATE_MIN``, or a
#: ``SPECULATE_SHARE``-th of the splits still to make when that is more. Wider waves counted
#: many children that were never used (a third of the histograms of the ``gbt`` benchmark) for
#: hardly fewer waves; narrower ones need more waves (docs/gradient_boosting.md, "Cost"). Only
#: the work depends on it, never the tree.
SPECULATE_MIN, SPECULATE_SHARE = 4, 4


# --------------------------------------------------------------------------------------------
# worker side
# --------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=16)
def _no_route(T, M):
    # Shared by every call without routing (the kernel only reads these arrays).
    return (np.full((T, M), -2, dtype=np.int32), np.zeros((T, M), dtype=np.int32),
            np.zeros((T, M), dtype=bool), np.zeros((T, M), dtype=np.int32),
            np.zeros((T, M), dtype=np.int32), np.full((T, M), -1, dtype=np.int32),
            np.zeros((0, 256), dtype=bool))


def grow_kernel(part, state, nodes, route, slot_map, S, nb, in_place=False, stack=None):
    """A wave on one block: the rows of the nodes split since the last wave move one level
    down (``route``: None when none were), then the requested histograms are counted.
    ``nodes`` is the block's ``(order, nstart, ncount)`` (:func:`init_nodes`); its ``order``
    is rewritten by the routing when ``in_place`` (a long-lived task owns its state), else
    copied first (a task of a graph leaves its inputs as they were: it may run again).
    Returns the new ``nodes`` and the histograms; with ``stack`` (``(out, scratch, top,
    merges)``, :func:`count_group`) the histograms go into that stack of partial sums instead
    and only the new ``nodes`` are returned."""
    order = nodes[0]
    if route is None:
        route = _no_route(*slot_map.shape)
    elif not in_place:
        order = order.copy()
    g, h, use = state[1], state[2], state[3]
    if stack is None:
        out = np.empty((int(S), part[0].shape[1], int(nb) + 1, 3), dtype=np.float64)
        return _gb_kernels.grow_pass(part[0], g, h, use, order, nodes[1], nodes[2], *route,
                                     slot_map, out, _no_stack(), 0, 0), out
    return _gb_kernels.grow_pass(part[0], g, h, use, order, nodes[1], nodes[2], *route,
                                 slot_map, *stack)


@functools.lru_cache(maxsize=1)
def _no_stack():
    return np.zeros((1, 0, 0, 0, 3))


def route_kernel(part, state, nodes, route, in_place=False):
    """Only the routing of a wave (the last splits of a round): the new ``nodes``."""
    T = nodes[0].shape[0]
    return grow_kernel(part, state, nodes, route, np.full((T, 1), -1, dtype=np.int32), 0, 0,
                       in_place)[0]


@functools.lru_cache(maxsize=64)
def tree_plan(lo, hi, n):
    """How a group of blocks ``lo .. hi - 1`` (of ``n``) adds its blocks' values up in the
    fixed binary tree of :func:`dml._block_groups.range_reduce`, as a stack: per block, the
    stack entry it is counted into and how many times the top entry is then added into the
    one below (a binary counter's carries); and the ``(level, index)`` of each entry left at
    the end (the group's pieces of the tree, those of ``range_reduce``). A node with a single
    child (the last one of a level of odd length) is its child, as there."""
    labels, plan, depth = [], [], tree_depth(n, 2)
    for j in range(lo, hi):
        labels.append((0, j))
        top, merges = len(labels) - 1, 0
        while True:
            L, i = labels[-1]
            p = i // 2
            size = 1 << (L + 1)
            if L == depth or p * size < lo or min((p + 1) * size, n) > hi:
                break
            if i % 2 == 0 and 2 * p + 1 < -(-n // (1 << L)):
                break  # the right sibling is still to come
            if i % 2 == 1:  # both children here: the left one takes the right one's sums
                labels.pop()
                merges += 1
            labels[-1] = (L + 1, p)
        plan.append((top, merges))
    # Cached (every wave of a group asks for the same plan): read-only tuples.
    return tuple(plan), tuple(labels)


def count_group(prep, carried, route, slot_map, S, nb, start, n_blocks, in_place=False):
    """A wave on a group's blocks: :func:`grow_kernel` on each, the histograms added up in the
    fixed tree over all blocks as they are counted (:func:`tree_plan`). Returns the blocks' new
    ``nodes`` and the group's pieces of the tree, ``{(level, index): histograms}``: those of
    :func:`~dml._block_groups.range_reduce` bit for bit (the same additions in the same order
    as when every block's histograms were an array of their own, added into the first of each
    pair). Every block is counted into a zeroed entry of the stack and the kernel does the
    merges while the sums are in the cache: no array per block and no pass of their own."""
    plan, labels = tree_plan(start, start + len(prep), n_blocks)
    d = prep[0][0].shape[1]
    deepest = max(top for top, _ in plan)
    out = np.empty((int(S), d, int(nb) + 1, 3), dtype=np.float64)
    scratch = np.empty((deepest + 1, int(S), d, int(nb) + 1, 3), dtype=np.float64)
    nodes = [grow_kernel(p, c, c[4], route, slot_map, S, nb, in_place,
                         (out, scratch, top, merges))
             for p, c, (top, merges) in zip(prep, carried, plan)]
    return nodes, {lab: out if i == 0 else scratch[i] for i, lab in enumerate(labels)}


def feature_share(partial, lo, hi):
    """A group's partial histograms (``{piece: (nodes, features, bins, 3)}``) restricted to
    features ``lo .. hi - 1``: what the group owning those features receives in a
    reduce-scatter (views; the channel copies them into its frame)."""
    return {k: v[:, lo:hi] for k, v in partial.items()}


def sum_hists(parts):
    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0].copy()
    out = parts[0] + parts[1]  # a new array without a copy first; the same sums in order
    for p in parts[2:]:
        out += p
    return out


def init_nodes(part, n_trees):
    """A block's rows all at the roots: ``(order, nstart, ncount)`` of
    :func:`~dml.ensemble._gb_kernels.grow_pass`."""
    n = part[0].shape[0]
    ncount = np.zeros((n_trees, 1), dtype=np.int64)
    ncount[:, 0] = n
    return (np.tile(np.arange(n, dtype=np.int32), (n_trees, 1)),
            np.zeros((n_trees, 1), dtype=np.int64), ncount)


def nodes_of(assign):
    """The rows grouped by node (each node's rows in increasing order) for a node
    assignment ``assign`` (rows × trees): ``(order, nstart, ncount)``."""
    n, T = assign.shape
    M = int(assign.max(initial=0)) + 1
    order = np.empty((T, n), dtype=np.int32)
    nstart = np.zeros((T, M), dtype=np.int64)
    ncount = np.zeros((T, M), dtype=np.int64)
    for t in range(T):
        order[t] = np.argsort(assign[:, t], kind="stable")
        ncount[t] = np.bincount(assign[:, t], minlength=M)
        nstart[t, 1:] = np.cumsum(ncount[t])[:-1]
    return order, nstart, ncount


def assign_of(nodes):
    """The node of every row (rows × trees, int32) from the rows grouped by node: the nodes
    that hold rows cover the list without overlap, in the order of their first positions."""
    order, nstart, ncount = nodes
    T, n = order.shape
    out = np.empty((n, T), dtype=np.int32)
    for t in range(T):
        ids = np.flatnonzero(ncount[t])
        ids = ids[np.argsort(nstart[t, ids], kind="stable")]
        out[order[t], t] = np.repeat(ids, ncount[t, ids])
    return out


# --------------------------------------------------------------------------------------------
# client side
# --------------------------------------------------------------------------------------------

class GrowParams:
    """Settings of the growth (plain attributes)."""

    def __init__(self, *, max_leaf_nodes, max_depth, min_samples_leaf, l2_regularization,
                 learning_rate, n_bins, has_missing, max_features, seed, is_cat=None,
                 known_bins=None):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        if is_cat is None:
            self.is_cat = np.zeros(len(n_bins), dtype=bool)
        self.nb = int(max(1, np.max(n_bins))) if len(n_bins) else 1
        self.any_cat = bool(self.is_cat.any())


class _Tree:
    """One tree being grown: node arrays as lists (speculative nodes included)."""

    def __init__(self, t, params: GrowParams, rnd: int):
        self.t, self.p, self.round = t, params, rnd
        self.parent, self.depth, self.G, self.H, self.N = [], [], [], [], []
        self.children = []     # (left, right) once created (routed), else None
        self.split = []        # (gain, feature, bin, mleft, GL, HL, NL) or None (leaf)
        self.committed = []    # split committed into the final tree
        self.hist = {}         # node -> (d, B, 3) histogram, while it may be needed
        self.cat_left = {}     # node -> (256,) bins going left, for a categorical split
        self.heap = []         # (-gain, node) of open nodes with a split
        self.leaves = 1
        self.done = False
        self.importance = np.zeros(len(params.n_bins))
        self._add(-1, 0, 0.0, 0.0, 0.0)

    def _add(self, parent, depth, G, H, N):
        for lst, v in ((self.parent, parent), (self.depth, depth), (self.G, G), (self.H, H),
                       (self.N, N), (self.children, None), (self.split, None),
                       (self.committed, False)):
            lst.append(v)
        return len(self.parent) - 1

    def clone(self):
        """A copy that can be advanced without changing this one (histograms are shared: they
        are never modified in place)."""
        new = copy.copy(self)
        for k in ("parent", "depth", "G", "H", "N", "children", "split", "committed", "heap"):
            setattr(new, k, list(getattr(self, k)))
        new.hist = dict(self.hist)
        new.cat_left = dict(self.cat_left)
        new.importance = self.importance.copy()
        return new

    # ---- split search ----
    def set_hists(self, items, stacked=None, own=None):
        """Histograms of nodes ``[(node, hist)]`` arrived (a wave's): store them and compute
        their best splits, all in one call of the scan (each node's result is its own).
        ``stacked``: the histograms as one array already (``hist`` the views of its rows),
        then not copied again.

        ``own``: ``(lo, hi)`` when the histograms hold only features ``lo .. hi - 1`` (a group
        of a reduce-scatter by feature, :func:`feature_share`); the best splits over those
        features are then returned, ``[(node, result, categories going left or None)]``, for
        :meth:`take_split` once every group's are in, instead of being taken."""
        p = self.p
        todo = []
        for node, hist in items:
            self.hist[node] = hist
            if node == 0:
                # Node sums from one feature's histogram (every row is in one of its bins).
                self.G[0] = float(hist[0, :, 0].sum())
                self.H[0] = float(hist[0, :, 1].sum())
                self.N[0] = float(hist[0, :, 2].sum())
                if self.N[0] < 2 * p.min_samples_leaf or self.H[0] < MIN_HESSIAN:
                    self.split[0] = ()
                    continue
            todo.append((node, hist))
        if not todo:
            return []
        d = len(p.n_bins)
        lo, hi = (0, d) if own is None else own
        mask = np.ones((len(todo), d), dtype=bool)
        if p.max_features < d:
            # Drawn over all features whatever ``own``: every group draws the same.
            mask[:] = False
            for i, (node, _) in enumerate(todo):
                rng = block_rng(p.seed, "features", self.round, self.t, node)
                mask[i, rng.permutation(d)[:p.max_features]] = True
        nodes = [node for node, _ in todo]
        if stacked is None or len(todo) < len(items):
            stacked = np.stack([h for _, h in todo])
        res = _gb_kernels.best_splits(
            stacked, np.array([self.G[n] for n in nodes]),
            np.array([self.H[n] for n in nodes]), np.array([self.N[n] for n in nodes]),
            p.n_bins[lo:hi], p.has_missing[lo:hi], (mask & ~p.is_cat)[:, lo:hi],
            float(p.min_samples_leaf), MIN_HESSIAN, float(p.l2_regularization))
        # One conversion to Python floats for all slots, not one per value (the same floats).
        rows = res.tolist()
        found = []
        for i, (node, hist) in enumerate(todo):
            r = rows[i]
            r[1] += lo
            if p.any_cat:
                r = self._categorical_split(node, hist, mask[i], r, lo)
            if own is None:
                self._set_split(node, r)
            else:
                found.append((node, r, self.cat_left.pop(node, None)))
        return found

    def take_split(self, node, res, cat_left):
        """The best split of ``node`` over all features, chosen from the groups' bests over
        their own (:meth:`set_hists` with ``own``)."""
        if cat_left is None:
            self.cat_left.pop(node, None)
        else:
            self.cat_left[node] = cat_left
        self._set_split(node, res)

    def _set_split(self, node, res):
        p = self.p
        gain = res[0]
        if gain <= 0:
            self.split[node] = ()
            return
        f, NL = int(res[1]), res[6]
        mleft = bool(res[3])
        if not p.has_missing[f]:
            # No missing value of this feature in training: missing values met later (validation
            # rows, prediction) go to the child with more rows, as scikit-learn's.
            mleft = NL > self.N[node] - NL
        if node in self.cat_left and p.known_bins is not None:
            # A category absent from the training data (a pandas category never used, or one met
            # only later) goes where missing values go, as scikit-learn's unknown categories.
            left = self.cat_left[node].copy()
            left[~p.known_bins[f]] = mleft
            self.cat_left[node] = left
        self.split[node] = (gain, f, int(res[2]), mleft, res[4], res[5], NL)

    def _categorical_split(self, node, hist, mask, res, lo=0):
        """The best split over the categorical features too (``res``: the numeric features'
        best, as :func:`~dml.ensemble._gb_kernels.best_splits` returns it); equal gains keep the
        lower feature index, as the numeric scan does. ``hist`` holds features ``lo`` on."""
        p = self.p
        self.cat_left.pop(node, None)
        hi = lo + hist.shape[0]
        for f in lo + np.flatnonzero(mask[lo:hi] & p.is_cat[lo:hi]):
            gain, gl, hl, nl, left, ml = _gb_kernels.best_split_categorical(
                hist[f - lo], self.G[node], self.H[node], self.N[node], int(p.n_bins[f]),
                bool(p.has_missing[f]), float(p.min_samples_leaf), MIN_HESSIAN,
                float(p.l2_regularization))
            if gain > 0 and (gain > res[0] or (gain == res[0] and f < res[1])):
                res = [gain, f, 0, ml, gl, hl, nl]
                self.cat_left[node] = left
        return res

    def _make_children(self, node):
        if self.children[node] is None:
            _, _, _, _, GL, HL, NL = self.split[node]
            dep = self.depth[node] + 1
            left = self._add(node, dep, GL, HL, NL)
            right = self._add(node, dep, self.G[node] - GL, self.H[node] - HL,
                              self.N[node] - NL)
            self.children[node] = (left, right)
            return True
        return False

    def _needs(self, node, final):
        """Children of ``node`` whose best split is needed if ``node`` is split."""
        p = self.p
        if final or (p.max_depth is not None and self.depth[node] + 1 == p.max_depth):
            return []
        left, right = self.children[node]
        return [c for c in (left, right) if self.N[c] >= 2 * p.min_samples_leaf]

    # ---- best-first commit ----
    def advance(self, new_children):
        """Commit splits in best-first order while their children's splits are known."""
        p = self.p
        while self.heap and not self.done:
            node = self.heap[0][1]
            final = p.max_leaf_nodes is not None and self.leaves + 1 == p.max_leaf_nodes
            if self._make_children(node):
                new_children.append(node)
            need = self._needs(node, final)
            if any(self.split[c] is None for c in need):
                return
            heapq.heappop(self.heap)
            self.committed[node] = True
            self.leaves += 1
            self.importance[self.split[node][1]] += self.split[node][0]
            self.hist.pop(node, None)
            if final:
                self.done = True
            else:
                for c in need:
                    if self.split[c]:
                        heapq.heappush(self.heap, (-self.split[c][0], c))
        self.done = True

    def requests(self, new_children):
        """Histograms to count in the next wave: ``[(node, derive_from)]`` where derive_from
        is ``(parent, counted sibling)`` for a histogram obtained by subtraction."""
        p = self.p
        open_ = sorted(self.heap)
        R = len(open_) if p.max_leaf_nodes is None else p.max_leaf_nodes - self.leaves
        out = []
        # Heap keys of the known splits that will be committed before an open node ranked
        # below them: the open nodes above it (its rank) and the children, already counted,
        # of those nodes (pushed when their parent is committed, which comes first). A node
        # with at least R of them ahead is never committed (the leaves run out first), and
        # one with R - 1 ahead is the last split if it is committed at all (its children need
        # no split): neither is counted, and the tree is the same.
        ahead = []
        width = R if p.max_leaf_nodes is None else max(SPECULATE_MIN, R // SPECULATE_SHARE)
        for rank, (key, node) in enumerate(open_[:max(min(R, width), 0)]):
            before = rank + sum(1 for k in ahead if k < (key, node))
            if before >= R:
                break  # (the next nodes have at least as many ahead)
            final = p.max_leaf_nodes is not None and self.leaves + before + 1 >= p.max_leaf_nodes
            if p.max_leaf_nodes is not None and self.children[node] is not None:
                ahead.extend((-self.split[c][0], c) for c in self._needs(node, False)
                             if self.split[c])
            if self._make_children(node):
                new_children.append(node)
            need = [c for c in self._needs(node, final) if self.split[c] is None]
            if not need:
                continue
            left, right = self.children[node]
            small, big = (left, right) if self.N[left] < self.N[right] else (right, left)
            if node in self.hist:
                out.append((small, None))
                if big in need:
                    out.append((big, (node, small)))
            else:
                out.extend((c, None) for c in need)
        return out

    # ---- result ----
    def node_values(self):
        """Leaf value (shrunk) of every node's rows: a speculative node takes the value of the
        final leaf it lies in."""
        p = self.p
        leaf = leaf_of_rows(self)
        G, H = np.asarray(self.G)[leaf], np.asarray(self.H)[leaf]
        val = -G / (H + p.l2_regularization + 1e-15) * p.learning_rate
        # A tree that is only a root does not change the predictions (as scikit-learn's).
        return np.where(leaf == 0, 0.0, val)

    def final_nodes(self):
        """The committed tree: (order of kept nodes, left, right, feature, bin, mleft)."""
        keep = [0]
        i = 0
        while i < len(keep):
            n = keep[i]
            if self.committed[n]:
                keep.extend(self.children[n])
            i += 1
        return keep


def leaf_of_rows(tree: _Tree) -> np.ndarray:
    """Map of every node id to the final leaf (node id) its rows are in."""
    M = len(tree.parent)
    out = np.arange(M)
    for n in range(M):
        a = n
        while a > 0 and not tree.committed[tree.parent[a]]:
            a = tree.parent[a]
        out[n] = a
    return out


def _route_arrays(trees, nodes_by_tree):
    M = max(len(t.parent) for t in trees)
    T = len(trees)
    feature = np.full((T, M), -2, dtype=np.int32)
    thr = np.zeros((T, M), dtype=np.int32)
    mleft = np.zeros((T, M), dtype=bool)
    left = np.zeros((T, M), dtype=np.int32)
    right = np.zeros((T, M), dtype=np.int32)
    cat_idx = np.full((T, M), -1, dtype=np.int32)
    bitsets = []
    for ti, nodes in nodes_by_tree.items():
        tr = trees[ti]
        for n in nodes:
            _, f, b, ml, _, _, _ = tr.split[n]
            feature[ti, n] = f
            thr[ti, n] = b
            mleft[ti, n] = ml
            left[ti, n], right[ti, n] = tr.children[n]
            if n in tr.cat_left:
                cat_idx[ti, n] = len(bitsets)
                bitsets.append(tr.cat_left[n])
    bits = np.asarray(bitsets, dtype=bool).reshape(-1, 256)
    return feature, thr, mleft, left, right, cat_idx, bits
