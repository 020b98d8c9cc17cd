"""Boosting rounds chained on the cluster: many growth waves and rounds per graph submission.

The growth of a round (:mod:`dml.ensemble._gb_grow`) alternates between the workers (route the
rows of newly split nodes, count gradient histograms) and the split search, which is
deterministic given the summed histograms. Submitting every such *wave* as a graph of its own
costs a client round trip each (tens of milliseconds), about a dozen per tree of 31 leaves.
Here :func:`dml._block_groups.chain_steps` lays out many steps as one graph: in each step the
task of every group of blocks reads the partial histograms of all groups from the step before,
sums them in the fixed order of the block tree and runs the client's own split search on them
(:class:`Driver`, the boosting loop cut at every point where it needs sums from the workers) --
every group computes the same decision -- then applies the decision to its own blocks. The end
of a round (leaf values added to the raw predictions, new gradients, the loss sums for early
stopping, the next roots' histograms) and the start of the next are steps like the others, so a
submission spans several rounds. On a ``distributed`` cluster the same :class:`Driver` and
:func:`apply_decision` run inside long-lived tasks instead (:mod:`dml.ensemble._gb_collective`);
the chained graphs serve the local schedulers. See docs/gradient_boosting.md.
"""
from __future__ import annotations

import copy
import heapq

import numpy as np

from dml._block_groups import finish_tree, range_reduce
from dml._graph import tree_add
from dml.ensemble import _gb_fit, _gb_grow
from dml.ensemble._gb_grow import _Tree
from dml.ensemble._gb_losses import weighted_quantile

#: Fan-in of the fixed reduction tree over the blocks. Binary, so that a group of consecutive
#: blocks sends few pieces of it (one for a group of 2**k aligned blocks), whatever the grouping.
_FANIN = 2


# --------------------------------------------------------------------------------------------
# worker side: one group's step
# --------------------------------------------------------------------------------------------

def _sum_parts(parts):
    """Combine of the end-of-round partials: loss sums and root histograms, each in order."""
    parts = [p for p in parts if p is not None]
    roots = [p[1] for p in parts if p[1] is not None]
    return (tree_add([p[0] for p in parts]), _gb_grow.sum_hists(roots) if roots else None)


def _combine(kind):
    """How the partials of a step of this kind are summed."""
    return {"grow": _gb_grow.sum_hists, "end": _sum_parts, "resid": _gb_fit.combine_resid}[kind]


def _routed(prep, carried, route, in_place=False):
    if route is None:
        return carried
    return [c[:4] + (_gb_grow.route_kernel(p, c, c[4], route, in_place),)
            for p, c in zip(prep, carried)]


def group_step(prep, carried, driver, args, *partials):
    """One group's step: the driver's next decision from the previous step's partials (every
    group computes the same), then the decision applied to the group's blocks.

    ``prep`` holds the blocks' ``(bins, y, w, is_validation)``, ``carried`` their ``(raw, g,
    h, use, nodes)`` (``nodes``: the rows grouped by node,
    :func:`~dml.ensemble._gb_grow.init_nodes`); returns the new carried state, the driver and
    the group's partial sums (its pieces of the block tree,
    :func:`~dml._block_groups.range_reduce`)."""
    decision, driver = drive(driver, *partials)
    if decision[0] == "idle":
        return carried, driver, None
    carried, partial = apply_decision(prep, carried, decision, args)
    return carried, driver, partial


def end_round(prep, carried, decision, args, in_place=False):
    """The carried state after an ``"end"`` decision's leaf values (the next round's
    gradients, every row back at the roots)."""
    start, n_blocks, loss, seed, subsample, n_trees = args
    _, route, values, rnd_next, _ = decision
    carried = _routed(prep, carried, route, in_place)
    if values is not None:
        # The node of every row, from the rows grouped by node.
        carried = [_gb_fit.end_kernel(start + j, p, c, _gb_grow.assign_of(c[4]), values, loss,
                                      seed, subsample, rnd_next) + (None,)
                   for j, (p, c) in enumerate(zip(prep, carried))]
    return tuple(c[:4] + (_gb_grow.init_nodes(p, n_trees),) for p, c in zip(prep, carried))


