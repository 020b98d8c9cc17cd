"""Fitting driver shared by the trees and forests, flat node arrays, and blockwise prediction.

A fitted tree or forest is a dict of flat NumPy arrays (scikit-learn's ``tree_`` layout, all
trees concatenated): ``children_left``, ``children_right`` (-1 at leaves), ``feature`` (-2 at
leaves), ``threshold`` (go left when ``x <= threshold``; NaN for categorical splits),
``missing_left``, ``cat_index`` (row of ``cat_bitsets`` for categorical splits, else -1),
``cat_bitsets`` (bool, categories that go left), ``value`` (class fractions or the mean),
``impurity``, ``weighted_n_node_samples`` and ``tree_start`` (first node of each tree, plus the
total). Node indices in ``children_*`` are global.
"""
from __future__ import annotations

import logging
import numbers
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np
import pandas as pd
from dask import delayed

from dml._block_groups import block_ranges, collect, default_n_tasks, hold_in_groups
from dml._blocks import seed_from, tree_reduce
from dml.tree._binning import (as_float_block, bin_kernel, combine_sketches, edges_from_sketch,
                               sketch_kernel)
from dml.tree._grow import boot_group, grow_trees
from dml.tree._split import GrowSpec, node_weight
from dml.worker_setup import entries, prepare

#: Forests log every level they grow here (at INFO).
_logger = logging.getLogger("dml.ensemble")

#: Trees grown together in one set of passes when ``trees_per_pass`` is None: bounded so that the
#: per-block node assignments (rows × trees int32) and bootstrap counts stay small.
DEFAULT_TREES_PER_PASS = 64

#: Groups the binned blocks are held in (None: one per worker thread of the cluster). A level
#: of the trees costs a few tasks per group, whatever the number of blocks; the trees do not
#: depend on it (the blocks' histograms are summed in a fixed tree over the blocks).
N_GROUPS = None


def flatten(trees, classify: bool, criterion: str) -> dict:
    """The grown trees as one dict of flat arrays (global node indices)."""
    starts = np.cumsum([0] + [len(t.left) for t in trees])
    cl, cr, feat, thr, ml, ci, val, imp, wn, bits = [], [], [], [], [], [], [], [], [], []
    n_bits = 0
    for off, t in zip(starts[:-1], trees):
        left = np.asarray(t.left, dtype=np.int64)
        right = np.asarray(t.right, dtype=np.int64)
        cl.append(np.where(left >= 0, left + off, -1))
        cr.append(np.where(right >= 0, right + off, -1))
        feat.append(np.asarray(t.feature, dtype=np.int64))
        thr.append(np.asarray(t.threshold, dtype=np.float64))
        ml.append(np.asarray(t.mleft, dtype=bool))
        c = np.asarray(t.cat_index, dtype=np.int64)
        ci.append(np.where(c >= 0, c + n_bits, -1))
        n_bits += len(t.bitsets)
        bits.extend(t.bitsets)
        stats = np.stack(t.stats)
        w = node_weight(stats, criterion)
        with np.errstate(divide="ignore", invalid="ignore"):
            if classify:
                v = stats / np.where(w > 0, w, 1.0)[:, None]
            else:
                v = (stats[:, 1] / np.where(w > 0, w, 1.0))[:, None]
        val.append(v)
        imp.append(np.asarray(t.impurity, dtype=np.float64))
        wn.append(w)
    return {
        "children_left": np.concatenate(cl), "children_right": np.concatenate(cr),
        "feature": np.concatenate(feat), "threshold": np.concatenate(thr),
        "missing_left": np.concatenate(ml), "cat_index": np.concatenate(ci),
        "cat_bitsets": np.asarray(bits, dtype=bool).reshape(-1, 256),
        "value": np.concatenate(val), "impurity": np.concatenate(imp),
        "weighted_n_node_samples": np.concatenate(wn), "tree_start": starts.astype(np.int64),
    }


def apply_float(x: np.ndarray, nodes: dict) -> np.ndarray:
    """Leaf (global node index) of every row in every tree: shape (n_rows, n_trees)."""
    n = x.shape[0]
    T = len(nodes["tree_start"]) - 1
    node = np.broadcast_to(nodes["tree_start"][:-1], (n, T)).copy()
    feature, thr, cl, cr = (nodes["feature"], nodes["threshold"], nodes["children_left"],
                            nodes["children_right"])
    ml, ci, bits = nodes["missing_left"], nodes["cat_index"], nodes["cat_bitsets"]
    rows = np.broadcast_to(np.arange(n)[:, None], (n, T))
    while True:
        f = feature[node]
        inner = f >= 0
        if not inner.any():
            return node
        r, a, ff = rows[inner], node[inner], f[inner]
        v = x[r, ff]
        miss = np.isnan(v)
        go = np.where(miss, ml[a], v <= thr[a])
        c = ci[a]
        cat = (c >= 0) & ~miss
        if cat.any():
            code = v[cat].astype(np.int64)
            ok = (code >= 0) & (code < 256)
            g = np.where(ok, False, ml[a][cat])
            g[ok] = bits[c[cat][ok], code[ok]]
            go[cat] = g
        node[inner] = np.where(go, cl[a], cr[a])


