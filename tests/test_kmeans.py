"""k-means (SPEC §5): distributed Lloyd equals scikit-learn's from the same initial centres."""
from __future__ import annotations

import warnings

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from conftest import QUICK_ON_PROCESS_CLUSTER

from dml.cluster import KMeans
from dml.cluster import _init, _lloyd

TOL = dict(rtol=1e-10, atol=1e-10)


def blobs(n=1500, d=4, centers=5, std=2.5, seed=0, dtype=np.float64):
    X, y = make_blobs(n_samples=n, n_features=d, centers=centers, cluster_std=std,
                      random_state=seed)
    return X.astype(dtype), y


def chunked(X, n_blocks):
    return da.from_array(X, chunks=(-(-len(X) // n_blocks), X.shape[1]))


def sk_reference(X, C0, sample_weight=None, **kw):
    return SkKMeans(len(C0), init=C0, n_init=1, algorithm="lloyd", **kw).fit(
        X, sample_weight=sample_weight)


def assert_same_model(km, sk, labels=None, tol=TOL):
    labels = km.labels_ if labels is None else labels
    np.testing.assert_array_equal(np.asarray(labels), sk.labels_)
    np.testing.assert_allclose(km.cluster_centers_, sk.cluster_centers_, **tol)
    np.testing.assert_allclose(km.inertia_, sk.inertia_, rtol=tol["rtol"])
    assert km.n_iter_ == sk.n_iter_


# ---------------------------------------------------------------------------------------------
# Equality with scikit-learn from the same initial centres
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_blocks", [1, 3, 7])
def test_lloyd_equals_sklearn_on_both_clusters(client, n_blocks):
    X, _ = blobs(seed=1)
    C0 = X[[3, 100, 200, 700, 1400]].copy()
    sk = sk_reference(X, C0)
    km = KMeans(5, init=C0).fit(chunked(X, n_blocks))
    assert isinstance(km.labels_, da.Array)
    assert_same_model(km, sk, km.labels_.compute())
    h = km.inertia_history_
    assert len(h) == km.n_iter_ and np.all(np.diff(h) <= 0)
    # The first entry is the inertia of the initial centres' assignment.
    d0 = ((X[:, None, :] - C0[None]) ** 2).sum(-1).min(1).sum()
    np.testing.assert_allclose(h[0], d0, rtol=1e-10)


def test_lloyd_tasks_are_grouped_by_worker(client):
    from dml._blocks import as_blocks
    from dml.cluster._kmeans import prepare

    X, _ = blobs(n=700, seed=15)
    data = prepare(as_blocks(chunked(X, 7)))
    # One task per worker thread (2 workers × 1 thread), covering every block once, in order.
    assert 1 <= len(data.groups) <= 2
    assert sorted(i for g in data.groups for i in g) == list(range(7))
    assert all(g == sorted(g) for g in data.groups)
    # Without a distributed client: one block per task.
    with dask.config.set(scheduler="threads"):
        assert prepare(as_blocks(chunked(X, 7))).groups == [[i] for i in range(7)]


def test_prepared_blocks_stay_where_the_input_blocks_are(client):
    from dask import delayed
    from distributed import wait

    from dml._blocks import as_blocks
    from dml.cluster._kmeans import prepare

    X, _ = blobs(n=800, seed=16)
    workers = sorted(client.scheduler_info()["workers"])
    pieces = []
    for i in range(8):
        rows = np.ascontiguousarray(X[i * 100:(i + 1) * 100])
        future = client.scatter(rows, workers=[workers[i % 2]])
        pieces.append(da.from_delayed(delayed(future), shape=rows.shape, dtype=rows.dtype))
    Xd = client.persist(da.concatenate(pieces))
    wait(Xd)
    inputs = client.who_has(Xd)
    where = [inputs[key][0] for key in sorted(inputs, key=lambda key: key[1])]
    data = prepare(as_blocks(Xd))
    who = client.who_has(list(data.parts))
    assert [who[p.key][0] for p in data.parts] == where
    assert sorted(data.groups) == sorted([i for i in range(8) if where[i] == w]
                                         for w in set(where))
    C0 = X[:5].copy()
    km = KMeans(5, init=C0).fit(Xd)
    assert_same_model(km, sk_reference(X, C0), km.labels_.compute())


@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_chained_iterations_on_both_clusters(client, monkeypatch):
    check_chained_iterations(monkeypatch, 8)


@pytest.mark.slow
@pytest.mark.parametrize("n_blocks", [1, 64, 256])
def test_chained_iterations_at_many_blocks(inprocess_client, monkeypatch, n_blocks):
    check_chained_iterations(monkeypatch, n_blocks)


def check_chained_iterations(monkeypatch, n_blocks):
    """Lloyd iterations chained on the cluster (several per graph) give the model of one
    scheduler call per iteration and scikit-learn's, whatever the chain length and the block
    count, through empty-cluster relocations and convergence inside a chain."""
    from dml.cluster import _chain

    X, _ = blobs(n=2048, centers=4, seed=21)
    # Two centres far outside the data: empty at the first iteration (relocation mid-chain).
    C0 = np.vstack([X[[0, 500, 1000, 1500]], np.full((2, 4), 1e3) + np.arange(2)[:, None]])
    sk = sk_reference(X, C0, tol=1e-6)
    Xd = chunked(X, n_blocks).persist()
    models = {}
    for length in (1, 3, 32):  # 1: the unchained path
        monkeypatch.setattr(_chain, "ITERS_PER_SUBMIT", length)
        models[length] = KMeans(6, init=C0, tol=1e-6).fit(Xd)
        assert_same_model(models[length], sk, models[length].labels_.compute())
    # Chains of 32 where every link reads all group results itself, or where one update task
    # per iteration reads them for all links (the default beyond ALL_TO_ALL_MAX_GROUPS
    # groups): the same numbers.
    default = _chain.ALL_TO_ALL_MAX_GROUPS
    for threshold in (0, 10**6):
        monkeypatch.setattr(_chain, "ALL_TO_ALL_MAX_GROUPS", threshold)
        models[threshold] = KMeans(6, init=C0, tol=1e-6).fit(Xd)
    monkeypatch.setattr(_chain, "ALL_TO_ALL_MAX_GROUPS", default)
    for length in (3, 32, 0, 10**6):
        np.testing.assert_array_equal(models[length].cluster_centers_,
                                      models[1].cluster_centers_)
        np.testing.assert_array_equal(models[length].inertia_history_,
                                      models[1].inertia_history_)
    # Several runs on the same data advance in one chain: the best of three is the same too.
    runs = {length: KMeans(6, init="random", n_init=3, random_state=3, max_iter=7, tol=0)
            for length in (1, 32)}
    for length, km in runs.items():
        monkeypatch.setattr(_chain, "ITERS_PER_SUBMIT", length)
        km.fit(Xd)
    np.testing.assert_array_equal(runs[32].cluster_centers_, runs[1].cluster_centers_)
    assert runs[32].n_iter_ == runs[1].n_iter_ == 7


def test_progress_and_log_lines_per_iteration(capsys, caplog):
    X, _ = blobs(n=600, seed=22)
    records = []
    km = KMeans(3, random_state=0, n_init=2, progress=records.append).fit(chunked(X, 4))
    assert [r["epoch"] for r in records] == list(range(1, km.n_iter_ + 1))
    assert all(r["unit"] == "iteration" for r in records)
    # The best of the lockstep runs; the kept run ends at the fitted model's last step.
    assert records[-1]["objective"] <= km.inertia_history_[-1]
    with caplog.at_level("INFO", logger="dml.cluster"):
        km = KMeans(3, random_state=0, verbose=1).fit(chunked(X, 4))
    err = capsys.readouterr().err
    # stderr is not a terminal here: one plain line per iteration, no carriage returns.
    lines = [ln for ln in err.splitlines() if ln.startswith("KMeans [")]
    assert len(lines) == km.n_iter_ and "\r" not in err
    assert f"iteration {km.n_iter_}/300" in lines[-1] and "s/iteration" in lines[-1]
    assert sum("KMeans iteration" in r.getMessage() for r in caplog.records) == km.n_iter_
    with pytest.raises(TypeError, match="progress must be"):
        KMeans(3, progress=5).fit(X)


def test_uneven_chunks_weights_and_max_iter():
    X, _ = blobs(n=1100, seed=2)
    w = np.random.default_rng(0).uniform(0.1, 3.0, len(X))
    C0 = X[:5].copy()
    Xd = da.from_array(X, chunks=((500, 1, 99, 300, 200), 4))
    wd = da.from_array(w, chunks=400)  # misaligned with X: realigned by the block layer
    for max_iter in (1, 3, 300):
        sk = sk_reference(X, C0, sample_weight=w, max_iter=max_iter)
        km = KMeans(5, init=C0, max_iter=max_iter).fit(Xd, sample_weight=wd)
        assert_same_model(km, sk, km.labels_.compute())


def test_tolerance_is_relative_to_feature_variance():
    X, _ = blobs(n=1200, std=4.0, seed=3)
    X = X * np.array([1.0, 10.0, 100.0, 0.1]) + 1e4  # far from the origin: centring matters
    C0 = X[10:15].copy()
    for tol in (0.0, 1e-6, 1e-2, 0.5):
        sk = sk_reference(X, C0, tol=tol)
        km = KMeans(5, init=C0, tol=tol).fit(chunked(X, 3))
        assert_same_model(km, sk, km.labels_.compute())


def test_numpy_input_gives_numpy_and_dataframe_columns():
    X, _ = blobs(n=600, seed=4)
    C0 = X[:5].copy()
    sk = sk_reference(X, C0)
    km = KMeans(5, init=C0).fit(X)
    assert isinstance(km.labels_, np.ndarray) and km.labels_.dtype == np.int32
    assert_same_model(km, sk)
    df = pd.DataFrame(X, columns=list("abcd"))
    km2 = KMeans(5, init=C0).fit(dd.from_pandas(df, npartitions=3))
    assert_same_model(km2, sk, km2.labels_.compute())
    assert list(km2.feature_names_in_) == list("abcd")
    assert list(km2.get_feature_names_out()) == [f"kmeans{i}" for i in range(5)]
    # y is ignored, but a column name (the `dml` command's target) stays out of the features.
    framed = dd.from_pandas(df.assign(target=np.arange(600) % 3), npartitions=2)
    km3 = KMeans(5, init=C0).fit(framed, "target")
    assert km3.n_features_in_ == 4
    assert_same_model(km3, sk, km3.labels_.compute())
    np.testing.assert_allclose(km3.score(framed, "target"), -sk.inertia_, rtol=1e-10)


def test_weight_column_of_a_dask_dataframe():
    X, _ = blobs(n=700, seed=5)
    w = np.random.default_rng(1).integers(1, 4, len(X)).astype(float)
    df = pd.DataFrame(X, columns=list("abcd")).assign(w=w)
    C0 = X[:5].copy()
    km = KMeans(5, init=C0).fit(dd.from_pandas(df, npartitions=4), sample_weight="w")
    # Integer weights are the same as repeated rows.
    sk = sk_reference(np.repeat(X, w.astype(int), axis=0), C0)
    np.testing.assert_allclose(km.cluster_centers_, sk.cluster_centers_, **TOL)
    np.testing.assert_allclose(km.inertia_, sk.inertia_, rtol=1e-10)


def test_float32_stays_float32():
    X, _ = blobs(n=1500, std=1.0, seed=6, dtype=np.float32)
    C0 = X[[0, 400, 800, 1000, 1200]].copy()
    sk = sk_reference(X, C0)
    km = KMeans(5, init=C0).fit(chunked(X, 3))
    assert km.cluster_centers_.dtype == np.float32
    assert km.transform(X).dtype == np.float32
    np.testing.assert_array_equal(km.labels_.compute(), sk.labels_)
    np.testing.assert_allclose(km.cluster_centers_, sk.cluster_centers_, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(km.inertia_, sk.inertia_, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Empty clusters
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_far", [1, 2])
def test_empty_cluster_relocation_matches_sklearn(n_far):
    X, _ = blobs(n=900, centers=3, seed=7)
    # Centres far outside the data attract no point in the first iteration.
    C0 = np.vstack([X[[0, 300, 600]], np.full((n_far, 4), 1e3) + np.arange(n_far)[:, None]])
    sk = sk_reference(X, C0)
    for n_blocks in (1, 3, 7):
        km = KMeans(3 + n_far, init=C0).fit(chunked(X, n_blocks))
        assert_same_model(km, sk, km.labels_.compute())
        assert np.all(np.diff(km.inertia_history_) <= 0)


def test_more_clusters_than_distinct_points_warns_like_sklearn():
    X = np.repeat(np.array([[0.0, 0.0], [5.0, 5.0]]), 10, axis=0)
    C0 = np.array([[0.0, 0.0], [5.0, 5.0], [1.0, 1.0]])
    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        km = KMeans(3, init=C0).fit(chunked(X, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = sk_reference(X, C0)
    assert_same_model(km, sk, km.labels_.compute())
    # Every initialisation copes with fewer distinct rows than clusters.
    for init in ("k-means||", "k-means++", "random"):
        with pytest.warns(ConvergenceWarning, match="distinct clusters"):
            km = KMeans(3, init=init, random_state=0).fit(chunked(X, 2))
        assert km.inertia_ == pytest.approx(0.0, abs=1e-20)
        with pytest.warns(ConvergenceWarning, match="distinct clusters"):
            assert KMeans(2, init=init, random_state=0).fit(np.ones((6, 2))).inertia_ == 0


# ---------------------------------------------------------------------------------------------
# predict / transform / score
# ---------------------------------------------------------------------------------------------

def test_predict_transform_score_match_sklearn():
    X, _ = blobs(n=800, seed=8)
    Xnew, _ = blobs(n=300, seed=9)
    C0 = X[:5].copy()
    sk = sk_reference(X, C0)
    km = KMeans(5, init=C0).fit(X)
    np.testing.assert_array_equal(km.predict(Xnew), sk.predict(Xnew))
    np.testing.assert_allclose(km.transform(Xnew), sk.transform(Xnew), rtol=1e-10)
    np.testing.assert_allclose(km.score(Xnew), sk.score(Xnew), rtol=1e-10)
    np.testing.assert_allclose(km.score(X), -sk.inertia_, rtol=1e-10)
    w = np.linspace(0.5, 2, len(Xnew))
    np.testing.assert_allclose(km.score(Xnew, sample_weight=w),
                               sk.score(Xnew, sample_weight=w), rtol=1e-10)
    # Dask in, lazy Dask out.
    p = km.predict(chunked(Xnew, 3))
    t = km.transform(chunked(Xnew, 3))
    assert isinstance(p, da.Array) and isinstance(t, da.Array)
    np.testing.assert_array_equal(p.compute(), sk.predict(Xnew))
    assert t.shape == (300, 5)
    np.testing.assert_allclose(t.compute(), sk.transform(Xnew), rtol=1e-10)
    np.testing.assert_allclose(km.score(chunked(Xnew, 4)), sk.score(Xnew), rtol=1e-10)
    np.testing.assert_array_equal(KMeans(5, init=C0).fit_predict(X), sk.labels_)
    np.testing.assert_allclose(KMeans(5, init=C0).fit_transform(X), sk.transform(X),
                               rtol=1e-10)


def test_sklearn_composition():
    X, _ = blobs(n=400, seed=10)
    km = KMeans(3, init="k-means++", random_state=0)
    assert clone(km).get_params() == km.get_params()
    pipe = make_pipeline(StandardScaler(), KMeans(3, random_state=0)).fit(X)
    assert pipe.predict(X).shape == (400,)


# ---------------------------------------------------------------------------------------------
# Initialisation
# ---------------------------------------------------------------------------------------------

def test_kmeans_parallel_within_one_percent_of_sklearn_best_of_ten():
    X, _ = make_blobs(n_samples=6000, n_features=8, centers=10, cluster_std=1.0, random_state=11)
    best = SkKMeans(10, n_init=10, random_state=0).fit(X).inertia_
    Xd = chunked(X, 4)
    for seed in range(3):
        km = KMeans(10, random_state=seed).fit(Xd)
        assert km.inertia_ <= 1.01 * best, (seed, km.inertia_ / best)
    km = KMeans(10, init="k-means++", random_state=0).fit(Xd)
    assert km.inertia_ <= 1.01 * best


@pytest.mark.parametrize("init", ["k-means||", "k-means++", "random"])
def test_same_seed_same_model_whatever_the_partitioning(init):
    X, _ = blobs(n=1200, centers=6, seed=12)
    fits = [KMeans(6, init=init, random_state=3, n_init=2).fit(chunked(X, nb)) for nb in (1, 3, 7)]
    again = KMeans(6, init=init, random_state=3, n_init=2).fit(chunked(X, 3))
    np.testing.assert_array_equal(again.cluster_centers_, fits[1].cluster_centers_)
    for km in fits[1:]:
        # Row-keyed random choices: the partitioning changes round-off only.
        np.testing.assert_allclose(km.cluster_centers_, fits[0].cluster_centers_, rtol=1e-9)
        np.testing.assert_array_equal(km.labels_.compute(), fits[0].labels_.compute())


def _laid_out(X, order="C", offset=0):
    """A copy of X in the given memory order starting ``offset`` bytes into its buffer."""
    buf = np.zeros(X.nbytes + offset, dtype=np.uint8)
    out = buf[offset:].view(X.dtype).reshape(X.shape, order=order)
    out[...] = X
    return out


def test_same_model_whatever_the_memory_layout_of_the_blocks():
    """The same values in C or Fortran order (a pandas frame's ``to_numpy()``), as a strided
    view, or not aligned (a block read back from a worker's spill file) give the same model
    bit for bit. NumPy's column sums of these differ in the last bits (pairwise down a
    contiguous column, row by row otherwise, in buffered pieces of 8,192 when not aligned); in
    the data mean that once moved a centre by one ulp between an out-of-core and an in-memory
    fit."""
    X, _ = blobs(n=9000, d=3, centers=4, seed=21)  # one block of more than 8,192 rows
    X[:, 1] += 1e4  # a large mean: its rounding shows in the centres
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(X))
    layouts = {"F": _laid_out(X, "F"), "strided": np.repeat(X, 2, axis=0)[::2],
               "unaligned C": _laid_out(X, "C", 3), "unaligned F": _laid_out(X, "F", 3)}
    assert not layouts["unaligned F"].flags.aligned

    def as_is(a):  # a one-block Dask array whose block is ``a`` itself (NumPy input is copied)
        return da.from_delayed(dask.delayed(a), a.shape, a.dtype)

    for sw, moved in ((None, None), (w, _laid_out(w, offset=5))):
        ref = KMeans(4, init="random", n_init=1, max_iter=3, tol=0.0, random_state=0).fit(
            as_is(X), sample_weight=None if sw is None else as_is(sw))
        for name, x in layouts.items():
            km = KMeans(4, init="random", n_init=1, max_iter=3, tol=0.0, random_state=0).fit(
                as_is(x), sample_weight=None if moved is None else as_is(moved))
            np.testing.assert_array_equal(km.cluster_centers_, ref.cluster_centers_,
                                          err_msg=name)
            assert km.inertia_ == ref.inertia_, name


def test_n_init_keeps_the_best_run():
    X, _ = blobs(n=1000, centers=8, std=3.0, seed=13)
    single = [KMeans(8, init="random", n_init=1, random_state=5).fit(X).inertia_]
    several = KMeans(8, init="random", n_init=4, random_state=5).fit(X)
    assert several.inertia_ <= single[0]
    assert KMeans(8, init="random", random_state=5).fit(X).inertia_ <= several.inertia_


def test_random_init_is_a_weighted_sample_without_replacement():
    # Zero-weight rows are never chosen; the k rows are distinct.
    X = np.arange(40, dtype=float).reshape(20, 2)
    w = np.zeros(20)
    w[[2, 5, 7, 11, 13]] = 1.0
    from dml._blocks import as_blocks
    from dml.cluster._kmeans import prepare
    data = prepare(as_blocks(chunked(X, 3), None, w))
    rows = _init.random_init(data.parts, data.offsets, 5, seed=0).compute() + data.mean
    assert sorted(rows[:, 0].astype(int) // 2) == [2, 5, 7, 11, 13]


def test_top_rows_break_ties_by_row_whatever_the_blocks():
    values = np.array([1.0, 3, 3, 2, 3, -np.inf, 5, 3, -np.inf, -np.inf])
    np.testing.assert_array_equal(_lloyd.largest(values, 3), [6, 1, 2])
    np.testing.assert_array_equal(_lloyd.largest(np.full(5, -np.inf), 2), [0, 1])
    for m in range(len(values) + 1):
        whole = _lloyd.largest(values, m)
        for cut in (1, 3, 7):
            # Per-block selections, merged: the same rows as on the whole vector.
            picked = np.concatenate([_lloyd.largest(values[:cut], m),
                                     _lloyd.largest(values[cut:], m) + cut])
            merged = picked[np.lexsort((picked, -values[picked]))][:m]
            np.testing.assert_array_equal(merged, whole)


def test_row_uniforms_do_not_depend_on_the_block():
    u = _init.row_uniforms(123, 0, 1000)
    assert np.all(_init.row_uniforms(123, 250, 100) == u[250:350])
    assert 0.45 < u.mean() < 0.55 and len(np.unique(u)) == 1000


def test_lloyd_kernel_chunking_inertia_and_ties():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3))
    w = rng.uniform(0.5, 2.0, 1000)
    C = X[:4].copy()
    xa, _, _ = _lloyd.prepare_block((X, None, w), np.zeros(3))
    ref = _lloyd.lloyd_block(xa, None, w, [C], chunk=4096)[0]
    d2 = ((X[:, None] - C[None]) ** 2).sum(-1)
    labels = d2.argmin(1)
    np.testing.assert_allclose(ref[:, -1], np.bincount(labels, w, minlength=4), rtol=1e-12)
    np.testing.assert_allclose(ref[:, :3], [(w[labels == j, None] * X[labels == j]).sum(0)
                                            for j in range(4)], rtol=1e-12, atol=1e-12)
    wxsq = float(((X * X).sum(1) * w).sum())
    np.testing.assert_allclose(_lloyd.step_inertia(ref, C, wxsq), (d2.min(1) * w).sum(),
                               rtol=1e-12)
    for chunk in (1, 7, 256):
        got = _lloyd.lloyd_block(xa, None, w, [C], chunk=chunk)[0]
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    # Integer data: distances are exact, so the points halfway between two centres are true
    # ties, which go to the lower index as in scikit-learn.
    X = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.0], [1.0, 1.0], [3.0, 0.0]])
    C = np.array([[2.0, 0.0], [0.0, 0.0], [2.0, 0.0]])
    xa, _, _ = _lloyd.prepare_block((X, None, None), np.zeros(2))
    sums = _lloyd.lloyd_block(xa, None, None, [C])[0]
    np.testing.assert_array_equal(sums[:, -1], [4, 1, 0])
    np.testing.assert_array_equal(_lloyd.assign(X, C), [1, 0, 0, 0, 0])


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------

def test_bad_input_is_reported_clearly():
    X, _ = blobs(n=50, seed=14)
    with pytest.raises(ValueError, match="n_samples=50 should be >= n_clusters=60"):
        KMeans(60).fit(X)
    with pytest.raises(ValueError, match=r"shape of the initial centers \(4, 4\) does not match "
                                         r"the number of clusters 5"):
        KMeans(5, init=X[:4]).fit(X)
    with pytest.raises(ValueError, match="number of features of the data 4"):
        KMeans(5, init=X[:5, :3]).fit(X)
    with pytest.raises(ValueError, match="initial centers contain NaN"):
        KMeans(2, init=np.array([[np.nan] * 4, [0.0] * 4])).fit(X)
    Xn = X.copy()
    Xn[7, 2] = np.nan
    with pytest.raises(ValueError, match="contains NaN"):
        KMeans(3).fit(chunked(Xn, 3))
    with pytest.raises(ValueError, match="contains NaN"):
        KMeans(3).fit(Xn)
    with pytest.raises(ValueError, match=r"The 'init' parameter of KMeans must be a str among .* "
                                         r"or an array-like\. Got 'kmeans' instead"):
        KMeans(3, init="kmeans").fit(X)
    with pytest.raises(TypeError, match=r"The 'init' parameter of KMeans must be a str among .* "
                                        r"or an array-like\. Got <function"):
        KMeans(3, init=lambda X, k, random_state: X[:k]).fit(X)
    with pytest.raises(ValueError, match=r"The 'n_clusters' parameter of KMeans must be an int in "
                                         r"the range \[1, inf\)\. Got 0 instead"):
        KMeans(0).fit(X)
    with pytest.raises(ValueError, match=r"The 'tol' parameter of KMeans must be a float in the "
                                         r"range \[0\.0, inf\)"):
        KMeans(3, tol=-1).fit(X)
    with pytest.raises(ValueError, match=r"The 'n_init' parameter of KMeans must be a str among "
                                         r"\{'auto'\} or an int"):
        KMeans(3, n_init="many").fit(X)
    with pytest.raises(ValueError, match="negative"):
        KMeans(3).fit(X, sample_weight=-np.ones(50))
    with pytest.warns(RuntimeWarning, match="performing only one init"):
        KMeans(3, init=X[:3], n_init=4).fit(X)
    with pytest.raises(NotFittedError):
        KMeans(3).predict(X)
    km = KMeans(3, random_state=0).fit(X)
    with pytest.raises(ValueError, match="X has 3 features, but KMeans is expecting 4"):
        km.predict(X[:, :3])


@pytest.mark.slow  # about 5 s: runs in the full suite only
def test_sklearn_estimator_checks():
    from sklearn.utils.estimator_checks import check_estimator

    # The one check scikit-learn's own KMeans is also expected to fail.
    expected = {"check_sample_weight_equivalence_on_dense_data":
                "sample_weight is not equivalent to removing/repeating samples (as for "
                "scikit-learn's KMeans): the random initialisation sees different rows"}
    expected["check_sample_weight_equivalence_on_sparse_data"] = expected[
        "check_sample_weight_equivalence_on_dense_data"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(KMeans(2, n_init=2, max_iter=5, random_state=0),
                        expected_failed_checks=expected)


@pytest.mark.parametrize("n_blocks", [8, 64, 256])
def test_initialisations_on_groups_of_blocks_equal_the_per_block_graphs(inprocess_client,
                                                                      n_blocks):
    """k-means||, k-means++ and random starts run one task per group of blocks and step on
    held data (:mod:`dml.cluster._init_groups`): the same rows, candidates and weights as the
    per-block graphs, bit for bit, with far fewer tasks (a task per block and step before)."""
    import dask

    from dml._blocks import as_blocks
    from dml.cluster._kmeans import _PartsView, init_graph, prepare

    X, _ = blobs(n=2048, centers=4, seed=11)
    data = prepare(as_blocks(chunked(X, n_blocks)))
    groups = data.init_groups
    assert groups is not None and len(groups) < n_blocks
    per_block = _PartsView(data.parts, data.offsets)
    # At 64 and 256 blocks k-means++ (k sequential steps over every block, the same group code
    # as k-means||'s rounds) is left to the 8-block case (also held in groups): its per-block
    # reference graph cost ~15 s of the suite at 256 blocks, 2 s at 64.
    for method in ("k-means||", "random") if n_blocks >= 64 else ("k-means||", "k-means++",
                                                                     "random"):
        # Two k-means|| rounds: the per-block graphs being compared cost a task per block each.
        grouped = init_graph(data, method, 3, 3, init_rounds=2)
        plain = init_graph(per_block, method, 3, 3, init_rounds=2)
        n_grouped, n_plain = (len(dict(g.__dask_graph__())) for g in (grouped, plain))
        # Tasks per step: the groups' count, not the blocks' (the graphs also hold the blocks
        # or groups themselves, counted differently by dask versions).
        assert n_grouped < (n_plain / 2 if n_blocks >= 64 else n_plain), (method, n_grouped,
                                                                          n_plain)
        got, want = dask.compute(grouped, plain)
        if method == "k-means||":
            for a, b in zip(got, want):  # candidates and their weights
                np.testing.assert_array_equal(a, b, err_msg=method)
            assert len(got[0]) > 3
        else:
            np.testing.assert_array_equal(got, want, err_msg=method)
            assert got.shape == (3, X.shape[1])


@pytest.mark.parametrize("n_blocks", [1, 8, 64, 256])
def test_numpy_input_cut_into_many_blocks_gives_the_dask_model(inprocess_client, monkeypatch,
                                                               n_blocks):
    """Local (NumPy) data cut by dml into 1-256 blocks (the block size shrunk to get them):
    its labels come back with the final statistics as a NumPy array, Dask input's are read
    from the workers; centres, inertia and labels are the same bit for bit."""
    from dml import _blocks

    X, _ = blobs(n=2048, centers=4, seed=3)
    rows = len(X) // n_blocks
    monkeypatch.setattr(_blocks, "BLOCK_BYTES", rows * X.shape[1] * X.itemsize)
    # Random starts: the cheapest initialisation (the starts are not what this test is about;
    # the one above compares them with the per-block graphs).
    kw = dict(init="random", n_init=2, max_iter=4, tol=0, random_state=1)
    local = KMeans(4, **kw).fit(X)
    dask_fit = KMeans(4, **kw).fit(da.from_array(X, chunks=(rows, -1)))
    assert isinstance(local.labels_, np.ndarray)
    np.testing.assert_array_equal(local.cluster_centers_, dask_fit.cluster_centers_)
    assert local.inertia_ == dask_fit.inertia_
    np.testing.assert_array_equal(local.labels_, dask_fit.labels_.compute())
    np.testing.assert_array_equal(local.labels_, local.predict(X))


@pytest.mark.parametrize("n_blocks, n_groups", [(32, 2)])
def test_same_model_with_prepared_blocks_held_in_groups_or_per_block(inprocess_client,
                                                                    monkeypatch, n_blocks,
                                                                    n_groups):
    """The prepared blocks (row norms, casts) held in groups of consecutive blocks, as on a
    small cluster with many blocks (groups of 8 here), or one object per block: the same
    k-means++ and random starts, iterations and labels, bit for bit. (The chained iterations
    at 256 blocks, in groups of 64, are checked against scikit-learn above.)"""
    from dml import _block_groups
    from dml.cluster import _prepared

    X, _ = blobs(n=2048, centers=4, seed=5)
    Xd = chunked(X, n_blocks)
    assert _block_groups.group_size(n_blocks, n_groups) == 8
    fits = []
    for groups in (n_groups, 100_000):
        for module in (_block_groups, _prepared):
            monkeypatch.setattr(module, "default_n_groups", lambda n=groups: n)
        fits.append([KMeans(4, init=init, n_init=1, max_iter=8, tol=0, random_state=7).fit(Xd)
                     for init in ("k-means++", "random")])
    for grouped, per_block in zip(*fits):
        np.testing.assert_array_equal(grouped.cluster_centers_, per_block.cluster_centers_)
        np.testing.assert_array_equal(grouped.inertia_history_, per_block.inertia_history_)
        np.testing.assert_array_equal(grouped.labels_.compute(), per_block.labels_.compute())
