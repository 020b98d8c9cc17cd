"""Classification metrics of predicted labels, as reductions over row blocks.

Label metrics (accuracy, confusion matrix, precision/recall/F, specificity, Cohen's kappa) all come
from one table: the weighted count of every (true label, predicted label) pair, built per block and
merged by label value (:class:`dml.metrics._base.LabelPairs`). Labels are discovered in the same
pass. The metrics of probabilities and scores (:func:`~dml.metrics.log_loss`,
:func:`~dml.metrics.roc_auc_score`) live in :mod:`dml.metrics._scores`. The results equal
scikit-learn's (1.9) for any partitioning, up to floating-point round-off in weighted sums.
"""
from __future__ import annotations

import numbers
import warnings
from functools import partial

import numpy as np

from dml.metrics import _base
from dml.metrics._base import (check_classification_targets, label_index, label_input, merge_pairs,
                               pair_counts)

__all__ = ["accuracy_score", "zero_one_loss", "confusion_matrix",
           "precision_recall_fscore_support", "precision_score", "recall_score", "f1_score",
           "fbeta_score", "specificity_score", "cohen_kappa_score"]


# --------------------------------------------------------------------------------------------
# Label pair table → confusion matrix
# --------------------------------------------------------------------------------------------

def _pairs(name, y_true, y_pred, sample_weight, true_name="y_true", pred_name="y_pred"):
    inp = label_input(name, y_true, y_pred, sample_weight, true_name=true_name,
                      pred_name=pred_name)
    return inp.reduce(pair_counts, name, true_name, pred_name,
                      combine=partial(merge_pairs, name=name))


def _select(values: np.ndarray, table_labels: np.ndarray, labels) -> np.ndarray:
    """``values`` (one per table label) for the requested ``labels``; absent labels get 0."""
    where = label_index(table_labels)
    idx = [where.get(v, -1) for v in np.asarray(labels).tolist()]
    out = np.zeros(len(idx), dtype=values.dtype)
    for i, j in enumerate(idx):
        if j >= 0:
            out[i] = values[j]
    return out


def _normalise_weights_sum(total, name):
    if total == 0:
        raise ValueError(f"{name}: the sample weights sum to zero, so the weighted average is "
                         "undefined; pass weights with a non-zero sum")


def accuracy_score(y_true, y_pred, *, normalize=True, sample_weight=None):
    """Accuracy: the (weighted) fraction of samples whose predicted label equals the true one.

    One pass over the blocks; equal to :func:`sklearn.metrics.accuracy_score` for binary and
    multiclass labels (multilabel indicator matrices are not supported).

    Parameters
    ----------
    y_true : array-like, pandas Series, Dask array or Dask Series of shape (n_samples,)
        Ground truth labels (numbers, strings or booleans).
    y_pred : array-like, pandas Series, Dask array or Dask Series of shape (n_samples,)
        Predicted labels. Realigned to y_true's partitions when they differ.
    normalize : bool, default=True
        Return the fraction of correct predictions; with False, their (weighted) number.
    sample_weight : array-like or Dask array/Series of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    score : float

    Examples
    --------
    >>> from dml.metrics import accuracy_score
    >>> accuracy_score([0, 1, 2, 3], [0, 2, 1, 3])
    0.5
    >>> accuracy_score(["a", "b", "b"], ["a", "b", "a"], normalize=False)
    2.0
    """
    name = "accuracy_score"
    t = _pairs(name, y_true, y_pred, sample_weight)
    check_classification_targets(t, name)
    correct = np.trace(t.counts)
    if not normalize:
        return float(correct)
    total = t.counts.sum()
    _normalise_weights_sum(total, name)
    return float(correct / total)


