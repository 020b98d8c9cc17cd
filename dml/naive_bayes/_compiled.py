"""Compiled per-class sums of a dense block: the count models' statistics in one row pass.

The per-class feature sums of MultinomialNB, ComplementNB and BernoulliNB are ``Y @ X`` with
``Y`` the (weighted) one-hot labels, as scikit-learn computes them. With a handful of classes
that product is a matrix product of a very thin matrix, which BLAS does several times slower
than a plain pass over the block (30 ms against 3 ms per 100,000 × 100 block, one core). The
loop below reads each row once, adds it (times its weight, binarised for BernoulliNB) to its
class's sums and keeps each column's minimum, so the non-negativity check needs no second pass;
a NaN or an infinity anywhere in the block makes some sum non-finite, so the finiteness check
of the block needs none either (see :func:`dml.naive_bayes._kernels._count_block`).
"""
from __future__ import annotations

import numpy as np

from dml._numba import kernel

__all__ = ["class_sums", "sparse_class_sums", "nonzero_columns"]


@kernel(nogil=True)
def class_sums(X, inverse, w, weighted, binarize, threshold, sums, colmin):  # pragma: no cover
    """``sums[inverse[i]] += w[i] · v(X[i])`` over the rows and ``colmin = min(colmin, v(X))``
    per column, with ``v(x) = x``, or ``1.0 if x > threshold else 0.0`` when ``binarize``;
    ``w[i] = 1`` when not ``weighted``. ``sums`` and ``colmin`` are updated in place."""
    n, d = X.shape
    for i in range(n):
        c = inverse[i]
        wi = w[i] if weighted else 1.0
        for j in range(d):
            v = X[i, j]
            if binarize:
                v = 1.0 if v > threshold else 0.0
            sums[c, j] += wi * v
            if v < colmin[j]:
                colmin[j] = v


@kernel(nogil=True)
def sparse_class_sums(data, indices, indptr, inverse, w, weighted, sums):  # pragma: no cover
    """``sums[indices[k], inverse[i]] += w[i] · data[k]`` over the stored values of a CSR block
    (row i owns ``indptr[i]:indptr[i + 1]``), with ``sums`` of shape (n_features, n_classes):
    one pass over the values, a single add each (a one-hot product makes one per class).
    Returns the smallest stored value (+inf when none) for the non-negativity check; a NaN or
    an infinity makes some sum non-finite, which :func:`nonzero_columns` reports."""
    lo = np.inf
    for i in range(len(indptr) - 1):
        c = inverse[i]
        wi = w[i] if weighted else 1.0
        for k in range(indptr[i], indptr[i + 1]):
            v = data[k]
            if v < lo:
                lo = v
            sums[indices[k], c] += wi * v
    return lo


@kernel(nogil=True)
def nonzero_columns(sums, cols):  # pragma: no cover
    """Writes the columns of ``sums`` (n_features, n_classes) with a nonzero sum to ``cols``, in
    increasing order, and returns their number and whether every sum is finite: one pass over
    ``sums`` (dropping all-zero columns changes no sum). Allocates nothing (cheap to compile)."""
    d, L = sums.shape
    k = 0
    finite = True
    for j in range(d):
        nonzero = False
        for c in range(L):
            s = sums[j, c]
            if s != 0.0:
                nonzero = True
                if s - s != 0.0:  # NaN or infinity
                    finite = False
        if nonzero:
            cols[k] = j
            k += 1
    return k, finite
