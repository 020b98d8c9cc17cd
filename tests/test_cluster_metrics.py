"""Silhouette (scikit-learn's definition), elbow curve and gap statistic (SPEC §5)."""
from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import silhouette_samples
from sklearn.metrics import silhouette_score as sk_silhouette_score

import dml._graph as graph_module
import dml.cluster._chain as chain_module
import dml.cluster._kmeans as kmeans_module
import dml.cluster._prepared as prepared_module
from dml._blocks import as_blocks, seed_from
from dml.cluster import elbow, gap_statistic
from dml.metrics._cluster import sample_rows, silhouette_score


def blobs(n=400, d=3, centers=4, std=1.5, seed=0):
    return make_blobs(n_samples=n, n_features=d, centers=centers, cluster_std=std,
                      random_state=seed)


def chunked(v, n_blocks):
    size = -(-len(v) // n_blocks)
    return da.from_array(v, chunks=(size,) + v.shape[1:])


# ---------------------------------------------------------------------------------------------
# Silhouette
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_blocks", [1, 3, 7])
def test_silhouette_equals_sklearn_on_both_clusters(client, n_blocks):
    X, y = blobs(seed=1)
    expected = sk_silhouette_score(X, y)
    got = silhouette_score(chunked(X, n_blocks), chunked(y, n_blocks))
    assert got == pytest.approx(expected, rel=1e-10, abs=1e-12)


def test_silhouette_label_forms_and_singletons():
    X, y = blobs(n=150, seed=2)
    y = y.copy()
    y[7] = 9  # a singleton cluster: s = 0 there, as in scikit-learn
    names = np.array(["a", "b", "c", "d", "z"], dtype=object)[np.searchsorted([0, 1, 2, 3, 9], y)]
    expected = sk_silhouette_score(X, names)
    assert silhouette_score(X, names) == pytest.approx(expected, rel=1e-10)
    assert silhouette_score(X, y) == pytest.approx(expected, rel=1e-10)
    # Labels partitioned differently from X are realigned; a dataframe with a label column.
    got = silhouette_score(chunked(X, 4), da.from_array(y, chunks=40))
    assert got == pytest.approx(expected, rel=1e-10)
    df = pd.DataFrame(X, columns=["u", "v", "w"]).assign(label=names)
    got = silhouette_score(dd.from_pandas(df, npartitions=3), "label")
    assert got == pytest.approx(expected, rel=1e-10)
    X32 = X.astype(np.float32)
    assert silhouette_score(chunked(X32, 2), y) == pytest.approx(
        sk_silhouette_score(X32, y), rel=1e-5)


def test_silhouette_on_a_sample_is_exact_for_the_sampled_rows():
    X, y = blobs(n=600, seed=3)
    full = silhouette_samples(X, y)
    for n_blocks in (1, 3, 7):
        blocks = as_blocks(chunked(X, n_blocks), chunked(y, n_blocks))
        rows = sample_rows(blocks, 50, seed_from(4))["row"]
        got = silhouette_score(chunked(X, n_blocks), chunked(y, n_blocks), sample_size=50,
                               random_state=4)
        # The same rows whatever the partitioning (the sample is keyed by row).
        if n_blocks == 1:
            first = rows
        np.testing.assert_array_equal(rows, first)
        assert len(np.unique(rows)) == 50
        assert got == pytest.approx(full[rows].mean(), rel=1e-10)
    assert silhouette_score(X, y, sample_size=600) == pytest.approx(full.mean(), rel=1e-10)
    assert silhouette_score(X, y, sample_size=5000) == pytest.approx(full.mean(), rel=1e-10)


def test_silhouette_bad_input():
    X, y = blobs(n=40, seed=5)
    with pytest.raises(ValueError, match="Number of labels is 1"):
        silhouette_score(X, np.zeros(40, dtype=int))
    with pytest.raises(ValueError, match="Number of labels is 40"):
        silhouette_score(X, np.arange(40))
    with pytest.raises(ValueError, match="only metric='euclidean'"):
        silhouette_score(X, y, metric="cosine")
    with pytest.raises(ValueError, match="sample_size must be a positive integer"):
        silhouette_score(X, y, sample_size=0)
    with pytest.raises(ValueError, match="X has 40 rows but y has 39"):
        silhouette_score(chunked(X, 2), y[:39])
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="contains NaN"):
        silhouette_score(chunked(Xn, 2), y)