def zero_one_loss(y_true, y_pred, *, normalize=True, sample_weight=None):
    """Zero-one classification loss: the error rate (``1 - accuracy``), or the number of errors.

    As :func:`sklearn.metrics.zero_one_loss` for binary and multiclass labels.

    Parameters
    ----------
    y_true, y_pred : array-like, pandas Series, Dask array or Dask Series of shape (n_samples,)
        True and predicted labels.
    normalize : bool, default=True
        Return the fraction of misclassified samples; with False, their (weighted) number.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    loss : float

    Examples
    --------
    >>> from dml.metrics import zero_one_loss
    >>> zero_one_loss([1, 2, 3, 4], [2, 2, 3, 4])
    0.25
    >>> zero_one_loss([1, 2, 3, 4], [2, 2, 3, 4], normalize=False)
    1.0
    """
    name = "zero_one_loss"
    t = _pairs(name, y_true, y_pred, sample_weight)
    check_classification_targets(t, name)
    correct, total = np.trace(t.counts), t.counts.sum()
    if normalize:
        _normalise_weights_sum(total, name)
        return float(1 - correct / total)
    return float(total - correct)


def _confusion(t, labels, name, y1="y_true"):
    """Confusion matrix (rows true, columns predicted) over ``labels`` from a merged table."""
    if labels is None:
        return t.counts.copy(), t.labels
    labels = np.asarray(labels)
    if labels.size == 0:
        raise ValueError(f"{name}: 'labels' should contain at least one label.")
    where = label_index(t.labels)
    idx = np.array([where.get(v, -1) for v in labels.ravel().tolist()], dtype=np.intp)
    if not any(i >= 0 and t.in_true[i] for i in idx):
        if y1 == "y1":
            raise ValueError(
                f"{name}: At least one label in `labels` must be present in `y1` (even though "
                "`cohen_kappa_score` is otherwise agnostic to the order of `y1` and `y2`).")
        raise ValueError(f"{name}: At least one label specified must be in y_true")
    cm = np.zeros((len(idx), len(idx)), dtype=t.counts.dtype)
    ok = idx >= 0
    cm[np.ix_(ok, ok)] = t.counts[np.ix_(idx[ok], idx[ok])]
    return cm, labels


def confusion_matrix(y_true, y_pred, *, labels=None, sample_weight=None, normalize=None):
    """Confusion matrix: ``C[i, j]`` is the (weighted) number of samples of true label ``i``
    predicted as ``j``.

    Per block, the counts of every (true, predicted) label pair present; merged by label value,
    so labels are discovered in the same pass. Equal to :func:`sklearn.metrics.confusion_matrix`
    (int64 counts without weights or with integer weights, float64 with float weights).

    Parameters
    ----------
    y_true, y_pred : array-like, pandas Series, Dask array or Dask Series of shape (n_samples,)
        True and predicted labels.
    labels : array-like of shape (n_classes,), default=None
        Labels indexing the matrix (to reorder or select). By default all labels seen in y_true
        or y_pred, sorted. Samples whose labels are not listed are left out.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    normalize : {'true', 'pred', 'all'}, default=None
        Divide by the row sums ('true'), column sums ('pred') or the total ('all'); 0/0 gives 0.

    Returns
    -------
    C : ndarray of shape (n_classes, n_classes)

    Examples
    --------
    >>> from dml.metrics import confusion_matrix
    >>> confusion_matrix([2, 0, 2, 2, 0, 1], [0, 0, 2, 2, 0, 2])
    array([[2, 0, 0],
           [0, 0, 1],
           [1, 0, 2]])
    >>> confusion_matrix(["cat", "ant", "cat"], ["ant", "ant", "cat"], normalize="true")
    array([[1. , 0. ],
           [0.5, 0.5]])
    """
    name = "confusion_matrix"
    if normalize not in ("true", "pred", "all", None):
        raise ValueError(f"{name}: normalize must be one of 'true', 'pred', 'all' or None; "
                         f"got {normalize!r}")
    t = _pairs(name, y_true, y_pred, sample_weight)
    if t.n == 0 and labels is not None and np.asarray(labels).size:
        n_labels = np.asarray(labels).size
        return np.zeros((n_labels, n_labels), dtype=int)
    check_classification_targets(t, name)
    cm, _ = _confusion(t, labels, name)
    with np.errstate(all="ignore"):
        if normalize == "true":
            cm = cm / cm.sum(axis=1, keepdims=True)
        elif normalize == "pred":
            cm = cm / cm.sum(axis=0, keepdims=True)
        elif normalize == "all":
            cm = cm / cm.sum()
        cm = np.nan_to_num(cm)
    if cm.shape == (1, 1):
        warnings.warn("A single label was found in 'y_true' and 'y_pred'. For the confusion "
                      "matrix to have the correct shape, use the 'labels' parameter to pass all "
                      "known labels.", UserWarning, stacklevel=2)
    return cm


