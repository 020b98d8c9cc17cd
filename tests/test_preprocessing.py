"""dml.preprocessing against scikit-learn: scalers and one-hot encoding, fitted in one pass."""
from collections import Counter

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import sklearn.preprocessing as skp
from dask import delayed
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline

from dml.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler

RTOL = 1e-10
# Transformed outputs are of unit scale; near the mean, x - mean_ cancels and a 1-ulp difference
# in mean_ shows as ~1e-14 absolute, so outputs also get a tiny absolute tolerance.
OUT_TOL = dict(rtol=RTOL, atol=1e-12)
# 1 block, 3 blocks, 7 uneven blocks (one of a single row)
PARTITIONINGS = [(120,), (40, 40, 40), (1, 30, 7, 22, 40, 5, 15)]


def _data(seed=0, n=120):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)) * [1.0, 10.0, 1e-3, 100.0, 2.0] + [0.0, -3.0, 5.0, 1e4, 0.0]
    X[:, 4] = 3.0  # constant feature
    X[[2, 50, 51], 1] = np.nan  # NaN is ignored in fit and kept in transform
    X[70, 3] = np.nan
    return X


def _assert_attrs(est, ref, attrs):
    for a in attrs:
        got, want = getattr(est, a), getattr(ref, a)
        if want is None:
            assert got is None, a
            continue
        # atol: a constant feature's variance is 0 here and ~1e-45 in scikit-learn
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-30, err_msg=a)
        assert np.shape(got) == np.shape(want), a
        assert np.asarray(got).dtype == np.asarray(want).dtype, (a, np.asarray(got).dtype)


def _counting_array(X, chunks):
    """A Dask array whose blocks come from a function that counts its calls."""
    calls = Counter()

    def make(i, lo, hi):
        calls[i] += 1
        return X[lo:hi]

    pieces, lo = [], 0
    for i, c in enumerate(chunks):
        pieces.append(da.from_delayed(delayed(make, pure=False)(i, lo, lo + c),
                                      shape=(c, X.shape[1]), dtype=X.dtype))
        lo += c
    return da.concatenate(pieces), calls


# --------------------------------------------------------------------------------------------
# StandardScaler
# --------------------------------------------------------------------------------------------

SS_ATTRS = ["mean_", "var_", "scale_", "n_samples_seen_"]


@pytest.mark.parametrize("chunks", PARTITIONINGS, ids=["1block", "3blocks", "7uneven"])
def test_standard_scaler_matches_sklearn(client, chunks):
    X = _data()
    ref = skp.StandardScaler().fit(X)
    est = StandardScaler().fit(da.from_array(X, chunks=(chunks, 5)))
    _assert_attrs(est, ref, SS_ATTRS)
    assert est.scale_[4] == 1.0  # constant feature, as scikit-learn
    out = est.transform(da.from_array(X, chunks=(chunks, 5)))
    assert isinstance(out, da.Array) and out.chunks[0] == chunks
    np.testing.assert_allclose(out.compute(), ref.transform(X), **OUT_TOL)
    back = est.inverse_transform(out)
    assert isinstance(back, da.Array)
    np.testing.assert_allclose(back.compute(), ref.inverse_transform(ref.transform(X)),
                               rtol=RTOL)


def test_standard_scaler_dask_dataframe(client):
    X = _data()
    df = pd.DataFrame(X, columns=list("abcde"))
    ddf = dd.from_pandas(df, npartitions=3)
    ref = skp.StandardScaler().fit(df)
    est = StandardScaler().fit(ddf)
    _assert_attrs(est, ref, SS_ATTRS)
    np.testing.assert_array_equal(est.feature_names_in_, ref.feature_names_in_)
    out = est.transform(ddf)
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), ref.transform(df), **OUT_TOL)
    np.testing.assert_array_equal(est.get_feature_names_out(), ref.get_feature_names_out())


def test_standard_scaler_numpy_in_numpy_out():
    X = _data()
    ref = skp.StandardScaler().fit(X)
    est = StandardScaler().fit(X)
    _assert_attrs(est, ref, SS_ATTRS)
    out = est.transform(X)
    assert type(out) is np.ndarray
    np.testing.assert_allclose(out, ref.transform(X), **OUT_TOL)
    out = est.fit_transform(pd.DataFrame(X))
    assert type(out) is np.ndarray