# ---------------------------------------------------------------------------------------------
# Elbow and gap statistic
# ---------------------------------------------------------------------------------------------

class CountingCompute:
    """Counts the scheduler calls of the k-means driver (wraps dml's own compute)."""

    def __init__(self, compute):
        self.compute = compute
        self.calls = 0

    def __call__(self, *objs):
        self.calls += 1
        return self.compute(*objs)


def test_elbow_fits_all_k_together(monkeypatch):
    X, _ = blobs(n=800, centers=4, std=1.0, seed=6)
    counter = CountingCompute(kmeans_module.compute)
    # The driver's scheduler calls: in the driver, in its prepared-data module and in the
    # chains' graph builder (LinkedTasks).
    monkeypatch.setattr(kmeans_module, "compute", counter)
    monkeypatch.setattr(prepared_module, "compute", counter)
    monkeypatch.setattr(graph_module, "compute", counter)
    curve = elbow(chunked(X, 3), n_clusters=range(1, 7), random_state=0)
    np.testing.assert_array_equal(curve.n_clusters, np.arange(1, 7))
    # k = 1: the total sum of squares.
    np.testing.assert_allclose(curve.inertia[0], ((X - X.mean(0)) ** 2).sum(), rtol=1e-10)
    for k, inertia in zip(curve.n_clusters, curve.inertia):
        best = SkKMeans(k, n_init=10, random_state=0).fit(X).inertia_
        assert inertia <= 1.05 * best, (k, inertia / best)
    assert np.all(np.diff(curve.inertia[:4]) < 0)
    # One scheduler call per chain of Lloyd iterations for all six models (they share the
    # data), plus the data statistics and the final E-step.
    chains = -(-int(curve.n_iter.max()) // chain_module.ITERS_PER_SUBMIT)
    assert counter.calls == chains + 2


def test_gap_statistic_finds_the_blobs_and_follows_tibshirani():
    X, _ = blobs(n=600, d=2, centers=3, std=0.5, seed=7)
    result = gap_statistic(chunked(X, 3), n_clusters=range(1, 6), n_references=6,
                           random_state=1)
    assert result.best_n_clusters == 3
    np.testing.assert_allclose(result.gap, result.expected_log_w - result.log_w)
    np.testing.assert_allclose(result.log_w, np.log(result.inertia))
    assert result.reference_log_w.shape == (6, 5)
    np.testing.assert_allclose(result.gap_std,
                               result.reference_log_w.std(axis=0) * np.sqrt(1 + 1 / 6))
    again = gap_statistic(chunked(X, 3), n_clusters=range(1, 6), n_references=6,
                          random_state=1)
    np.testing.assert_array_equal(again.gap, result.gap)
    # Uniform data has no cluster structure: the gap picks k = 1.
    U = np.random.default_rng(0).uniform(size=(400, 2))
    assert gap_statistic(U, n_clusters=4, n_references=10, random_state=0).best_n_clusters == 1


def test_selection_bad_input():
    X, _ = blobs(n=30, seed=8)
    with pytest.raises(ValueError, match="n_samples=30 should be >= the largest n_clusters=31"):
        elbow(X, n_clusters=[2, 31])
    with pytest.raises(ValueError, match="increasing without repeats"):
        elbow(X, n_clusters=[3, 2])
    with pytest.raises(TypeError, match="when fitting a range"):
        elbow(X, n_clusters=3, init=X[:3])
