"""The boosting driver: binning, baseline, rounds, early stopping, and the flat fitted trees.

Per block the workers keep ``prep = (bins, y, w, is_validation)`` and ``state = (raw, g, h,
use)``; a round replaces the state by a new persisted one (raw predictions plus the shrunk
leaf values, new gradients), so only histograms, split decisions and a few loss sums travel.
The validation rows (``validation_fraction``) are drawn per block from the block's own
generator; rows are subsampled per (round, block) likewise, so the model depends on the data,
its partitioning and ``random_state``, never on the number of workers.
"""
from __future__ import annotations

import logging
import math

import dask
import numpy as np
from dask import delayed

from dml._block_groups import (block_ranges, chain_steps, default_n_tasks, finish_tree,
                               persist_placed, range_reduce, task_inputs)
from dml._blocks import block_rng, broadcast, compute, seed_from
from dml._graph import tree_add
from dml.base import check_weights_not_all_zero
from dml.ensemble import _gb_categorical, _gb_chain, _gb_collective, _gb_grow
from dml.ensemble._gb_losses import make_loss
from dml.ensemble._gb_categorical import encode_coded
from dml.tree._binning import (MISSING, _compress, as_float_block, bin_kernel,
                               combine_sketches, edges_from_sketch, sketch_kernel)
from dml.tree._model import _categorical_layout, _class_weights
from dml.worker_setup import entries, prepare

_logger = logging.getLogger("dml.ensemble")

# --------------------------------------------------------------------------------------------
# worker kernels
# --------------------------------------------------------------------------------------------


def prep_kernel(index, part, validation_fraction, seed, validation_block=False):
    """Binned block plus its validation-row mask (an exact share of the block's rows; every
    row of a block of the user's validation set)."""
    xb, y, w = part
    n = xb.shape[0]
    is_val = np.full(n, validation_block, dtype=bool)
    if validation_fraction and not validation_block:
        k = int(round(validation_fraction * n))
        is_val[block_rng(seed, "validation", index).permutation(n)[:k]] = True
    return xb, y, w, is_val


def base_kernel(part, loss, is_cat, count_seen):
    """Baseline statistics, missing values per feature and the bins of the categorical features
    present in X (``count_seen``: False for blocks of the user's validation set)."""
    xb, y, w, is_val = part
    tr = ~is_val
    seen = np.zeros((xb.shape[1], 256), dtype=bool)
    if count_seen:
        for j in np.flatnonzero(is_cat):
            seen[j] = np.bincount(xb[:, j], minlength=256) > 0
    return {"stats": loss.baseline_stats(y[tr], w[tr]), "seen": seen,
            "missing": (xb[tr] == MISSING).any(axis=0), "n": int(tr.sum()),
            "wsum": float(w.sum()),
            "n_val": int(is_val.sum())}


def combine_base(parts):
    parts = [p for p in parts if p is not None]
    st = [p["stats"] for p in parts]
    if isinstance(st[0], tuple):  # value sketches (quantile losses)
        stats = _compress(np.concatenate([s[0] for s in st]), np.concatenate([s[1] for s in st]))
    else:
        stats = tree_add(st)
    return {"stats": stats, "missing": np.logical_or.reduce([p["missing"] for p in parts]),
            "seen": np.logical_or.reduce([p["seen"] for p in parts]),
            "n": sum(p["n"] for p in parts), "n_val": sum(p["n_val"] for p in parts),
            "wsum": sum(p["wsum"] for p in parts)}


_F32_SAFE = 1e30


def _use_mask(index, is_val, rnd, seed, subsample):
    use = ~is_val
    if subsample < 1.0:
        use &= block_rng(seed, "subsample", rnd, index).random(len(use)) < subsample
    return use


def _grad(part, raw, loss, use):
    _, y, w, _ = part
    g, h = loss.grad_hess(y, raw)
    g = g * w[:, None]
    h = h * w[:, None]
    # float32 as scikit-learn's, unless that would overflow (targets near 1e38 and beyond).
    if max(np.abs(g).max(initial=0.0), h.max(initial=0.0)) < _F32_SAFE:
        g, h = g.astype(np.float32), h.astype(np.float32)
    return raw, g, h, use