def predict_kernel(xb, nodes, categorical, categories, estimator, what):
    """Blockwise output: mean class distribution ('proba'), mean value ('value'), or leaves."""
    x = as_float_block(xb, categorical, categories, estimator)
    leaves = apply_float(x, nodes)
    if what == "apply":
        return leaves
    val = nodes["value"][leaves]  # (n, T, K)
    out = val.mean(axis=1)
    if what == "value":
        return out[:, 0]
    return out


# --------------------------------------------------------------------------------------------
# fitting
# --------------------------------------------------------------------------------------------

def resolve_max_features(max_features, d: int) -> int:
    """The number of features drawn per node (``max_features`` checked by the estimator)."""
    if max_features is None:
        return d
    if isinstance(max_features, str):
        return max(1, int(np.sqrt(d) if max_features == "sqrt" else np.log2(d)))
    if isinstance(max_features, (numbers.Integral, np.integer)):
        return min(int(max_features), d)
    return max(1, int(max_features * d))


def _categorical_layout(blocks, max_bins, name):
    d = blocks.n_features
    categorical = np.zeros(d, dtype=bool)
    categories = [None] * d
    if blocks.dtypes is not None:
        for j, t in enumerate(blocks.dtypes):
            if isinstance(t, pd.CategoricalDtype):
                if t.categories is None or len(t.categories) == 0:
                    raise ValueError(f"{name}: categorical column {blocks.dtypes.index[j]!r} "
                                     "has unknown categories; call .cat.as_known() first")
                if len(t.categories) > max_bins:
                    raise ValueError(
                        f"{name}: categorical column {blocks.dtypes.index[j]!r} has "
                        f"{len(t.categories)} categories, more than max_bins={max_bins}; "
                        "raise max_bins (<= 255) or encode the column numerically")
                categorical[j] = True
                categories[j] = np.asarray(t.categories)
            elif not (pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t)):
                raise TypeError(f"{name}: column {blocks.dtypes.index[j]!r} has dtype {t}; "
                                "give it the pandas 'category' dtype or encode it numerically")
    return categorical, categories


def _prepare_kernels(classify, criterion, any_cat, subtract):
    """Compile the kernels this fit will run once across the cluster, before it starts
    (:func:`dml.worker_setup.prepare`): the blocks' counting and routing kernels, the split
    search that runs beside the merged histograms (on the client when every feature is used:
    ``subtract`` in :func:`~dml.tree._grow.grow_trees`) and, without ``subtract``, the rows
    route of deep levels. Only the signatures of this task (classifier or regressor)."""
    fused = criterion in ("gini", "squared_error") and not any_cat
    search = "best_candidates" if fused else "split_scores"
    on_workers = {"bin_numeric", "sort_values", "group_by_slot", "hist_sparse", "merge_sum",
                  "route"}
    if not subtract:
        on_workers |= ({search, "rows_by_slot", "rows_in_slot_order"}
                       | ({"best_from_rows"} if fused else set()))

    def y_matches(name, sig):  # the target is class indices (int64) or float64
        y = {"hist_sparse": 1, "best_from_rows": 2, "rows_in_slot_order": 3}.get(name)
        return y is None or (str(sig[y].dtype) == "int64") == bool(classify)

    prepare(entries("trees", lambda n, s: n in on_workers and y_matches(n, s)),
            local=entries("trees", lambda n, s: subtract and n == search))


@dataclass
class BinnedData:
    """Training blocks validated, binned and, when they fit, persisted: what growing trees needs
    of the data. ``groups`` hold the binned blocks in groups of consecutive blocks (a tuple of
    ``(uint8 bins, encoded y, weights)`` per block; group ``g`` holds blocks ``bounds[g] ..
    bounds[g + 1] - 1``); data that does not fit is not persisted and is one block a group.
    :func:`bin_data` makes it, :func:`grow_on_bins` grows trees on it (AdaBoost's rounds grow
    on it with new row weights: :mod:`dml.ensemble._adaboost_rounds`)."""

    blocks: Any
    groups: list
    bounds: list
    edges: list
    n_bins: np.ndarray
    categorical: np.ndarray
    categories: list
    classes: np.ndarray | None
    class_weight: np.ndarray | None
    n_rows: int
    keep: bool


