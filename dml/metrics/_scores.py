"""Classification metrics of predicted probabilities and decision scores, as block reductions.

:func:`log_loss` reduces, per true label, the summed ``-log p`` of every probability column;
:func:`roc_auc_score` reduces, per distinct score, the weight of each true label (which is what
the ROC curve is built from, whatever the partitioning). The label metrics that compare hard
predictions live in :mod:`dml.metrics._classification`. The results equal scikit-learn's (1.9)
for any partitioning, up to floating-point round-off in weighted sums.
"""
from __future__ import annotations

import numbers
import warnings
from functools import partial
from itertools import combinations

import numpy as np

from dml.metrics import _base
from dml.metrics._base import (block_labels, float_block, label_index,
                               label_input, union_labels, weight_vector, weighted_bincount)
from dml.metrics._classification import _normalise_weights_sum

__all__ = ["log_loss", "roc_auc_score"]


# --------------------------------------------------------------------------------------------
# Log loss
# --------------------------------------------------------------------------------------------

class _ProbaTable:
    """Per true label, the (weighted) sum of ``-log(clip(p))`` of every probability column."""

    __slots__ = ("labels", "kind", "continuous", "n", "wsum", "loss", "pmin", "pmax", "sums_ok")

    def __init__(self, labels, kind, continuous, n, wsum, loss, pmin, pmax, sums_ok):
        self.labels, self.kind, self.continuous, self.n = labels, kind, continuous, n
        self.wsum, self.loss, self.pmin, self.pmax, self.sums_ok = wsum, loss, pmin, pmax, sums_ok

    def __getstate__(self):
        return {s: getattr(self, s) for s in self.__slots__}

    def __setstate__(self, state):
        for s, v in state.items():
            setattr(self, s, v)


_PROBA_DTYPES = (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.float16))


def _proba_kernel(index, xb, yb, wb, name):
    labels, codes, kind, continuous = block_labels(yb, "y_true", name, index)
    p = float_block(xb, "y_proba", name, index, keep=_PROBA_DTYPES)
    if p.ndim == 1:
        p = p[:, None]
    pmin = float(p.min()) if p.size else np.inf
    pmax = float(p.max()) if p.size else -np.inf
    if p.shape[1] == 1:
        p = np.concatenate([1 - p, p], axis=1)
    # Same clipping and sum check as scikit-learn 1.9: eps of y_proba's own float dtype.
    eps = np.finfo(p.dtype).eps
    sums_ok = bool(np.all(np.isclose(p.sum(axis=1), 1, rtol=np.sqrt(eps))))
    neg_log = -np.log(np.clip(p, eps, 1 - eps))
    w = weight_vector(wb, name, index)
    m = len(labels)
    loss = np.empty((m, p.shape[1]))
    for j in range(p.shape[1]):
        col = neg_log[:, j].astype(np.float64)
        loss[:, j] = np.bincount(codes, weights=col if w is None else col * w, minlength=m)
    wsum = len(codes) if w is None else (w.sum() if w.dtype.kind in "iu" else
                                          float(w.astype(np.float64).sum()))
    return _ProbaTable(labels, kind, continuous, len(codes), wsum, loss, pmin, pmax, sums_ok)


def _merge_proba(parts, name="log_loss"):
    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    labels, kind = union_labels([p.kind for p in parts], [p.labels for p in parts], name)
    loss = np.zeros((len(labels), parts[0].loss.shape[1]))
    for p in parts:
        if p.labels.size:
            loss[np.searchsorted(labels, p.labels)] += p.loss
    return _ProbaTable(labels, kind, any(p.continuous for p in parts), sum(p.n for p in parts),
                       sum(p.wsum for p in parts), loss, min(p.pmin for p in parts),
                       max(p.pmax for p in parts), all(p.sums_ok for p in parts))