def apply_decision(prep, carried, decision, args, in_place=False):
    """A (non-idle) decision applied to a group's blocks: the new carried state and the
    group's partial sums. ``in_place``: the rows' grouping by node is rewritten rather than
    copied (the caller owns ``carried`` and drops the old one)."""
    start, n_blocks, loss, seed, subsample, n_trees = args
    kind = decision[0]
    if kind == "end":  # the round's leaf values (None: none), then loss sums and root histograms
        carried = end_round(prep, carried, decision, args, in_place)
        nb = decision[4]
        losses = range_reduce([_gb_fit.loss_kernel(p, c, loss) for p, c in zip(prep, carried)],
                              start, n_blocks, tree_add, _FANIN)
        roots = {}
        if nb is not None:
            slot_map = np.arange(n_trees, dtype=np.int32)[:, None]
            roots = _gb_grow.count_group(prep, carried, None, slot_map, n_trees, nb, start,
                                         n_blocks)[1]
        return tuple(carried), {k: (v, roots.get(k)) for k, v in losses.items()}
    if kind == "grow":  # routing and counting in one pass over each block
        _, route, slot_map, S, nb = decision
        # The blocks' histograms are added up in the block tree's order as they are counted.
        nodes, pieces = _gb_grow.count_group(prep, carried, route, slot_map, S, nb, start,
                                             n_blocks, in_place)
        return tuple(c[:4] + (a,) for c, a in zip(carried, nodes)), pieces
    # "resid"
    carried = _routed(prep, carried, decision[1], in_place)
    parts = [_gb_fit.resid_kernel(p, c, _gb_grow.assign_of(c[4]), decision[2])
             for p, c in zip(prep, carried)]
    return tuple(carried), range_reduce(parts, start, n_blocks, _combine(kind), _FANIN)


def start_group(prep, start, loss, baseline, nodes, seed, subsample, rnd, n_trees):
    """A group's carried state at the start of round ``rnd`` (``nodes``: the trees fitted
    before a warm start, else None)."""
    out = []
    for j, p in enumerate(prep):
        raw0 = None if nodes is None else _gb_fit.raw_binned_kernel(p, nodes, baseline,
                                                                    loss.n_outputs)
        out.append(_gb_fit.start_kernel(start + j, p, loss, baseline, raw0, seed, subsample,
                                        rnd) + (_gb_grow.init_nodes(p, n_trees),))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# the driver
# --------------------------------------------------------------------------------------------

