"""dml.neighbors: exact brute-force neighbours equal scikit-learn's ``algorithm="brute"``.

Kernels are checked without a cluster; the estimators on the in-process and multi-process
clusters, on 1, 3, 7 and 64 training partitions, with duplicated rows (ties), k larger than a
block, Dask query sets and the training set itself as the query (``X=None``).
"""
from __future__ import annotations

import pickle

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn import neighbors as skn
from sklearn.metrics import pairwise_distances

import dml
from dml.neighbors import KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors
from dml.neighbors import _knn_kernels as kern

METRICS = [("euclidean", {}), ("sqeuclidean", {}), ("manhattan", {}), ("chebyshev", {}),
           ("cosine", {}), ("minkowski", {"p": 3}), ("minkowski", {"p": 2})]
RNG = np.random.default_rng(0)
# Rows drawn from 25 distinct points: many exact duplicates, so many tied distances.
BASE = RNG.integers(0, 3, size=(25, 4)).astype(np.float64)
X_TIES = BASE[RNG.integers(0, 25, 300)] + 0.0
Q_TIES = BASE[RNG.integers(0, 25, 40)] + 0.0
X = RNG.normal(size=(300, 4))
Q = RNG.normal(size=(40, 4))
Y_CLASS = np.array(["ant", "bee", "cat"], dtype=object)[RNG.integers(0, 3, 300)]
Y_REG = X @ np.array([1.0, -2.0, 0.5, 0.0]) + RNG.normal(size=300)