def log_loss(y_true, y_proba=None, *, normalize=True, sample_weight=None, labels=None,
             y_pred="deprecated"):
    r"""Log loss (cross-entropy) of predicted class probabilities.

    :math:`-\frac{1}{\sum w}\sum_i w_i \log p_{i, y_i}`, with probabilities clipped to
    ``[eps, 1 - eps]`` where ``eps`` is the machine epsilon of y_proba's float dtype, exactly as
    scikit-learn 1.9. Per block, for each true label present, the summed ``-log p`` of every
    column is reduced, so the classes (and the column of each label) are only needed once all
    blocks are merged. Sums are accumulated in float64 (scikit-learn computes float32 input in
    float32, so float32 results differ at float32 round-off).

    Parameters
    ----------
    y_true : array-like, pandas Series, Dask array or Dask Series of shape (n_samples,)
        True labels.
    y_proba : array-like or Dask array of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities, columns in the sorted order of the classes (as
        ``predict_proba``). A 1-D array is the probability of the greater of two classes.
    normalize : bool, default=True
        Mean loss per sample (weighted); with False, the (weighted) sum.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like, default=None
        All class labels, when y_true may lack some; by default the labels seen in y_true.
    y_pred : array-like
        Deprecated alias of y_proba (as in scikit-learn 1.9).

    Returns
    -------
    loss : float

    Examples
    --------
    >>> from dml.metrics import log_loss
    >>> log_loss(["spam", "ham", "ham", "spam"],
    ...          [[.1, .9], [.9, .1], [.8, .2], [.35, .65]])
    0.21616...
    >>> log_loss([0, 1, 1], [0.2, 0.7, 0.9], normalize=False)
    0.6851...
    """
    name = "log_loss"
    if not (isinstance(y_pred, str) and y_pred == "deprecated"):
        if y_proba is not None:
            raise ValueError(f"{name}: Cannot use both `y_pred` and `y_proba`. `y_pred` is "
                             "deprecated, use `y_proba` instead.")
        warnings.warn("`y_pred` was renamed to `y_proba` in version 1.9 and will be removed in "
                      "1.11. Use `y_proba` instead.", FutureWarning, stacklevel=2)
        y_proba = y_pred
    if y_proba is None:
        raise ValueError(f"{name}: y_proba (the predicted probabilities) is required")
    inp = label_input(name, y_true, y_proba, sample_weight, pred_name="y_proba",
                      max_columns=None)
    t = inp.reduce(_proba_kernel, name, combine=partial(_merge_proba, name=name))
    if t.pmax > 1:
        raise ValueError(f"{name}: y_proba contains values greater than 1: {t.pmax}")
    if t.pmin < 0:
        raise ValueError(f"{name}: y_proba contains values lower than 0: {t.pmin}")
    if t.n == 0:
        raise ValueError(f"{name}: Found empty input array (e.g., `y_true` or `y_proba`) while "
                         "a minimum of 1 sample is required.")
    if t.continuous:
        raise ValueError(f"{name}: Unknown label type: continuous. y_true must hold class "
                         "labels")
    if labels is not None:
        given = np.asarray(labels)
        classes = np.unique(given)
        if classes.shape != given.shape or not np.all(classes == given):
            warnings.warn(f"Labels passed were {labels}. But this function assumes labels are "
                          f"ordered lexicographically. Pass the ordered labels="
                          f"{classes.tolist()} and ensure that the columns of y_prob correspond "
                          "to this ordering.", UserWarning, stacklevel=2)
        known = label_index(classes)
        undeclared = {v for v in t.labels.tolist() if v not in known}
        if undeclared:
            raise ValueError(f"{name}: y_true contains values {undeclared} not belonging to "
                             f"the passed labels {labels}.")
    else:
        classes = t.labels
    if len(classes) == 1:
        if labels is None:
            raise ValueError(f"{name}: y_true contains only one label ({classes[0]}). Please "
                             "provide the list of all expected class labels explicitly "
                             "through the labels argument.")
        raise ValueError(f"{name}: The labels array needs to contain at least two labels, got "
                         f"{classes}.")
    if not t.sums_ok:
        warnings.warn("The y_prob values do not sum to one. Make sure to pass probabilities.",
                      UserWarning, stacklevel=2)
    n_columns = t.loss.shape[1]
    if len(classes) != n_columns:
        if labels is None:
            raise ValueError(f"{name}: y_true and y_proba contain different number of classes: "
                             f"{len(classes)} vs {n_columns}. Please provide the true labels "
                             f"explicitly through the labels argument. Classes found in "
                             f"y_true: {classes}")
        raise ValueError(f"{name}: The number of classes in labels is different from that in "
                         f"y_proba ({n_columns} columns). Classes found in labels: {classes}")
    column = label_index(classes)
    cols = np.array([column[v] for v in t.labels.tolist()], dtype=np.intp)
    total = float(t.loss[np.arange(len(cols)), cols].sum())
    if not normalize:
        return total
    _normalise_weights_sum(t.wsum, name)
    return float(total / t.wsum)


