"""dml.datasets: seeded chunked generators, file readers and the shared data loaders."""
from __future__ import annotations

import gzip
import os
import pickle
import re
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import sklearn.datasets as skd
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.naive_bayes import BernoulliNB, MultinomialNB

from dml import _numba
from dml import datasets as ds

GENERATORS = {
    "classification": lambda **kw: ds.make_classification(500, 7, n_informative=3, **kw),
    "regression": lambda **kw: ds.make_regression(500, 6, n_informative=3, noise=1.0, **kw),
    "blobs": lambda **kw: ds.make_blobs(500, 3, centers=4, **kw),
    "counts": lambda **kw: ds.make_counts(500, 8, n_classes=3, **kw),
}


def threaded(*objs):
    return dask.compute(*objs, scheduler="threads")


# ============================================================================================
# Determinism and chunking
# ============================================================================================

@pytest.mark.parametrize("name", GENERATORS)
def test_same_seed_same_data_other_seed_other_data(name):
    make = GENERATORS[name]
    X1, y1 = threaded(*make(random_state=3, chunks=120))
    X2, y2 = threaded(*make(random_state=3, chunks=120))
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    X3, _ = threaded(*make(random_state=4, chunks=120))
    assert not np.array_equal(X1, X3)
    # Same arguments give the same graph keys: the data is a pure function of them.
    assert make(random_state=3, chunks=120)[0].name == make(random_state=3, chunks=120)[0].name


def test_random_state_objects_and_none():
    X1, _ = threaded(*ds.make_blobs(50, random_state=np.random.RandomState(0)))
    X2, _ = threaded(*ds.make_blobs(50, random_state=np.random.RandomState(0)))
    np.testing.assert_array_equal(X1, X2)
    X, y = ds.make_blobs(50, random_state=None, chunks=20)
    # A fresh seed is fixed in the graph: recomputing gives the same numbers.
    np.testing.assert_array_equal(X.compute(), X.compute())


def test_cluster_equals_threaded_scheduler(client):
    """Same numbers on the in-process and multi-process clusters as on the threaded scheduler."""
    made = {name: make(random_state=11, chunks=(100, 37, 250, 113))
            for name, make in GENERATORS.items()}
    on_cluster = dask.compute(made)[0]
    local = dask.compute(made, scheduler="threads")[0]
    for name in GENERATORS:
        np.testing.assert_array_equal(on_cluster[name][0], local[name][0], err_msg=name)
        np.testing.assert_array_equal(on_cluster[name][1], local[name][1], err_msg=name)


@pytest.mark.parametrize("name", GENERATORS)
def test_known_chunks_and_dtypes(name):
    make = GENERATORS[name]
    X, y = make(random_state=0, chunks=200)
    assert X.chunks[0] == (200, 200, 100) and len(X.chunks[1]) == 1
    assert y.chunks[0] == X.chunks[0]
    assert X.dtype == np.float64
    assert y.dtype == (np.float64 if name == "regression" else np.int64)
    Xc, yc = threaded(X, y)
    assert Xc.shape == X.shape and yc.shape == y.shape and Xc.dtype == X.dtype
    X, _ = make(random_state=0, chunks=(50, 0, 450))
    assert X.chunks[0] == (50, 0, 450) and threaded(X)[0].shape == (500, X.shape[1])
    X, _ = make(random_state=0, chunks=None)
    assert X.chunks[0] == (500,)
    X, _ = make(random_state=0, chunks=1000)
    assert X.chunks[0] == (500,)
    X, _ = make(random_state=0, dtype=np.float32)
    assert X.dtype == np.float32 and threaded(X)[0].dtype == np.float32


def test_bad_chunks():
    with pytest.raises(ValueError, match="sum to n_samples=100"):
        ds.make_blobs(100, chunks=(50, 40))
    with pytest.raises(ValueError, match="positive number of rows"):
        ds.make_blobs(100, chunks=0)
    with pytest.raises(TypeError, match="chunks must be"):
        ds.make_blobs(100, chunks="auto")
    X, _ = ds.make_blobs(100, chunks=((60, 40), (2,)))  # Dask's per-dimension form
    assert X.chunks == ((60, 40), (2,))