# --------------------------------------------------------------------------------------------
# Precision, recall, F-beta, specificity
# --------------------------------------------------------------------------------------------

_AVERAGES = ("binary", "micro", "macro", "weighted", None)


def _check_average(average, name):
    if isinstance(average, str) and average == "samples":
        raise ValueError(f"{name}: average='samples' is for multilabel targets, which "
                         "dml.metrics does not support; use one of 'binary', 'micro', 'macro', "
                         "'weighted' or None")
    if not (average is None or (isinstance(average, str) and average in _AVERAGES)):
        raise ValueError(f"{name}: average has to be one of 'binary', 'micro', 'macro', "
                         f"'weighted' or None; got {average!r}")


def _zero_division_value(zero_division, name):
    if isinstance(zero_division, str):
        if zero_division == "warn":
            return 0.0
    elif isinstance(zero_division, numbers.Real):
        if np.isnan(zero_division):
            return np.nan
        if zero_division in (0, 1):
            return float(zero_division)
    raise ValueError(f"{name}: zero_division must be 'warn', 0.0, 1.0 or np.nan; got "
                     f"{zero_division!r}")


def _warn_prf(average, modifier, msg_start, result_size):
    msg = (f"{msg_start} ill-defined and being set to 0.0 {{0}} no {modifier} samples. Use "
           "`zero_division` parameter to control this behavior.")
    msg = msg.format("due to" if result_size == 1 else "in labels with")
    warnings.warn(msg, _base.UndefinedMetricWarning, stacklevel=4)


def _prf_divide(numerator, denominator, metric, modifier, average, warn_for, zero_division):
    """numerator / denominator; 0/0 becomes ``zero_division`` (and warns, as scikit-learn)."""
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.array(denominator, dtype=np.float64)
    mask = denominator == 0
    denominator[mask] = 1
    result = numerator / denominator
    if not mask.any():
        return result
    result[mask] = _zero_division_value(zero_division, "metric")
    if not (isinstance(zero_division, str) and zero_division == "warn") or \
            metric not in warn_for:
        return result
    _warn_prf(average, modifier, f"{metric.capitalize()} is", result.shape[0])
    return result


def _nanaverage(a, weights=None):
    """scikit-learn's ``_nanaverage``: weighted mean ignoring NaN; zero total weight: plain mean."""
    if a.shape[0] == 0:
        return np.nan
    mask = np.isnan(a)
    if mask.all():
        return np.nan
    if weights is None:
        return np.nanmean(a)
    a, weights = a[~mask], np.asarray(weights)[~mask]
    if np.sum(weights) == 0:
        return np.average(a)
    return np.average(a, weights=weights)


