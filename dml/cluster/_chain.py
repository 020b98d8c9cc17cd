"""Lloyd iterations chained on the cluster: many iterations per graph submission.

Without chaining, every Lloyd iteration is a round trip: the client submits one task per worker
group, gathers the per-block cluster sums, adds them and divides. On a 2-worker cluster that
round trip (graph build, submission, gathering) costs about as much as the iteration's
arithmetic.

Chained, the client submits up to :data:`ITERS_PER_SUBMIT` iterations as one graph. The task of
worker group ``g`` in iteration ``t`` reads the per-block sums of *every* group of iteration
``t − 1``, adds them in the fixed tree order of :func:`~dml.cluster._prepared.tree_combine`,
applies the client's own update (:func:`next_centres`: the same function of the same values, so
every group and the client arrive at the same centres bit for bit), then runs its Lloyd step.
An iteration costs one scheduler hop instead of a round trip through the client.

The client then *replays* the chain: it takes each iteration's reduced sums and applies its
usual update to its runs, so history, ``n_iter`` and the stopping rule are computed exactly as
without chaining, and it checks that the centres the workers used are the ones it computes.
Two things stop a chain early, and the replay handles them as the unchained loop does: every
run has converged (the remaining links do nothing), or a cluster became empty (relocation needs
one more pass over all blocks, which the client runs before it submits the next chain).

Chaining is used for persisted training data only: data read from storage at every pass would
let the scheduler load later iterations' blocks early.
"""
from __future__ import annotations

import numpy as np

from dml._graph import LinkedTasks, broadcast, reduce_levels, tree_depth
from dml.cluster import _lloyd, _sparse
from dml.cluster._prepared import Prepared, in_block_order, tree_combine

__all__ = ["ITERS_PER_SUBMIT", "max_links", "next_centres", "run_chain"]

#: Lloyd iterations submitted as one graph. Links after convergence cost a no-op task each, so
#: a long chain wastes little when the runs converge early.
ITERS_PER_SUBMIT = 32

#: Up to this many group tasks per iteration, each task of the next iteration reads every
#: group result itself (G² edges, one scheduler hop an iteration); with more groups, one task
#: per iteration reduces them and applies the update for all (2·G edges, one more hop): on
#: 1,024 blocks in 16 groups, 256 results crossing between workers every iteration otherwise.
ALL_TO_ALL_MAX_GROUPS = 4

#: Bytes of centres a chain may hold: every link keeps the centres it used until the client
#: collects the chain, which matters for wide (sparse, 2^20-column) data.
CHAIN_CENTRE_BYTES = 64 * 2**20