def test_rechunking_changes_rows_not_the_model():
    """Documented: another chunking gives other rows with the same model and class counts."""
    X1, y1, c1 = ds.make_regression(600, 5, coef=True, random_state=1, chunks=100)
    X2, y2, c2 = ds.make_regression(600, 5, coef=True, random_state=1, chunks=(100, 500))
    np.testing.assert_array_equal(c1, c2)
    a1, a2 = threaded(X1, X2)
    # Chunk i depends on (seed, i, its length) only: equal first chunks, different rest.
    np.testing.assert_array_equal(a1[:100], a2[:100])
    assert not np.array_equal(a1[100:], a2[100:])

    _, yb1, k1 = ds.make_blobs(601, centers=4, random_state=2, chunks=50, return_centers=True)
    _, yb2, k2 = ds.make_blobs(601, centers=4, random_state=2, chunks=(601,),
                               return_centers=True)
    np.testing.assert_array_equal(k1, k2)
    np.testing.assert_array_equal(np.bincount(threaded(yb1)[0]), np.bincount(threaded(yb2)[0]))

    ya, yb = threaded(ds.make_classification(900, 6, flip_y=0, random_state=5, chunks=64)[1],
                      ds.make_classification(900, 6, flip_y=0, random_state=5, chunks=900)[1])
    np.testing.assert_array_equal(np.bincount(ya), np.bincount(yb))


def test_shuffled_chunks_have_random_class_counts():
    # With shuffle=True each chunk is a random slice of the permuted data set, not a stratum.
    y = threaded(ds.make_blobs(4000, centers=2, random_state=0, chunks=200)[1])[0]
    per_chunk = y.reshape(20, 200).sum(axis=1)
    assert per_chunk.min() < 100 < per_chunk.max()
    assert y.sum() == 2000


def test_nothing_materialised_on_the_client():
    """A 1e6-row data set is a small graph: one generation task per chunk, small model."""
    for make in (ds.make_classification, ds.make_regression, ds.make_blobs, ds.make_counts):
        X, y = make(1_000_000, 20, random_state=0, chunks=50_000)
        graph = dict(X.__dask_graph__())
        assert len(pickle.dumps(graph)) < 20_000, make.__name__
        assert len(pickle.dumps(dict(y.__dask_graph__()))) < 20_000, make.__name__
        gen = [k for k in graph if isinstance(k, tuple) and k[0].startswith(
            f"{make.__name__}-") and not k[0].startswith((f"{make.__name__}-X-",))]
        assert len(gen) == X.numblocks[0] == 20
        # The generation tasks, one getitem per chunk and the shared model: nothing else.
        assert len(graph) == 2 * X.numblocks[0] + 1
        # Sums of X computed in tasks; only the per-chunk sums travel.
        assert np.isfinite(threaded(X[:100_000].sum())[0])


# ============================================================================================
# make_classification vs scikit-learn
# ============================================================================================

@pytest.mark.parametrize("kw", [
    dict(),
    dict(n_classes=3, n_informative=4, weights=[0.5, 0.2]),
    dict(n_classes=4, n_clusters_per_class=1, n_informative=3, weights=[0.1, 0.2, 0.3, 0.4]),
])
def test_classification_labels_equal_sklearn_without_shuffle(kw):
    """Cluster sizes and layout are scikit-learn's, so unshuffled labels agree exactly."""
    ours = threaded(ds.make_classification(1003, 10, flip_y=0, shuffle=False, random_state=0,
                                           chunks=(300, 300, 403), **kw)[1])[0]
    _, ref = skd.make_classification(1003, 10, flip_y=0, shuffle=False, random_state=0, **kw)
    np.testing.assert_array_equal(ours, ref)
    shuffled = threaded(ds.make_classification(1003, 10, flip_y=0, random_state=0, chunks=100,
                                               **kw)[1])[0]
    np.testing.assert_array_equal(np.bincount(shuffled), np.bincount(ref))
    assert not np.array_equal(shuffled, ref)


def test_classification_accuracy_like_sklearn():
    """Informative features separate the classes as much as in scikit-learn's generator.

    The difficulty of a make_classification problem varies a lot with the seed (random
    covariances, accuracies from 0.6 to 0.99), so compare the mean accuracy over seeds: over
    hundreds of seeds the two generators agree to within 0.01.
    """
    def accuracy(X, y):
        return LogisticRegression().fit(X[::2], y[::2]).score(X[1::2], y[1::2])

    seeds = range(24)
    ours = threaded(*[ds.make_classification(600, random_state=s, chunks=250) for s in seeds])
    ours = [accuracy(X, y) for X, y in ours]
    ref = [accuracy(*skd.make_classification(600, random_state=s)) for s in seeds]
    assert abs(np.mean(ours) - np.mean(ref)) < 0.04, (np.mean(ours), np.mean(ref))
    assert np.mean(ours) > 0.85