def fit_trees(est, X, y, sample_weight, *, classify, n_trees, bootstrap, max_features,
              oob=False, progress=None):
    """Fit ``n_trees`` histogram trees on the estimator's behalf; sets the fitted attributes.

    ``progress`` (a display of :mod:`dml.optim.progress`, or None) gets a record after every
    level of the trees being grown (``epoch``: trees finished, ``unit`` "tree", ``detail``: the
    level) and after every group of trees; the levels are also logged at INFO on the
    ``dml.ensemble`` logger.
    """
    data = bin_data(est, X, y, sample_weight, classify=classify, n_trees=n_trees,
                    max_features=max_features)
    grow_on_bins(est, data, classify=classify, n_trees=n_trees, bootstrap=bootstrap,
                 max_features=max_features, oob=oob, progress=progress)
    return est


def bin_data(est, X, y, sample_weight, *, classify, n_trees, max_features) -> BinnedData:
    """Validate the training data, sketch the feature quantiles (unweighted), bin every block
    and persist the bins when they fit (``n_trees``: trees grown together, for that check)."""
    name = type(est).__name__
    blocks = est._fit_blocks(X, y, sample_weight, numeric=False, allow_nan=True,
                             y_numeric=not classify)
    categorical, categories = _categorical_layout(blocks, est.max_bins, name)
    d = blocks.n_features
    _prepare_kernels(classify, _criterion(est, classify), bool(categorical.any()),
                     resolve_max_features(max_features, d) >= d)
    from dml.optim.data import should_persist

    per_pass = getattr(est, "trees_per_pass", None) or DEFAULT_TREES_PER_PASS
    # Data whose bins will be held (its length known, the raw blocks within the persist budget
    # too) is read a group of consecutive blocks per task in both passes below, validation
    # included: at hundreds of blocks the per-block tasks, not the arithmetic, set their time.
    # Larger data streams a block per task (a group's blocks are in one task's memory).
    grouped = (blocks.known_lengths is not None and blocks.groups is None
               and should_persist(blocks, "auto")
               and _fits_in_memory(blocks.n_samples, d, min(per_pass, n_trees)))
    # Pass 1: quantile sketch and labels (the same fixed reduction tree either way).
    reduce = blocks.reduce_in_groups if grouped else blocks.map_reduce
    sk = reduce(sketch_kernel, categorical, categories, classify, name,
                combine=combine_sketches)
    edges = []
    n_bins = np.zeros(d, dtype=np.int64)
    for j in range(d):
        if categorical[j]:
            edges.append(np.empty(0))
            n_bins[j] = len(categories[j])
        else:
            v, w = sk["sketch"][j]
            e = edges_from_sketch(v, w, est.max_bins)
            edges.append(e)
            n_bins[j] = len(e) + 1
    classes = None
    cw = None
    if classify:
        classes = sk["labels"]
        if classes is None or len(classes) == 0:
            raise ValueError(f"{name}: y has no labels")
        if classes.dtype.kind == "f" and not np.all(classes == np.round(classes)):
            # Each distinct float would otherwise become its own class: a useless model.
            raise ValueError(f"{name}: Unknown label type: 'continuous'. y holds non-integer "
                             "numbers, like a regression target; a classifier needs class labels "
                             "(integers or strings). Use a regressor, or bin y first.")
        if len(classes) < 2:
            raise ValueError(f"{name}: y has a single class (1 class: {classes[0]!r}); a "
                             "classifier needs at least two classes")
        cw = _class_weights(est.class_weight, classes, blocks, name)
    bin_args = (edges, categorical, categories, classes, cw, name)
    n = blocks.n_samples if blocks.known_lengths is not None else None
    n_rows = n if n is not None else sk["n"]
    # Persist the binned blocks (and per-pass node assignments, bootstrap counts) only when they
    # fit; otherwise every level re-reads and re-bins its blocks from the source (DESIGN
    # principle 3: data larger than the cluster streams instead of filling worker memory).
    keep = grouped or _fits_in_memory(int(n_rows), d, min(per_pass, n_trees))
    n_groups = N_GROUPS or default_n_tasks()
    if grouped:
        groups, bounds = _binned_groups(blocks, n_groups, bin_args)
    elif keep:
        groups, bounds = hold_in_groups(blocks.map_parts(bin_kernel, *bin_args), n_groups)
    else:
        groups = [delayed(collect, pure=True)(p)
                  for p in blocks.map_parts(bin_kernel, *bin_args)]
        bounds = list(range(len(groups) + 1))
    return BinnedData(blocks, groups, bounds, edges, n_bins, categorical, categories, classes,
                      cw, int(n_rows), keep)


