"""Impurity and information gain of given class counts, e.g. for multiway ID3 splits.

Counts may be fractional (weighted instances, such as the seed notes' fractional rows for
missing values).

See docs/trees.md.
"""
from __future__ import annotations

import numpy as np

from dml.tree._split import weighted_impurity

__all__ = ["impurity", "information_gain"]

_CRITERIA = ("entropy", "gini", "misclassification")


def impurity(counts, criterion="entropy") -> float:
    """Impurity of a node with the given (weighted) class counts.

    Examples
    --------
    >>> round(impurity([1, 2]), 6), impurity([5, 5]), impurity([1, 1, 1, 1], "gini")
    (0.918296, 1.0, 0.75)
    """
    c = np.asarray(counts, dtype=np.float64)
    if criterion not in _CRITERIA:
        raise ValueError(f"criterion must be one of {list(_CRITERIA)}, got {criterion!r}")
    n = c.sum()
    if n <= 0:
        return 0.0
    if criterion == "misclassification":
        return float(1.0 - c.max() / n)
    return float(weighted_impurity(c, criterion) / n)


def information_gain(parent, children, criterion="entropy") -> float:
    """I(parent) − Σ_children (n_child/n) I(child) for (weighted) class counts.

    Examples
    --------
    >>> round(information_gain([9, 5], [[6, 2], [3, 3]]), 4)
    0.0481
    """
    p = np.asarray(parent, dtype=np.float64)
    n = p.sum()
    total = impurity(p, criterion)
    for ch in children:
        ch = np.asarray(ch, dtype=np.float64)
        total -= ch.sum() / n * impurity(ch, criterion)
    return float(total)