def start_kernel(index, part, loss, baseline, raw0, seed, subsample, rnd):
    """Round ``rnd``'s state from the baseline (or the given raw predictions: warm start)."""
    n = part[0].shape[0]
    raw = np.tile(baseline, (n, 1)) if raw0 is None else raw0
    return _grad(part, raw, loss, _use_mask(index, part[3], rnd, seed, subsample))


def end_kernel(index, part, state, assign, values, loss, seed, subsample, rnd_next):
    """Add the round's leaf values to the raw predictions; the next round's gradients."""
    raw = state[0].copy()
    for t in range(assign.shape[1]):
        raw[:, t] += values[t][assign[:, t]]
    return _grad(part, raw, loss, _use_mask(index, part[3], rnd_next, seed, subsample))


def loss_kernel(part, state, loss):
    """(Σw·loss, Σw) over the training rows and over the validation rows."""
    _, y, w, is_val = part
    lw = loss.pointwise(y, state[0]) * w
    if not is_val.any():
        # No validation rows here: the training rows are all rows (the same sums, no copies).
        return np.array([lw.sum(), w.sum(), 0.0, 0.0])
    tr = ~is_val
    return np.array([lw[tr].sum(), w[tr].sum(), lw[is_val].sum(), w[is_val].sum()])


def resid_kernel(part, state, assign, leaf_map):
    """Per final leaf: a summary of the residuals y - raw of the rows used this round."""
    _, y, w, _ = part
    use = state[3]
    leaf = leaf_map[assign[:, 0]]
    res = y - state[0][:, 0]
    out = {}
    for lf in np.unique(leaf[use]):
        m = use & (leaf == lf)
        out[int(lf)] = _compress(res[m], w[m])
    return out


def combine_resid(parts):
    out = {}
    for p in parts:
        if p is None:
            continue
        for k, (v, w) in p.items():
            if k in out:
                out[k] = _compress(np.concatenate([out[k][0], v]),
                                   np.concatenate([out[k][1], w]))
            else:
                out[k] = (v, w)
    return out


def raw_binned_kernel(part, nodes, baseline, n_out):
    """Raw predictions of the fitted trees on a binned block (for warm start)."""
    from dml.tree._model import apply_float

    x = part[0].astype(np.float64)
    x[part[0] == MISSING] = np.nan
    bin_nodes = dict(nodes, threshold=nodes["bin_threshold"].astype(np.float64))
    return raw_from_leaves(apply_float(x, bin_nodes), nodes, baseline, n_out)


