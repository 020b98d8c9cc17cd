"""Text vectorizers: hashing, counts and tf-idf of documents held in partitions.

Every vectorizer subclasses its scikit-learn counterpart and keeps its parameters, analyzer
(preprocessing, tokenization, n-grams, stop words) and per-document code: the partitions are
transformed on the workers by scikit-learn's own ``transform`` with the fitted state, so the
output equals scikit-learn's to the last bit. What dml adds is the fit of the stateful ones:
the vocabulary and the document frequencies come from ONE reduction over the partitions (per
partition: documents, term -> documents containing it, term -> occurrences; combined in a
fixed tree), after which the pruning (``min_df``, ``max_df``, ``max_features``) and the sorted
vocabulary are computed exactly as scikit-learn computes them from the whole matrix.
"""
from __future__ import annotations

import warnings
from collections import Counter
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer as _SkCountVectorizer
from sklearn.feature_extraction.text import HashingVectorizer as _SkHashingVectorizer
from sklearn.feature_extraction.text import TfidfTransformer as _SkTfidfTransformer
from sklearn.feature_extraction.text import TfidfVectorizer as _SkTfidfVectorizer
from sklearn.utils.validation import FLOAT_DTYPES

from dml._graph import map_delayed, tree_reduce
from dml._typing import Any, ArrayLike, Self
from dml.base import fit_context
from dml.feature_extraction._base import SparseProducerMixin, dml_constraints
from dml._blocks import empty_csr
from dml.feature_extraction._documents import as_documents, document_list
from dml.feature_extraction._tfidf import idf_from_counts, tfidf_dtype

__all__ = ["HashingVectorizer", "CountVectorizer", "TfidfVectorizer"]


def _docs(part, index, est):
    return document_list(part, index, check_text=est.input == "content")


# --------------------------------------------------------------------------------------------
# Partition kernels
# --------------------------------------------------------------------------------------------

def _hash_documents(part, index, est):
    docs = _docs(part, index, est)
    if not docs:  # scikit-learn's hasher cannot take an empty sequence
        return empty_csr(est.n_features, est.dtype)
    return _SkHashingVectorizer.transform(est, docs)


def _count_documents(part, index, est):
    return _SkCountVectorizer.transform(est, _docs(part, index, est))


def _tfidf_documents(part, index, est, tfidf):
    counts = _SkCountVectorizer.transform(est, _docs(part, index, est))
    return _SkTfidfTransformer.transform(tfidf, counts, copy=False)


def _term_counts(part, index, est, need_tf):
    """(documents, term -> documents containing it, term -> occurrences or None, (documents,))
    of one partition; the last item collects the partitions' lengths in order."""
    docs = _docs(part, index, est)
    analyze = est.build_analyzer()
    df, tf = Counter(), Counter()
    for doc in docs:
        terms = analyze(doc)
        df.update(set(terms))
        if need_tf:
            tf.update(terms)
    return len(docs), df, tf if need_tf else None, (len(docs),)


def _fixed_counts(part, index, est):
    """As :func:`_term_counts` for a given vocabulary: document frequencies as an array."""
    docs = _docs(part, index, est)
    X = _SkCountVectorizer.transform(est, docs).tocsr()
    return len(docs), np.bincount(X.indices, minlength=X.shape[1]), None, (len(docs),)


def _merge_counts(parts):
    """Combine partition results in order (the tree of :func:`dml._graph.tree_reduce`)."""
    n = sum(p[0] for p in parts)
    lengths = tuple(x for p in parts for x in p[3])
    if isinstance(parts[0][1], np.ndarray):
        return n, sum(p[1] for p in parts), None, lengths
    df = Counter()
    for p in parts:  # a new Counter: the inputs are results other tasks may still hold
        df.update(p[1])
    tf = None
    if parts[0][2] is not None:
        tf = Counter()
        for p in parts:
            tf.update(p[2])
    return n, df, tf, lengths


def _sum_dtype(dtype) -> np.dtype:
    """Dtype of a column sum of a sparse matrix of ``dtype`` (scipy widens small integers)."""
    return sp.csr_matrix((1, 1), dtype=dtype).sum(axis=0).dtype


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------

