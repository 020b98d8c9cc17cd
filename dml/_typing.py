"""Type aliases of the public API's signatures.

The estimators take NumPy arrays, pandas objects, Dask arrays and Dask DataFrames (and, where a
docstring says so, column names): :data:`ArrayLike` is NumPy's alias, which covers all of them
through ``__array__``. What ``predict``/``transform`` return depends on the input (NumPy for
in-memory data, a lazy Dask collection for Dask input, DataFrames under ``set_output``), so
those are annotated ``Any``; the docstrings say which.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from numpy.typing import ArrayLike

if TYPE_CHECKING:  # typing.Self needs Python 3.11; annotations are never evaluated at run time
    from typing_extensions import Self
else:
    Self = Any

__all__ = ["ArrayLike", "Any", "Self"]