def raw_from_leaves(leaves, nodes, baseline, n_out, staged=False):
    n, T = leaves.shape
    vals = nodes["value"][leaves].reshape(n, T // n_out, n_out)
    if staged:
        return baseline[None, None, :] + np.cumsum(vals, axis=1)
    return baseline[None, :] + vals.sum(axis=1)


# --------------------------------------------------------------------------------------------
# client
# --------------------------------------------------------------------------------------------

def _flatten(trees_by_round, edges):
    """All trees (round-major, then output) as one dict of flat arrays, global node indices."""
    cl, cr, feat, thr, bthr, ml, val, wn, starts = [], [], [], [], [], [], [], [], [0]
    ci, bits = [], []
    for trees, values in trees_by_round:
        for tr, v in zip(trees, values):
            keep = tr.final_nodes()
            pos = {n: i + starts[-1] for i, n in enumerate(keep)}
            for n in keep:
                if tr.committed[n]:
                    _, f, b, m, _, _, _ = tr.split[n]
                    left, right = tr.children[n]
                    cl.append(pos[left])
                    cr.append(pos[right])
                    feat.append(f)
                    bthr.append(b)
                    thr.append(float(edges[f][b]) if b < len(edges[f]) else np.inf)
                    ml.append(m)
                    val.append(0.0)
                    if n in tr.cat_left:  # categorical: the bins (category codes) going left
                        thr[-1] = np.nan
                        ci.append(len(bits))
                        bits.append(tr.cat_left[n])
                    else:
                        ci.append(-1)
                else:
                    cl.append(-1)
                    cr.append(-1)
                    feat.append(-2)
                    bthr.append(-1)
                    thr.append(np.nan)
                    ml.append(False)
                    val.append(float(v[n]))
                    ci.append(-1)
                wn.append(tr.H[n])
            starts.append(starts[-1] + len(keep))
    return {"children_left": np.asarray(cl, dtype=np.int64),
            "children_right": np.asarray(cr, dtype=np.int64),
            "feature": np.asarray(feat, dtype=np.int64),
            "threshold": np.asarray(thr, dtype=np.float64),
            "bin_threshold": np.asarray(bthr, dtype=np.int64),
            "missing_left": np.asarray(ml, dtype=bool),
            "cat_index": np.asarray(ci, dtype=np.int64),
            "cat_bitsets": np.asarray(bits, dtype=bool).reshape(-1, 256),
            "value": np.asarray(val, dtype=np.float64),
            "sum_hessians": np.asarray(wn, dtype=np.float64),
            "tree_start": np.asarray(starts, dtype=np.int64)}


def _concat_nodes(a, b):
    if a is None:
        return b
    out = {}
    off = a["tree_start"][-1]
    for k in a:
        if k == "tree_start":
            out[k] = np.concatenate([a[k], b[k][1:] + off])
        elif k == "cat_index":
            out[k] = np.concatenate([a[k], np.where(b[k] >= 0, b[k] + len(a["cat_bitsets"]),
                                                    -1)])
        elif k in ("children_left", "children_right"):
            out[k] = np.concatenate([a[k], np.where(b[k] >= 0, b[k] + off, -1)])
        else:
            out[k] = np.concatenate([a[k], b[k]])
    return out


def _should_stop(scores, n_iter_no_change, tol):
    """scikit-learn's rule: no score of the last ``n_iter_no_change`` beats the one before
    them by more than ``tol``."""
    ref = n_iter_no_change + 1
    if len(scores) < ref:
        return False
    reference = scores[-ref] + tol
    return not any(s > reference for s in scores[-n_iter_no_change:])


def val_bin_kernel(xb, yb, wb, edges, categorical, categories, is_cat, classes, name):
    """A block of the user's validation set binned as the training blocks (a category not
    seen in training is missing; a class not seen in training is an error)."""
    x = encode_coded(as_float_block(xb, categorical, categories, name), is_cat, categorical,
                     categories)
    if classes is not None:
        unseen = np.setdiff1d(np.unique(yb), classes)
        if unseen.size:
            raise ValueError(f"{name}: y_val has labels {unseen.tolist()[:5]} that are not in "
                             f"the training classes {classes.tolist()[:10]}")
    return bin_kernel(x, yb, wb, edges, is_cat, categories, classes, None, name)


def _check_validation_args(est, X_val, y_val, name):
    """scikit-learn's rules: X_val and y_val come together, and need early stopping on."""
    if X_val is None and y_val is None:
        return False
    if y_val is None:
        raise ValueError(f"{name}: X_val is provided, but y_val was not provided.")
    if X_val is None:
        raise ValueError(f"{name}: y_val is provided, but X_val was not provided.")
    if est.early_stopping is False:
        raise ValueError(f"{name}: X_val and y_val are passed to fit while early_stopping is "
                         "False; they are only used for early stopping, so set "
                         "early_stopping to 'auto' or True (or leave them out).")
    return True


def fit_boosting(est, X, y, sample_weight, *, classify, X_val=None, y_val=None,
                 sample_weight_val=None):
    """Fit the boosted trees on the estimator's behalf; sets the fitted attributes."""
    name = type(est).__name__
    warm = est.warm_start and hasattr(est, "nodes_")
    has_val = _check_validation_args(est, X_val, y_val, name)
    blocks = est._fit_blocks(X, y, sample_weight, numeric=False, allow_nan=True,
                             y_numeric=not classify, reset=not warm)
    categorical, categories = _categorical_layout(blocks, est.max_bins, name)
    is_cat = _gb_categorical.resolve(est.categorical_features, blocks, categorical, name)
    d = blocks.n_features
    # The two kernels compiled once across the cluster, one per worker, before the first task
    # needs them (docs/cold_start.md): a fresh worker would otherwise compile both on the
    # fit's critical path.
    prepare(entries("gbt"))
    from dml.optim.data import should_persist

    # Data of known length that fits is read a group of consecutive blocks per task (sketch,
    # validation and binning; the same fixed reduction tree, so the same sketch): at hundreds
    # of blocks a task per block costs more than the work. Larger data streams a block per
    # task (a group's float blocks are in one task's memory).
    grouped = blocks.known_lengths is not None and should_persist(blocks, "auto")
    if warm:
        if est.max_iter < est.n_iter_:
            raise ValueError(f"{name}: max_iter={est.max_iter} must be at least the "
                             f"n_iter_={est.n_iter_} rounds already fitted when warm_start=True")
        seed = est._seed
        edges, classes = est.bin_edges_, getattr(est, "classes_", None)
        is_cat, categories = est.is_categorical_, est.categories_
    else:
        seed = seed_from(est.random_state)
        reduce = blocks.reduce_in_groups if grouped else blocks.map_reduce
        sk = reduce(sketch_kernel, categorical, categories, classify, name,
                    combine=combine_sketches)
        edges = []
        for j in range(d):
            if categorical[j]:  # pandas categories: the codes are the bins
                edges.append(np.empty(0))
            elif is_cat[j]:  # numeric codes: the sorted distinct values are the bins
                categories[j] = _gb_categorical.coded_categories(
                    sk["sketch"][j][0], est.max_bins, _gb_categorical.column_name(blocks, j),
                    name)
                edges.append(categories[j][:-1])
            else:
                edges.append(bin_edges(*sk["sketch"][j], est.max_bins))
        classes = None
        if classify:
            classes = _check_classes(sk["labels"], name)
    n_bins = np.array([len(categories[j]) if categorical[j] else len(edges[j]) + 1
                       for j in range(d)], dtype=np.int64)
    cw = _class_weights(est.class_weight, classes, blocks, name) \
        if classify and getattr(est, "class_weight", None) is not None else None
    K = len(classes) if classify else 1
    loss = make_loss(est.loss, K, getattr(est, "quantile", 0.5) or 0.5)
    if est.loss == "poisson":
        total = blocks.map_reduce(_check_poisson_y, name)
        if not total[0] > 0:
            raise ValueError(f"{name}: loss='poisson' needs sum(y) > 0; y is all zeros")
    bin_args = (edges, categorical, categories, classes, cw, name)
    n_known = blocks.n_samples if blocks.known_lengths is not None else None
    es = est.early_stopping
    if es == "auto":
        # (Counting the rows of blocks of unknown length keeps them for the runs below.)
        es = blocks.n_samples > 10000
    # A given validation set replaces the held-out share of the training rows (and is not
    # used at all without early stopping, as scikit-learn's "auto" below 10,000 rows).
    use_val = bool(es) and (has_val or est.validation_fraction is not None)
    vf = est.validation_fraction if es and not has_val else None
    n_train = len(blocks.parts)
    val_binned = []
    if es and has_val:
        val_blocks = est._fit_blocks(X_val, y_val, sample_weight_val, numeric=False,
                                     allow_nan=True, y_numeric=not classify, reset=False)
        val_binned = list(val_blocks.map_parts(
            val_bin_kernel, edges, categorical, categories, is_cat, classes, name))
    n_blocks = n_train + len(val_binned)
    # Small blocks are counted in runs of at least RUN_ROWS rows; from here on a run is what
    # the fit calls a block (its random draws, its place in the fixed tree of sums).
    row_run_bounds = _run_bounds(blocks, val_blocks if val_binned else None,
                                 None if warm else sk["n"])
    n_groups = _n_groups(n_blocks, n_known, d, loss.n_outputs)
    if grouped and blocks.groups is None and not val_binned:
        # Data that fits is binned in the tasks that hold its groups: no task per block.
        prep, starts = _prep_held_groups(blocks, bin_args, vf, seed, n_groups, row_run_bounds)
    else:
        binned = blocks.map_parts(bin_kernel, *bin_args)
        prep, starts = _prep_groups(list(binned) + val_binned, vf, seed, n_train, n_groups,
                                    row_run_bounds)
    n_train = row_run_bounds.index(n_train)
    n_blocks = len(row_run_bounds) - 1
    base = compute(*[delayed(_base_group, pure=False)(p, loss, start, n_blocks, n_train, is_cat)
                     for p, start in zip(prep, starts)])
    base = finish_tree(base, n_blocks, combine_base, _gb_chain._FANIN)
    check_weights_not_all_zero(base["wsum"], name)
    if base["n"] == 0:
        raise ValueError(f"{name}: no training rows are left after the validation split")
    if has_val and es and base["n_val"] == 0:
        raise ValueError(f"{name}: X_val has no rows; pass a non-empty validation set")
    has_missing = base["missing"]
    if warm:
        baseline = est._baseline
        nodes = est.nodes_
    else:
        baseline = loss.baseline(base["stats"])
        nodes = None
    first = est.n_iter_ if warm else 0
    T = loss.n_outputs
    params = _gb_grow.GrowParams(
        max_leaf_nodes=est.max_leaf_nodes, max_depth=est.max_depth,
        min_samples_leaf=est.min_samples_leaf, l2_regularization=est.l2_regularization,
        learning_rate=est.learning_rate, n_bins=n_bins, has_missing=has_missing,
        max_features=max(1, int(math.ceil(est.max_features * d))), seed=seed, is_cat=is_cat,
        known_bins=base["seen"])
    driver = _gb_chain.Driver(
        params=params, loss=loss, n_trees=T, first=first, max_iter=est.max_iter,
        early_stopping=bool(es), validation=use_val, n_iter_no_change=est.n_iter_no_change,
        tol=est.tol, record_start=not warm, n_blocks=n_blocks)
    if warm:
        driver.train_scores = list(est.train_score_)
        driver.val_scores = list(est.validation_score_) if use_val else []
    client = _gb_collective.cluster_client()
    collective = client is not None and _gb_collective.has_headroom(client, prep)
    if collective:
        # On a cluster: long-lived tasks that swap histograms directly. If a run's tasks cannot
        # all start (paused workers: data near the memory limit), the chained graphs below
        # grow the same model from the start instead.
        try:
            driver0 = driver.copy()
            driver, all_trees, runs = _gb_collective.fit_rounds(
                client, prep, starts, driver, n_blocks=n_blocks, loss=loss, seed=seed,
                subsample=est.subsample, n_trees=T, baseline=baseline, prior=nodes,
                flatten=lambda rounds: _flatten(rounds, edges))
            submissions, lost = runs["runs"], runs["lost_runs"]
        except _gb_collective.RunCannotStart as exc:
            _logger.info("%s; growing the rounds as chained graphs instead", exc)
            driver, collective = driver0, False
    if not collective:
        lost = 0
        driver, all_trees, submissions = _chained_rounds(prep, starts, driver, loss, baseline,
                                                         nodes, seed, est.subsample, first, T,
                                                         n_blocks, bool(es))
    importances = (est._importance_sums if warm else np.zeros(d)) + driver.importances
    n_iter = driver.rnd
    train_scores = driver.train_scores
    val_scores = (driver.val_scores if use_val else train_scores) if es else []
    # Growth statistics (waves per round, graph submissions) for benchmarks and docs.
    est._fit_stats = {"waves": list(driver.waves), "submissions": submissions,
                      "groups": len(prep), "runs": n_blocks, "lost_runs": lost,
                      "collective": collective}
    new_nodes = _flatten(all_trees, edges) if all_trees else None
    est.nodes_ = _concat_nodes(nodes, new_nodes) if new_nodes is not None else (
        nodes if nodes is not None else _flatten([], edges))
    est._seed = seed
    est._baseline = baseline
    est._importance_sums = importances
    est.n_iter_ = n_iter
    est.n_trees_per_iteration_ = T
    est.bin_edges_ = edges
    est.n_bins_ = n_bins
    est.categorical_ = categorical
    est.is_categorical_ = is_cat
    est.categories_ = categories
    est.has_missing_values_ = has_missing
    est.do_early_stopping_ = bool(es)
    est.train_score_ = np.asarray(train_scores)
    est.validation_score_ = np.asarray(val_scores) if es else np.asarray([])
    if classify:
        est.classes_ = classes
        est.n_classes_ = K
    return est


def _chained_rounds(prep, starts, driver, loss, baseline, nodes, seed, subsample, first, T,
                    n_blocks, es):
    """The rounds as chained graphs (any Dask scheduler; see :mod:`dml.ensemble._gb_chain`)."""
    carried = dask.persist(*[
        delayed(_gb_chain.start_group, pure=False)(p, start, loss, baseline, broadcast(nodes),
                                                   seed, subsample, first, T)
        for p, start in zip(prep, starts)])
    group_args = [(start, n_blocks, loss, seed, subsample, T) for start in starts]
    all_trees = []
    submissions = 0
    while not driver.done:
        n_steps = _chain_length(driver, loss, es)
        carried, dstate = chain_steps(prep, carried, driver, _gb_chain.group_step, group_args,
                                      n_steps, _gb_chain.finish, "gbt-chain")
        *carried, dstate = dask.persist(*carried, dstate)
        (driver,) = compute(dstate)
        submissions += 1
        all_trees.extend(driver.finished)
        driver.finished = []
    return driver, all_trees, submissions


#: Most steps (waves, ends of rounds) submitted as one graph: a longer chain is a bigger graph
#: to build and, after early stopping, more idle steps.
MAX_STEPS = 48


def _chain_length(driver, loss, early_stopping):
    """Steps for the next submission: about what the remaining rounds need (waves as in the
    rounds so far, plus the end of each round), at most :data:`MAX_STEPS`."""
    per_round = (float(np.mean(driver.waves[-10:])) if driver.waves else 6.0) + 1.0
    if loss.leaf_quantile is not None:
        per_round += 1
    rounds = driver.max_iter - driver.rnd
    if early_stopping:  # the fit may stop after any round
        rounds = min(rounds, max(driver.n_iter_no_change, 2))
    return int(min(MAX_STEPS, max(2, math.ceil(rounds * per_round) + 1)))


#: Most of the smallest worker's memory limit one group's per-row state may take (bins, target,
#: weight, validation flag and a round's raw scores, gradients, hessians, subsample flag and
#: node index: :func:`_row_bytes`). A step replaces a group's per-row state, so for a moment
#: it exists twice; on data near the workers' memory a bounded group keeps that doubling a
#: small share instead of the whole data. The model does not depend on the grouping.
GROUP_MEMORY_SHARE = 1 / 16

#: Most blocks in one group when the data's length is not known before the groups are made
#: (the rows per block, and so the memory a group holds, are then unknown).
MAX_GROUP_BLOCKS = 16

#: Fewest binned cells (rows × features) worth a group of their own. On a cluster every
#: growth wave of several groups swaps histograms and then best splits between them (about
#: 0.2 ms of CPU a swap plus the wait for the slower group, about 17 waves a tree), so small
#: data is grown faster by fewer groups; from about two million cells a group, halving the
#: histogram work pays for that (docs/gradient_boosting.md, "Cost"). The model does not
#: depend on the grouping.
MIN_GROUP_CELLS = 2_000_000

#: Rows of a *run*: consecutive blocks whose rows are counted into one histogram, in row
#: order, as if they were one block (:func:`row_runs`). Every run counted on its own costs
#: every wave the zeroing and adding of a whole histogram array (nodes × features × bins),
#: whatever its rows: hundreds of small blocks made that the fit's main cost, and at 20,000
#: rows a block it was still four tenths of the histogram kernel's time
#: (docs/gradient_boosting.md, "Small blocks are counted in runs"). Blocks of at least this
#: many rows on average are runs of their own. The runs follow from the blocks' lengths
#: alone, so the model still depends only on the data and its partitioning; a group holds
#: whole runs, so a fit uses at most one worker thread per run. 0: every block a run.
RUN_ROWS = 65_536


def _row_bytes(n_features: int, n_outputs: int) -> int:
    """Bytes a group holds per row: uint8 bins, float64 target and weight, a validation flag,
    and per round float64 raw scores and float32 gradients and hessians per output, a
    subsample flag and an int32 node index."""
    return n_features + 8 + 8 + 1 + n_outputs * (8 + 4 + 4) + 1 + 4


def _n_groups(n_blocks: int, n_rows: int | None, n_features: int, n_outputs: int) -> int:
    """Groups to hold the binned blocks in: one per worker thread, fewer on small data
    (:data:`MIN_GROUP_CELLS`), more when a group's per-row state would exceed
    :data:`GROUP_MEMORY_SHARE` of the smallest worker (by bytes, not blocks: hundreds of small
    blocks are no reason for many groups, and every extra group costs every wave a wait)."""
    from dml.optim.data import cluster_memory, smallest_worker_memory

    n_groups = default_n_tasks()
    if n_rows is None:
        return max(n_groups, -(-n_blocks // MAX_GROUP_BLOCKS))
    if MIN_GROUP_CELLS > 0:
        n_groups = min(n_groups, n_rows * n_features // MIN_GROUP_CELLS)
    limit = smallest_worker_memory() or cluster_memory()
    state = n_rows * _row_bytes(n_features, n_outputs)
    return max(1, n_groups, math.ceil(state / (GROUP_MEMORY_SHARE * limit)))


def row_runs(lengths, min_rows: int) -> list:
    """The blocks (of ``lengths`` rows) cut into runs of consecutive blocks whose rows are
    counted into one histogram (:data:`RUN_ROWS`). Blocks of ``min_rows`` rows or more on
    average are runs of their own. Smaller ones make a power of two of runs, as many as
    ``min_rows`` rows each allow, cut at the block boundaries nearest to equal shares of the
    rows: groups of whole runs then hold equal rows on 2, 4, 8 ... threads. Returns the runs'
    bounds ``[0, ..., len(lengths)]``.

    Examples
    --------
    >>> row_runs([20, 20, 20], 8)
    [0, 1, 2, 3]
    >>> row_runs([5] * 10, 8)               # 50 rows: 4 runs of about 12 rows
    [0, 2, 5, 7, 10]
    >>> row_runs([5, 5], 0), row_runs([5, 5], 100)
    ([0, 1, 2], [0, 2])
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n, total = len(lengths), int(lengths.sum())
    if n == 0 or min_rows <= 0 or total >= min_rows * n:
        return list(range(n + 1))
    k = min(n, 1 << max(0, (total // min_rows).bit_length() - 1))
    cum = np.concatenate([[0], np.cumsum(lengths)])
    bounds = [0]
    for i in range(1, k):
        target = total * i / k
        j = int(np.searchsorted(cum, target))
        if j > 0 and target - cum[j - 1] <= cum[j] - target:
            j -= 1
        bounds.append(min(max(j, bounds[-1] + 1), n - (k - i)))
    return bounds + [n]


def _run_bounds(blocks, val_blocks, n_rows=None):
    """Run bounds over all blocks: the training blocks' runs, then the validation blocks'
    (``val_blocks``, or None; never one run of both)."""
    train = row_runs(_lengths(blocks, n_rows), RUN_ROWS)
    if val_blocks is None:
        return train
    n = train[-1]
    return train + [n + b for b in row_runs(_lengths(val_blocks), RUN_ROWS)[1:]]


def _lengths(blocks, n_rows=None):
    """The rows of every block. Counted when the input does not state them (the runs, and so
    the model, must not depend on whether it does: a persisted Dask DataFrame does not, the
    Parquet files it was read from do), unless ``n_rows`` (the total, known from the sketch)
    already shows blocks of ``RUN_ROWS`` rows on average, which are runs of their own."""
    n = len(blocks.parts)
    if blocks.known_lengths is None and (
            RUN_ROWS <= 0 or (n_rows is not None and n_rows >= RUN_ROWS * n)):
        return [RUN_ROWS] * n  # the same runs without counting: a block each
    return blocks.lengths


def _prep_groups(binned, vf, seed, n_train, n_groups, runs):
    """The binned blocks with their validation masks, held as ``n_groups`` groups of
    consecutive blocks (:func:`_n_groups`; every group runs the split search in every step;
    see :mod:`dml.ensemble._gb_chain`). Blocks from ``n_train`` on are the user's validation
    set: they are carried like the others (their raw predictions follow the rounds) but hold
    only validation rows. ``runs`` (bounds, :func:`row_runs`) join consecutive blocks into one
    part each, and a group holds whole runs. Returns the persisted groups (a tuple of parts,
    one per run) and their first runs."""
    bounds = block_ranges(len(runs) - 1, max(1, n_groups))
    ranges = [(runs[a], runs[b]) for a, b in zip(bounds[:-1], bounds[1:])]
    sizes = [tuple(np.diff(runs[a:b + 1]).tolist()) for a, b in zip(bounds[:-1], bounds[1:])]
    # Each group on a worker of its own (consecutive groups together, near the blocks they
    # read): a plain persist may put two groups on one worker, whose run then does the work of
    # both while the other worker idles (every group's run is pinned to its group's worker).
    groups = persist_placed(
        [delayed(_prep_group, pure=False)(lo, vf, seed, n_train, sz, *binned[lo:hi])
         for (lo, hi), sz in zip(ranges, sizes)],
        [[k for b in binned[lo:hi] for k in task_inputs(b)] for lo, hi in ranges])
    return list(groups), bounds[:-1]


def _prep_held_groups(blocks, bin_args, vf, seed, n_groups, runs):
    """:func:`_prep_groups` for data of known length that fits and has no separate validation
    set: each group's task validates and bins its blocks and joins its runs
    (:meth:`dml._blocks.Blocks.map_groups`), where a task per block binned them before."""
    bounds = block_ranges(len(runs) - 1, max(1, n_groups))
    prep = blocks.map_groups([runs[b] for b in bounds], _bin_prep_group, bin_args, vf, seed,
                             tuple(runs))
    return prep, bounds[:-1]


def _bin_prep_group(group, start, bin_args, vf, seed, runs):
    end = start + len(group)
    sizes = np.diff([b for b in runs if start <= b <= end]).tolist()
    return _prep_group(start, vf, seed, runs[-1], sizes,
                       *[bin_kernel(xb, yb, wb, *bin_args) for xb, yb, wb in group])


def _prep_group(start, vf, seed, n_train, sizes, *parts):
    # Validation rows are drawn per block (keyed by the block), then a run's blocks are one part.
    prepped = [prep_kernel(start + j, p, vf, seed, start + j >= n_train)
               for j, p in enumerate(parts)]
    out, at = [], 0
    for size in sizes:
        run = prepped[at:at + size]
        at += size
        out.append(run[0] if size == 1 else tuple(np.concatenate(c) for c in zip(*run)))
    return tuple(out)


def _base_group(prep, loss, start, n_blocks, n_train, is_cat):
    return range_reduce([base_kernel(p, loss, is_cat, start + j < n_train)
                         for j, p in enumerate(prep)], start, n_blocks, combine_base,
                        _gb_chain._FANIN)


#: Rows up to which the exact value counts of a feature are expanded to compute scikit-learn's
#: percentiles exactly (beyond, the counts are used as weights of the sorted values).
_EXPAND_ROWS = 5_000_000


def bin_edges(values, counts, max_bins):
    """Bin edges of one feature from its (distinct value, count) summary, as scikit-learn's
    HistGradientBoosting bins: midpoints of adjacent values when there are at most
    ``max_bins``, else its ``averaged_inverted_cdf`` percentiles. These are exact while the
    summary is (at most 2048 distinct values, see :mod:`dml.tree._binning`); beyond, the
    summary's quantiles approximate them."""
    exact = np.all(counts == np.round(counts))
    if values.size <= max_bins:
        return edges_from_sketch(values, counts, max_bins)
    if not exact or counts.sum() > _EXPAND_ROWS:
        # The summary's points carry equal weights: its inverted-cdf percentiles.
        cum = np.cumsum(counts)
        pct = np.arange(1, max_bins) / max_bins * cum[-1]
        idx = np.minimum(np.searchsorted(cum, pct * (1 - 1e-12), side="left"), values.size - 1)
        return np.unique(values[idx])
    col = np.repeat(values, counts.astype(np.int64))
    pct = np.linspace(0, 100, num=max_bins + 1)[1:-1]
    return np.unique(np.percentile(col, pct, method="averaged_inverted_cdf"))


def _check_classes(classes, name):
    if classes is None or len(classes) == 0:
        raise ValueError(f"{name}: y has no labels")
    if classes.dtype.kind == "f" and not np.all(classes == np.round(classes)):
        raise ValueError(f"{name}: Unknown label type: 'continuous'. y holds non-integer "
                         "numbers, like a regression target; a classifier needs class labels "
                         "(integers or strings). Use a regressor, or bin y first.")
    if len(classes) < 2:
        raise ValueError(f"{name}: y has a single class (1 class: {classes[0]!r}); a "
                         "classifier needs at least two classes")
    return classes


def _check_poisson_y(xb, yb, wb, name):
    y = np.asarray(yb, dtype=np.float64)
    if (y < 0).any():
        raise ValueError(f"{name}: loss='poisson' needs y >= 0 (counts or rates); y has "
                         f"negative values (min {y.min()})")
    return np.array([y.sum()])