def _dask(a, n_blocks):
    rows = -(-len(a) // n_blocks)
    return da.from_array(a, chunks=(rows,) + a.shape[1:])


def assert_same_up_to_ties(ind, sk_ind, Xt, Xq, metric, params):
    """Our neighbours and scikit-learn's are the same rows, except that among training rows at
    exactly the same distance scikit-learn may take others: its brute force merges per-thread
    heaps, so its pick depends on its thread count; dml always takes the lowest indices."""
    d = pairwise_distances(Xq, Xt, metric=metric, **params)
    rows = np.arange(len(Xq))[:, None]
    np.testing.assert_array_equal(d[rows, ind], d[rows, sk_ind])
    for r in range(len(Xq)):
        same = np.isin(ind[r], sk_ind[r])
        # where the picks differ, the rows are tied with the k-th neighbour
        assert np.all(d[r, ind[r][~same]] == d[r, ind[r][-1]])


def expected(Xt, Xq, k, metric, params):
    """k smallest (distance, index) pairs from scikit-learn's pairwise distances (the set
    scikit-learn's brute force selects; its cosine path may pick other tied rows)."""
    d = pairwise_distances(Xq, Xt, metric="minkowski" if metric == "minkowski" else metric,
                           **params)
    ind = np.array([np.lexsort((np.arange(len(Xt)), row))[:k] for row in d])
    return ind


# --------------------------------------------------------------------------------------------
# kernels, no cluster
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("metric,params", METRICS)
@pytest.mark.parametrize("splits", [[300], [7, 100, 193], [1, 1, 2, 296]])
def test_search_and_merge_equal_sklearn_for_any_split(metric, params, splits):
    m, p = kern.reduced_metric(metric, float(params.get("p", 2)))
    bounds = np.concatenate([[0], np.cumsum(splits)])
    parts = [kern.search(kern.prepare(Q_TIES, m), [kern.prepare(X_TIES[a:b], m)], [a], 6, m, p)
             for a, b in zip(bounds[:-1], bounds[1:])]
    rdist, ind = kern.merge(parts)
    dist = kern.finalize(rdist, m, p)
    sk = skn.NearestNeighbors(n_neighbors=6, algorithm="brute", metric=metric, **params)
    sd, si = sk.fit(X_TIES).kneighbors(Q_TIES)
    np.testing.assert_allclose(dist, sd, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ind, expected(X_TIES, Q_TIES, 6, metric, params))
    assert_same_up_to_ties(ind, si, X_TIES, Q_TIES, metric, params)


def test_euclidean_values_match_sklearn_to_rounding():
    # Same expanded form, same order of operations: equal up to the BLAS product's rounding.
    d_ours, i_ours = NearestNeighbors(n_neighbors=5).fit(X).kneighbors(Q)
    d_sk, i_sk = skn.NearestNeighbors(n_neighbors=5, algorithm="brute").fit(X).kneighbors(Q)
    np.testing.assert_array_equal(i_ours, i_sk)
    np.testing.assert_allclose(d_ours, d_sk, rtol=1e-13, atol=0)


def test_search_with_fewer_rows_than_k_and_a_row_at_distance_zero():
    rd, ind = kern.search(kern.prepare(X[:2], "euclidean"), [kern.prepare(X[:3], "euclidean")],
                          [10], 5, "euclidean")
    assert ind.shape == (2, 3)
    np.testing.assert_array_equal(ind[:, 0], [10, 11])
    np.testing.assert_array_equal(rd[:, 0], [0.0, 0.0])  # clipped at zero, never negative


# --------------------------------------------------------------------------------------------
# estimators on a cluster
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_blocks", [1, 3, 7, 64])
@pytest.mark.parametrize("metric,params", METRICS)
def test_kneighbors_equal_sklearn(inprocess_client, metric, params, n_blocks):
    nn = NearestNeighbors(n_neighbors=8, metric=metric, **params).fit(_dask(X_TIES, n_blocks))
    dist, ind = nn.kneighbors(Q_TIES)
    sk = skn.NearestNeighbors(n_neighbors=8, algorithm="brute", metric=metric, **params)
    sd, si = sk.fit(X_TIES).kneighbors(Q_TIES)
    np.testing.assert_allclose(dist, sd, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ind, expected(X_TIES, Q_TIES, 8, metric, params))
    assert_same_up_to_ties(ind, si, X_TIES, Q_TIES, metric, params)


@pytest.mark.parametrize("n_blocks", [1, 7, 64])
def test_k_larger_than_a_block_and_dask_queries(client, n_blocks):
    Xt = _dask(X_TIES, n_blocks)  # 64 blocks of 5 rows, k = 12
    nn = NearestNeighbors(n_neighbors=12).fit(Xt)
    dist, ind = nn.kneighbors(_dask(Q_TIES, 3))
    assert isinstance(dist, da.Array) and isinstance(ind, da.Array)
    assert dist.chunks[0] == _dask(Q_TIES, 3).chunks[0]
    dist, ind = da.compute(dist, ind)
    sd, si = skn.NearestNeighbors(n_neighbors=12, algorithm="brute").fit(X_TIES).kneighbors(Q_TIES)
    np.testing.assert_allclose(dist, sd, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ind, expected(X_TIES, Q_TIES, 12, "euclidean", {}))
    assert_same_up_to_ties(ind, si, X_TIES, Q_TIES, "euclidean", {})
    only = nn.kneighbors(Q_TIES, n_neighbors=3, return_distance=False)
    np.testing.assert_array_equal(only, ind[:, :3])


@pytest.mark.parametrize("local,n_blocks", [(True, None), (False, 7), (False, 64)])
def test_training_rows_as_queries_drop_themselves(inprocess_client, local, n_blocks):
    nn = NearestNeighbors(n_neighbors=4).fit(X_TIES if local else _dask(X_TIES, n_blocks))
    dist, ind = nn.kneighbors()
    assert isinstance(ind, np.ndarray) == local
    dist, ind = dask.compute(dist, ind)  # one pass for both (lazy on Dask input)
    sd, si = skn.NearestNeighbors(n_neighbors=4, algorithm="brute").fit(X_TIES).kneighbors()
    np.testing.assert_allclose(np.asarray(dist), sd, atol=1e-12)
    assert_same_up_to_ties(np.asarray(ind), si, X_TIES, X_TIES, "euclidean", {})
    graph = nn.kneighbors_graph(mode="distance")
    ref = skn.NearestNeighbors(n_neighbors=4, algorithm="brute").fit(X_TIES).kneighbors_graph(
        mode="distance")
    np.testing.assert_allclose(graph.toarray(), ref.toarray(), atol=1e-12)


@pytest.mark.parametrize("weights", ["uniform", "distance"])
@pytest.mark.parametrize("n_blocks", [1, 3, 64])
def test_classifier_equals_sklearn(client, weights, n_blocks):
    clf = KNeighborsClassifier(n_neighbors=7, weights=weights).fit(
        _dask(X, n_blocks), _dask(Y_CLASS, n_blocks))
    sk = skn.KNeighborsClassifier(n_neighbors=7, weights=weights, algorithm="brute").fit(
        X, Y_CLASS)
    np.testing.assert_array_equal(clf.classes_, sk.classes_)
    np.testing.assert_array_equal(clf.predict(Q), sk.predict(Q))
    np.testing.assert_allclose(clf.predict_proba(Q), sk.predict_proba(Q), atol=1e-12)
    lazy = clf.predict(_dask(Q, 4))
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), sk.predict(Q))
    y_q = sk.predict(Q)
    assert clf.score(_dask(Q, 4), _dask(y_q, 4)) == pytest.approx(1.0)