class Driver:
    """The boosting loop as a state machine fed with summed partials (see the module doc).

    ``finished`` collects the completed rounds ``(trees, leaf values)`` until the client takes
    them; ``done`` is set once ``max_iter`` rounds ran or early stopping stopped the fit.
    """

    def __init__(self, *, params, loss, n_trees, first, max_iter, early_stopping,
                 validation, n_iter_no_change, tol, record_start, n_blocks):
        self.params, self.loss, self.T = params, loss, n_trees
        self.rnd, self.max_iter = first, max_iter
        self.es, self.vf = early_stopping, validation
        self.n_iter_no_change, self.tol = n_iter_no_change, tol
        self.record_start = record_start
        self.n_blocks = n_blocks
        self.train_scores, self.val_scores = [], []
        self.finished, self.waves = [], []
        self.importances = np.zeros(len(params.n_bins))
        self.trees, self.unrouted, self.counted, self.reqs = None, {}, [], {}
        self.n_waves, self.values, self.done = 0, None, False
        # ``(lo, hi)``: in a run's task of a reduce-scatter by feature, the features this
        # group sums and searches (:meth:`merge`); None: all of them.
        self.features, self.found = None, []
        self.initial = True
        self.pending = ("end", None, None, first, params.nb if first < max_iter else None)

    def copy(self):
        """A copy to advance (the task's input stays as it was: a task may run again)."""
        new = copy.copy(self)
        for k in ("train_scores", "val_scores", "finished", "waves", "counted"):
            setattr(new, k, list(getattr(self, k)))
        new.importances = self.importances.copy()
        new.unrouted = {t: list(v) for t, v in self.unrouted.items()}
        if self.trees is not None:
            new.trees = [tr.clone() for tr in self.trees]
        return new

    # ---- one step ----
    def step(self, partials):
        kind = self.pending[0]
        if kind == "idle":
            return self.pending
        total = finish_tree(partials, self.n_blocks, _combine(kind), _FANIN)
        if kind == "grow":
            return self._grown(total)
        if kind == "resid":
            return self._end(self._refit(total), None)
        return self._scored(*total)

    def _scored(self, losses, root):
        record = self.record_start if self.initial else True
        stop = False
        if record:
            self.train_scores.append(-losses[0] / losses[1])
            if self.es and self.vf:
                self.val_scores.append(-losses[2] / losses[3])
            if self.es and not self.initial:
                scores = self.val_scores if self.vf else self.train_scores
                stop = _gb_fit._should_stop(scores, self.n_iter_no_change, self.tol)
        self.initial = False
        if stop or self.rnd >= self.max_iter:
            self.done = True
            return ("idle",)
        self.trees = [_Tree(t, self.params, self.rnd) for t in range(self.T)]
        for t, tr in enumerate(self.trees):
            # Every group has the whole root histograms (the end of a round sends them all)
            # and searches them all; only the group's features are kept for subtraction.
            tr.set_hists([(0, root[t])], root[t:t + 1])
            if self.features is not None:
                tr.hist[0] = root[t][self.features[0]:self.features[1]]
            if tr.split[0]:
                heapq.heappush(tr.heap, (-tr.split[0][0], 0))
        self.unrouted, self.n_waves = {}, 0
        return self._grow()

    def _grow(self):
        """The next wave of the round, or the end of the round."""
        trees = self.trees
        reqs = {}
        for t, tr in enumerate(trees):
            if tr.done:
                continue
            new = self.unrouted.setdefault(t, [])
            tr.advance(new)
            if not tr.done:
                reqs[t] = tr.requests(new)
                if not reqs[t] and not tr.heap:
                    tr.done = True
        reqs = {t: r for t, r in reqs.items() if r}
        if not reqs:
            if all(tr.done for tr in trees):
                return self._finish_round()
            raise RuntimeError("gradient boosting: growth stalled (a bug; please report it)")
        self.n_waves += 1
        counted = [(t, n) for t, r in reqs.items() for (n, src) in r if src is None]
        M = max(len(tr.parent) for tr in trees)
        slot_map = np.full((self.T, M), -1, dtype=np.int32)
        for s, (t, n) in enumerate(counted):
            slot_map[t, n] = s
        self.counted, self.reqs = counted, reqs
        return ("grow", self._take_routes(), slot_map, len(counted), self.params.nb)

    def _take_routes(self):
        todo = {t: ns for t, ns in self.unrouted.items() if ns}
        self.unrouted = {}
        return _gb_grow._route_arrays(self.trees, todo) if todo else None

    def _grown(self, total):
        trees = self.trees
        own = self.features
        found = []
        lo = 0
        for t, r in self.reqs.items():
            tr = trees[t]
            # A tree's counted nodes are consecutive slots of the total: searched in place.
            nodes = [n for n, src in r if src is None]
            hi = lo + len(nodes)
            counted = total[lo:hi]
            lo = hi
            derived = [(n, src) for n, src in r if src is not None]
            if derived:
                # Sibling subtraction: the parent's histogram minus the counted child's,
                # written after a copy of the counted ones, so that one call of the split
                # search takes both (each node's result is its own: the same splits as two).
                k = len(nodes)
                both = np.empty((k + len(derived),) + total.shape[1:])
                both[:k] = counted
                slot = {n: i for i, n in enumerate(nodes)}
                for i, (n, (parent, small)) in enumerate(derived):
                    np.subtract(tr.hist[parent], counted[slot[small]], out=both[k + i])
                nodes = nodes + [n for n, _ in derived]
                counted = both
            found += [(t, f) for f in tr.set_hists(list(zip(nodes, counted)), counted, own)]
        if own is None:
            return self._grow()
        # The group's best splits over its features, for the other groups (:meth:`merge`).
        self.found = [(t, node) for t, (node, _, _) in found]
        rows = np.array([res for _, (_, res, _) in found], dtype=np.float64).reshape(-1, 7)
        return ("best", rows, {i: left for i, (_, (_, _, left)) in enumerate(found)
                               if left is not None})

    def merge(self, shares):
        """The next decision once every group's best splits over its own features are in
        (``shares``, in group order: the ``"best"`` decisions' rows and categories): each
        node's split is the best of them, equal gains keeping the lower feature index, as
        the search over all features does; so every group takes the same splits, those of
        the search over all features."""
        rows = [s[1].tolist() for s in shares]
        for i, (t, node) in enumerate(self.found):
            best, left = None, None
            for r, share in zip(rows, shares):
                res = r[i]
                if best is None or res[0] > best[0] or (res[0] == best[0] and res[1] < best[1]):
                    best, left = res, share[2].get(i)
            self.trees[t].take_split(node, best, left)
        self.found = []
        return self._grow()

    def _finish_round(self):
        route = self._take_routes()
        self.values = [tr.node_values() for tr in self.trees]
        if self.loss.leaf_quantile is not None:
            return ("resid", route, _gb_grow.leaf_of_rows(self.trees[0]))
        return self._end(self.values, route)

    def _refit(self, sketches):
        """Absolute error / quantile: each leaf's value becomes the quantile of its residuals."""
        leaf_map = _gb_grow.leaf_of_rows(self.trees[0])
        rate = self.params.learning_rate
        leaf_vals = {lf: weighted_quantile(v, w, self.loss.leaf_quantile) * rate
                     for lf, (v, w) in sketches.items()}
        out = self.values[0].copy()
        for n in range(len(out)):
            lf = int(leaf_map[n])
            if lf != 0 and lf in leaf_vals:
                out[n] = leaf_vals[lf]
        return [out]

    def _end(self, values, route):
        for tr in self.trees:
            self.importances += tr.importance
            tr.hist = {}
        self.finished.append((self.trees, values))
        self.waves.append(self.n_waves)
        self.trees, self.values = None, None
        self.rnd += 1
        nb = self.params.nb if self.rnd < self.max_iter else None
        return ("end", route, [np.asarray(v) for v in values], self.rnd, nb)


def drive(driver, *partials):
    """``(decision, driver)`` after the partials of the previous step (none: the decision the
    driver already holds). The input is left as it was: a task may run again."""
    if not partials:
        return driver.pending, driver
    driver = driver.copy()
    driver.pending = driver.step(partials)
    return driver.pending, driver


def finish(driver, *partials):
    """The driver after the last step's partials (the client continues from it)."""
    return drive(driver, *partials)[1]