def _set_wise_counts(name, y_true, y_pred, labels, pos_label, average, sample_weight):
    """(tp, pred_sum, true_sum, total) per selected label, as scikit-learn's multilabel
    confusion matrix for 1-D targets."""
    _check_average(average, name)
    t = _pairs(name, y_true, y_pred, sample_weight)
    y_type = check_classification_targets(t, name)
    present = t.labels
    if average == "binary":
        if y_type == "binary":
            if pos_label not in label_index(present):
                if len(present) >= 2:
                    raise ValueError(f"{name}: pos_label={pos_label} is not a valid label. It "
                                     f"should be one of {present}")
            labels = [pos_label]
        else:
            raise ValueError(f"{name}: Target is {y_type} but average='binary'. Please choose "
                             "another average setting, one of [None, 'micro', 'macro', "
                             "'weighted'].")
    elif pos_label not in (None, 1):
        warnings.warn(f"Note that pos_label (set to {pos_label!r}) is ignored when average != "
                      f"'binary' (got {average!r}). You may use labels=[pos_label] to specify "
                      "a single positive class.", UserWarning, stacklevel=3)
    counts = t.counts.astype(np.float64) if t.weighted else t.counts
    tp, pred_sum, true_sum = np.diag(counts).copy(), counts.sum(axis=0), counts.sum(axis=1)
    total = counts.sum()
    if labels is not None:
        tp, pred_sum, true_sum = (_select(v, present, labels) for v in (tp, pred_sum, true_sum))
    return tp, pred_sum, true_sum, total


def _micro(*arrays):
    return tuple(np.array([a.sum()]) for a in arrays)


def precision_recall_fscore_support(y_true, y_pred, *, beta=1.0, labels=None, pos_label=1,
                                    average=None, warn_for=("precision", "recall", "f-score"),
                                    sample_weight=None, zero_division="warn"):
    """Precision, recall, F-beta score and support for each class (or averaged).

    Precision is ``tp / (tp + fp)``, recall ``tp / (tp + fn)``, F-beta
    ``(1 + β²) tp / ((1 + β²) tp + β² fn + fp)`` and support the (weighted) number of true
    samples of each class. All come from the confusion matrix, computed in one pass over the
    blocks. Equal to :func:`sklearn.metrics.precision_recall_fscore_support` for binary and
    multiclass labels (multilabel targets and ``average='samples'`` are not supported).

    Parameters
    ----------
    y_true, y_pred : array-like, pandas Series, Dask array or Dask Series of shape (n_samples,)
        True and predicted labels.
    beta : float, default=1.0
        Weight of recall in the F-score (0 gives precision, ``inf`` recall).
    labels : array-like, default=None
        Labels to report (and average over), in this order. By default all labels seen, sorted.
    pos_label : int, float, bool or str, default=1
        The positive class when ``average='binary'``; otherwise ignored.
    average : {'binary', 'micro', 'macro', 'weighted'} or None, default=None
        None returns per-class arrays. 'binary': the ``pos_label`` class only (targets must be
        binary). 'micro': from the total tp, fp, fn. 'macro': unweighted mean over labels.
        'weighted': mean weighted by support.
    warn_for : tuple of str, default=('precision', 'recall', 'f-score')
        Which ill-defined metrics warn (with ``zero_division='warn'``).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    zero_division : {'warn', 0.0, 1.0, np.nan}, default='warn'
        Value for a 0/0 division; 'warn' gives 0 and an ``UndefinedMetricWarning``.

    Returns
    -------
    precision, recall, fbeta_score : float or ndarray of shape (n_labels,)
    support : None or ndarray of shape (n_labels,)
        None when averaged.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.metrics import precision_recall_fscore_support
    >>> y_true = np.array(['cat', 'dog', 'pig', 'cat', 'dog', 'pig'])
    >>> y_pred = np.array(['cat', 'pig', 'dog', 'cat', 'cat', 'dog'])
    >>> precision_recall_fscore_support(y_true, y_pred, average='macro')
    (0.222..., 0.333..., 0.266..., None)
    >>> p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=['pig', 'dog', 'cat'])
    >>> r, s
    (array([0., 0., 1.]), array([2, 2, 2]))
    """
    name = "precision_recall_fscore_support"
    return _prfs(name, y_true, y_pred, beta=beta, labels=labels, pos_label=pos_label,
                 average=average, warn_for=warn_for, sample_weight=sample_weight,
                 zero_division=zero_division)