_ANALYZER_DOC = """\
    input : {'content', 'filename', 'file'}, default='content'
        What a document is: its text (str or bytes), a file name read on the worker that
        holds the partition (the file must be visible there), or an object with ``read``.
    encoding : str, default='utf-8'
        Encoding used to decode bytes.
    decode_error : {'strict', 'ignore', 'replace'}, default='strict'
        What to do with bytes that are not valid in ``encoding``.
    strip_accents : {'ascii', 'unicode'} or callable, default=None
        Remove accents during preprocessing.
    lowercase : bool, default=True
        Lower-case the text before tokenizing.
    preprocessor : callable, default=None
        Replaces the preprocessing (only when ``analyzer`` is not callable).
    tokenizer : callable, default=None
        Replaces the tokenization (only when ``analyzer='word'``).
    stop_words : {'english'}, list or None, default=None
        Words removed from the tokens (``analyzer='word'`` only).
    token_pattern : str or None, default=r"(?u)\\b\\w\\w+\\b"
        Regular expression of a token (``analyzer='word'``, no ``tokenizer``).
    ngram_range : tuple (min_n, max_n), default=(1, 1)
        Lengths of the n-grams to extract.
    analyzer : {'word', 'char', 'char_wb'} or callable, default='word'
        Word or character n-grams, or a callable that turns a document into its features.
"""

_VOCABULARY_DOC = """\
    max_df : float in range [0.0, 1.0] or int, default=1.0
        Drop terms found in more documents than this (a fraction of the documents, or a
        count).
    min_df : float in range [0.0, 1.0] or int, default=1
        Drop terms found in fewer documents than this (a fraction or a count).
    max_features : int, default=None
        Keep only the terms with the highest counts over the whole corpus.
    vocabulary : Mapping or iterable, default=None
        A given vocabulary (term -> column, or terms); then nothing is learned but the
        document frequencies (tf-idf).
    binary : bool, default=False
        Counts of 1 for every present term.
"""


class HashingVectorizer(SparseProducerMixin, _SkHashingVectorizer):
    """Hash the tokens of text documents into a sparse matrix of token occurrences.

    Stateless, like scikit-learn's ``HashingVectorizer``, and equal to it bit for bit: every
    partition of documents is tokenized and hashed on its worker by scikit-learn's code.
    In-memory documents (a list, NumPy array or pandas Series) give a ``scipy.sparse`` CSR
    matrix; a Dask Series (or one-column DataFrame), Bag or 1-D array gives a Dask array whose
    blocks are CSR matrices, one per partition, with the partitions' lengths as row chunks
    (counted once when the collection does not know them).

    Parameters
    ----------
{analyzer}    n_features : int, default=2**20
        Number of columns of the output.
    binary : bool, default=False
        Value 1 for every present token instead of its count.
    norm : {{'l1', 'l2'}} or None, default='l2'
        Normalisation of each row.
    alternate_sign : bool, default=True
        Sign the hashed values so that collisions cancel out in expectation.
    dtype : numpy dtype, default=np.float64
        Dtype of the output's values.

    See Also
    --------
    CountVectorizer : Counts over a learned vocabulary.

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> import pandas as pd
    >>> from dml.feature_extraction.text import HashingVectorizer
    >>> docs = pd.Series(["the cat sat", "the dog ran", "a cat ran"])
    >>> X = HashingVectorizer(n_features=16, norm=None).transform(
    ...     dd.from_pandas(docs, npartitions=2))
    >>> X.chunks
    ((2, 1), (16,))
    >>> X.compute().toarray()[0]
    array([ 0.,  0.,  0.,  0.,  0., -1.,  0.,  0.,  0.,  0., -1., -1.,  0.,  0.,  0.,  0.])
    """

    _parameter_constraints = dml_constraints(_SkHashingVectorizer._parameter_constraints)

    @fit_context
    def fit(self, X: ArrayLike | None = None, y: ArrayLike | None = None) -> Self:
        """Check the parameters; nothing is learned (hashing needs no vocabulary).

        Parameters
        ----------
        X : object, default=None
            Ignored (a single string is refused, as scikit-learn does).
        y : object, default=None
            Ignored.

        Returns
        -------
        self : HashingVectorizer

        Examples
        --------
        >>> from dml.feature_extraction.text import HashingVectorizer
        >>> HashingVectorizer(n_features=8).fit(["some text"])
        HashingVectorizer(n_features=8)
        """
        if isinstance(X, (str, bytes)):
            raise ValueError("Iterable over raw text documents expected, string object "
                             "received.")
        self._warn_for_unused_params()
        self._validate_ngram_range()
        return self

    def transform(self, X: ArrayLike) -> Any:
        """Hash the documents of ``X`` into a sparse matrix.

        Parameters
        ----------
        X : iterable of str, dask.dataframe.Series, dask.bag.Bag or dask.array.Array
            The documents. A Dask collection is hashed partition by partition on the workers.

        Returns
        -------
        X : scipy.sparse.csr_matrix or dask.array.Array of CSR blocks
            Shape (n_documents, n_features).

        Examples
        --------
        >>> from dml.feature_extraction.text import HashingVectorizer
        >>> HashingVectorizer(n_features=4, norm=None).transform(["a bb bb cc"]).toarray()
        array([[ 0.,  0., -1.,  2.]])
        """
        self._validate_params()
        self._validate_ngram_range()
        docs = as_documents(X, type(self).__name__)
        return self._sparse_output(docs, _hash_documents, self, n_features=self.n_features,
                                   dtype=self.dtype)


