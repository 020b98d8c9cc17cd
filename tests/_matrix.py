"""Test matrices whose full cross product runs in CI but only a checkerboard of it in the quick
suite (``-m "not slow"``).

Equality tests of the form "estimator variant × partitioning" multiply quickly. In the quick
suite every variant still runs on two partitionings (or one, when there are only three) and every
partitioning still meets half the variants; the cells in between carry the ``slow`` mark, so CI
(which runs slow tests) still checks the whole product.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

__all__ = ["checkerboard"]


def checkerboard(variants: Sequence[Any], partitionings: Sequence[Any],
                 variant_id: Callable[[int, Any], str] | None = None) -> list:
    """``pytest.param(variant, partitioning)`` for every pair; cell (i, j) is ``slow`` when
    i + j is odd. Use with ``@pytest.mark.parametrize("variant,partitioning", ...)``."""
    out = []
    for i, v in enumerate(variants):
        vid = variant_id(i, v) if variant_id else (v if isinstance(v, str) else f"params{i}")
        for j, p in enumerate(partitionings):
            marks = (pytest.mark.slow,) if (i + j) % 2 else ()
            out.append(pytest.param(v, p, marks=marks, id=f"{vid}-{p}"))
    return out
