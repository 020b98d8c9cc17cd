"""What the sparse-feature producers share: parameter tables and the sparse output of a kernel."""
from __future__ import annotations

from collections.abc import Callable

from sklearn.utils._param_validation import Interval as _SkInterval

from dml._param_validation import Interval
from dml.base import DaskEstimatorMixin
from dml._blocks import sparse_blocks
from dml.feature_extraction._documents import Documents

__all__ = ["dml_constraints", "SparseProducerMixin"]


def dml_constraints(table: dict) -> dict:
    """scikit-learn's constraint table with dml's :class:`~dml._param_validation.Interval`
    (which refuses booleans: ``n_features=True`` is a mistake, not 1)."""
    out = {}
    for name, constraints in table.items():
        if isinstance(constraints, list):
            constraints = [Interval(c.type, c.left, c.right, closed=c.closed)
                           if isinstance(c, _SkInterval) else c for c in constraints]
        out[name] = constraints
    return out


class SparseProducerMixin(DaskEstimatorMixin):
    """Output of a per-partition kernel: a CSR matrix for in-memory input, else a Dask array of
    CSR blocks whose row chunks are the partitions' lengths (counted once when unknown)."""

    def _sparse_output(self, docs: Documents, kernel: Callable, *args, n_features: int, dtype):
        if docs.parts is None:
            return kernel(docs.local, None, *args)
        return sparse_blocks(docs.parts, kernel=kernel, args=args, n_features=n_features,
                             dtype=dtype, lengths=docs.known_lengths())
