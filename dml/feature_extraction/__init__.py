"""Sparse features from text and from named features, computed on the workers.

:class:`FeatureHasher` and the text vectorizers of :mod:`dml.feature_extraction.text`
(:class:`HashingVectorizer`, :class:`CountVectorizer`, :class:`TfidfTransformer`,
:class:`TfidfVectorizer`) take documents in memory (a list, NumPy array or pandas Series) or as
a Dask Bag, Series or 1-D array, and return what scikit-learn returns on the same documents: a
``scipy.sparse`` CSR matrix for in-memory input, a Dask array of CSR blocks (one per partition)
for Dask input. Vocabularies and document frequencies are learned in one reduction over the
partitions. See ``docs/text.md``.
"""
from __future__ import annotations

from dml._lazy import attach as _attach

__all__ = ["FeatureHasher", "HashingVectorizer", "CountVectorizer", "TfidfTransformer",
           "TfidfVectorizer"]

# Imported on first use, so that a worker unpickling one of the package's functions does not
# import every module of it (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "FeatureHasher": "dml.feature_extraction._hashing",
    "CountVectorizer": "dml.feature_extraction.text",
    "HashingVectorizer": "dml.feature_extraction.text",
    "TfidfTransformer": "dml.feature_extraction.text",
    "TfidfVectorizer": "dml.feature_extraction.text",
})
