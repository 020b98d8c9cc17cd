"""What the workers run for :mod:`dml.model_selection._split`: rows of one partition.

Apart from the splitters (subclasses of scikit-learn's), so that a worker unpickling it does not
import scikit-learn (docs/cold_start.md).
"""
from __future__ import annotations


def _iloc(part, idx):
    """Rows ``idx`` (positions) of one partition: pandas by position, arrays by index."""
    if hasattr(part, "iloc"):  # pandas, without importing it on a worker holding arrays
        return part.iloc[idx]
    return part[idx]
