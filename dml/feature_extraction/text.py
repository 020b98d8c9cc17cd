"""Text vectorizers (scikit-learn's ``sklearn.feature_extraction.text``, on Dask partitions).

:class:`HashingVectorizer` (stateless), :class:`CountVectorizer`, :class:`TfidfTransformer` and
:class:`TfidfVectorizer`; see :mod:`dml.feature_extraction` and ``docs/text.md``.
"""
from __future__ import annotations

from dml.feature_extraction._text import CountVectorizer, HashingVectorizer, TfidfVectorizer
from dml.feature_extraction._tfidf import TfidfTransformer

__all__ = ["HashingVectorizer", "CountVectorizer", "TfidfTransformer", "TfidfVectorizer"]