def _prfs(name, y_true, y_pred, *, beta, labels, pos_label, average, warn_for, sample_weight,
          zero_division):
    _zero_division_value(zero_division, name)
    if not isinstance(beta, numbers.Real) or np.isnan(beta) or beta < 0:
        raise ValueError(f"{name}: beta must be a number >= 0, got {beta!r}")
    tp, pred_sum, true_sum, _ = _set_wise_counts(name, y_true, y_pred, labels, pos_label,
                                                 average, sample_weight)
    if average == "micro":
        tp, pred_sum, true_sum = _micro(tp, pred_sum, true_sum)
    precision = _prf_divide(tp, pred_sum, "precision", "predicted", average, warn_for,
                            zero_division)
    recall = _prf_divide(tp, true_sum, "recall", "true", average, warn_for, zero_division)
    if np.isposinf(beta):
        f_score = recall
    elif beta == 0:
        f_score = precision
    else:
        beta2 = beta ** 2
        denom = beta2 * true_sum.astype(np.float64) + pred_sum.astype(np.float64)
        f_score = _prf_divide((1 + beta2) * tp.astype(np.float64), denom, "f-score",
                              "true nor predicted", average, warn_for, zero_division)
    if average is None:
        return precision, recall, f_score, true_sum
    weights = true_sum if average == "weighted" else None
    return (float(_nanaverage(precision, weights)), float(_nanaverage(recall, weights)),
            float(_nanaverage(f_score, weights)), None)


_PRF_PARAMS = """
    Parameters
    ----------
    y_true, y_pred : array-like, pandas Series, Dask array or Dask Series of shape (n_samples,)
        True and predicted labels.
    labels : array-like, default=None
        Labels to include (and their order when ``average=None``); by default all labels seen.
    pos_label : int, float, bool or str, default=1
        The positive class when ``average='binary'``.
    average : {'binary', 'micro', 'macro', 'weighted'} or None, default='binary'
        See :func:`precision_recall_fscore_support`.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    zero_division : {'warn', 0.0, 1.0, np.nan}, default='warn'
        Value for a 0/0 division; 'warn' gives 0 and an ``UndefinedMetricWarning``.
"""


def precision_score(y_true, y_pred, *, labels=None, pos_label=1, average="binary",
                    sample_weight=None, zero_division="warn"):
    p, _, _, _ = _prfs("precision_score", y_true, y_pred, beta=1.0, labels=labels,
                       pos_label=pos_label, average=average, warn_for=("precision",),
                       sample_weight=sample_weight, zero_division=zero_division)
    return p


precision_score.__doc__ = """Precision ``tp / (tp + fp)``: the fraction of predicted positives
    that are right.

    As :func:`sklearn.metrics.precision_score` (binary and multiclass labels).
    """ + _PRF_PARAMS + """
    Returns
    -------
    precision : float or ndarray of shape (n_labels,)

    Examples
    --------
    >>> from dml.metrics import precision_score
    >>> y_true, y_pred = [0, 1, 2, 0, 1, 2], [0, 2, 1, 0, 0, 1]
    >>> precision_score(y_true, y_pred, average='macro')
    0.222...
    >>> precision_score(y_true, y_pred, average=None)
    array([0.66666667, 0.        , 0.        ])
    """


def recall_score(y_true, y_pred, *, labels=None, pos_label=1, average="binary",
                 sample_weight=None, zero_division="warn"):
    _, r, _, _ = _prfs("recall_score", y_true, y_pred, beta=1.0, labels=labels,
                       pos_label=pos_label, average=average, warn_for=("recall",),
                       sample_weight=sample_weight, zero_division=zero_division)
    return r