def test_classification_feature_structure():
    ni, nr, nrep, n_features = 3, 2, 2, 10
    X, y = threaded(*ds.make_classification(
        400, n_features, n_informative=ni, n_redundant=nr, n_repeated=nrep, shuffle=False,
        random_state=0, chunks=150))
    inf = X[:, :ni]
    # Redundant features are linear combinations of the informative ones.
    coef, *_ = np.linalg.lstsq(inf, X[:, ni:ni + nr], rcond=None)
    np.testing.assert_allclose(inf @ coef, X[:, ni:ni + nr], atol=1e-8)
    # Repeated features are copies of earlier columns.
    for j in range(ni + nr, ni + nr + nrep):
        assert any(np.array_equal(X[:, j], X[:, k]) for k in range(ni + nr))
    # The rest is independent noise: full rank n_informative + n_random.
    assert np.linalg.matrix_rank(X) == n_features - nr - nrep
    # Informative features separate the classes, the noise features do not.
    assert LogisticRegression().fit(inf, y).score(inf, y) > 0.75
    noise = X[:, ni + nr + nrep:]
    assert LogisticRegression().fit(noise, y).score(noise, y) < 0.65


def test_classification_flip_shift_scale():
    kw = dict(n_samples=2000, n_features=5, shuffle=False, random_state=4, chunks=700)
    X0, y0 = threaded(*ds.make_classification(flip_y=0.0, **kw))
    X1, y1 = threaded(*ds.make_classification(flip_y=0.3, **kw))
    np.testing.assert_array_equal(X0, X1)
    # A flipped label is redrawn uniformly: it changes with probability 1/2 for 2 classes.
    assert 0.12 < np.mean(y0 != y1) < 0.18
    shift, scale = np.arange(5.0), np.arange(1.0, 6.0)
    X2, y2 = threaded(*ds.make_classification(flip_y=0.0, shift=shift, scale=scale, **kw))
    np.testing.assert_allclose(X2, (X0 + shift) * scale)
    np.testing.assert_array_equal(y2, y0)
    X3, _ = threaded(*ds.make_classification(shift=None, scale=None, hypercube=False, **kw))
    assert np.all(np.isfinite(X3)) and X3.std(axis=0).max() > 5  # scales in [1, 101]


def test_classification_many_informative_and_dtype():
    X, y = threaded(*ds.make_classification(200, 40, n_informative=35, n_redundant=0,
                                            n_classes=5, random_state=0, chunks=64,
                                            dtype=np.float32))
    assert X.dtype == np.float32 and set(np.unique(y)) <= set(range(5))


@pytest.mark.parametrize("kw, match", [
    (dict(n_informative=15, n_redundant=6), "exceeds n_features"),
    (dict(n_informative=1, n_classes=3), r"must be smaller or equal 2\*\*n_informative"),
    (dict(weights=[0.2, 0.3, 0.5]), "weights has 3 entries"),
    (dict(weights=[0.8, 0.7]), "summing to at most 1"),
    (dict(flip_y=1.5), r"flip_y must be in \[0, 1\]"),
    (dict(class_sep=0), r"The 'class_sep' parameter of make_classification must be a float in "
                        r"the range \(0\.0, inf\)\. Got 0 instead"),
    (dict(shift=[1.0, 2.0]), "shift must be a number or an array of length"),
])
def test_classification_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        ds.make_classification(100, 20, **kw)


def test_classification_type_errors():
    with pytest.raises(TypeError, match=r"The 'n_samples' parameter of make_classification must be "
                                        r"an int in the range \[1, inf\)\. Got 100\.0 instead"):
        ds.make_classification(100.0)
    with pytest.raises(TypeError, match="random_state"):
        ds.make_classification(100, random_state="0")


# ============================================================================================
# make_regression
# ============================================================================================