# --------------------------------------------------------------------------------------------
# ROC AUC
# --------------------------------------------------------------------------------------------

class _ScoreTable:
    """Per score column: distinct (score, true label) pairs with their weight.

    ``columns[c]`` is ``(values, codes, weights)`` sorted by (value, code); ``codes`` index
    ``labels``. Zero-weight samples are left out, as in scikit-learn.
    """

    __slots__ = ("labels", "kind", "continuous", "n", "columns")

    def __init__(self, labels, kind, continuous, n, columns):
        self.labels, self.kind, self.continuous, self.n, self.columns = \
            labels, kind, continuous, n, columns

    def __getstate__(self):
        return {s: getattr(self, s) for s in self.__slots__}

    def __setstate__(self, state):
        for s, v in state.items():
            setattr(self, s, v)


def _group(values, codes, weights, n_codes):
    """Sum ``weights`` (None: count) over equal (value, code) pairs, sorted by (value, code)."""
    if len(values) == 0:
        empty = np.zeros(0, dtype=np.int64 if weights is None else weights.dtype)
        return values.astype(np.float64), codes.astype(np.intp), empty
    order = np.argsort(values, kind="stable")
    v = values[order]
    # Runs of equal scores (!=, not the bit pattern: -0.0 and 0.0 are one score, as in
    # scikit-learn), then one integer key per (run, code).
    new_run = np.empty(len(v), dtype=bool)
    new_run[0] = True
    np.not_equal(v[1:], v[:-1], out=new_run[1:])
    run_value = v[new_run]
    key = (np.cumsum(new_run) - 1) * n_codes + codes[order]
    w = None if weights is None else weights[order]
    if len(run_value) * n_codes <= 8 * len(v):
        # Few labels: a dense (run, code) table, then only the pairs that occur.
        dense = weighted_bincount(key, w, len(run_value) * n_codes)
        occurs = np.bincount(key, minlength=len(dense)) > 0
        keys, sums = np.flatnonzero(occurs), dense[occurs]
    else:
        keys, inverse = np.unique(key, return_inverse=True)
        sums = weighted_bincount(inverse, w, len(keys))
    return run_value[keys // n_codes], (keys % n_codes).astype(np.intp), sums


def _score_kernel(index, xb, yb, wb, name, probabilities, bins):
    labels, codes, kind, continuous = block_labels(yb, "y_true", name, index)
    s = float_block(xb, "y_score", name, index)
    if s.ndim == 1:
        s = s[:, None]
    if probabilities and s.size and not np.allclose(1, s.sum(axis=1)):
        raise ValueError(f"{name}: Target scores need to be probabilities for multiclass "
                         "roc_auc, i.e. they should sum up to 1.0 over classes")
    w = weight_vector(wb, name, index)
    n = len(codes)
    if w is not None:
        keep = w != 0
        s, codes, w = s[keep], codes[keep], w[keep]
        w = w.astype(np.int64 if w.dtype.kind in "iu" else np.float64)
    columns = []
    for c in range(s.shape[1]):
        values = s[:, c] if bins is None else _bin(s[:, c], bins, c)
        columns.append(_group(values, codes, w, max(len(labels), 1)))
    return _ScoreTable(labels, kind, continuous, n, columns)


def _bin(values, bins, c):
    lo, hi, n_bins = bins
    width = hi[c] - lo[c]
    if not width > 0:
        return np.zeros(len(values))
    # Monotone in the score, so the order between bins is the order of the scores.
    return np.clip(np.floor((values - lo[c]) * (n_bins / width)), 0, n_bins - 1)


def _merge_scores(parts, name="roc_auc_score"):
    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    labels, kind = union_labels([p.kind for p in parts], [p.labels for p in parts], name)
    columns = []
    for c in range(len(parts[0].columns)):
        values, codes, weights = [], [], []
        for p in parts:
            v, k, w = p.columns[c]
            if len(v):
                values.append(v)
                codes.append(np.searchsorted(labels, p.labels)[k])
                weights.append(w)
        if values:
            columns.append(_group(np.concatenate(values), np.concatenate(codes),
                                  np.concatenate(weights), len(labels)))
        else:
            columns.append(parts[0].columns[c])
    return _ScoreTable(labels, kind, any(p.continuous for p in parts), sum(p.n for p in parts),
                       columns)


def _range_kernel(index, xb, yb, wb, name):
    s = float_block(xb, "y_score", name, index)
    if s.ndim == 1:
        s = s[:, None]
    if not len(s):
        return np.full(s.shape[1], np.inf), np.full(s.shape[1], -np.inf)
    return s.min(axis=0), s.max(axis=0)


def _merge_range(parts):
    return (np.min([p[0] for p in parts], axis=0), np.max([p[1] for p in parts], axis=0))


def _curve_auc(values, pos, neg, max_fpr=None):
    """Exact ROC AUC from per-(sorted)-value positive and negative weights, as scikit-learn."""
    if len(values):
        starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))
        pos, neg = np.add.reduceat(pos, starts)[::-1], np.add.reduceat(neg, starts)[::-1]
    # Thresholds from the highest score down; the curve starts at (0, 0).
    tps = np.concatenate([[0.0], np.cumsum(pos, dtype=np.float64)])
    fps = np.concatenate([[0.0], np.cumsum(neg, dtype=np.float64)])
    if fps[-1] <= 0:
        warnings.warn("No negative samples in y_true, false positive value should be "
                      "meaningless", _base.UndefinedMetricWarning, stacklevel=3)
        fpr = np.full(fps.shape, np.nan)
    else:
        fpr = fps / fps[-1]
    if tps[-1] <= 0:
        warnings.warn("No positive samples in y_true, true positive value should be "
                      "meaningless", _base.UndefinedMetricWarning, stacklevel=3)
        tpr = np.full(tps.shape, np.nan)
    else:
        tpr = tps / tps[-1]
    if max_fpr is None or max_fpr == 1:
        return float(np.trapezoid(tpr, fpr))
    stop = np.searchsorted(fpr, max_fpr, "right")
    x_interp, y_interp = [fpr[stop - 1], fpr[stop]], [tpr[stop - 1], tpr[stop]]
    tpr = np.append(tpr[:stop], np.interp(max_fpr, x_interp, y_interp))
    fpr = np.append(fpr[:stop], max_fpr)
    partial_auc = float(np.trapezoid(tpr, fpr))
    # McClish correction: 0.5 for a non-discriminant score, 1 for a perfect one.
    min_area, max_area = 0.5 * max_fpr ** 2, max_fpr
    return 0.5 * (1 + (partial_auc - min_area) / (max_area - min_area))