def max_links(runs, d: int, n_groups: int) -> int:
    """The longest chain whose links' centres fit :data:`CHAIN_CENTRE_BYTES` (every group's
    task of a link holds its own copy of the centres)."""
    per_link = 8 * max(1, d) * sum(len(r.centres) for r in runs) * max(1, n_groups)
    return int(max(1, min(ITERS_PER_SUBMIT, CHAIN_CENTRE_BYTES // per_link)))


def next_centres(centres, sums, d: int, dtype, tol: float, n_iter: int, max_iter: int):
    """The update after an assignment step without empty clusters: new centres, ``n_iter``,
    done.

    scikit-learn's order of operations: the weighted means (empty clusters sit on the heaviest
    one, see :func:`~dml.cluster._lloyd.average_centres`), then the total squared centre shift
    against ``tol``.
    """
    new = _lloyd.average_centres(sums, sums[:, -1].copy(), d).astype(dtype)
    shift = np.sqrt(((new.astype(np.float64) - np.asarray(centres, dtype=np.float64)) ** 2)
                    .sum(axis=1))
    n_iter += 1
    return new, n_iter, bool((shift ** 2).sum() <= tol or n_iter >= max_iter)


def _reduced(previous, groups, n_blocks, levels=0):
    """Per-run reduced sums of an iteration from its group results (None: it did not run).
    ``levels`` > 0: each group result is already its aligned subtree of ``levels`` levels of the
    fixed tree (held groups), and only the rest of the tree is left: the same numbers."""
    if previous[0]["sums"] is None:
        return None
    if levels:
        vals = [res["sums"][0] for res in previous]
        rest = tree_depth(n_blocks) - levels
        return _sparse.dense_sums(reduce_levels(vals, _lloyd.combine_lloyd, rest)[0]
                                  if rest > 0 else vals[0])
    per_block = in_block_order(groups, [res["sums"] for res in previous])
    return _sparse.dense_sums(tree_combine(per_block, _lloyd.combine_lloyd))


def _advance(state, reduced, config):
    """The run states after an iteration (``state``: per run ``(centres, n_iter, done)``);
    ``halt`` when it needs the client (a cluster became empty) or did not run."""
    if reduced is None:
        return state, True
    tol, max_iter, d, dtype = config
    active = [j for j, s in enumerate(state) if not s[2]]
    if any(np.any(reduced[a][:, -1] == 0) for a in range(len(active))):
        return state, True
    state = list(state)
    for a, j in enumerate(active):
        centres, n_iter, _ = state[j]
        state[j] = next_centres(centres, reduced[a], d, dtype, tol[j], n_iter, max_iter[j])
    return state, False


def _link(n_own: int, levels: int, state0, config, groups, n_blocks, *args):
    """One group's task of one chained iteration: the previous iteration's update (or the
    starting state), then this group's Lloyd step on its blocks (``levels`` > 0: the one
    argument of its own is a held group, a tuple of blocks, whose sums it reduces over its
    ``levels`` subtree levels, so that every task combines group results, not block results)."""
    own, previous = args[:n_own], args[n_own:]
    if levels:
        own = own[0]
    if previous:
        if previous[0]["halt"]:
            return {"state": previous[0]["state"], "halt": True, "sums": None}
        if "sums" in previous[0]:  # every group's result of the previous iteration
            state, halt = _advance(previous[0]["state"],
                                   _reduced(previous, groups, n_blocks, levels), config)
        else:  # the previous iteration's update, made once for all groups (_update)
            state, halt = previous[0]["state"], False
    else:
        state, halt = state0, False
    active = [s[0] for s in state if not s[2]]
    if halt or not active:
        return {"state": state, "halt": True, "sums": None}
    sums = [_lloyd.lloyd_block(p[0], p[1], p[2], active) for p in own]
    if levels:
        sums = reduce_levels(sums, _lloyd.combine_lloyd, levels)
    return {"state": state, "halt": False, "sums": sums}


def _update(config, groups, n_blocks, levels, *previous):
    """One iteration's update from its group results, made once for every group task of the
    next iteration (many groups): the state :func:`_link` would compute, the same numbers."""
    if previous[0]["halt"]:
        return {"state": previous[0]["state"], "halt": True}
    state, halt = _advance(previous[0]["state"], _reduced(previous, groups, n_blocks, levels),
                           config)
    return {"state": state, "halt": halt}


def _collect(n_iters: int, n_groups: int, groups, n_blocks, levels, *results):
    """Per iteration: the centres the workers used (active runs) and the reduced sums."""
    out = []
    for t in range(n_iters):
        row = results[t * n_groups:(t + 1) * n_groups]
        if row[0]["sums"] is None:
            break
        used = [s[0] for s in row[0]["state"] if not s[2]]
        out.append((used, _reduced(row, groups, n_blocks, levels)))
    return out


def run_chain(data: Prepared, runs, n_iters: int) -> list:
    """Run up to ``n_iters`` Lloyd iterations of ``runs`` (all on ``data``) in one graph.

    Returns, per iteration that ran, ``(centres used by the active runs, their reduced sums)``,
    in the form :func:`dml.cluster._kmeans.lloyd` applies; fewer than ``n_iters`` entries when
    every run converged or a cluster became empty.
    """
    chain = LinkedTasks("lloyd-chain")
    groups = [list(g) for g in data.groups]
    n_blocks = len(data.parts)
    held = data.blocks.groups is not None
    # Held groups (aligned, see dml._block_groups) reduce their own subtree of the fixed tree
    # (``levels``: already capped at the whole tree's depth).
    levels = data.blocks.groups.levels if held else 0
    # A held group is one argument (the tuple of its blocks), else one argument per block.
    refs = [[chain.arg(inputs)] if held else [chain.arg(p) for p in inputs]
            for inputs in data.group_inputs()]
    state0 = chain.arg(broadcast([(r.centres, r.n_iter, r.done) for r in runs]))
    config = ([r.tol for r in runs], [r.max_iter for r in runs], data.d, data.dtype)
    previous: list = []
    links: list = []
    for t in range(n_iters):
        if previous and len(refs) > ALL_TO_ALL_MAX_GROUPS:
            previous = [chain.add((t, "update"), _update, config, groups, n_blocks, levels,
                                  *previous)]
        current = [chain.add((t, g), _link, len(own), levels, state0 if t == 0 else None, config,
                             groups, n_blocks, *own, *previous)
                   for g, own in enumerate(refs)]
        links += current
        previous = current
    return chain.compute(chain.add(("collect",), _collect, n_iters, len(groups), groups,
                                   n_blocks, levels, *links))