@pytest.mark.parametrize("weights", ["uniform", "distance"])
def test_distance_weights_at_distance_zero_follow_sklearn(inprocess_client, weights):
    # Queries equal to (duplicated) training rows: distance weights give those rows all votes.
    y = (X_TIES[:, 0] + X_TIES[:, 1] * 2).astype(int) % 3
    for est, ref in [(KNeighborsClassifier(weights=weights), skn.KNeighborsClassifier),
                     (KNeighborsRegressor(weights=weights), skn.KNeighborsRegressor)]:
        est.fit(_dask(X_TIES, 3), _dask(y, 3))
        sk = ref(weights=weights, algorithm="brute").fit(X_TIES, y)
        np.testing.assert_allclose(est.predict(Q_TIES), sk.predict(Q_TIES), atol=1e-12)
        if hasattr(sk, "predict_proba"):
            np.testing.assert_allclose(est.predict_proba(Q_TIES), sk.predict_proba(Q_TIES),
                                       atol=1e-12)


@pytest.mark.parametrize("weights", ["uniform", "distance"])
@pytest.mark.parametrize("n_blocks", [1, 7, 64])
def test_regressor_equals_sklearn(client, weights, n_blocks):
    reg = KNeighborsRegressor(n_neighbors=6, weights=weights, metric="manhattan").fit(
        _dask(X, n_blocks), _dask(Y_REG, n_blocks))
    sk = skn.KNeighborsRegressor(n_neighbors=6, weights=weights, metric="manhattan",
                                 algorithm="brute").fit(X, Y_REG)
    np.testing.assert_allclose(reg.predict(Q), sk.predict(Q), rtol=1e-12)
    assert reg.score(_dask(Q, 2), _dask(sk.predict(Q), 2)) == pytest.approx(1.0)
    assert reg.score(Q, Y_REG[:40]) == pytest.approx(sk.score(Q, Y_REG[:40]), abs=1e-12)


def test_model_file_and_pickle_carry_the_training_set(inprocess_client, tmp_path):
    clf = KNeighborsClassifier(n_neighbors=3).fit(_dask(X, 7), _dask(Y_CLASS, 7))
    before = clf.predict_proba(Q)
    loaded = dml.load(dml.save(clf, tmp_path / "knn.dml"))
    np.testing.assert_array_equal(loaded._fit_X, X)
    np.testing.assert_array_equal(loaded._fit_y, Y_CLASS)
    np.testing.assert_array_equal(loaded.predict_proba(Q), before)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(clf)).predict_proba(Q), before)


def test_query_errors(inprocess_client):
    nn = NearestNeighbors(n_neighbors=3).fit(_dask(X[:10], 3))
    with pytest.raises(ValueError, match="Expected n_neighbors <= n_samples_fit"):
        nn.kneighbors(Q, n_neighbors=11)
    with pytest.raises(ValueError, match="n_neighbors = 11, n_samples_fit = 10"):
        nn.kneighbors(n_neighbors=10)  # itself excluded: one more is needed
    with pytest.raises(ValueError, match="Expected n_neighbors > 0"):
        nn.kneighbors(Q, n_neighbors=0)
    with pytest.raises(TypeError, match="n_neighbors does not take"):
        nn.kneighbors(Q, n_neighbors=2.5)
    with pytest.raises(ValueError, match="X has 3 features, but NearestNeighbors is expecting 4"):
        nn.kneighbors(Q[:, :3])
    with pytest.raises(ValueError, match="NaN"):
        nn.kneighbors(np.where(Q > 1, np.nan, Q))
    with pytest.raises(ValueError, match="minkowski"):
        NearestNeighbors(p=0.5).fit(X)


def test_blas_threads_are_restored_after_queries(inprocess_client):
    from threadpoolctl import threadpool_info

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    nn = NearestNeighbors(n_neighbors=2).fit(_dask(X, 7))
    for _ in range(3):
        nn.kneighbors(Q)
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert after == before


def test_copies_take_the_training_set_along(inprocess_client):
    import copy

    nn = NearestNeighbors(n_neighbors=2).fit(_dask(X, 3))
    want = nn.kneighbors(Q)[1]
    copied = copy.deepcopy(nn)   # through __getstate__: the rows are gathered once
    np.testing.assert_array_equal(copied._fit_X, X)
    np.testing.assert_array_equal(copied.kneighbors(Q)[1], want)
    local = NearestNeighbors(n_neighbors=2).fit(X)
    pickled = pickle.loads(pickle.dumps(local))
    np.testing.assert_array_equal(pickled.kneighbors(Q)[1], want)


def test_dataframe_input_keeps_feature_names(inprocess_client):
    import pandas as pd

    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    clf = KNeighborsClassifier(n_neighbors=3).fit(frame, Y_CLASS)
    np.testing.assert_array_equal(clf.feature_names_in_, ["a", "b", "c", "d"])
    sk = skn.KNeighborsClassifier(n_neighbors=3, algorithm="brute").fit(frame, Y_CLASS)
    q = pd.DataFrame(Q, columns=frame.columns)
    np.testing.assert_array_equal(clf.predict(q), sk.predict(q))
    with pytest.raises(ValueError, match="feature names"):
        clf.predict(q.rename(columns={"a": "z"}))