class CountVectorizer(SparseProducerMixin, _SkCountVectorizer):
    """Count the terms of text documents over a vocabulary learned from every partition.

    As scikit-learn's ``CountVectorizer``, with the same vocabulary and the same matrix: the
    vocabulary, document frequencies and term totals are learned in ONE reduction over the
    partitions (each worker counts its partition's terms; the counts are combined in a fixed
    tree), then pruned by ``min_df``/``max_df``/``max_features`` and sorted as scikit-learn
    does. ``transform`` counts each partition on its worker with scikit-learn's code and the
    fitted vocabulary. In-memory documents give a ``scipy.sparse`` CSR matrix, Dask
    collections (Series, one-column DataFrame, Bag, 1-D array) a Dask array of CSR blocks.

    Parameters
    ----------
{analyzer}{vocabulary}    dtype : numpy dtype, default=np.int64
        Dtype of the output's values.

    Attributes
    ----------
    vocabulary_ : dict
        Term -> column, columns in the sorted order of the terms.
    fixed_vocabulary_ : bool
        True when the vocabulary was given.

    Examples
    --------
    >>> import dask.bag as db
    >>> from dml.feature_extraction.text import CountVectorizer
    >>> docs = db.from_sequence(["the cat sat", "the dog sat", "a dog ran"], npartitions=2)
    >>> cv = CountVectorizer(min_df=2).fit(docs)
    >>> cv.vocabulary_
    {{'dog': 0, 'sat': 1, 'the': 2}}
    >>> cv.transform(docs).compute().toarray()
    array([[0, 1, 1],
           [1, 1, 1],
           [1, 0, 0]])
    """

    _parameter_constraints = dml_constraints(_SkCountVectorizer._parameter_constraints)

    @fit_context
    def fit(self, raw_documents: Any, y: ArrayLike | None = None) -> Self:
        """Learn the vocabulary of the documents (one pass over the partitions).

        Parameters
        ----------
        raw_documents : iterable of str, dask.dataframe.Series, dask.bag.Bag or dask.array.Array
            The documents.
        y : None
            Ignored.

        Returns
        -------
        self : CountVectorizer

        Examples
        --------
        >>> from dml.feature_extraction.text import CountVectorizer
        >>> sorted(CountVectorizer().fit(["to be or not to be"]).vocabulary_)
        ['be', 'not', 'or', 'to']
        """
        self._fit(as_documents(raw_documents, type(self).__name__))
        return self

    @fit_context
    def fit_transform(self, raw_documents: Any, y: ArrayLike | None = None) -> Any:
        """Learn the vocabulary and return the counts (the fit's pass also counts the
        partitions' lengths, so the output's row chunks are known without another pass).

        Parameters
        ----------
        raw_documents : iterable of str, dask.dataframe.Series, dask.bag.Bag or dask.array.Array
            The documents.
        y : None
            Ignored.

        Returns
        -------
        X : scipy.sparse.csr_matrix or dask.array.Array of CSR blocks
            Shape (n_documents, n_terms).

        Examples
        --------
        >>> from dml.feature_extraction.text import CountVectorizer
        >>> CountVectorizer().fit_transform(["to be or not to be"]).toarray()
        array([[2, 1, 1, 2]])
        """
        docs = as_documents(raw_documents, type(self).__name__)
        self._fit(docs)
        return self._transform(docs)

    def transform(self, raw_documents: Any) -> Any:
        """Count the vocabulary's terms in each document.

        Parameters
        ----------
        raw_documents : iterable of str, dask.dataframe.Series, dask.bag.Bag or dask.array.Array
            The documents.

        Returns
        -------
        X : scipy.sparse.csr_matrix or dask.array.Array of CSR blocks
            Shape (n_documents, n_terms).

        Examples
        --------
        >>> from dml.feature_extraction.text import CountVectorizer
        >>> cv = CountVectorizer().fit(["to be or not to be"])
        >>> cv.transform(["be quick"]).toarray()
        array([[1, 0, 0, 0]])
        """
        self._check_vocabulary()
        return self._transform(as_documents(raw_documents, type(self).__name__))

    # ---- shared with TfidfVectorizer ----
    def _transform(self, docs):
        return self._sparse_output(docs, _count_documents, self,
                                   n_features=len(self.vocabulary_), dtype=self.dtype)

    def _fit(self, docs, need_df: bool = False):
        """Learn ``vocabulary_`` from the documents; returns (document frequencies of the kept
        terms, number of documents) when ``need_df`` (tf-idf), else None."""
        self._validate_ngram_range()
        self._warn_for_unused_params()
        self._validate_vocabulary()
        if self.fixed_vocabulary_ and self.lowercase:
            if any(any(map(str.isupper, term)) for term in self.vocabulary):
                warnings.warn("Upper case characters found in vocabulary while 'lowercase' is "
                              "True. These entries will not be matched with any documents")
        if self.fixed_vocabulary_ and not need_df:
            return None
        if self.fixed_vocabulary_:
            kernel, args = _fixed_counts, (self,)
        else:
            binary_tf = self.binary or self.max_features is None
            kernel, args = _term_counts, (self, not binary_tf)
        if docs.parts is None:
            result = _merge_counts([kernel(docs.local, None, *args)])
        else:
            result = tree_reduce(map_delayed(kernel, docs.parts, *args, with_index=True),
                                 _merge_counts).compute()
            # The pass counted every partition: the output's row chunks are known now.
            docs.lengths = np.asarray(result[3], dtype=np.int64)
        n_doc, df, tf, _ = result
        if self.fixed_vocabulary_:
            return df, n_doc
        return self._prune(n_doc, df, tf)

    def _prune(self, n_doc, df: Counter, tf: Counter | None):
        """The vocabulary scikit-learn keeps from these counts (its rules, its order)."""
        if not df:
            raise ValueError("empty vocabulary; perhaps the documents only contain stop words")
        max_df, min_df = self.max_df, self.min_df
        max_doc_count = max_df if isinstance(max_df, Integral) else max_df * n_doc
        min_doc_count = min_df if isinstance(min_df, Integral) else min_df * n_doc
        if max_doc_count < min_doc_count:
            raise ValueError("max_df corresponds to < documents than min_df")
        terms = sorted(df)
        dfs = np.fromiter((df[t] for t in terms), dtype=np.int64, count=len(terms))
        mask = (dfs <= max_doc_count) & (dfs >= min_doc_count)
        limit = self.max_features
        if limit is not None and mask.sum() > limit:
            # Totals in the dtype scikit-learn sums the count matrix in: its (unstable) argsort
            # then breaks ties between equally frequent terms the same way.
            totals = dfs if tf is None else np.fromiter((tf[t] for t in terms), dtype=np.int64,
                                                        count=len(terms))
            tfs = totals.astype(_sum_dtype(self.dtype))
            mask_inds = (-tfs[mask]).argsort()[:limit]
            new_mask = np.zeros(len(dfs), dtype=bool)
            new_mask[np.where(mask)[0][mask_inds]] = True
            mask = new_mask
        kept = np.flatnonzero(mask)
        if len(kept) == 0:
            raise ValueError("After pruning, no terms remain. Try a lower min_df or a higher "
                             "max_df.")
        self.vocabulary_ = {terms[i]: j for j, i in enumerate(kept)}
        return dfs[kept], n_doc