@pytest.mark.parametrize("with_mean,with_std", [(False, True), (True, False), (False, False)])
def test_standard_scaler_options(with_mean, with_std):
    X = _data()
    ref = skp.StandardScaler(with_mean=with_mean, with_std=with_std).fit(X)
    est = StandardScaler(with_mean=with_mean, with_std=with_std).fit(
        da.from_array(X, chunks=30))
    _assert_attrs(est, ref, SS_ATTRS)
    np.testing.assert_allclose(est.transform(X), ref.transform(X), **OUT_TOL)
    np.testing.assert_allclose(est.inverse_transform(X), ref.inverse_transform(X), rtol=RTOL)


def test_standard_scaler_sample_weight():
    X = _data()
    w = np.random.default_rng(1).uniform(0, 3, size=len(X))
    ref = skp.StandardScaler().fit(X, sample_weight=w)
    # weights chunked differently from X: realigned by the shared block machinery
    est = StandardScaler().fit(da.from_array(X, chunks=(PARTITIONINGS[2], 5)),
                               sample_weight=da.from_array(w, chunks=50))
    _assert_attrs(est, ref, SS_ATTRS)


def test_standard_scaler_stable_far_from_zero():
    # mean/std ~ 1e8: a naive merge of block means loses ~1e-9 of the variance
    rng = np.random.default_rng(3)
    X = rng.normal(size=(700, 2)) * [1.0, 1e-3] + [1e8, 1e6]
    ref = skp.StandardScaler().fit(X)
    est = StandardScaler().fit(da.from_array(X, chunks=(PARTITIONINGS[2][:6] + (595,), 2)))
    _assert_attrs(est, ref, SS_ATTRS)


def test_standard_scaler_partial_fit_equals_fit():
    X = _data()
    one = StandardScaler().fit(X)
    inc = StandardScaler()
    for lo, hi in [(0, 17), (17, 80), (80, 120)]:
        inc.partial_fit(da.from_array(X[lo:hi], chunks=10))
    _assert_attrs(inc, one, SS_ATTRS)
    ref = skp.StandardScaler()
    for lo, hi in [(0, 17), (17, 80), (80, 120)]:
        ref.partial_fit(X[lo:hi])
    _assert_attrs(inc, ref, SS_ATTRS)


def test_standard_scaler_float32_kept():
    X = _data().astype(np.float32)
    ref = skp.StandardScaler().fit(X)
    for Xi in (X, da.from_array(X, chunks=40)):
        est = StandardScaler().fit(Xi)
        _assert_attrs(est, ref, SS_ATTRS)  # float64 statistics, as scikit-learn
        out = est.transform(Xi)
        assert out.dtype == np.float32
        np.testing.assert_allclose(np.asarray(out), ref.transform(X), rtol=1e-6)
    # integers become float64
    assert StandardScaler().fit_transform(np.arange(12).reshape(6, 2)).dtype == np.float64


def test_standard_scaler_one_pass():
    X = _data()
    Xd, calls = _counting_array(X, PARTITIONINGS[2])
    with dask.config.set(scheduler="threads"):
        est = StandardScaler().fit(Xd)
        assert calls == Counter({i: 1 for i in range(7)})
        out = est.transform(Xd)
        assert calls == Counter({i: 1 for i in range(7)})  # transform is lazy
        out.compute()
        assert calls == Counter({i: 2 for i in range(7)})


def test_unknown_chunk_sizes():
    # e.g. the output of a transform of a Dask DataFrame: rows per block unknown to Dask
    X = _data()
    Xd = dd.from_pandas(pd.DataFrame(X), npartitions=3).to_dask_array()
    assert np.isnan(Xd.chunks[0][0])
    est = StandardScaler().fit(Xd)
    _assert_attrs(est, skp.StandardScaler().fit(X), SS_ATTRS)
    out = MinMaxScaler().fit(Xd).transform(Xd)
    np.testing.assert_allclose(out.compute(), skp.MinMaxScaler().fit_transform(X), **OUT_TOL)


def test_standard_scaler_all_nan_column():
    X = _data()
    X[:, 0] = np.nan
    with pytest.warns(RuntimeWarning):
        ref = skp.StandardScaler().fit(X)
    est = StandardScaler().fit(da.from_array(X, chunks=25))
    np.testing.assert_array_equal(est.n_samples_seen_, ref.n_samples_seen_)
    assert np.isnan(est.mean_[0]) and np.isnan(ref.mean_[0])
    np.testing.assert_allclose(est.mean_[1:], ref.mean_[1:], rtol=RTOL)