def test_regression_model_and_noise():
    X, y, coef = ds.make_regression(3000, 8, n_informative=3, bias=2.5, noise=0.5, coef=True,
                                    random_state=0, chunks=1000)
    assert isinstance(coef, np.ndarray) and coef.shape == (8,)
    assert (coef != 0).sum() == 3 and coef.min() >= 0 and coef.max() < 100
    Xc, yc = threaded(X, y)
    resid = yc - Xc @ coef - 2.5
    assert abs(resid.std() - 0.5) < 0.03 and abs(resid.mean()) < 0.05
    np.testing.assert_allclose(Xc.mean(0), 0, atol=0.08)
    np.testing.assert_allclose(Xc.std(0), 1, atol=0.05)
    fit = LinearRegression().fit(Xc, yc)
    np.testing.assert_allclose(fit.coef_, coef, atol=0.05)
    assert abs(fit.intercept_ - 2.5) < 0.05


def test_regression_like_sklearn():
    """Same law as scikit-learn: var(y) = |coef|^2 + noise^2 with coef ~ 100 U(0, 1)."""
    ours = [threaded(ds.make_regression(500, 10, n_informative=4, noise=3.0, random_state=s,
                                        chunks=200)[1])[0].var() for s in range(20)]
    ref = [skd.make_regression(500, 10, n_informative=4, noise=3.0, random_state=s)[1].var()
           for s in range(20)]
    assert 0.6 < np.mean(ours) / np.mean(ref) < 1.6
    _, _, c = ds.make_regression(50, 10, n_informative=4, shuffle=False, coef=True,
                                 random_state=0)
    assert np.all(c[:4] > 0) and np.all(c[4:] == 0)


def test_regression_multi_target_and_errors():
    X, y, coef = ds.make_regression(300, 5, n_informative=2, n_targets=3, coef=True,
                                    random_state=0, chunks=100)
    assert y.shape == (300, 3) and y.chunks == ((100, 100, 100), (3,)) and coef.shape == (5, 3)
    Xc, yc = threaded(X, y)
    np.testing.assert_allclose(yc, Xc @ coef, atol=1e-9)
    with pytest.raises(NotImplementedError, match="effective_rank.*not supported"):
        ds.make_regression(100, 5, effective_rank=2)
    with pytest.raises(ValueError, match=r"The 'noise' parameter of make_regression must be a "
                                         r"float in the range \[0\.0, inf\)"):
        ds.make_regression(100, 5, noise=-1)


# ============================================================================================
# make_blobs
# ============================================================================================

def test_blobs_like_sklearn():
    _, ref = skd.make_blobs(1001, 2, centers=3, shuffle=False, random_state=0)
    X, y, centers = ds.make_blobs(1001, 2, centers=3, shuffle=False, random_state=0,
                                  return_centers=True, chunks=300)
    Xc, yc = threaded(X, y)
    np.testing.assert_array_equal(yc, ref)
    assert np.all((centers >= -10) & (centers <= 10))
    for k in range(3):
        np.testing.assert_allclose(Xc[yc == k].mean(0), centers[k], atol=0.15)
        np.testing.assert_allclose(Xc[yc == k].std(0), 1.0, atol=0.1)


def test_blobs_given_centers_and_std():
    centers = np.array([[0.0, 0.0, 0.0], [50.0, 0.0, 0.0]])
    X, y = ds.make_blobs(2000, n_features=99, centers=centers, cluster_std=[0.5, 3.0],
                         random_state=1, chunks=333)
    assert X.shape == (2000, 3)
    Xc, yc = threaded(X, y)
    np.testing.assert_array_equal(np.bincount(yc), [1000, 1000])
    np.testing.assert_allclose(Xc[yc == 0].std(0), 0.5, rtol=0.1)
    np.testing.assert_allclose(Xc[yc == 1].std(0), 3.0, rtol=0.1)
    np.testing.assert_allclose(Xc[yc == 1].mean(0), centers[1], atol=0.4)


def test_blobs_errors():
    with pytest.raises(TypeError, match="integer n_samples only"):
        ds.make_blobs([10, 20])
    with pytest.raises(ValueError, match="one entry per centre"):
        ds.make_blobs(10, centers=3, cluster_std=[1.0, 2.0])
    with pytest.raises(ValueError, match="center_box"):
        ds.make_blobs(10, center_box=(1.0, -1.0))


# ============================================================================================
# make_counts
# ============================================================================================

