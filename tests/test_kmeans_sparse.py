"""k-means on sparse X: the same model as on the densified X, and scikit-learn's from the same
initial centres, without ever densifying a block (docs/clustering.md, "Sparse data")."""
from __future__ import annotations

import tracemalloc

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans as SkKMeans

from dml._blocks import sparse_blocks
from dml.cluster import KMeans, _lloyd, elbow

TOL = dict(rtol=1e-10, atol=1e-12)


def corpus(n=240, d=30, density=0.15, seed=0, dtype=np.float64):
    """Non-negative sparse rows (TF-IDF-like) in three loose groups of columns."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed,
                  data_rvs=lambda k: rng.random(k) + 0.1).tolil()
    for i in range(n):  # each row leans on a third of the columns: clusters to find
        cols = rng.choice(np.arange(i % 3, d, 3), size=3, replace=False)
        X[i, cols] = 1.0 + rng.random(3)
    return X.tocsr().astype(dtype)


def sk_reference(X, C0, sample_weight=None):
    return SkKMeans(len(C0), init=C0, n_init=1, algorithm="lloyd").fit(
        X, sample_weight=sample_weight)


def labels_of(km):
    return np.asarray(km.labels_.compute() if isinstance(km.labels_, da.Array) else km.labels_)


def assert_same_model(km, ref, tol=TOL):
    np.testing.assert_array_equal(labels_of(km), np.asarray(ref.labels_))
    np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, **tol)
    np.testing.assert_allclose(km.inertia_, ref.inertia_, rtol=tol["rtol"])
    assert km.n_iter_ == ref.n_iter_


@pytest.mark.parametrize("n_blocks", [1, 3, 7])
def test_sparse_lloyd_equals_sklearn_and_dense_on_both_clusters(client, n_blocks):
    X = corpus(seed=1)
    C0 = X[[0, 1, 2, 50]].toarray()
    sk = sk_reference(X, C0)
    km = KMeans(4, init=C0).fit(sparse_blocks(X, -(-X.shape[0] // n_blocks)))
    assert isinstance(km.labels_, da.Array)
    assert_same_model(km, sk)
    dense = KMeans(4, init=C0).fit(da.from_array(X.toarray(), chunks=(-(-240 // n_blocks), 30)))
    assert_same_model(km, dense)


def test_local_sparse_input_and_many_blocks():
    X = corpus(n=512, seed=2)
    C0 = X[[5, 6, 7]].toarray()
    sk = sk_reference(X, C0)
    for Xi in (X, sp.csc_matrix(X), sp.csr_array(X), sparse_blocks(X, 8)):  # 64 blocks
        km = KMeans(3, init=C0).fit(Xi)
        assert_same_model(km, sk)
        assert km.inertia_history_[-1] >= km.inertia_ * (1 - 1e-12)
    assert isinstance(KMeans(3, init=C0).fit(X).labels_, np.ndarray)


def test_sample_weight_and_float32():
    X = corpus(seed=3)
    C0 = X[[0, 1, 2]].toarray()
    w = np.linspace(0.2, 3.0, X.shape[0])
    sk = sk_reference(X, C0, sample_weight=w)
    km = KMeans(3, init=C0).fit(sparse_blocks(X, 70), sample_weight=da.from_array(w, 70))
    assert_same_model(km, sk)
    X32 = X.astype(np.float32)
    km32 = KMeans(3, init=C0).fit(sparse_blocks(X32, 70))
    sk32 = sk_reference(X32, C0.astype(np.float32))
    assert km32.cluster_centers_.dtype == np.float32
    assert_same_model(km32, sk32, tol=dict(rtol=1e-5, atol=1e-6))


@pytest.mark.parametrize("init", ["k-means||", "k-means++", "random"])
def test_builtin_inits_give_the_dense_model(init):
    """Same seed: the same rows are chosen from sparse and dense X, so the same model."""
    X = corpus(seed=4)
    sparse = KMeans(3, init=init, random_state=0).fit(sparse_blocks(X, 50))
    dense = KMeans(3, init=init, random_state=0).fit(da.from_array(X.toarray(), chunks=(50, 30)))
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_array_equal(labels_of(sparse), labels_of(dense))
    assert sparse.inertia_ == pytest.approx(dense.inertia_, rel=1e-10)
    other = KMeans(3, init=init, random_state=0).fit(sparse_blocks(X, 37))
    np.testing.assert_allclose(other.cluster_centers_, sparse.cluster_centers_, rtol=1e-9,
                               atol=1e-12)


def test_empty_cluster_relocation_matches_sklearn():
    X = corpus(seed=5)
    C0 = np.vstack([X[[0, 1, 2]].toarray(), np.full((2, 30), 50.0)])  # two attract nobody
    sk = sk_reference(X, C0)
    for n_blocks in (1, 3, 7):
        km = KMeans(5, init=C0).fit(sparse_blocks(X, -(-X.shape[0] // n_blocks)))
        assert_same_model(km, sk)


def test_predict_transform_score_on_csr_blocks():
    X, Xnew = corpus(seed=6), corpus(n=90, seed=7)
    C0 = X[[0, 1, 2, 3]].toarray()
    sk = sk_reference(X, C0)
    km = KMeans(4, init=C0).fit(X)
    np.testing.assert_array_equal(km.predict(Xnew), sk.predict(Xnew))
    np.testing.assert_allclose(km.transform(Xnew), sk.transform(Xnew), rtol=1e-10)
    np.testing.assert_allclose(km.score(Xnew), sk.score(Xnew), rtol=1e-10)
    w = np.linspace(0.5, 2, Xnew.shape[0])
    np.testing.assert_allclose(km.score(Xnew, sample_weight=w),
                               sk.score(Xnew, sample_weight=w), rtol=1e-10)
    blocks = sparse_blocks(Xnew, 25)
    p, t = km.predict(blocks), km.transform(blocks)
    assert isinstance(p, da.Array) and isinstance(t, da.Array)
    np.testing.assert_array_equal(p.compute(), sk.predict(Xnew))
    np.testing.assert_allclose(t.compute(), sk.transform(Xnew), rtol=1e-10)
    np.testing.assert_allclose(km.score(blocks), sk.score(Xnew), rtol=1e-10)


def test_two_to_the_twenty_columns_without_densifying(monkeypatch):
    """2^20 columns, 2,000 rows: densified, one block of 500 rows would take 4 GiB.

    Every Lloyd kernel call is checked to receive a CSR block, and the traced peak of the
    whole fit (synchronous scheduler: every allocation is made in this process) stays far
    below the size of one densified block.
    """
    d, n, k = 2**20, 2000, 3
    rng = np.random.default_rng(8)
    nnz_row = 8
    cols = (rng.integers(0, 3, size=(n, 1)) * 1000  # three groups of columns: clusters
            + rng.integers(0, 40, size=(n, nnz_row))) * 997 % d
    X = sp.csr_matrix((rng.random(n * nnz_row) + 0.5, cols.ravel(),
                       np.arange(0, n * nnz_row + 1, nnz_row)), shape=(n, d))
    seen = []
    real_lloyd = _lloyd.lloyd_block

    def checked(xa, yb, wb, centres_list, chunk=None):
        seen.append(sp.issparse(xa))
        return real_lloyd(xa, yb, wb, centres_list, chunk)

    monkeypatch.setattr(_lloyd, "lloyd_block", checked)
    dense_block_bytes = 500 * d * 8
    tracemalloc.start()
    try:
        with dask.config.set(scheduler="synchronous"):
            km = KMeans(k, random_state=0, max_iter=10).fit(sparse_blocks(X, 500))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen and all(seen)
    assert peak < dense_block_bytes / 8, peak  # < 512 MiB: the centres and sums are k × d
    assert km.cluster_centers_.shape == (k, d)
    sk = sk_reference(X, km.cluster_centers_)  # a fixed point of Lloyd: sklearn agrees
    np.testing.assert_array_equal(labels_of(km), sk.labels_)
    # the three column groups are the three clusters
    groups = (cols[:, 0] * pow(997, -1, d) % d) // 1000
    assert len({(g, lab) for g, lab in zip(groups, labels_of(km))}) == 3


def test_bad_sparse_input_is_reported_clearly():
    X = corpus(n=60, seed=9)
    bad = X.copy()
    bad.data[5] = np.nan
    with pytest.raises(ValueError, match="contains NaN"):
        KMeans(3).fit(bad)
    with pytest.raises(ValueError, match="contains NaN"):
        KMeans(3).fit(sparse_blocks(bad, 20))
    bad.data[5] = np.inf
    with pytest.raises(ValueError, match="contains infinity"):
        KMeans(3).fit(sparse_blocks(bad, 20))
    km = KMeans(3, random_state=0).fit(X)
    wider = sp.hstack([X, X[:, :1]], format="csr")
    with pytest.raises(ValueError, match="X has 31 features, but KMeans is expecting 30"):
        km.predict(wider)
    with pytest.raises(ValueError, match="X has 31 features, but KMeans is expecting 30"):
        km.transform(sparse_blocks(wider, 20)).compute()
    with pytest.raises(ValueError, match="number of features of the data 30"):
        KMeans(3, init=np.zeros((3, 29))).fit(X)
    with pytest.raises(ValueError, match="X has 60 rows but sample_weight has 59"):
        KMeans(3).fit(sparse_blocks(X, 20), sample_weight=np.ones(59))
    with pytest.raises(TypeError, match="elbow does not accept sparse X"):
        elbow(X, n_clusters=3)