def _binned_groups(blocks, n_groups: int, bin_args: tuple) -> tuple[list, list]:
    """The blocks binned and held in ``n_groups`` groups of consecutive blocks
    (:func:`~dml._block_groups.block_ranges`), one task per group that validates and bins its
    blocks (:meth:`dml._blocks.Blocks.persist` with ``then``): the groups and their bounds, as
    :func:`~dml._block_groups.hold_in_groups` gives them for blocks binned one task each."""
    bounds = block_ranges(len(blocks.parts), max(1, n_groups))
    held = blocks.persist(bounds=bounds, then=(_bin_group, bin_args))
    return list(held.groups.objects), list(held.groups.bounds)


def _bin_group(group, start, *bin_args):
    """A group's validated blocks binned (:func:`bin_kernel` on each)."""
    return tuple(bin_kernel(xb, yb, wb, *bin_args) for xb, yb, wb in group)


def grow_on_bins(est, data: BinnedData, *, classify, n_trees, bootstrap, max_features,
                 oob=False, progress=None, need_assign=False):
    """Grow ``n_trees`` trees on binned data (:func:`fit_trees` after :func:`bin_data`); sets
    the estimator's fitted attributes. With ``need_assign``, returns the node each row reached
    in the trees of the last pass (per group of ``data.groups``, per block: rows × trees int32,
    tree-local node indices; AdaBoost's rounds read the leaves from them)."""
    name = type(est).__name__
    groups, bounds = data.groups, data.bounds
    edges, n_bins, keep = data.edges, data.n_bins, data.keep
    categorical, categories, classes = data.categorical, data.categories, data.classes
    n_rows, d = data.n_rows, len(data.n_bins)
    seed = seed_from(est.random_state)
    per_pass = getattr(est, "trees_per_pass", None) or DEFAULT_TREES_PER_PASS
    mss = est.min_samples_split
    msl = est.min_samples_leaf
    spec = GrowSpec(
        classify=classify, n_channels=len(classes) if classify else 3,
        criterion=_criterion(est, classify), max_depth=est.max_depth,
        min_samples_split=(max(2, int(np.ceil(mss * n_rows))) if isinstance(mss, float)
                           else mss),
        min_samples_leaf=(max(1, int(np.ceil(msl * n_rows))) if isinstance(msl, float)
                          else msl),
        min_impurity_decrease=est.min_impurity_decrease,
        max_features=resolve_max_features(max_features, d), n_bins=n_bins,
        is_cat=categorical, edges=edges, seed=seed, n_rows=int(n_rows))
    all_trees, importances, oob_parts = [], [], []
    for start in range(0, n_trees, per_pass):
        ids = np.arange(start, min(n_trees, start + per_pass))
        boot = None
        if bootstrap:
            boot = [delayed(boot_group, pure=True)(g, lo, seed, ids)
                    for g, lo in zip(groups, bounds[:-1])]
            if keep:
                boot = list(dask.persist(*boot))
        trees, imp, assign = grow_trees(groups, bounds, boot, len(ids), ids, spec,
                                        need_assign=oob or need_assign,
                                        persist_assign=keep,
                                        on_level=_level_reporter(name, ids, n_trees, progress))
        if progress is not None:
            progress.update({"epoch": int(ids[-1]) + 1, "unit": "tree"})
        all_trees.extend(trees)
        importances.append(imp)
        if oob:
            nodes = flatten(trees, classify, spec.criterion)
            oob_parts.append([delayed(_oob_group, pure=True)(g, a, bt, nodes, classify)
                              for g, a, bt in zip(groups, assign, boot)])
    est.n_bins_ = n_bins
    est.bin_edges_ = edges
    est.categorical_ = categorical
    est.categories_ = categories
    if classify:
        est.classes_ = classes
        est.n_classes_ = len(classes)
    est.nodes_ = flatten(all_trees, classify, spec.criterion)
    imp = np.concatenate(importances)
    tot = imp.sum(axis=1, keepdims=True)
    imp = np.divide(imp, tot, out=np.zeros_like(imp), where=tot > 0)
    fi = imp.mean(axis=0)
    s = fi.sum()
    est.feature_importances_ = fi / s if s > 0 else fi
    est.max_features_ = spec.max_features
    if oob:
        per_group = [tree_reduce(list(z), _concat_oob) for z in zip(*oob_parts)] \
            if len(oob_parts) > 1 else oob_parts[0]
        res = [r for rs in dask.compute(*[delayed(_oob_score_group, pure=True)(g, o, classify)
                                          for g, o in zip(groups, per_group)]) for r in rs]
        num = sum(r[0] for r in res)
        den = sum(r[1] for r in res)
        sse = sum(r[2] for r in res)
        if den == 0:
            raise ValueError(f"{name}: no row was out of bag in any tree; oob_score needs more "
                             "trees")
        if classify:
            est.oob_score_ = num / den
        else:
            ys = np.concatenate([r[4] for r in res])
            est.oob_score_ = 1.0 - sse / float(((ys - ys.mean()) ** 2).sum()) \
                if len(ys) > 1 else np.nan
    return assign if need_assign else None


