"""Rows of row-blocked data picked by their global index (a sample of a few rows).

For estimators that start from a handful of training rows (the means of a mixture, the landmark
rows of a Nyström map): the blocks stay where they are and only the picked rows travel, in one
map-reduce over the blocks.
"""
from __future__ import annotations

import numpy as np

from dml._blocks import Blocks

__all__ = ["take_rows"]


def _rows_block(index, xb, yb, wb, rows, offsets):
    start = int(offsets[index])
    local = rows[(rows >= start) & (rows < start + xb.shape[0])]
    return [(int(r), xb[r - start].copy()) for r in local]


def _concat(parts):
    return [x for p in parts for x in p]


def take_rows(blocks: Blocks, indices) -> np.ndarray:
    """The rows of ``blocks`` at global ``indices`` (in that order), shape (len(indices), d).

    Examples
    --------
    >>> from dml._blocks import as_blocks
    >>> b = as_blocks(np.arange(12.0).reshape(6, 2), block_rows=4)
    >>> take_rows(b, [5, 0])
    array([[10., 11.],
           [ 0.,  1.]])
    """
    indices = np.asarray(indices, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(blocks.lengths)]).astype(np.int64)
    wanted = np.unique(indices)
    found = dict(blocks.map_reduce(_rows_block, wanted, offsets, combine=_concat,
                                   with_index=True))
    return np.stack([found[int(i)] for i in indices])
