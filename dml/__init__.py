"""dml: partition-parallel machine learning on Dask.

Chunked Dask arrays and dataframes drive training: per-block NumPy kernels run where the data
lives and only small statistics or parameters travel. Estimators follow scikit-learn's API.
"""
__version__ = "0.1.0"