# --------------------------------------------------------------------------------------------
# MinMaxScaler
# --------------------------------------------------------------------------------------------

MM_ATTRS = ["min_", "scale_", "data_min_", "data_max_", "data_range_", "n_samples_seen_"]


@pytest.mark.parametrize("chunks", PARTITIONINGS, ids=["1block", "3blocks", "7uneven"])
def test_minmax_scaler_matches_sklearn(client, chunks):
    X = _data()
    ref = skp.MinMaxScaler(feature_range=(-1, 2)).fit(X)
    est = MinMaxScaler(feature_range=(-1, 2)).fit(da.from_array(X, chunks=(chunks, 5)))
    _assert_attrs(est, ref, MM_ATTRS)
    X2 = _data(seed=5)
    out = est.transform(da.from_array(X2, chunks=(chunks, 5)))
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), ref.transform(X2), **OUT_TOL)
    np.testing.assert_allclose(est.inverse_transform(out).compute(),
                               ref.inverse_transform(ref.transform(X2)), **OUT_TOL)


def test_minmax_scaler_dataframe_clip_float32():
    X = _data().astype(np.float32)
    df = pd.DataFrame(X, columns=list("abcde"))
    ref = skp.MinMaxScaler(clip=True).fit(df)
    est = MinMaxScaler(clip=True).fit(dd.from_pandas(df, npartitions=4))
    _assert_attrs(est, ref, MM_ATTRS)
    assert est.data_min_.dtype == np.float32
    X2 = pd.DataFrame(_data(seed=7).astype(np.float32) * 3, columns=list("abcde"))
    out = est.transform(dd.from_pandas(X2, npartitions=2)).compute()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref.transform(X2), rtol=1e-6)
    assert np.nanmax(out) <= 1 and np.nanmin(out) >= 0


def test_minmax_scaler_partial_fit_equals_fit():
    X = _data()
    one = MinMaxScaler().fit(X)
    inc = MinMaxScaler()
    for lo, hi in [(0, 1), (1, 64), (64, 120)]:
        inc.partial_fit(da.from_array(X[lo:hi], chunks=20))
    _assert_attrs(inc, one, MM_ATTRS)
    assert inc.n_samples_seen_ == 120


def test_minmax_scaler_bad_range():
    with pytest.raises(ValueError, match=r"The 'feature_range' parameter of MinMaxScaler must be a "
                                         r"tuple \(min, max\) of two numbers with min < max"):
        MinMaxScaler(feature_range=(2, 1)).fit(_data())


# --------------------------------------------------------------------------------------------
# OneHotEncoder
# --------------------------------------------------------------------------------------------

def _frame(seed=0, n=90):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "color": pd.Series(rng.choice(["red", "green", "blue", "black"], n), dtype=object),
        "size": pd.Categorical(rng.choice(["S", "M", "L"], n), categories=["S", "M", "L", "XL"]),
        "n": rng.integers(0, 4, n),
        "flag": rng.random(n) < 0.3,
        "text": pd.Series(rng.choice(["a", "b", "c"], n), dtype="str"),
    })


def _assert_categories(est, ref):
    assert len(est.categories_) == len(ref.categories_)
    for got, want in zip(est.categories_, ref.categories_):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        _assert_same_values(got, want)


