"""What a group of a boosting run sends another group each growth wave: its partial histograms of
the other group's features, packed.

A histogram bin holds ``(Σg, Σh, count)`` in float64 (:mod:`dml.ensemble._gb_kernels`): 24
bytes. On the wire the sums stay float64 (the model must be the same bit for bit), but the
count is a row count, so it travels as the narrowest unsigned integer that holds the largest
count of the share (one byte in most nodes below the roots), and a bin whose three values are
all +0.0 (no row of the group falls in it: about a quarter of the bins sent in the benchmark,
most of them in deep nodes) is not sent at all, only its bit in a mask. The receiver writes
the bins back, zeros where the mask says so: the same array, bit for bit. A share whose counts
are not whole numbers below 2**32 (never for counts of rows) is sent as it is.

A packed share is ``(TAG, shape, mask, sums, counts)``; :func:`unpack` checks it against the
shape the receiver expects before a kernel reads it (what arrives over the direct channel is
only trusted to be arrays of the declared sizes, :mod:`dml._direct`).
"""
from __future__ import annotations

import math

import numpy as np

from dml._numba import kernel

TAG = "dml-gbt-packed"
_COUNT_TYPES = (np.uint8, np.uint16, np.uint32)


@kernel(nogil=True)
def _pack_kernel(hist, raw, mask, sums, counts):  # pragma: no cover - compiled
    """Bins of ``hist`` (S, f, B, 3; ``raw``: the same viewed as uint64) not all +0.0: their
    bit set in ``mask``, their sums (``sums``: uint64 view) and counts written in order.
    Returns ``(kept, largest count, whether a count is negative or not whole)``. Without a
    branch on the data: every bin is written at the next free place, which a kept one takes."""
    S, F, B = hist.shape[0], hist.shape[1], hist.shape[2]
    i = 0
    k = 0
    top = 0.0
    bad = 0
    byte = np.uint64(0)
    for s in range(S):
        for f in range(F):
            for b in range(B):
                a0, a1, a2 = raw[s, f, b, 0], raw[s, f, b, 1], raw[s, f, b, 2]
                c = hist[s, f, b, 2]
                keep = np.uint64((a0 | a1 | a2) != 0)  # bits: -0.0 is kept
                sums[k, 0] = a0
                sums[k, 1] = a1
                counts[k] = np.uint32(c) if c < 4294967296.0 and c >= 0.0 else 0
                top = max(top, c)
                bad += (c != math.floor(c)) | (c < 0.0)
                byte |= keep << np.uint64(i & 7)
                if (i & 7) == 7:
                    mask[i >> 3] = np.uint8(byte)
                    byte = np.uint64(0)
                k += keep
                i += 1
    if i & 7:
        mask[i >> 3] = np.uint8(byte)
    return k, top, bad


@kernel(nogil=True)
def _unpack_kernel(mask, sums, counts, out, raw):  # pragma: no cover - compiled
    """``out`` (S, f, B, 3; ``raw``: the same viewed as uint64) written from a packed share
    (``sums`` viewed as uint64); returns the number of bins the mask sets (the caller checks
    it against the number sent; none is read beyond it)."""
    S, F, B = out.shape[0], out.shape[1], out.shape[2]
    last = sums.shape[0] - 1
    i = 0
    k = 0
    for s in range(S):
        for f in range(F):
            for b in range(B):
                keep = np.uint64((mask[i >> 3] >> (i & 7)) & 1)
                j = min(k, last)
                ones = np.uint64(0) - keep  # all ones for a sent bin, else zero
                raw[s, f, b, 0] = sums[j, 0] & ones
                raw[s, f, b, 1] = sums[j, 1] & ones
                out[s, f, b, 2] = np.float64(np.uint64(counts[j]) & ones)
                k += keep
                i += 1
    return k


def pack(hist):
    """A share of histograms ``(S, f, B, 3)`` (any strides) as sent: packed, or ``hist``
    itself when its counts are not whole numbers below 2**32."""
    if hist.ndim != 4 or hist.shape[3] != 3 or hist.dtype != np.float64 or hist.size == 0:
        return hist
    n = hist.shape[0] * hist.shape[1] * hist.shape[2]
    mask = np.empty(-(-n // 8), dtype=np.uint8)
    sums = np.empty((n, 2), dtype=np.float64)
    counts = np.empty(n, dtype=np.uint32)
    k, top, bad = _pack_kernel(hist, hist.view(np.uint64), mask, sums.view(np.uint64), counts)
    if bad or top > np.iinfo(np.uint32).max:
        return hist
    kind = next(t for t in _COUNT_TYPES if top <= np.iinfo(t).max)
    return (TAG, tuple(int(v) for v in hist.shape), mask, sums[:k],
            counts[:k].astype(kind) if kind is not np.uint32 else counts[:k])


def pack_share(share):
    """:func:`pack` of every piece of a group's share (``{piece: histograms}``)."""
    return {key: pack(v) for key, v in share.items()}


def unpack(value, shape):
    """The histograms ``(S, f, B, 3)`` of a received piece (packed or not); raises ValueError
    when it is not a share of the expected ``shape``."""
    shape = tuple(int(v) for v in shape)
    if isinstance(value, np.ndarray):
        if value.shape != shape or value.dtype != np.float64:
            raise ValueError(f"gradient boosting: a peer sent histograms of shape "
                             f"{value.shape} ({value.dtype}), expected {shape}")
        return value
    if not (isinstance(value, tuple) and len(value) == 5 and value[0] == TAG):
        raise ValueError("gradient boosting: a peer sent histograms in an unknown form")
    _, got, mask, sums, counts = value
    n = shape[0] * shape[1] * shape[2]
    if (tuple(got) != shape or not isinstance(mask, np.ndarray) or mask.dtype != np.uint8
            or mask.shape != (-(-n // 8),) or not isinstance(sums, np.ndarray)
            or sums.dtype != np.float64 or sums.ndim != 2 or sums.shape[1] != 2
            or not isinstance(counts, np.ndarray) or counts.dtype not in _COUNT_TYPES
            or counts.shape != (sums.shape[0],)):
        raise ValueError(f"gradient boosting: a peer sent packed histograms that do not "
                         f"match the expected shape {shape}")
    out = np.empty(shape, dtype=np.float64)
    if sums.shape[0] == 0:
        if mask[:n // 8].any() or (n % 8 and mask[-1] & ((1 << n % 8) - 1)):
            raise ValueError("gradient boosting: a peer sent packed histograms whose mask "
                             "does not match their bins")
        out[...] = 0.0
        return out
    if _unpack_kernel(mask, np.ascontiguousarray(sums).view(np.uint64),
                      np.ascontiguousarray(counts), out, out.view(np.uint64)) != sums.shape[0]:
        raise ValueError("gradient boosting: a peer sent packed histograms whose mask does "
                         "not match their bins")
    return out


def unpack_share(share, shape):
    """:func:`unpack` of every piece of a received share."""
    if not isinstance(share, dict):
        raise ValueError("gradient boosting: a peer sent histograms in an unknown form")
    return {key: unpack(v, shape) for key, v in share.items()}