class TfidfVectorizer(CountVectorizer):
    """Tf-idf weights of the terms of text documents (vocabulary and idf from every partition).

    :class:`CountVectorizer` followed by :class:`TfidfTransformer`, as scikit-learn's
    ``TfidfVectorizer``, with the same vocabulary, ``idf_`` and matrix: the vocabulary and the
    document frequencies come from the same single reduction over the partitions, and each
    partition is weighted on its worker.

    Parameters
    ----------
{analyzer}{vocabulary}    dtype : {{np.float64, np.float32}}, default=np.float64
        Dtype of the output's values.
    norm : {{'l1', 'l2'}} or None, default='l2'
        Normalisation of each row.
    use_idf : bool, default=True
        Weight the counts by the inverse document frequency.
    smooth_idf : bool, default=True
        Add one to every document frequency (as if one more document held every term).
    sublinear_tf : bool, default=False
        Replace a count tf by ``1 + log(tf)``.

    Attributes
    ----------
    vocabulary_ : dict
        Term -> column, columns in the sorted order of the terms.
    fixed_vocabulary_ : bool
        True when the vocabulary was given.
    idf_ : ndarray of shape (n_terms,)
        Inverse document frequencies (only when ``use_idf``).

    Examples
    --------
    >>> import dask.bag as db
    >>> from dml.feature_extraction.text import TfidfVectorizer
    >>> docs = db.from_sequence(["the cat sat", "the dog sat", "a dog ran"], npartitions=2)
    >>> tv = TfidfVectorizer().fit(docs)
    >>> tv.idf_.round(3)
    array([1.693, 1.288, 1.693, 1.288, 1.288])
    >>> tv.transform(docs).compute().toarray().round(2)[2]
    array([0.  , 0.61, 0.8 , 0.  , 0.  ])
    """

    _parameter_constraints = dml_constraints(_SkTfidfVectorizer._parameter_constraints)

    def __init__(self, *, input="content", encoding="utf-8", decode_error="strict",
                 strip_accents=None, lowercase=True, preprocessor=None, tokenizer=None,
                 analyzer="word", stop_words=None, token_pattern=r"(?u)\b\w\w+\b",
                 ngram_range=(1, 1), max_df=1.0, min_df=1, max_features=None, vocabulary=None,
                 binary=False, dtype=np.float64, norm="l2", use_idf=True, smooth_idf=True,
                 sublinear_tf=False):
        super().__init__(input=input, encoding=encoding, decode_error=decode_error,
                         strip_accents=strip_accents, lowercase=lowercase,
                         preprocessor=preprocessor, tokenizer=tokenizer, analyzer=analyzer,
                         stop_words=stop_words, token_pattern=token_pattern,
                         ngram_range=ngram_range, max_df=max_df, min_df=min_df,
                         max_features=max_features, vocabulary=vocabulary, binary=binary,
                         dtype=dtype)
        self.norm = norm
        self.use_idf = use_idf
        self.smooth_idf = smooth_idf
        self.sublinear_tf = sublinear_tf

    def _fit(self, docs, need_df: bool = True):
        if self.dtype not in FLOAT_DTYPES:
            warnings.warn(f"Only {FLOAT_DTYPES} 'dtype' should be used. {self.dtype} 'dtype' "
                          "will be converted to np.float64.", UserWarning)
        df, n_doc = super()._fit(docs, need_df=True)
        if self.use_idf:
            self.idf_ = idf_from_counts(df, n_doc, self.smooth_idf, tfidf_dtype(self.dtype))
        return None

    def _tfidf(self) -> _SkTfidfTransformer:
        """scikit-learn's transformer holding the fitted weights (applied per partition)."""
        t = _SkTfidfTransformer(norm=self.norm, use_idf=self.use_idf,
                                smooth_idf=self.smooth_idf, sublinear_tf=self.sublinear_tf)
        t.n_features_in_ = len(self.vocabulary_)
        if self.use_idf:
            t.idf_ = self.idf_
        return t

    def _transform(self, docs):
        if self.use_idf and not hasattr(self, "idf_"):
            from sklearn.exceptions import NotFittedError
            raise NotFittedError("The TF-IDF vectorizer is not fitted")
        return self._sparse_output(docs, _tfidf_documents, self, self._tfidf(),
                                   n_features=len(self.vocabulary_),
                                   dtype=tfidf_dtype(self.dtype))


for _cls in (HashingVectorizer, CountVectorizer, TfidfVectorizer):
    _cls.__doc__ = _cls.__doc__.format(analyzer=_ANALYZER_DOC, vocabulary=_VOCABULARY_DOC)
del _cls
