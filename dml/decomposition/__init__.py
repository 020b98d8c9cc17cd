"""Matrix decompositions over row blocks: PCA, TruncatedSVD and IncrementalPCA.

:class:`PCA` is exact from one pass (each block returns its centred scatter matrix or the R
factor of its centred rows; the client solves a d×d problem) or randomized (subspace iteration,
one pass per power step). :class:`TruncatedSVD` does the same without centring.
:class:`IncrementalPCA` carries scikit-learn's incremental update through the blocks in order.
``docs/decomposition.md`` explains the maths.
"""
from dml._lazy import attach as _attach

__all__ = ["PCA", "TruncatedSVD", "IncrementalPCA"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "PCA": "dml.decomposition._pca",
    "TruncatedSVD": "dml.decomposition._truncated_svd",
    "IncrementalPCA": "dml.decomposition._incremental_pca",
})