def _level_reporter(name, ids, n_trees, progress):
    """``on_level`` of :func:`grow_trees` for trees ``ids`` of ``n_trees``: a log line and a
    progress record per level (a forest's trees grow together, so a level is the finest
    step there is)."""
    if n_trees == 1 and progress is None:
        return None  # a single decision tree: no report
    first, last = int(ids[0]) + 1, int(ids[-1]) + 1

    def report(level, n_open):
        detail = f"trees {first}-{last}: level {level} grown, {n_open} nodes to split"
        _logger.info("%s %s", name, detail)
        if progress is not None:
            progress.update({"epoch": first - 1, "unit": "tree", "detail": detail})
    return report


def _fits_in_memory(n_rows: int, d: int, trees_per_pass: int) -> bool:
    """Whether the binned blocks (uint8 bins, y, weights) plus the per-pass node assignments
    (int32) and bootstrap counts (uint8) of ``n_rows`` rows fit the cluster's persist budget."""
    from dml.optim.data import fits_persist_budget

    return fits_persist_budget(n_rows * (d + 16 + 5 * trees_per_pass))


def _criterion(est, classify):
    return "entropy" if est.criterion == "log_loss" else est.criterion


def _class_weights(class_weight, classes, blocks, name):
    if class_weight is None:
        return None
    if class_weight == "balanced":
        counts = blocks.map_reduce(_class_counts, classes)
        with np.errstate(divide="ignore"):
            return np.where(counts > 0, counts.sum() / (len(classes) * counts), 0.0)
    if isinstance(class_weight, dict):
        unknown = [k for k in class_weight if k not in set(classes.tolist())]
        if unknown:
            raise ValueError(f"{name}: class_weight names classes {unknown} not in y "
                             f"(classes: {list(classes)})")
        return np.asarray([float(class_weight.get(c, 1.0)) for c in classes.tolist()])
    raise ValueError(f"{name}: class_weight must be None, 'balanced' or a dict; got "
                     f"{class_weight!r}")


def _class_counts(xb, yb, wb, classes):
    w = np.ones(len(yb)) if wb is None else np.asarray(wb, dtype=np.float64)
    return np.bincount(np.searchsorted(classes, yb), weights=w, minlength=len(classes))


def _oob_kernel(part, assign, boot, nodes, classify):
    """Per block: summed leaf values of the trees for which a row is out of bag, and counts."""
    T = assign.shape[1]
    leaves = assign + nodes["tree_start"][:-1][None, :T]
    val = nodes["value"][leaves]  # (n, T, K)
    out = (boot == 0)
    return (np.einsum("nt,ntk->nk", out.astype(np.float64), val), out.sum(axis=1))


def _oob_group(group, assign, boot, nodes, classify):
    return tuple(_oob_kernel(p, a, bt, nodes, classify) for p, a, bt in zip(group, assign, boot))


def _concat_oob(parts):
    """The out-of-bag sums of several passes of trees, block by block (parts: per pass, the
    per-block results of one group)."""
    return tuple((sum(p[j][0] for p in parts), sum(p[j][1] for p in parts))
                 for j in range(len(parts[0])))


def _oob_score_group(group, oob, classify):
    return [_oob_score(p, o, classify) for p, o in zip(group, oob)]


def _oob_score(part, oob, classify):
    _, y, _ = part
    s, c = oob
    seen = c > 0
    if classify:
        pred = np.argmax(s[seen], axis=1)
        return (float((pred == y[seen]).sum()), int(seen.sum()), 0.0, None, None)
    pred = s[seen, 0] / c[seen]
    return (0.0, int(seen.sum()), float(((y[seen] - pred) ** 2).sum()), None, y[seen])
