"""Per-block kernels of the linear models: label counts, weight sums, predictions.

What the workers run for :mod:`dml.linear_model._base`, kept apart from the estimators so that a
worker unpickling one imports NumPy and SciPy's ``expit`` only, not scikit-learn
(docs/cold_start.md).
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit


def _label_kernel(X, y, w):
    try:
        labels, inv = np.unique(np.asarray(y), return_inverse=True)
    except TypeError:
        raise TypeError("y mixes label types that cannot be compared (e.g. numbers and "
                        "strings); use one label type") from None
    inv = inv.ravel()
    counts = np.bincount(inv, minlength=len(labels)).astype(np.int64)
    wsum = (counts.astype(np.float64) if w is None else
            np.bincount(inv, weights=np.asarray(w, dtype=np.float64), minlength=len(labels)))
    return {"labels": labels, "counts": counts, "wsum": wsum}


def _merge_labels(parts):
    parts = [p for p in parts if p is not None and len(p["labels"])]
    if not parts:
        return {"labels": np.array([]), "counts": np.zeros(0, np.int64), "wsum": np.zeros(0)}
    try:
        labels = np.concatenate([p["labels"] for p in parts])
        uniq, inv = np.unique(labels, return_inverse=True)
    except TypeError:
        raise TypeError("y mixes label types that cannot be compared (e.g. numbers and "
                        "strings); use one label type") from None
    inv = inv.ravel()
    counts = np.bincount(inv, weights=np.concatenate([p["counts"] for p in parts]),
                         minlength=len(uniq)).astype(np.int64)
    wsum = np.bincount(inv, weights=np.concatenate([p["wsum"] for p in parts]),
                       minlength=len(uniq))
    return {"labels": uniq, "counts": counts, "wsum": wsum}


def _weight_sum_kernel(X, y, w):
    return float(X.shape[0]) if w is None else float(np.sum(w))


def _predict_kernel(X, coef, intercept, classes):
    scores = X @ coef.T + intercept
    idx = (scores[:, 0] > 0).astype(np.intp) if scores.shape[1] == 1 else scores.argmax(axis=1)
    return classes[idx]


def _proba_kernel(X, coef, intercept, kind):
    scores = X @ coef.T + intercept
    if kind == "softmax":
        scores -= scores.max(axis=1, keepdims=True)
        p = np.exp(scores)
        return p / p.sum(axis=1, keepdims=True)
    if kind == "log":
        p = expit(scores)
    else:  # modified_huber
        p = (np.clip(scores, -1.0, 1.0) + 1.0) / 2.0
    if p.shape[1] == 1:
        return np.hstack([1.0 - p, p])
    total = p.sum(axis=1, keepdims=True)
    # All-zero rows (modified_huber): uniform, as scikit-learn does.
    zero = total[:, 0] == 0
    p[zero] = 1.0
    total[zero] = p.shape[1]
    return p / total


def _labels_present(part, mask, classes):
    X, y, w = part
    idx = np.searchsorted(classes, np.asarray(y))
    present = np.zeros((mask.shape[1], len(classes)), dtype=bool)
    for g in range(mask.shape[1]):
        present[g, np.unique(idx[mask[:, g]])] = True
    return present
