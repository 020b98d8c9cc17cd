"""Compiled parts of dense k-means: the Lloyd step's nearest centre and per-cluster sums in one
row pass, the final assignment with exact distances, and the prepared blocks' statistics.

After the BLAS product of a chunk of prepared rows with the augmented centres (the distances up
to the row's own ``‖x‖²``, see :mod:`._lloyd`), one compiled loop takes each row's nearest
centre (the first minimum: ties to the lowest index, as ``np.argmin`` and scikit-learn) and adds
the row, times its weight, to that centre's float64 sums. The trailing ones column of the
prepared rows makes the last column of the sums the cluster weights. Compared with an
``argmin`` and a separate sparse assignment product, the chunk is read once while it is still
in the cache and nothing of size ``n`` is allocated besides the labels.
"""
from __future__ import annotations

import numpy as np

from dml._numba import kernel

__all__ = ["argmin_sums", "argmin_sqdist", "column_stats"]


@kernel(nogil=True)
def argmin_sums(dist, xa, w, weighted, labels, sums, start):  # pragma: no cover - compiled
    """For rows ``start .. start + len(dist) − 1`` of ``xa``: ``labels[i]`` = the column of
    the first minimum of ``dist[i − start]``; ``sums[label] += w[i] · xa[i]`` (``w[i] = 1``
    when not ``weighted``)."""
    m, k = dist.shape
    d1 = xa.shape[1]
    for r in range(m):
        i = start + r
        best = 0
        value = dist[r, 0]
        for j in range(1, k):
            if dist[r, j] < value:
                value = dist[r, j]
                best = j
        labels[i] = best
        weight = w[i] if weighted else 1.0
        for c in range(d1):
            sums[best, c] += weight * xa[i, c]


@kernel(nogil=True)
def argmin_sqdist(dist, xa, centres, labels, sq, start):  # pragma: no cover - compiled
    """For rows ``start .. start + len(dist) − 1`` of ``xa``: the nearest centre as in
    :func:`argmin_sums`, and the row's squared distance to it from the differences (each
    difference in the data's dtype, squared and added in float64, as ``_sq_to`` in
    :mod:`._lloyd` and scikit-learn's inertia)."""
    m, k = dist.shape
    d = centres.shape[1]
    for r in range(m):
        i = start + r
        best = 0
        value = dist[r, 0]
        for j in range(1, k):
            if dist[r, j] < value:
                value = dist[r, j]
                best = j
        labels[i] = best
        acc = 0.0
        for c in range(d):
            diff = np.float64(xa[i, c] - centres[best, c])
            acc += diff * diff
        sq[i] = acc


@kernel(nogil=True)
def column_stats(xa, colsum, colsumsq, lo, hi, rowsq):  # pragma: no cover - compiled
    """One pass over a prepared block's feature columns (all but the last): per column the sum,
    the sum of squares, the minimum and maximum (float64, updated in place), and per row
    ``‖x‖²``."""
    n, d1 = xa.shape
    for i in range(n):
        acc = 0.0
        for c in range(d1 - 1):
            v = np.float64(xa[i, c])
            colsum[c] += v
            colsumsq[c] += v * v
            acc += v * v
            if v < lo[c]:
                lo[c] = v
            if v > hi[c]:
                hi[c] = v
        rowsq[i] = acc
