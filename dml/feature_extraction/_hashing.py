"""FeatureHasher: the hashing trick per partition, on the workers, as scikit-learn computes it."""
from __future__ import annotations

from sklearn.feature_extraction import FeatureHasher as _SkFeatureHasher

from dml._typing import Any, ArrayLike, Self
from dml.base import fit_context
from dml.feature_extraction._base import SparseProducerMixin, dml_constraints
from dml._blocks import empty_csr
from dml.feature_extraction._documents import as_documents, document_list

__all__ = ["FeatureHasher"]


def _hash_partition(part, index, est):
    samples = document_list(part, index, check_text=False)
    if not samples:  # scikit-learn's hasher cannot take an empty sequence
        return empty_csr(est.n_features, est.dtype)
    return _SkFeatureHasher.transform(est, samples)


class FeatureHasher(SparseProducerMixin, _SkFeatureHasher):
    """Hash features (dicts, (name, value) pairs or strings) into a sparse matrix.

    Stateless, like scikit-learn's ``FeatureHasher``, and equal to it bit for bit: each
    partition is hashed on the worker that holds it by scikit-learn's own hashing code
    (signed 32-bit MurmurHash3 of the feature names). In-memory input gives a
    ``scipy.sparse`` CSR matrix; a Dask Bag, Series or 1-D array of samples gives a Dask array
    whose blocks are CSR matrices, one per partition, with known row chunks (the partitions'
    lengths are counted once when the collection does not know them).

    Parameters
    ----------
    n_features : int, default=2**20
        Number of columns of the output. Collisions are rarer with more columns; linear models
        learn one weight per column.
    input_type : {'dict', 'pair', 'string'}, default='dict'
        What a sample is: a dict of feature name to value, an iterable of (name, value) pairs,
        or an iterable of feature names (each counting 1).
    dtype : numpy dtype, default=np.float64
        Dtype of the output's values.
    alternate_sign : bool, default=True
        Add a sign bit from the hash so that collisions cancel out in expectation.

    See Also
    --------
    dml.feature_extraction.text.HashingVectorizer : Hash the tokens of text documents.

    Examples
    --------
    >>> import dask.bag as db
    >>> from dml.feature_extraction import FeatureHasher
    >>> samples = db.from_sequence([{"dog": 1, "cat": 2}, {"dog": 2, "run": 5}], npartitions=2)
    >>> X = FeatureHasher(n_features=8).transform(samples)
    >>> X.chunks
    ((1, 1), (8,))
    >>> X.compute().toarray()
    array([[ 0.,  0.,  0.,  0.,  0., -1.,  0.,  2.],
           [-5.,  0.,  0.,  0.,  0., -2.,  0.,  0.]])
    """

    _parameter_constraints = dml_constraints(_SkFeatureHasher._parameter_constraints)

    @fit_context
    def fit(self, X: ArrayLike | None = None, y: ArrayLike | None = None) -> Self:
        """Check the parameters; nothing is learned (the hashing needs no state).

        Parameters
        ----------
        X : object, default=None
            Ignored.
        y : object, default=None
            Ignored.

        Returns
        -------
        self : FeatureHasher

        Examples
        --------
        >>> from dml.feature_extraction import FeatureHasher
        >>> FeatureHasher(n_features=16).fit()
        FeatureHasher(n_features=16)
        """
        return self

    def transform(self, raw_X: Any) -> Any:
        """Hash the samples of ``raw_X`` into a sparse matrix.

        Parameters
        ----------
        raw_X : iterable, dask.bag.Bag, dask.dataframe.Series or dask.array.Array
            Samples as ``input_type`` says (dicts, pair iterables or string iterables). A Dask
            collection is hashed partition by partition on the workers.

        Returns
        -------
        X : scipy.sparse.csr_matrix or dask.array.Array of CSR blocks
            Shape (n_samples, n_features).

        Examples
        --------
        >>> from dml.feature_extraction import FeatureHasher
        >>> h = FeatureHasher(n_features=4, input_type="string", alternate_sign=False)
        >>> h.transform([["a", "b"], ["a"]]).toarray()
        array([[0., 1., 1., 0.],
               [0., 0., 1., 0.]])
        """
        self._validate_params()
        docs = as_documents(raw_X, type(self).__name__, what="samples")
        return self._sparse_output(docs, _hash_partition, self, n_features=self.n_features,
                                   dtype=self.dtype)
