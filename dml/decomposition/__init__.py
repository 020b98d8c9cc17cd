"""Matrix decompositions over row blocks: PCA, TruncatedSVD and IncrementalPCA.

:class:`PCA` is exact from one pass (each block returns its centred scatter matrix or the R
factor of its centred rows; the client solves a d×d problem) or randomized (subspace iteration,
one pass per power step). :class:`TruncatedSVD` does the same without centring.
:class:`IncrementalPCA` carries scikit-learn's incremental update through the blocks in order.
``docs/decomposition.md`` explains the maths.
"""
__all__ = ["PCA", "TruncatedSVD", "IncrementalPCA"]

_WHERE = {"PCA": "dml.decomposition._pca", "TruncatedSVD": "dml.decomposition._truncated_svd",
          "IncrementalPCA": "dml.decomposition._incremental_pca"}


def __getattr__(name):
    # Lazy, so that workers unpickling a kernel of _pca_kernels do not import scikit-learn.
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'dml.decomposition' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
