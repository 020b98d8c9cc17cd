"""Compiled part of the dense Lloyd step: nearest centre and per-cluster sums in one row pass.

After the BLAS product of a chunk of prepared rows with the augmented centres (the distances up
to the row's own ``‖x‖²``, see :mod:`._lloyd`), one compiled loop takes each row's nearest
centre (the first minimum: ties to the lowest index, as ``np.argmin`` and scikit-learn) and adds
the row, times its weight, to that centre's float64 sums. The trailing ones column of the
prepared rows makes the last column of the sums the cluster weights. Compared with an
``argmin`` and a separate sparse assignment product, the chunk is read once while it is still
in the cache and nothing of size ``n`` is allocated besides the labels.
"""
from __future__ import annotations

from dml._numba import kernel

__all__ = ["argmin_sums"]


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
