"""The compiled per-class sums of MultinomialNB and ComplementNB on CSR blocks.

A CSR block with many stored values per column (hashed text) is summed in one compiled pass
into a dense (n_features, n_classes) array that also checks the values; these tests check that
this path gives scikit-learn's counts and reports NaN, infinity and negative counts as the other
paths do.
"""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.naive_bayes as skb

from dml import naive_bayes as nb
from dml._blocks import sparse_blocks
from dml.naive_bayes import _kernels

D = 1 << 12


def hashed_counts(n=2000, d=D, words=12, n_classes=3, seed=0):
    """Word counts of ``n`` short documents over ``d`` hashed columns (many values per column,
    so the compiled path is taken), and labels that depend on them."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), words)
    cols = np.minimum(rng.zipf(1.3, n * words), d) - 1
    X = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    y = (np.asarray(X[:, :3].sum(axis=1)).ravel().astype(int) + rng.integers(0, 2, n)) % n_classes
    return X, y


def product_sums(X, inverse, w, L):
    """scikit-learn's per-class sums, as a dense (L, d) array."""
    Y = np.where(inverse[:, None] == np.arange(L), w[:, None], 0.0)
    return np.asarray(X.T @ Y).T


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_compiled_sums_equal_the_one_hot_product(index_dtype):
    X, y = hashed_counts()
    X.data[::9] = 0.0  # stored zeros
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    inverse = y.astype(np.intp)
    L = 4  # class 3 has no rows
    assert L * D <= _kernels._DENSE_SUMS_PER_VALUE * X.nnz  # the compiled path's condition
    w = np.random.default_rng(1).uniform(0.5, 2.0, X.shape[0])
    for weights in (None, w):
        out = _kernels._fused_sparse_sums(0, X, inverse, weights, L, True, "MultinomialNB")
        assert sp.issparse(out) and out.shape == (L, D) and out.has_sorted_indices
        expected = product_sums(X, inverse, np.ones(X.shape[0]) if weights is None else w, L)
        np.testing.assert_allclose(out.toarray(), expected, rtol=1e-13)
        # Only the columns with a nonzero sum are stored (for every class).
        assert out.nnz == L * np.count_nonzero(expected.any(axis=0))


@pytest.mark.parametrize("Est", [nb.MultinomialNB, nb.ComplementNB])
@pytest.mark.parametrize("value,message", [(np.nan, "contains NaN"),
                                           (np.inf, "contains infinity"),
                                           (-2.0, "non-negative counts")])
def test_bad_counts_are_reported_on_the_compiled_path(Est, value, message):
    X, y = hashed_counts()
    X.data[17] = value
    with pytest.raises(ValueError, match=message):
        Est().fit(sparse_blocks(X, 700), da.from_array(y, chunks=700))


def test_missing_ignore_and_overflowing_sums_take_the_exact_path():
    X, y = hashed_counts()
    Xn = X.copy()
    Xn.data[::11] = np.nan
    m = nb.MultinomialNB(missing="ignore").fit(Xn, y)
    Xz = Xn.copy()
    Xz.data[::11] = 0.0
    np.testing.assert_allclose(m.feature_count_, skb.MultinomialNB().fit(Xz, y).feature_count_,
                               rtol=1e-13)
    big = X.copy()
    big.data[:] = 1e307  # finite counts whose sums overflow: no error, as scikit-learn
    with np.errstate(all="ignore"):
        m = nb.MultinomialNB().fit(big, y)
        r = skb.MultinomialNB().fit(big, y)
    np.testing.assert_array_equal(m.feature_count_, r.feature_count_)


@pytest.mark.parametrize("blocks", [1, 3, 7, 64])
def test_hashed_counts_equal_scikit_learn_on_the_cluster(client, blocks):
    X, y = hashed_counts()
    w = np.random.default_rng(0).uniform(0.5, 2.0, X.shape[0])
    rows = -(-X.shape[0] // blocks)
    m = nb.MultinomialNB().fit(sparse_blocks(X, rows), da.from_array(y, chunks=rows),
                               sample_weight=da.from_array(w, chunks=rows))
    r = skb.MultinomialNB().fit(X, y, sample_weight=w)
    for attr in ("class_count_", "feature_count_", "feature_log_prob_"):
        np.testing.assert_allclose(getattr(m, attr), getattr(r, attr), rtol=1e-12, err_msg=attr)