def test_counts_for_naive_bayes():
    X, y, rates = ds.make_counts(3000, 30, n_classes=3, random_state=0, chunks=700,
                                 return_rates=True)
    Xc, yc = threaded(X, y)
    assert Xc.min() >= 0 and np.array_equal(Xc, np.round(Xc))
    np.testing.assert_array_equal(np.bincount(yc), [1000, 1000, 1000])
    means = np.array([Xc[yc == c].mean(0) for c in range(3)])
    assert np.all(np.abs(means - rates) <= 0.1 + 0.1 * rates)
    for model, floor in ((MultinomialNB(), 0.9), (BernoulliNB(), 0.85)):
        assert model.fit(Xc[:1500], yc[:1500]).score(Xc[1500:], yc[1500:]) > floor
    X, _ = ds.make_counts(10, 4, random_state=0, dtype=np.int32)
    assert threaded(X)[0].dtype == np.int32


# ============================================================================================
# Readers
# ============================================================================================

@pytest.fixture
def csv_dir(tmp_path):
    pd.DataFrame({"a": [1, 2, 3], "b": [0.5, 1.5, 2.5]}).to_csv(tmp_path / "p1.csv", index=False)
    pd.DataFrame({"a": [4, 5], "b": [3.5, 4.5]}).to_csv(tmp_path / "p2.csv", index=False)
    return tmp_path


def test_read_csv_file_glob_and_list(csv_dir):
    one = ds.read_csv(csv_dir / "p1.csv")
    assert isinstance(one, dd.DataFrame) and len(one) == 3
    many = ds.read_csv(str(csv_dir / "p*.csv"))
    assert many.npartitions == 2 and many["a"].sum().compute() == 15
    listed = ds.read_csv([csv_dir / "p1.csv", csv_dir / "p2.csv"], usecols=["a"])
    assert list(listed.columns) == ["a"] and len(listed) == 5
    with gzip.open(csv_dir / "z.csv.gz", "wt") as fh:
        fh.write("a,b\n9,9.5\n")
    assert ds.read_csv(csv_dir / "z.csv.gz")["a"].sum().compute() == 9


