"""Collections of documents cut into partitions.

The producers of sparse features (:mod:`dml.feature_extraction`, :func:`dml.datasets.read_svmlight`)
share two mechanisms, kept here:

* :func:`as_documents` accepts a list/ndarray/pandas Series (in memory), a Dask Series (or a
  one-column Dask DataFrame), a Dask Bag or a 1-D Dask array of documents and returns
  :class:`Documents`: one delayed partition per row block, plus the rows of each block when they
  are known without reading the data.
* their kernels turn one partition into a ``scipy.sparse`` CSR matrix, mapped over the
  partitions by :func:`dml._blocks.sparse_blocks` (the one mechanism that makes Dask arrays of
  CSR blocks).

Every kernel starts with :func:`document_list`, which checks that what a partition holds are
text documents and says which one is not (partition and position), on the worker that reads it.
"""
from __future__ import annotations

from dataclasses import dataclass

import dask.array as da
import dask.bag as db
import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask.delayed import Delayed

from dml._graph import compute, map_delayed

__all__ = ["Documents", "as_documents", "document_list"]

#: Document types of ``input="content"`` (what scikit-learn's vectorizers decode).
_TEXT_TYPES = (str, bytes)


@dataclass
class Documents:
    """Documents in row partitions.

    Attributes
    ----------
    parts : list of Delayed or None
        One delayed partition (a list, pandas Series or NumPy array of documents) per row
        block, in order; None for in-memory documents.
    local : list or None
        The documents, when they were given in memory.
    lengths : ndarray of int64 or None
        Documents per partition, when known without reading the data.
    """

    parts: list | None
    local: list | None
    lengths: np.ndarray | None

    @property
    def npartitions(self) -> int:
        return 1 if self.parts is None else len(self.parts)

    def known_lengths(self) -> np.ndarray:
        """Documents per partition, counted once (one pass) when the input did not say."""
        if self.lengths is None:
            self.lengths = np.asarray(compute(*map_delayed(len, self.parts)), dtype=np.int64)
        return self.lengths


def as_documents(X, estimator: str, *, what: str = "raw text documents") -> Documents:
    """Cut the documents ``X`` into partitions (see the module docstring for what it takes)."""
    if isinstance(X, (str, bytes)):
        # scikit-learn's wording: a lone string would be read as a sequence of characters.
        raise ValueError(f"Iterable over {what} expected, string object received.")
    if isinstance(X, (dd.DataFrame, pd.DataFrame)):
        if len(X.columns) != 1:
            raise TypeError(
                f"{estimator}: X is a DataFrame with {len(X.columns)} columns; pass the one "
                f"column that holds the documents, e.g. df['text'] (iterating a DataFrame "
                f"would yield its column names, not its rows).")
        X = X[X.columns[0]]
    if isinstance(X, dd.Series):
        return Documents(list(X.to_delayed(optimize_graph=False)), None, None)
    if isinstance(X, db.Bag):
        return Documents(list(X.to_delayed(optimize_graph=False)), None, None)
    if isinstance(X, da.Array):
        if X.ndim == 2 and X.shape[1] == 1:
            X = X[:, 0]
        if X.ndim != 1:
            raise ValueError(f"{estimator}: expected a 1-D collection of documents, got a Dask "
                             f"array of shape {X.shape}")
        rows = X.chunks[0]
        lengths = None if any(np.isnan(r) for r in rows) else np.asarray(rows, dtype=np.int64)
        return Documents(list(X.to_delayed(optimize_graph=False)), None, lengths)
    if isinstance(X, Delayed):
        raise TypeError(f"{estimator}: got a Delayed object; pass a Dask Bag "
                        "(dask.bag.from_delayed) or Series of documents instead")
    if isinstance(X, pd.Series):
        docs = X.tolist()
    elif isinstance(X, np.ndarray):
        if X.ndim == 2 and X.shape[1] == 1:
            X = X[:, 0]
        if X.ndim != 1:
            raise ValueError(f"{estimator}: expected a 1-D collection of documents, got an "
                             f"array of shape {X.shape}")
        docs = X.tolist()
    else:
        try:
            docs = list(X)
        except TypeError:
            raise TypeError(f"{estimator}: expected an iterable of {what}, got "
                            f"{type(X).__name__}") from None
    return Documents(None, docs, np.asarray([len(docs)], dtype=np.int64))


def document_list(part, index: int | None = None, *, check_text: bool = True) -> list:
    """One partition as a list, every element checked to be a text document.

    ``index`` is the partition's number (None for in-memory documents), used in the message.
    A missing document (None or NaN) raises a ``ValueError``, any other non-text value a
    ``TypeError``; both name the document's position and say how to fix it.
    """
    if isinstance(part, (pd.Series, pd.Index, np.ndarray)):
        docs = part.tolist()
    elif isinstance(part, list):
        docs = part
    else:
        docs = list(part)
    if not check_text:
        return docs
    for i, doc in enumerate(docs):
        if isinstance(doc, _TEXT_TYPES):
            continue
        where = f"document {i}" + ("" if index is None else f" of partition {index}")
        if doc is None or (isinstance(doc, float) and doc != doc) or doc is pd.NA:
            raise ValueError(f"{where} is missing ({doc!r}); every document must be a string. "
                             "Fill missing documents first, e.g. docs.fillna('').")
        raise TypeError(f"{where} is a {type(doc).__name__} ({doc!r:.60}), not a string; every "
                        "document must be str or bytes (convert them, e.g. "
                        "docs.astype(str)).")
    return docs