def _assert_same_values(got, want):
    """Equal arrays, NaN (and None) in the same places; works for object arrays."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    gm, wm = pd.isna(got), pd.isna(want)
    np.testing.assert_array_equal(gm, wm)
    np.testing.assert_array_equal(got[~gm], want[~wm])
    assert [type(v) for v in got[gm]] == [type(v) for v in want[wm]]  # None vs nan


@pytest.mark.parametrize("npartitions", [1, 3, 7])
def test_onehot_dask_dataframe_matches_sklearn(client, npartitions):
    df = _frame()
    ref = skp.OneHotEncoder(sparse_output=False).fit(df)
    ddf = dd.from_pandas(df, npartitions=npartitions)
    est = OneHotEncoder().fit(ddf)
    _assert_categories(est, ref)
    assert est.drop_idx_ is None
    out = est.transform(ddf)
    assert isinstance(out, da.Array) and out.dtype == np.float64
    np.testing.assert_array_equal(out.compute(), ref.transform(df))
    np.testing.assert_array_equal(est.get_feature_names_out(), ref.get_feature_names_out())


def test_onehot_category_only_in_one_partition():
    df = _frame()
    df.loc[88, "color"] = "zebra"  # seen only in the last partition
    ddf = dd.from_pandas(df, npartitions=5)
    est = OneHotEncoder().fit(ddf)
    ref = skp.OneHotEncoder(sparse_output=False).fit(df)
    _assert_categories(est, ref)
    assert "zebra" in est.categories_[0]
    np.testing.assert_array_equal(est.transform(ddf).compute(), ref.transform(df))


@pytest.mark.parametrize("chunks", [90, (1, 40, 49), (13,) * 6 + (12,)])
def test_onehot_dask_array_of_strings(chunks):
    X = _frame()[["color", "text"]].to_numpy(dtype=object)
    ref = skp.OneHotEncoder(sparse_output=False).fit(X)
    est = OneHotEncoder().fit(da.from_array(X, chunks=(chunks, 2)))
    _assert_categories(est, ref)
    np.testing.assert_array_equal(est.transform(da.from_array(X, chunks=(chunks, 2))).compute(),
                                  ref.transform(X))
    # fixed-width numpy strings keep their '<U' dtype, as scikit-learn
    Xu = X.astype(str)
    _assert_categories(OneHotEncoder().fit(da.from_array(Xu, chunks=30)),
                       skp.OneHotEncoder().fit(Xu))


def test_onehot_missing_values_are_categories():
    X = np.array([["a", 1.0], [None, np.nan], ["b", 2.0], [np.nan, 1.0], ["a", np.nan]],
                 dtype=object)
    df = pd.DataFrame({"s": X[:, 0], "f": X[:, 1].astype(float)})
    ref = skp.OneHotEncoder(sparse_output=False).fit(df)
    # Dask's conversion of object columns to pyarrow strings would turn None into NA (with
    # pandas < 3, whose object column keeps None and NaN apart for scikit-learn).
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_pandas(df, npartitions=2)
    est = OneHotEncoder().fit(ddf)
    _assert_categories(est, ref)
    np.testing.assert_array_equal(est.transform(df), ref.transform(df))
    np.testing.assert_array_equal(est.get_feature_names_out(), ref.get_feature_names_out())


def test_onehot_unknown_error_names_column_and_value():
    df = _frame()
    est = OneHotEncoder().fit(df)
    bad = df.copy()
    bad.loc[3, "color"] = "purple"
    with pytest.raises(ValueError, match=r"unknown categories \['purple'\] in column 'color'"):
        est.transform(bad)
    lazy = est.transform(dd.from_pandas(bad, npartitions=3))  # lazy: raises when computed
    with pytest.raises(ValueError, match="purple"):
        lazy.compute()


def test_onehot_unknown_ignore_is_all_zeros(client):
    df = _frame()
    bad = df.copy()
    bad.loc[[3, 60], "color"] = "purple"
    bad.loc[60, "n"] = 99
    ref = skp.OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(df)
    est = OneHotEncoder(handle_unknown="ignore").fit(dd.from_pandas(df, npartitions=3))
    out = est.transform(dd.from_pandas(bad, npartitions=3)).compute()
    np.testing.assert_array_equal(out, ref.transform(bad))
    color = slice(0, len(est.categories_[0]))
    assert out[3, color].sum() == 0 and out[60, color].sum() == 0
    np.testing.assert_array_equal(est.inverse_transform(out), ref.inverse_transform(out))


@pytest.mark.parametrize("drop", ["first", "if_binary", ["green", "M", 2, True, "c"]])
def test_onehot_drop(drop):
    df = _frame()
    ref = skp.OneHotEncoder(drop=drop, sparse_output=False).fit(df)
    est = OneHotEncoder(drop=drop).fit(dd.from_pandas(df, npartitions=3))
    _assert_categories(est, ref)
    np.testing.assert_array_equal(est.drop_idx_, ref.drop_idx_)
    assert est.drop_idx_.dtype == ref.drop_idx_.dtype
    out = est.transform(df)
    np.testing.assert_array_equal(out, ref.transform(df))
    np.testing.assert_array_equal(est.get_feature_names_out(), ref.get_feature_names_out())
    np.testing.assert_array_equal(est.inverse_transform(out), ref.inverse_transform(out))


@pytest.mark.parametrize("params", [
    dict(min_frequency=10), dict(min_frequency=0.2), dict(max_categories=2),
    dict(max_categories=3, min_frequency=5, handle_unknown="infrequent_if_exist"),
    dict(min_frequency=10, drop="first", handle_unknown="ignore"),
])
def test_onehot_infrequent(params):
    df = _frame(n=200)
    ref = skp.OneHotEncoder(sparse_output=False, **params).fit(df)
    est = OneHotEncoder(**params).fit(dd.from_pandas(df, npartitions=4))
    _assert_categories(est, ref)
    for got, want in zip(est.infrequent_categories_, ref.infrequent_categories_):
        if want is None:
            assert got is None
        else:
            np.testing.assert_array_equal(got, want)
    X2 = _frame(seed=9, n=50)
    if params.get("handle_unknown") in ("ignore", "infrequent_if_exist"):
        X2.loc[4, "color"] = "purple"
    with pytest.warns() if params.get("drop") else _nullcontext():
        want = ref.transform(X2)
    with pytest.warns() if params.get("drop") else _nullcontext():
        got = est.transform(X2)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(est.get_feature_names_out(), ref.get_feature_names_out())


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_onehot_given_categories_and_dtype():
    X = np.array([["a", 1], ["b", 2], ["a", 3]], dtype=object)
    cats = [["a", "b", "z"], [1, 2, 3, 4]]
    ref = skp.OneHotEncoder(categories=cats, sparse_output=False, dtype=np.float32).fit(X)
    est = OneHotEncoder(categories=cats, dtype=np.float32).fit(da.from_array(X, chunks=2))
    _assert_categories(est, ref)
    out = est.transform(X)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, ref.transform(X))
    with pytest.raises(ValueError, match="unknown categories"):
        OneHotEncoder(categories=[["a"], [1, 2, 3]]).fit(X)


@pytest.mark.parametrize("params", [{}, {"handle_unknown": "ignore", "drop": "first"},
                                    {"min_frequency": 10, "handle_unknown": "infrequent_if_exist",
                                     "dtype": np.float32}])
@pytest.mark.parametrize("npartitions", [1, 3, 7, 64])
def test_onehot_sparse_output_matches_sklearn(inprocess_client, params, npartitions):
    """sparse_output=True: CSR blocks (a CSR matrix for local input), entry for entry
    scikit-learn's sparse output, unknown categories included."""
    import scipy.sparse as sp

    df = _frame(n=200)
    ref = skp.OneHotEncoder(sparse_output=True, **params).fit(df)
    est = OneHotEncoder(sparse_output=True, **params).fit(dd.from_pandas(df, npartitions=3))
    new = _frame(seed=1, n=130)
    if params.get("handle_unknown", "error") != "error":
        new.loc[5, "color"] = "purple"
    want = ref.transform(new)
    for X in (dd.from_pandas(new, npartitions=npartitions), new):
        out = est.transform(X)
        if isinstance(out, da.Array):
            assert out.chunks[1] == (want.shape[1],)
            assert isinstance(out.blocks[0].compute(), sp.csr_matrix)
            out = out.compute()
        assert sp.issparse(out) and out.format == "csr" and out.dtype == want.dtype
        np.testing.assert_array_equal(out.indptr, want.indptr)
        np.testing.assert_array_equal(out.indices, want.indices)
        np.testing.assert_array_equal(out.data, want.data)
    back = est.inverse_transform(est.transform(new))
    np.testing.assert_array_equal(pd.isna(back), pd.isna(ref.inverse_transform(want)))


