"""TfidfTransformer: document frequencies summed over row blocks, tf-idf applied blockwise."""
from __future__ import annotations

import dask.array as da
import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer as _SkTfidfTransformer
from sklearn.utils import check_array

from dml._graph import map_delayed, tree_add, tree_reduce
from dml._typing import Any, ArrayLike, Self
from dml.base import check_is_fitted, fit_context
from dml.feature_extraction._base import SparseProducerMixin, dml_constraints
from dml._blocks import sparse_blocks

__all__ = ["TfidfTransformer", "idf_from_counts", "tfidf_dtype"]


def tfidf_dtype(dtype) -> np.dtype:
    """Dtype of tf-idf values computed from counts of ``dtype`` (as scikit-learn decides)."""
    dtype = np.dtype(dtype)
    return dtype if dtype in (np.float64, np.float32) else np.dtype(np.float64)


def idf_from_counts(df: np.ndarray, n_samples: int, smooth_idf: bool, dtype) -> np.ndarray:
    """Inverse document frequencies, computed with scikit-learn's operations in its order (so
    the values are the same to the last bit): ``log((n + s) / (df + s)) + 1``, s = smooth_idf."""
    df = np.asarray(df).astype(dtype, copy=True)
    df += float(smooth_idf)
    n_samples = int(n_samples) + int(smooth_idf)
    idf = np.full_like(df, fill_value=n_samples, dtype=dtype)
    idf /= df
    np.log(idf, out=idf)
    idf += 1.0
    return idf


def _block_document_frequency(block):
    """(rows, non-zero entries per column) of one block of counts (checked as scikit-learn
    checks its input: finite numbers, sparse or dense)."""
    block = check_array(block, accept_sparse=("csr", "csc"), input_name="X")
    if not sp.issparse(block):
        block = sp.csr_matrix(block)
    if block.format == "csr":
        df = np.bincount(block.indices, minlength=block.shape[1])
    else:
        df = np.diff(block.indptr)
    return block.shape[0], df.astype(np.int64)


def _tfidf_block(block, index, est):
    return _SkTfidfTransformer.transform(est, block, copy=True)


def _blocks_of(X: da.Array) -> list:
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    return list(X.to_delayed(optimize_graph=False)[:, 0])


class TfidfTransformer(SparseProducerMixin, _SkTfidfTransformer):
    """Turn a matrix of term counts into tf-idf weights (document frequencies from all blocks).

    As scikit-learn's ``TfidfTransformer`` and with the same result: ``fit`` counts in how many
    documents each term occurs, one reduction over the row blocks (a Dask array of CSR or dense
    blocks, e.g. the output of :class:`CountVectorizer`), and ``transform`` weights each block
    on its worker. In-memory input (a NumPy array or ``scipy.sparse`` matrix) is handled by
    scikit-learn's code directly.

    Parameters
    ----------
    norm : {'l1', 'l2'} or None, default='l2'
        Each output row has unit norm ('l2': sum of squares 1; 'l1': sum of absolute values 1).
    use_idf : bool, default=True
        Weight the counts by the inverse document frequency.
    smooth_idf : bool, default=True
        Add one to the document frequencies, as if an extra document held every term once
        (prevents divisions by zero).
    sublinear_tf : bool, default=False
        Replace a count tf by ``1 + log(tf)``.

    Attributes
    ----------
    idf_ : ndarray of shape (n_features,)
        Inverse document frequencies (only when ``use_idf``).
    n_features_in_ : int
        Number of columns seen in ``fit``.

    Examples
    --------
    >>> import dask.array as da
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from dml.feature_extraction.text import TfidfTransformer
    >>> counts = np.array([[3, 0, 1], [2, 0, 0], [3, 0, 0], [4, 0, 0]])
    >>> X = da.from_array(sp.csr_matrix(counts), chunks=(2, 3), asarray=False)
    >>> t = TfidfTransformer().fit(X)
    >>> t.idf_
    array([1.        , 2.60943791, 1.91629073])
    >>> t.transform(X).compute().toarray().round(3)
    array([[0.843, 0.   , 0.538],
           [1.   , 0.   , 0.   ],
           [1.   , 0.   , 0.   ],
           [1.   , 0.   , 0.   ]])
    """

    _parameter_constraints = dml_constraints(_SkTfidfTransformer._parameter_constraints)

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Learn the inverse document frequencies of the columns of ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask.array.Array} of shape (n_samples, n_features)
            Term counts; a Dask array may have CSR, CSC or dense blocks.
        y : None
            Ignored.

        Returns
        -------
        self : TfidfTransformer

        Examples
        --------
        >>> import numpy as np
        >>> from dml.feature_extraction.text import TfidfTransformer
        >>> TfidfTransformer().fit(np.array([[1, 0], [1, 1]])).idf_
        array([1.        , 1.40546511])
        """
        if not isinstance(X, da.Array):
            return _SkTfidfTransformer.fit(self, X, y)
        if X.ndim != 2:
            raise ValueError(f"TfidfTransformer: expected a 2-D X, got a Dask array of shape "
                             f"{X.shape}")
        self.n_features_in_ = int(X.shape[1])
        if self.use_idf:
            n, df = tree_reduce(map_delayed(_block_document_frequency, _blocks_of(X)),
                                tree_add).compute()
            if n == 0:
                raise ValueError("Found array with 0 sample(s) (shape=(0, "
                                 f"{X.shape[1]})) while a minimum of 1 is required by "
                                 "TfidfTransformer.")
            self.idf_ = idf_from_counts(df, n, self.smooth_idf, tfidf_dtype(X.dtype))
        return self

    def transform(self, X: ArrayLike, copy: bool = True) -> Any:
        """Weight the counts of ``X`` by tf-idf (block by block for a Dask array).

        Parameters
        ----------
        X : {array-like, sparse matrix, dask.array.Array} of shape (n_samples, n_features)
            Term counts.
        copy : bool, default=True
            Work on a copy (in-memory CSR input only; Dask blocks are always copied).

        Returns
        -------
        X_tfidf : scipy.sparse.csr_matrix or dask.array.Array of CSR blocks

        Examples
        --------
        >>> import numpy as np
        >>> from dml.feature_extraction.text import TfidfTransformer
        >>> t = TfidfTransformer(norm=None).fit(np.array([[1, 0], [1, 1]]))
        >>> t.transform(np.array([[0, 2]])).toarray()
        array([[0.        , 2.81093022]])
        """
        if not isinstance(X, da.Array):
            return _SkTfidfTransformer.transform(self, X, copy=copy)
        check_is_fitted(self, "n_features_in_")
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[-1]} features, but TfidfTransformer is expecting "
                             f"{self.n_features_in_} features as input.")
        rows = X.chunks[0]
        lengths = None if any(np.isnan(r) for r in rows) else np.asarray(rows, dtype=np.int64)
        return sparse_blocks(_blocks_of(X), kernel=_tfidf_block, args=(self,),
                             n_features=X.shape[1],
                             dtype=tfidf_dtype(X.dtype), lengths=lengths)