def test_readers_missing_paths(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(FileNotFoundError, match="no such file.*nope.csv"):
        ds.read_csv(missing)
    with pytest.raises(FileNotFoundError, match=r"no file matches the pattern.*\*\.csv"):
        ds.read_csv(tmp_path / "*.csv")
    with pytest.raises(FileNotFoundError, match="nope.parquet"):
        ds.read_parquet(tmp_path / "nope.parquet")
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        ds.read_table(missing)
    with pytest.raises(FileNotFoundError, match="nothing_here"):
        ds.read_table(tmp_path / "nothing_here")


def test_read_parquet_file_dir_glob(tmp_path):
    d = tmp_path / "ds"
    d.mkdir()
    pd.DataFrame({"x": [1.0, 2.0]}).to_parquet(d / "part-0.parquet")
    pd.DataFrame({"x": [3.0]}).to_parquet(d / "part-1.parquet")
    assert ds.read_parquet(d / "part-0.parquet")["x"].sum().compute() == 3.0
    assert len(ds.read_parquet(d)) == 3
    assert ds.read_parquet(str(d / "part-*.parquet"))["x"].sum().compute() == 6.0
    assert len(ds.read_table(d)) == 3
    assert len(ds.read_table(d / "part-1.parquet")) == 1


def test_read_table_by_extension(csv_dir):
    assert len(ds.read_table(csv_dir / "p1.csv")) == 3
    assert len(ds.read_table(str(csv_dir / "*.csv"))) == 5
    (csv_dir / "t.tsv").write_text("a\tb\n1\t2\n")
    assert list(ds.read_table(csv_dir / "t.tsv").columns) == ["a", "b"]
    (csv_dir / "t.json").write_text("{}")
    with pytest.raises(ValueError, match="cannot tell the format"):
        ds.read_table(csv_dir / "t.json")


# ============================================================================================
# Shared data and loaders
# ============================================================================================

def test_data_dir_argument_then_env_then_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("DML_DATA", str(tmp_path / "from-env"))
    assert ds.DATA_DIR_ENV == "DML_DATA"
    assert ds.data_dir() == tmp_path / "from-env"
    assert ds.data_dir(tmp_path / "given") == tmp_path / "given"
    assert ds.data_dir("~/x") == Path.home() / "x"
    monkeypatch.delenv("DML_DATA")
    # The default is dml's user cache directory, the one its numba kernels use too.
    monkeypatch.setenv("DML_CACHE_DIR", str(tmp_path / "cache"))
    assert ds.data_dir() == tmp_path / "cache" / "data"
    assert _numba._configured_dir() == tmp_path / "cache" / "numba"
    monkeypatch.delenv("DML_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ds.data_dir() == tmp_path / "xdg" / "dml" / "data"
    # Never relative to the package's own files (after an install: site-packages).
    assert Path(ds.__file__).resolve().parents[1] not in ds.data_dir().parents
    with pytest.raises(TypeError, match="data_home must be a path"):
        ds.data_dir(3)


def _copy(src: Path, home: Path, name: str) -> Path:
    dest = home / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes((src / name).read_bytes())
    return dest


def test_load_movielens(dml_data):
    ml = ds.load_movielens(npartitions=3)  # found through $DML_DATA (the dml_data fixture)
    r = ml.ratings
    assert r.npartitions == 3
    assert r.dtypes.to_dict() == {"userId": np.dtype("int64"), "movieId": np.dtype("int64"),
                                  "rating": np.dtype("float64"),
                                  "timestamp": np.dtype("int64")}
    n, lo, hi, users = dask.compute(r.shape[0], r.rating.min(), r.rating.max(),
                                    r.userId.nunique(), scheduler="threads")
    assert (n, lo, hi, users) == (100_836, 0.5, 5.0, 610)
    assert isinstance(ml.movies, pd.DataFrame) and ml.movies.shape == (9742, 3)
    assert "Harper" in ml.DESCR
    assert len(ds.load_movielens(dml_data / "movielens-small")["ratings"]) == 100_836


def test_load_adult(dml_data):
    df = ds.load_adult(npartitions=4)
    assert df.npartitions == 4 and list(df.columns) == ds.ADULT_COLUMNS
    local = df.compute(scheduler="threads")
    assert len(local) == 30_162
    for c in ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hr_per_week"):
        assert local[c].dtype == np.int64
    for c in ("type_employer", "education", "marital", "occupation", "relationship", "race",
              "sex", "country", "income"):
        assert isinstance(df[c].dtype, pd.CategoricalDtype) and df[c].cat.known
        cats = list(df[c].cat.categories)
        assert cats == [s.strip() for s in cats] and local[c].notna().all()
    assert list(df.income.cat.categories) == ["<=50K", ">50K"]
    assert list(df.sex.cat.categories) == ["Female", "Male"]
    assert abs((local.income == ">50K").mean() - 0.249) < 0.01
    assert len(ds.load_adult(dml_data / "adult" / "adult.csv")) == 30_162


def test_load_adult_arrays_on_cluster(process_client, dml_data):
    """Workers (separate processes, without $DML_DATA) read the file and convert the
    partitions: the client resolves the data home to a path."""
    X, y = ds.load_adult(as_frame=False, npartitions=2)
    assert X.shape == (30_162, 14) and y.shape == (30_162,) and len(X.chunks[0]) == 2
    Xc, yc = dask.compute(X, y)
    assert Xc.dtype == np.float64 and not np.isnan(Xc).any()
    assert set(np.unique(yc)) == {0, 1} and abs(yc.mean() - 0.249) < 0.01
    assert Xc[:, ds.ADULT_COLUMNS.index("sex")].max() == 1


def test_loaders_read_a_copy_in_data_home(real_data, tmp_path, monkeypatch):
    monkeypatch.delenv("DML_DATA", raising=False)
    home = tmp_path / "home"
    _copy(real_data, home, "adult/adult.csv")
    _copy(real_data, home, "movielens-small/ratings.csv")
    assert len(ds.load_adult(data_home=home)) == 30_162
    ml = ds.load_movielens(data_home=home)  # movies.csv and README.txt are optional
    assert len(ml.ratings) == 100_836 and ml.movies is None and ml.DESCR == ""
    # $DML_DATA is honoured, and data_home= wins over it.
    monkeypatch.setenv("DML_DATA", str(home))
    assert len(ds.load_adult()) == 30_162
    monkeypatch.setenv("DML_DATA", str(tmp_path / "elsewhere"))
    assert len(ds.load_adult(data_home=home)) == 30_162
    with pytest.raises(FileNotFoundError, match="elsewhere"):
        ds.load_adult()


def test_missing_file_names_the_path_and_the_source(tmp_path, monkeypatch):
    monkeypatch.delenv("DML_DATA", raising=False)
    home = tmp_path / "home"
    with pytest.raises(FileNotFoundError) as err:
        ds.load_movielens(data_home=home)
    msg = str(err.value)
    assert str(home / "movielens-small" / "ratings.csv") in msg
    assert "https://files.grouplens.org/datasets/movielens/ml-latest-small.zip" in msg
    assert "data_home=" in msg and "never downloads" in msg
    with pytest.raises(FileNotFoundError) as err:
        ds.load_adult(data_home=home)
    msg = str(err.value)
    assert str(home / "adult" / "adult.csv") in msg and "archive.ics.uci.edu" in msg
    # The message says how the data home was chosen: $DML_DATA, or the default.
    monkeypatch.setenv("DML_DATA", str(home))
    with pytest.raises(FileNotFoundError, match=re.escape(f"from $DML_DATA={home})")):
        ds.load_adult()
    monkeypatch.delenv("DML_DATA")
    monkeypatch.setenv("DML_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError) as err:
        ds.load_adult()
    assert str(tmp_path / "cache" / "data" / "adult" / "adult.csv") in str(err.value)
    assert "$DML_DATA is not set" in str(err.value)


def test_file_with_another_checksum_is_refused(tmp_path):
    home = tmp_path / "home"
    (home / "adult").mkdir(parents=True)
    (home / "adult" / "adult.csv").write_text(",".join(ds.ADULT_COLUMNS) + "\n")
    with pytest.raises(ValueError, match=r"adult.csv is not the expected adult/adult.csv: its "
                                         r"SHA-256 is [0-9a-f]{64}, expected 23959c20"):
        ds.load_adult(data_home=home)
    # path= reads a file of your own as is.
    assert len(ds.load_adult(home / "adult")) == 0


def test_one_changed_byte_is_refused(real_data, tmp_path):
    home = tmp_path / "home"
    for name in ("adult/adult.csv", "movielens-small/ratings.csv",
                 "movielens-small/movies.csv"):
        _copy(real_data, home, name)
    adult = home / "adult" / "adult.csv"
    data = bytearray(adult.read_bytes())
    at = data.index(b"\n45,") + 1
    data[at] = ord("5")  # one age, 45 -> 55: still a well-formed file
    adult.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256.*damaged, truncated or from another release"):
        ds.load_adult(data_home=home)
    assert len(ds.load_adult(adult)) == 30_162  # as a file of your own: no check
    # An optional file of the data home is checked too when present.
    movies = home / "movielens-small" / "movies.csv"
    movies.write_bytes(movies.read_bytes()[:-1])
    with pytest.raises(ValueError, match="movies.csv: its SHA-256"):
        ds.load_movielens(data_home=home)


def test_loader_arguments(tmp_path):
    with pytest.raises(ValueError, match="not both"):
        ds.load_adult(tmp_path, data_home=tmp_path)
    with pytest.raises(ValueError, match="not both"):
        ds.load_movielens(tmp_path, data_home=tmp_path)
    with pytest.raises(TypeError, match="path must be a file or directory"):
        ds.load_adult(42)


_RUN_DOCTESTS = """
import doctest, importlib, pkgutil, sys
import dml.datasets as ds
assert not ds.__file__.startswith(sys.argv[1]), ds.__file__
names = ["dml.datasets"] + ["dml.datasets." + m.name
                            for m in pkgutil.iter_modules(getattr(ds, "__path__", []))]
flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
failed = attempted = 0
for name in names:
    result = doctest.testmod(importlib.import_module(name), optionflags=flags)
    failed, attempted = failed + result.failed, attempted + result.attempted
print(attempted, failed)
sys.exit(failed != 0 or attempted < 30)
"""


@pytest.mark.slow
def test_doctests_run_on_an_installed_copy_without_the_data(tmp_path):
    """The examples of dml.datasets pass with the package installed elsewhere (nothing beside
    it) and no data home: none of them needs a file outside the repository."""
    import shutil
    import subprocess
    import sys

    site = tmp_path / "site-packages"
    shutil.copytree(Path(ds.__file__).resolve().parents[1], site / "dml",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DML_", "XDG_"))}
    env.update(PYTHONPATH=str(site), HOME=str(tmp_path / "home"),
               DML_CACHE_DIR=str(tmp_path / "cache"))
    repo = str(Path(ds.__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", _RUN_DOCTESTS, repo], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def test_load_adult_original_uci_layout(tmp_path):
    """No header, ', ' separators, '?' for missing, '<=50K.' labels (the UCI files)."""
    lines = ["39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, "
             "White, Male, 2174, 0, 40, United-States, <=50K.",
             "50, ?, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, "
             "White, Male, 0, 0, 13, United-States, >50K."]
    (tmp_path / "adult.csv").write_text("\n".join(lines) + "\n")
    df = ds.load_adult(tmp_path).compute(scheduler="threads")
    assert list(df.income) == ["<=50K", ">50K"]
    assert df.type_employer.iloc[0] == "State-gov" and pd.isna(df.type_employer.iloc[1])
    assert list(df.type_employer.cat.categories) == ["State-gov"]


def test_loader_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="ratings.csv.*never downloads"):
        ds.load_movielens(tmp_path / "ml")
    with pytest.raises(FileNotFoundError, match="adult.csv.*never downloads"):
        ds.load_adult(tmp_path)
    (tmp_path / "adult.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="does not look like the Adult data"):
        ds.load_adult(tmp_path)
    (tmp_path / "adult.csv").write_text(",".join(ds.ADULT_COLUMNS) + "\n"
                                        + "1,a,2,b,3,c,d,e,f,g,4,5,6,h,maybe\n")
    with pytest.raises(ValueError, match=r"income column .* labels \['maybe'\]"):
        ds.load_adult(tmp_path)


def test_load_adult_finds_categories_without_a_shuffle(inprocess_client, dml_data, caplog):
    """The distinct values come from a tree reduction, not a P2P shuffle per column (whose
    scheduler warnings would flood a notebook's output)."""
    with caplog.at_level("WARNING", logger="distributed.shuffle"):
        df = ds.load_adult(npartitions=4)
    assert list(df.sex.cat.categories) == ["Female", "Male"]
    assert not [r for r in caplog.records if "Shuffle" in r.getMessage()]


def test_make_ratings_converts_to_arrays_on_a_cluster(inprocess_client):
    """The generated frame's columns become Dask arrays on a distributed cluster.

    Regression: built with ``from_delayed(verify_meta=False)``, the frame's alias tasks made
    ``to_dask_array()`` fail with "lost dependencies" on a distributed scheduler."""
    ratings = ds.make_ratings(n_users=50, n_items=40, n_ratings=500, npartitions=2,
                              random_state=0)
    values = ratings["rating"].to_dask_array(lengths=True)
    assert values.chunks[0] == (250, 250)
    np.testing.assert_array_equal(values.compute(), ratings["rating"].compute().to_numpy())


def test_read_csv_warns_about_a_numeric_column_with_a_stray_string(tmp_path):
    """One "n/a?" among numbers makes the column text (a model would one-hot every number):
    read_csv names the column, the value and its line; clean or categorical columns are quiet."""
    import warnings

    from dml.datasets import read_csv

    rows = [f"{i},{i * 0.5},{'abc'[i % 3]}" for i in range(50)]
    # Within the rows Dask infers the dtypes from (a stray value further down fails at compute
    # with Dask's own "Mismatched dtypes" message instead).
    rows[3] = "3,n/a?,a"
    (tmp_path / "spoiled.csv").write_text("id,amount,kind\n" + "\n".join(rows) + "\n")
    with pytest.warns(UserWarning, match=r"column 'amount'.*'n/a\?'.*row 3.*line 5") as rec:
        df = read_csv(tmp_path / "spoiled.csv")
    assert len(rec) == 1, [str(w.message) for w in rec]
    assert "na_values=['n/a?']" in str(rec[0].message)
    fixed = read_csv(tmp_path / "spoiled.csv", na_values=["n/a?"])
    assert fixed["amount"].dtype.kind == "f" and int(fixed["amount"].isna().sum().compute()) == 1
    assert len(df) == 50
    (tmp_path / "clean.csv").write_text("id,kind\n" + "\n".join(f"{i},{'abc'[i % 3]}"
                                                                for i in range(50)) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_csv(tmp_path / "clean.csv")