def _column_auc(column, pos_codes, neg_codes, max_fpr=None):
    values, codes, weights = column
    zero = np.zeros((), dtype=weights.dtype)
    return _curve_auc(values, np.where(pos_codes[codes], weights, zero),
                      np.where(neg_codes[codes], weights, zero), max_fpr)


def _one_class_nan():
    warnings.warn("Only one class is present in y_true. ROC AUC score is not defined in that "
                  "case.", _base.UndefinedMetricWarning, stacklevel=3)
    return np.nan


def roc_auc_score(y_true, y_score, *, average="macro", sample_weight=None, max_fpr=None,
                  multi_class="raise", labels=None, method="exact", n_bins=10_000,
                  score_range=None):
    r"""Area under the ROC curve, exact from a per-score table, for binary or multiclass labels.

    ``method='exact'`` (default): per block and per distinct score value, the (weighted) count of
    each true label; the tables are merged by score value and the ROC curve and its trapezoid
    area are computed from the merged table exactly as scikit-learn does (ties between scores
    included; zero-weight samples are left out). The merged table has one row per distinct
    (score, label) pair, so **memory on the client grows with the number of distinct scores**
    (up to a few numbers per sample for continuous scores): fine for millions of samples, too
    much for billions — use the histogram method there, or round the scores.

    ``method='histogram'``: scores are grouped into ``n_bins`` equal-width bins between the
    smallest and largest score of each column (found with one extra pass unless
    ``score_range`` is given) and a positive and a negative sample in the same bin count as a
    tie (½). The table then has at most ``n_bins`` rows per label, and the result differs from
    the exact AUC by at most :math:`\frac{1}{2}\sum_b P_b N_b / (P N)` (:math:`P_b, N_b` the
    positive and negative weight in bin b, :math:`P, N` their totals): about
    ``1 / (2 * n_bins)`` for scores spread over their range, more if scores crowd into few bins.

    Binary targets: ``y_score`` is 1-D, the score of the greater label (``classes[1]``).
    Multiclass targets: ``y_score`` holds one probability column per class (rows summing to 1)
    and ``multi_class`` must be 'ovr' (one-vs-rest, with average 'macro', 'weighted', 'micro'
    or None) or 'ovo' (Hand & Till one-vs-one, 'macro' or 'weighted', no sample weights).
    As scikit-learn 1.9, a y_true with a single class gives NaN and an
    ``UndefinedMetricWarning`` (not an error).

    Parameters
    ----------
    y_true : array-like, pandas Series, Dask array or Dask Series of shape (n_samples,)
        True labels.
    y_score : array-like or Dask array of shape (n_samples,) or (n_samples, n_classes)
        Scores of the positive class (binary) or class probabilities (multiclass).
    average : {'macro', 'weighted', 'micro'} or None, default='macro'
        Averaging of the per-class AUCs (multiclass only; ignored for binary targets).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    max_fpr : float in (0, 1], default=None
        Binary only: standardised partial AUC (McClish) over ``[0, max_fpr]``.
    multi_class : {'raise', 'ovr', 'ovo'}, default='raise'
        Multiclass strategy; 'raise' raises for multiclass targets.
    labels : array-like of shape (n_classes,), default=None
        Multiclass only: the classes of the ``y_score`` columns (sorted); by default the labels
        seen in y_true.
    method : {'exact', 'histogram'}, default='exact'
        See above.
    n_bins : int, default=10000
        Number of bins per column for ``method='histogram'``.
    score_range : (float, float), default=None
        Score range for the histogram bins (e.g. ``(0, 1)`` for probabilities), saving the pass
        that finds it. Scores outside it fall in the end bins.

    Returns
    -------
    auc : float, or ndarray of shape (n_classes,) for multiclass with ``average=None``

    Examples
    --------
    >>> from dml.metrics import roc_auc_score
    >>> roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    0.75
    >>> roc_auc_score(["no", "no", "yes", "yes"], [0.1, 0.4, 0.4, 0.8])  # tie counts 1/2
    0.875
    >>> roc_auc_score([0, 1, 2, 2], [[.8, .1, .1], [.2, .6, .2], [.1, .3, .6], [.3, .3, .4]],
    ...               multi_class="ovr")
    1.0
    >>> roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], method="histogram", n_bins=100)
    0.75
    """
    name = "roc_auc_score"
    if method not in ("exact", "histogram"):
        raise ValueError(f"{name}: method must be 'exact' or 'histogram'; got {method!r}")
    if method == "histogram" and not (isinstance(n_bins, numbers.Integral) and n_bins >= 1):
        raise ValueError(f"{name}: n_bins must be a positive integer; got {n_bins!r}")
    if max_fpr is not None and not (isinstance(max_fpr, numbers.Real) and 0 < max_fpr <= 1):
        raise ValueError(f"{name}: Expected max_fpr in range (0, 1], got: {max_fpr!r}")
    if multi_class not in ("raise", "ovr", "ovo"):
        raise ValueError(f"{name}: multi_class must be one of 'raise', 'ovr', 'ovo'; got "
                         f"{multi_class!r}")
    inp = label_input(name, y_true, y_score, sample_weight, pred_name="y_score",
                      max_columns=None)
    k = inp.n_columns
    multiclass = k > 2
    if k == 2:
        raise ValueError(f"{name}: y_score has 2 columns. For binary targets pass the score of "
                         "the greater label only (e.g. y_score[:, 1]); for multiclass targets "
                         "pass one probability column per class.")
    if multiclass:
        _check_multiclass_options(name, average, multi_class, max_fpr, sample_weight)
    bins = None
    if method == "histogram":
        if score_range is None:
            lo, hi = inp.reduce(_range_kernel, name, combine=_merge_range)
        else:
            lo, hi = np.full(k, float(score_range[0])), np.full(k, float(score_range[1]))
        bins = (lo, hi, int(n_bins))
    t = inp.reduce(_score_kernel, name, multiclass, bins,
                   combine=partial(_merge_scores, name=name))
    if t.n == 0:
        raise ValueError(f"{name}: Found empty input array (e.g., `y_true` or `y_score`) while "
                         "a minimum of 1 sample is required.")
    if t.continuous:
        raise ValueError(f"{name}: continuous format is not supported; y_true must hold class "
                         "labels")
    if not multiclass:
        if len(t.labels) > 2:
            _check_multiclass_options(name, average, multi_class, max_fpr, sample_weight)
            raise ValueError(f"{name}: `y_score` needs to be of shape `(n_samples, n_classes)`, "
                             "since `y_true` contains multiple classes. Got "
                             f"`y_score.shape=({t.n},)`.")
        if len(t.labels) < 2:
            return _one_class_nan()
        return _column_auc(t.columns[0], np.array([False, True]), np.array([True, False]),
                           max_fpr)
    return _multiclass_auc(name, t, k, labels, average, multi_class)