recall_score.__doc__ = """Recall (sensitivity) ``tp / (tp + fn)``: the fraction of true positives
    found.

    As :func:`sklearn.metrics.recall_score` (binary and multiclass labels).
    """ + _PRF_PARAMS + """
    Returns
    -------
    recall : float or ndarray of shape (n_labels,)

    Examples
    --------
    >>> from dml.metrics import recall_score
    >>> recall_score([0, 1, 2, 0, 1, 2], [0, 2, 1, 0, 0, 1], average='micro')
    0.333...
    >>> recall_score([1, 1, 0, 0], [1, 0, 0, 0])
    0.5
    """


def fbeta_score(y_true, y_pred, *, beta, labels=None, pos_label=1, average="binary",
                sample_weight=None, zero_division="warn"):
    _, _, f, _ = _prfs("fbeta_score", y_true, y_pred, beta=beta, labels=labels,
                       pos_label=pos_label, average=average, warn_for=("f-score",),
                       sample_weight=sample_weight, zero_division=zero_division)
    return f


fbeta_score.__doc__ = """F-beta score ``(1 + β²) P R / (β² P + R)``, the weighted harmonic mean
    of precision P and recall R.

    As :func:`sklearn.metrics.fbeta_score` (binary and multiclass labels).
    """ + _PRF_PARAMS.replace("""        True and predicted labels.
""", """        True and predicted labels.
    beta : float
        Weight of recall (``beta > 1`` favours recall); keyword only, no default.
""", 1) + """
    Returns
    -------
    fbeta_score : float or ndarray of shape (n_labels,)

    Examples
    --------
    >>> from dml.metrics import fbeta_score
    >>> fbeta_score([0, 1, 2, 0, 1, 2], [0, 2, 1, 0, 0, 1], average='macro', beta=0.5)
    0.238...
    """


def f1_score(y_true, y_pred, *, labels=None, pos_label=1, average="binary", sample_weight=None,
             zero_division="warn"):
    return fbeta_score(y_true, y_pred, beta=1, labels=labels, pos_label=pos_label,
                       average=average, sample_weight=sample_weight,
                       zero_division=zero_division)


f1_score.__doc__ = """F1 score ``2 P R / (P + R)``, the harmonic mean of precision P and recall R.

    As :func:`sklearn.metrics.f1_score` (binary and multiclass labels).
    """ + _PRF_PARAMS + """
    Returns
    -------
    f1_score : float or ndarray of shape (n_labels,)

    Examples
    --------
    >>> from dml.metrics import f1_score
    >>> f1_score([0, 1, 2, 0, 1, 2], [0, 2, 1, 0, 0, 1], average='weighted')
    0.266...
    """


def specificity_score(y_true, y_pred, *, labels=None, pos_label=1, average="binary",
                      sample_weight=None, zero_division="warn"):
    name = "specificity_score"
    _zero_division_value(zero_division, name)
    tp, pred_sum, true_sum, total = _set_wise_counts(name, y_true, y_pred, labels, pos_label,
                                                     average, sample_weight)
    # One-vs-rest per label: the negatives are all samples not of that label.
    negatives = total - true_sum
    tn = negatives - (pred_sum - tp)
    if average == "micro":
        tn, negatives = _micro(tn, negatives)
    spec = _prf_divide(tn, negatives, "specificity", "negative", average, ("specificity",),
                       zero_division)
    if average is None:
        return spec
    return float(_nanaverage(spec, true_sum if average == "weighted" else None))