def test_onehot_sparse_output_both_clusters(client):
    df = _frame()
    est = OneHotEncoder(sparse_output=True).fit(df)
    out = est.transform(dd.from_pandas(df, npartitions=4)).compute()
    want = skp.OneHotEncoder(sparse_output=True).fit(df).transform(df)
    assert (out != want).nnz == 0
    with pytest.raises(ValueError, match="Pandas output does not support sparse data"):
        OneHotEncoder(sparse_output=True).set_output(transform="pandas").fit(df).transform(df)


def test_onehot_one_pass():
    df = _frame()
    calls = Counter()

    def part(i, lo, hi):
        calls[i] += 1
        return df.iloc[lo:hi]

    bounds = [0, 10, 11, 50, 90]
    ddf = dd.from_map(part, range(4), bounds[:-1], bounds[1:], meta=df.iloc[:0],
                      enforce_metadata=False)
    with dask.config.set(scheduler="threads"):
        est = OneHotEncoder().fit(ddf)
        assert calls == Counter({i: 1 for i in range(4)})
        est.transform(ddf).compute()
    assert calls == Counter({i: 2 for i in range(4)})
    _assert_categories(est, skp.OneHotEncoder().fit(df))


def test_onehot_mixed_types_clear_error():
    X = np.array([["a"], [1]], dtype=object)
    with pytest.raises(TypeError, match="uniformly strings or numbers"):
        OneHotEncoder().fit(X)