def _check_multiclass_options(name, average, multi_class, max_fpr, sample_weight):
    if max_fpr is not None and max_fpr != 1.0:
        raise ValueError(f"{name}: Partial AUC computation not available in multiclass "
                         f"setting, 'max_fpr' must be set to `None`, received "
                         f"`max_fpr={max_fpr}` instead")
    if multi_class == "raise":
        raise ValueError(f"{name}: multi_class must be in ('ovo', 'ovr')")
    options = (("micro",) if multi_class == "ovr" else ()) + ("macro", "weighted", None)
    if average not in options:
        raise ValueError(f"{name}: average must be one of {options} for multiclass problems")
    if multi_class == "ovo":
        if sample_weight is not None:
            raise ValueError(f"{name}: sample_weight is not supported for multiclass one-vs-one "
                             "ROC AUC, 'sample_weight' must be None in this case.")
        if average is None:
            raise NotImplementedError("average=None is not implemented for multi_class='ovo'.")


def _multiclass_auc(name, t, k, labels, average, multi_class):
    if labels is not None:
        given = np.asarray(labels).ravel()
        classes = np.unique(given)
        if len(classes) != len(given):
            raise ValueError(f"{name}: Parameter 'labels' must be unique")
        if not np.array_equal(classes, given):
            raise ValueError(f"{name}: Parameter 'labels' must be ordered")
        if len(classes) != k:
            raise ValueError(f"{name}: Number of given labels, {len(classes)}, not equal to the "
                             f"number of columns in 'y_score', {k}")
        where = label_index(classes)
        if any(v not in where for v in t.labels.tolist()):
            raise ValueError(f"{name}: 'y_true' contains labels not in parameter 'labels'")
        class_of = np.array([where[v] for v in t.labels.tolist()], dtype=np.intp)
    else:
        if len(t.labels) != k:
            raise ValueError(f"{name}: Number of classes in y_true not equal to the number of "
                             "columns in 'y_score'")
        class_of = np.arange(k)

    if multi_class == "ovo":
        # Hand & Till: for each pair of classes present in y_true, the mean of the AUC of a
        # against b (column a) and of b against a (column b).
        present = np.unique(class_of)
        totals = _class_totals(t.columns[0], class_of, k)
        pair_scores, prevalence = [], []
        for a, b in combinations(present, 2):
            sa = _column_auc(t.columns[a], class_of == a, class_of == b)
            sb = _column_auc(t.columns[b], class_of == b, class_of == a)
            pair_scores.append((sa + sb) / 2)
            prevalence.append((totals[a] + totals[b]) / t.n)
        return float(np.average(pair_scores,
                                weights=prevalence if average == "weighted" else None))

    if average == "micro":
        values, pos, neg = [], [], []
        for c in range(k):
            v, codes, w = t.columns[c]
            is_pos = class_of[codes] == c
            zero = np.zeros((), dtype=w.dtype)
            values.append(v)
            pos.append(np.where(is_pos, w, zero))
            neg.append(np.where(is_pos, zero, w))
        values = np.concatenate(values)
        order = np.argsort(values, kind="stable")
        return _curve_auc(values[order], np.concatenate(pos)[order],
                          np.concatenate(neg)[order])

    scores = np.zeros(k)
    for c in range(k):
        is_pos = class_of == c
        if not is_pos.any() or is_pos.all():
            scores[c] = _one_class_nan()
        else:
            scores[c] = _column_auc(t.columns[c], is_pos, ~is_pos)
    if average is None:
        return scores
    weights = None
    if average == "weighted":
        weights = _class_totals(t.columns[0], class_of, k).astype(np.float64)
        if np.isclose(weights.sum(), 0):
            return 0
        scores[weights == 0] = 0
    return float(np.average(scores, weights=weights))


def _class_totals(column, class_of, k):
    """Total weight of each class (the positives of its one-vs-rest problem)."""
    _, codes, weights = column
    return weighted_bincount(class_of[codes], weights, k)