specificity_score.__doc__ = """Specificity ``tn / (tn + fp)``: the fraction of true negatives
    recognised as negative (the true negative rate).

    For each class, one-vs-rest: ``tn`` counts samples that are neither of that class nor
    predicted as it. scikit-learn has no specificity; this follows its precision/recall
    conventions (averages, ``labels``, ``pos_label``, ``zero_division``) and agrees with
    ``imblearn.metrics.specificity_score``. For binary targets it equals the recall of the
    negative class. 'weighted' averages by support (true samples of each class).
    """ + _PRF_PARAMS + """
    Returns
    -------
    specificity : float or ndarray of shape (n_labels,)

    Examples
    --------
    >>> from dml.metrics import specificity_score
    >>> specificity_score([0, 0, 0, 1, 1], [0, 1, 0, 1, 1])
    0.666...
    >>> specificity_score(["A", "B", "C", "A"], ["A", "C", "C", "B"], average=None)
    array([1.        , 0.66666667, 0.66666667])
    """


# --------------------------------------------------------------------------------------------
# Cohen's kappa
# --------------------------------------------------------------------------------------------

def cohen_kappa_score(y1, y2, *, labels=None, weights=None, sample_weight=None,
                      replace_undefined_by=np.nan):
    r"""Cohen's kappa, the agreement of two labelings corrected for chance.

    :math:`\kappa = (p_o - p_e) / (1 - p_e)` with :math:`p_o` the observed agreement and
    :math:`p_e` the agreement expected from the two label distributions; computed from the
    confusion matrix of (y1, y2), as :func:`sklearn.metrics.cohen_kappa_score`.

    Parameters
    ----------
    y1, y2 : array-like, pandas Series, Dask array or Dask Series of shape (n_samples,)
        Labels assigned by the two annotators.
    labels : array-like of shape (n_classes,), default=None
        Labels to use (at least one must occur in y1); by default all labels seen.
    weights : {None, 'linear', 'quadratic'}, default=None
        Weighting of disagreements by label distance (labels in their sorted/given order).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    replace_undefined_by : np.nan or float in [-1, 1], default=np.nan
        Returned (with an ``UndefinedMetricWarning``) when kappa is 0/0.

    Returns
    -------
    kappa : float

    Examples
    --------
    >>> from dml.metrics import cohen_kappa_score
    >>> y1 = ["negative", "positive", "negative", "neutral", "positive"]
    >>> y2 = ["negative", "positive", "negative", "neutral", "negative"]
    >>> cohen_kappa_score(y1, y2)
    0.6875
    """
    name = "cohen_kappa_score"
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"{name}: weights must be None, 'linear' or 'quadratic'; got "
                         f"{weights!r}")
    t = _pairs(name, y1, y2, sample_weight, true_name="y1", pred_name="y2")
    check_classification_targets(t, name)
    confusion, _ = _confusion(t, labels, name, y1="y1")
    confusion = confusion.astype(np.float64)
    n_classes = confusion.shape[0]
    sum0, sum1 = confusion.sum(axis=0), confusion.sum(axis=1)
    denominator = sum0.sum()
    if denominator == 0:
        warnings.warn("`y2` contains no labels that are present in both `y1` and `labels`."
                      "`cohen_kappa_score` is undefined and set to the value defined by the "
                      f"`replace_undefined_by` param, which is set to {replace_undefined_by}.",
                      _base.UndefinedMetricWarning, stacklevel=2)
        return replace_undefined_by
    expected = np.outer(sum0, sum1) / denominator
    if weights is None:
        w_mat = np.ones((n_classes, n_classes))
        np.fill_diagonal(w_mat, 0)
    else:
        w_mat = np.zeros((n_classes, n_classes)) + np.arange(n_classes)
        w_mat = np.abs(w_mat - w_mat.T) if weights == "linear" else (w_mat - w_mat.T) ** 2
    numerator, denominator = np.sum(w_mat * confusion), np.sum(w_mat * expected)
    if denominator == 0:
        warnings.warn("`y1`, `y2` and `labels` have only one label in common. "
                      "`cohen_kappa_score` is undefined and set to the value defined by the "
                      f"`replace_undefined_by` param, which is set to {replace_undefined_by}.",
                      _base.UndefinedMetricWarning, stacklevel=2)
        return replace_undefined_by
    return float(1 - numerator / denominator)