# --------------------------------------------------------------------------------------------
# Composition, validation
# --------------------------------------------------------------------------------------------

def test_pipeline_numpy_matches_sklearn():
    X = np.nan_to_num(_data())
    y = (X[:, 0] > 0).astype(int)
    ours = Pipeline([("scale", StandardScaler()), ("lr", LogisticRegression())]).fit(X, y)
    ref = Pipeline([("scale", skp.StandardScaler()), ("lr", LogisticRegression())]).fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=1e-6)


def test_pipeline_dask_stays_lazy():
    X = _data()
    pipe = Pipeline([("scale", StandardScaler()), ("minmax", MinMaxScaler())])
    Xd = da.from_array(X, chunks=(PARTITIONINGS[1], 5))
    out = pipe.fit(Xd).transform(Xd)
    assert isinstance(out, da.Array)
    ref = Pipeline([("scale", skp.StandardScaler()), ("minmax", skp.MinMaxScaler())]).fit(X)
    np.testing.assert_allclose(out.compute(), ref.transform(X), **OUT_TOL)


def test_clone_and_params():
    est = OneHotEncoder(handle_unknown="ignore", drop="first")
    c = clone(est)
    assert c.get_params() == est.get_params()
    assert StandardScaler(with_mean=False).get_params()["with_mean"] is False


@pytest.mark.parametrize("Est", [StandardScaler, MinMaxScaler, OneHotEncoder])
def test_bad_input(Est):
    X = _data() if Est is not OneHotEncoder else _frame()[["n", "color"]]
    with pytest.raises(NotFittedError):
        Est().transform(X)
    with pytest.raises(ValueError, match="expected a 2-D X, got a 1-D array"):
        Est().fit(np.arange(5.0))
    est = Est().fit(X)
    with pytest.raises(ValueError, match="features, but .* is expecting"):
        est.transform(np.zeros((3, X.shape[1] + 1)))
    if isinstance(X, pd.DataFrame):
        other = X.rename(columns={"n": "m"})
        with pytest.raises(ValueError, match=r"feature names .* differ.*Missing: \['n'\]"):
            est.transform(other)
        with pytest.raises(ValueError, match="different order"):
            est.transform(X[X.columns[::-1]])


@pytest.mark.parametrize("Est", [StandardScaler, MinMaxScaler])
def test_scalers_reject_strings_and_inf(Est):
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": ["x", "y", "z"]})
    with pytest.raises(TypeError, match=r"non-numeric columns \['b'\]"):
        Est().fit(df)
    with pytest.raises(TypeError, match=r"non-numeric columns \['b'\]"):
        Est().fit(dd.from_pandas(df, npartitions=2))
    with pytest.raises(TypeError, match="non-numeric values"):
        Est().fit(np.array([["1", "x"], ["2", "y"]], dtype=object))
    X = _data()
    X[5, 2] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        Est().fit(X)
    with pytest.raises(ValueError, match="infinity"):
        Est().fit(da.from_array(X, chunks=30))
    est = Est().fit(_data())
    with pytest.raises(ValueError, match="infinity"):
        est.transform(X)


def test_onehot_rejects_inf():
    X = np.array([[1.0], [np.inf]])
    with pytest.raises(ValueError, match="infinity"):
        OneHotEncoder().fit(X)


def test_empty_data():
    with pytest.raises(ValueError, match="0 sample"):
        StandardScaler().fit(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="0 sample"):
        MinMaxScaler().fit(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="0 sample"):
        OneHotEncoder().fit(np.zeros((0, 3)))
