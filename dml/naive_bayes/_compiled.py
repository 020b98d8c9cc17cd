"""Compiled per-class statistics of a dense block: sums for the count models, moments for
GaussianNB.

The per-class feature sums of MultinomialNB, ComplementNB and BernoulliNB are ``Y @ X`` with
``Y`` the (weighted) one-hot labels, as scikit-learn computes them. With a handful of classes
that product is a matrix product of a very thin matrix, which BLAS does several times slower
than a plain pass over the block (30 ms against 3 ms per 100,000 × 100 block, one core). The
loop below reads each row once, adds it (times its weight, binarised for BernoulliNB) to its
class's sums and keeps each column's minimum, so the non-negativity check needs no second pass;
a NaN or an infinity anywhere in the block makes some sum non-finite, so the finiteness check
of the block needs none either (see :func:`dml.naive_bayes._kernels._count_block`).

GaussianNB's per-class means and squared deviations (:func:`class_moments`) are two such passes.
A loop also fixes the order in which a column's values are added, row after row, whatever the
machine's BLAS does: a BLAS product splits its sums between threads, so the same block gave other
last bits with two BLAS threads (an in-process worker) than with one (a ``dask worker``).
"""
from __future__ import annotations

import numpy as np

from dml._numba import kernel

__all__ = ["class_sums", "class_moments", "sparse_class_sums", "nonzero_columns"]


@kernel(nogil=True)
def class_sums(X, inverse, w, weighted, binarize, threshold, skip_nan, sums, colmin,
               missing):  # pragma: no cover
    """``sums[inverse[i]] += w[i] · v(X[i])`` over the rows and ``colmin = min(colmin, v(X))``
    per column, with ``v(x) = x``, or ``1.0 if x > threshold else 0.0`` when ``binarize``;
    ``w[i] = 1`` when not ``weighted``. With ``skip_nan`` a NaN adds its row's weight to
    ``missing[inverse[i], j]`` instead (``missing="ignore"``). ``sums``, ``colmin`` and
    ``missing`` are updated in place."""
    n, d = X.shape
    for i in range(n):
        c = inverse[i]
        wi = w[i] if weighted else 1.0
        for j in range(d):
            v = X[i, j]
            if skip_nan and v != v:
                missing[c, j] += wi
                continue
            if binarize:
                v = 1.0 if v > threshold else 0.0
            sums[c, j] += wi * v
            if v < colmin[j]:
                colmin[j] = v


@kernel(nogil=True)
def class_moments(X, inverse, w, weighted, skip_nan, n, mean, m2):  # pragma: no cover
    """Per class ``c`` and column ``j``: the weight ``n[c, j]`` of the class's rows, their
    weighted mean ``mean[c, j]`` and weighted sum of squared deviations from it ``m2[c, j]``
    (``w[i] = 1`` when not ``weighted``). Two passes, the second centred (numerically stable,
    as scikit-learn's ``np.var``).

    With ``skip_nan`` a NaN leaves its entry out (``missing="ignore"``) and the kernel counts
    ``n`` itself; otherwise ``n`` must come in holding each class's total weight in every
    column. ``mean`` and ``m2`` must come in zero; a class without observed rows keeps mean 0.
    """
    rows, d = X.shape
    L = n.shape[0]
    for i in range(rows):
        c = inverse[i]
        wi = w[i] if weighted else 1.0
        for j in range(d):
            v = X[i, j]
            if skip_nan:
                if v != v:
                    continue
                n[c, j] += wi
            mean[c, j] += wi * v
    for c in range(L):
        for j in range(d):
            if n[c, j] != 0.0:
                mean[c, j] /= n[c, j]
            else:
                mean[c, j] = 0.0
    for i in range(rows):
        c = inverse[i]
        wi = w[i] if weighted else 1.0
        for j in range(d):
            v = X[i, j]
            if skip_nan and v != v:
                continue
            dv = v - mean[c, j]
            m2[c, j] += wi * (dv * dv)


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
