"""dml: partition-parallel machine learning on Dask.

Chunked Dask arrays and dataframes drive training: per-block NumPy kernels run where the data
lives and only small statistics or parameters travel. Estimators follow scikit-learn's API.
"""
__version__ = "0.1.0"

__all__ = ["save", "load"]


def __getattr__(name):
    # Lazy, so that `import dml` (and `dml --help`) does not pay for what it does not use.
    if name in ("save", "load"):
        from dml import io

        return getattr(io, name)
    raise AttributeError(f"module 'dml' has no attribute {name!r}")
