"""dml.compose.ColumnTransformer against scikit-learn's, on UCI Adult and synthetic data."""
from collections import Counter

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import sklearn.compose as skc
import sklearn.preprocessing as skp
from dask import delayed
from sklearn.base import clone
from sklearn.compose import make_column_selector
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from dml.compose import ColumnTransformer, make_column_transformer
from dml.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler

N_ROWS = 2000
RTOL = 1e-10
OUT_TOL = dict(rtol=RTOL, atol=1e-12)  # unit-scale outputs: x - mean_ cancels near the mean


@pytest.fixture(scope="module")
def adult_file(real_data):
    """UCI Adult from the real data sets (tests/conftest.py: skips without them)."""
    return real_data / "adult" / "adult.csv"


@pytest.fixture(scope="module")
def adult(adult_file):
    return pd.read_csv(adult_file, nrows=N_ROWS)


@pytest.fixture(scope="module")
def adult_csv(adult, tmp_path_factory):
    """The same rows as a CSV file, for dask.dataframe.read_csv (several partitions)."""
    path = tmp_path_factory.mktemp("adult") / "adult_head.csv"
    adult.to_csv(path, index=False)
    return path


def _columns(df):
    num = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]
    cat = [c for c in df.columns if c not in num and c != "income"]
    return num, cat


def _pair(num, cat, **ohe):
    ours = ColumnTransformer([("num", StandardScaler(), num),
                              ("cat", OneHotEncoder(**ohe), cat)])
    ref = skc.ColumnTransformer([("num", skp.StandardScaler(), num),
                                 ("cat", skp.OneHotEncoder(sparse_output=False, **ohe), cat)])
    return ours, ref


def _assert_fitted_like(ours, ref):
    a, b = ours.named_transformers_, ref.named_transformers_
    for attr in ("mean_", "var_", "scale_"):
        np.testing.assert_allclose(getattr(a["num"], attr), getattr(b["num"], attr), rtol=RTOL)
    assert a["num"].n_samples_seen_ == b["num"].n_samples_seen_
    for got, want in zip(a["cat"].categories_, b["cat"].categories_):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ours.get_feature_names_out(), ref.get_feature_names_out())
    assert ours.output_indices_ == ref.output_indices_
    np.testing.assert_array_equal(ours.feature_names_in_, ref.feature_names_in_)
    assert ours.n_features_in_ == ref.n_features_in_


@pytest.mark.parametrize("npartitions", [1, 3, 7])
def test_adult_dask_dataframe_matches_sklearn(client, adult, npartitions):
    num, cat = _columns(adult)
    ours, ref = _pair(num, cat)
    want = ref.fit_transform(adult)
    ddf = dd.from_pandas(adult, npartitions=npartitions)
    got = ours.fit_transform(ddf)
    assert isinstance(got, da.Array) and got.dtype == np.float64
    _assert_fitted_like(ours, ref)
    np.testing.assert_allclose(got.compute(), want, **OUT_TOL)


def test_adult_read_csv_matches_sklearn(client, adult, adult_csv):
    # dask's read_csv gives string[pyarrow] columns (pd.NA for missing): a different path
    ddf = dd.read_csv(adult_csv, blocksize=60_000)
    assert ddf.npartitions > 1
    num, cat = _columns(adult)
    ours, ref = _pair(num, cat, handle_unknown="ignore")
    want = ref.fit_transform(adult)
    got = ours.fit(ddf).transform(ddf)
    _assert_fitted_like(ours, ref)
    np.testing.assert_allclose(got.compute(), want, **OUT_TOL)


def test_adult_pandas_numpy_out(adult, adult_file):
    num, cat = _columns(adult)
    ours, ref = _pair(num, cat)
    got = ours.fit_transform(adult)
    assert type(got) is np.ndarray
    want = ref.fit_transform(adult)
    _assert_fitted_like(ours, ref)
    np.testing.assert_allclose(got, want, **OUT_TOL)
    # rows not seen in fit, selected by name: extra columns and another order are fine
    new = pd.read_csv(adult_file, skiprows=range(1, 5001), nrows=300)
    new = new[new["country"].isin(ours.named_transformers_["cat"].categories_[-1])]
    shuffled = new[new.columns[::-1]]
    np.testing.assert_allclose(ours.transform(shuffled), ref.transform(shuffled), **OUT_TOL)


def test_remainder_passthrough_and_stateless(client, adult):
    num, cat = _columns(adult)
    log = FunctionTransformer(np.log1p, feature_names_out="one-to-one")
    kw = dict(remainder="passthrough", transformer_weights={"num": 2.0})
    ours = ColumnTransformer([("num", StandardScaler(), num[:3]),
                              ("cat", OneHotEncoder(), cat[:2]),
                              ("log", log, ["capital_gain"]),
                              ("gone", "drop", ["race"])], **kw)
    ref = skc.ColumnTransformer([("num", skp.StandardScaler(), num[:3]),
                                 ("cat", skp.OneHotEncoder(sparse_output=False), cat[:2]),
                                 ("log", log, ["capital_gain"]),
                                 ("gone", "drop", ["race"])], **kw)
    want = ref.fit_transform(adult)
    got = ours.fit_transform(dd.from_pandas(adult, npartitions=3))
    assert got.dtype == want.dtype == object  # string columns passed through
    got = got.compute()
    assert got.shape == want.shape
    k = ref.output_indices_["remainder"].start
    np.testing.assert_allclose(got[:, :k].astype(float), want[:, :k].astype(float), **OUT_TOL)
    np.testing.assert_array_equal(got[:, k:], want[:, k:])
    np.testing.assert_array_equal(ours.get_feature_names_out(), ref.get_feature_names_out())
    assert ours.output_indices_ == ref.output_indices_
    assert [(n, c) for n, _, c in ours.transformers_] == \
        [(n, c) for n, _, c in ref.transformers_]
    assert isinstance(ours.named_transformers_["remainder"], FunctionTransformer)


def test_numpy_and_dask_array_by_position():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=150), rng.integers(0, 4, 150), rng.normal(size=150) * 5,
                         rng.integers(0, 2, 150)]).astype(np.float64)
    spec = [("scale", StandardScaler(), [0, 2]), ("ohe", OneHotEncoder(), [1, 3])]
    ref_spec = [("scale", skp.StandardScaler(), [0, 2]),
                ("ohe", skp.OneHotEncoder(sparse_output=False), [1, 3])]
    ref = skc.ColumnTransformer(ref_spec, remainder="drop").fit(X)
    for Xi in (X, da.from_array(X, chunks=((1, 60, 40, 49), 4))):
        ours = ColumnTransformer(spec).fit(Xi)
        out = ours.transform(Xi)
        assert isinstance(out, type(Xi))
        np.testing.assert_allclose(np.asarray(out), ref.transform(X), **OUT_TOL)
        np.testing.assert_array_equal(ours.get_feature_names_out(), ref.get_feature_names_out())


def test_float32_kept():
    X = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    ref = skc.ColumnTransformer([("s", skp.StandardScaler(), [0, 1]),
                                 ("m", skp.MinMaxScaler(), [2])]).fit(X)
    ours = ColumnTransformer([("s", StandardScaler(), [0, 1]), ("m", MinMaxScaler(), [2])])
    out = ours.fit(da.from_array(X, chunks=20)).transform(da.from_array(X, chunks=20))
    assert out.dtype == np.float32 == ref.transform(X).dtype
    np.testing.assert_allclose(out.compute(), ref.transform(X), rtol=1e-6)


def _counting_frame(df, bounds):
    """A Dask DataFrame whose partitions come from a function that counts its calls.

    (dd.from_map, not dd.from_delayed: with dask 2026.8 an array built from a from_delayed
    frame's to_delayed() fails to compute with "Missing dependency", cf. dask/dask#12127.)
    """
    calls = Counter()

    def part(i):
        calls[i] += 1
        return df.iloc[bounds[i]:bounds[i + 1]]

    return dd.from_map(part, range(len(bounds) - 1), meta=df.iloc[:0],
                       enforce_metadata=False), calls


def test_one_pass_over_dask_dataframe(adult):
    num, cat = _columns(adult)
    bounds = [0, 1, 400, 1000, 1013, 2000]
    ddf, calls = _counting_frame(adult, bounds)
    ct = ColumnTransformer([("num", StandardScaler(), num), ("mm", MinMaxScaler(), num[:2]),
                            ("cat", OneHotEncoder(), cat),
                            ("log", FunctionTransformer(np.log1p), ["age"])],
                           remainder="passthrough")
    with dask.config.set(scheduler="threads"):
        ct.fit(ddf)
        assert calls == Counter({i: 1 for i in range(5)})  # every block read once in fit
        out = ct.transform(ddf)
        assert calls == Counter({i: 1 for i in range(5)})  # transform is lazy
        out.compute()
        assert calls == Counter({i: 2 for i in range(5)})


def test_one_pass_over_dask_array():
    X = np.random.default_rng(0).integers(0, 5, size=(200, 4)).astype(float)
    calls = Counter()

    def block(i, lo, hi):
        calls[i] += 1
        return X[lo:hi]

    edges = [0, 30, 31, 120, 200]
    Xd = da.concatenate([da.from_delayed(delayed(block, pure=False)(i, lo, hi),
                                         shape=(hi - lo, 4), dtype=float)
                         for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:]))])
    ct = ColumnTransformer([("s", StandardScaler(), [0, 1]), ("m", MinMaxScaler(), [1, 2]),
                            ("o", OneHotEncoder(), [3])])
    with dask.config.set(scheduler="threads"):
        ct.fit(Xd)
    assert calls == Counter({i: 1 for i in range(4)})


def test_pipeline_dask_stays_lazy(client, adult):
    num, cat = _columns(adult)
    ours = Pipeline([("ct", ColumnTransformer([("num", StandardScaler(), num),
                                               ("cat", OneHotEncoder(), cat)])),
                     ("mm", MinMaxScaler())])
    ref = Pipeline([("ct", skc.ColumnTransformer([
        ("num", skp.StandardScaler(), num),
        ("cat", skp.OneHotEncoder(sparse_output=False), cat)])), ("mm", skp.MinMaxScaler())])
    ddf = dd.from_pandas(adult, npartitions=3)
    out = ours.fit(ddf).transform(ddf)
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), ref.fit(adult).transform(adult), **OUT_TOL)
    # the next step got a Dask array with the rows of the dataframe's partitions (their
    # lengths known without computing: a pandas-backed frame states them)
    chunks = ours["ct"].transform(ddf).chunks[0]
    assert chunks == tuple(int(n) for n in ddf.map_partitions(len).compute())


def test_pipeline_with_sklearn_estimator(adult):
    num, cat = _columns(adult)
    y = (adult["income"] == ">50K").to_numpy().astype(int)
    ours = Pipeline([("ct", make_column_transformer((StandardScaler(), num),
                                                    (OneHotEncoder(handle_unknown="ignore"),
                                                     cat))),
                     ("lr", LogisticRegression(max_iter=500))]).fit(adult, y)
    ref = Pipeline([("ct", skc.make_column_transformer(
        (skp.StandardScaler(), num),
        (skp.OneHotEncoder(handle_unknown="ignore", sparse_output=False), cat))),
        ("lr", LogisticRegression(max_iter=500))]).fit(adult, y)
    np.testing.assert_allclose(ours.predict_proba(adult), ref.predict_proba(adult), rtol=1e-6)
    # nested parameters, as scikit-learn's compositions
    ours.set_params(ct__onehotencoder__handle_unknown="error")
    assert ours.get_params()["ct__onehotencoder__handle_unknown"] == "error"
    assert clone(ours).get_params()["ct__standardscaler"] is not \
        ours.get_params()["ct__standardscaler"]


def test_make_column_transformer_names_and_selector(adult):
    ct = make_column_transformer((StandardScaler(), make_column_selector(dtype_include="number")),
                                 (OneHotEncoder(), ["sex"]), (OneHotEncoder(), ["race"]))
    ref = skc.make_column_transformer(
        (skp.StandardScaler(), make_column_selector(dtype_include="number")),
        (skp.OneHotEncoder(sparse_output=False), ["sex"]),
        (skp.OneHotEncoder(sparse_output=False), ["race"]))
    assert [n for n, _, _ in ct.transformers] == [n for n, _, _ in ref.transformers] == \
        ["standardscaler", "onehotencoder-1", "onehotencoder-2"]
    ct.fit(dd.from_pandas(adult, npartitions=2))  # the selector sees the pandas _meta
    ref.fit(adult)
    np.testing.assert_array_equal(ct.get_feature_names_out(), ref.get_feature_names_out())


def test_verbose_feature_names_out_false(adult):
    ct = ColumnTransformer([("a", StandardScaler(), ["age"]), ("b", OneHotEncoder(), ["sex"])],
                           verbose_feature_names_out=False).fit(adult)
    np.testing.assert_array_equal(ct.get_feature_names_out(), ["age", "sex_Female", "sex_Male"])
    dup = ColumnTransformer([("a", StandardScaler(), ["age"]), ("b", MinMaxScaler(), ["age"])],
                            verbose_feature_names_out=False).fit(adult)
    with pytest.raises(ValueError, match="not unique"):
        dup.get_feature_names_out()


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------

def test_bad_input(adult):
    num, cat = _columns(adult)
    ct = ColumnTransformer([("num", StandardScaler(), num), ("cat", OneHotEncoder(), cat)])
    with pytest.raises(ValueError, match="expected a 2-D X, got a 1-D array"):
        ct.fit(np.arange(5.0))
    ct.fit(adult)
    with pytest.raises(ValueError, match=r"columns are missing: \['age'\]"):
        ct.transform(adult.drop(columns="age"))
    with pytest.raises(ValueError, match=r"columns are missing: \['age'\]"):
        ct.transform(dd.from_pandas(adult.drop(columns="age"), npartitions=2))
    with pytest.raises(ValueError, match="X has 3 features, but ColumnTransformer is expecting"):
        ct.transform(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="expected a 2-D X"):
        ct.transform(np.zeros(3))
    with pytest.raises(ValueError, match="is not a column of X"):
        ColumnTransformer([("num", StandardScaler(), ["nope"])]).fit(adult)
    with pytest.raises(ValueError, match="not a DataFrame"):
        ColumnTransformer([("num", StandardScaler(), ["age"])]).fit(np.zeros((3, 2)))


def test_strings_into_scaler_clear_error(adult):
    ct = ColumnTransformer([("num", StandardScaler(), ["age", "sex"])])
    with pytest.raises(TypeError, match=r"transformer 'num' \(StandardScaler\) got non-numeric "
                                        r"columns \['sex'\]"):
        ct.fit(dd.from_pandas(adult, npartitions=2))


def test_inf_clear_error(adult):
    bad = adult.copy()
    bad["capital_gain"] = bad["capital_gain"].astype(float)
    bad.loc[7, "capital_gain"] = np.inf
    ct = ColumnTransformer([("num", StandardScaler(), ["age", "capital_gain"])])
    with pytest.raises(ValueError, match="infinity"):
        ct.fit(dd.from_pandas(bad, npartitions=3))


def test_unknown_category_at_transform(adult):
    ct = ColumnTransformer([("cat", OneHotEncoder(), ["sex"])]).fit(adult)
    bad = adult.head(5).copy()
    bad.loc[2, "sex"] = "Other"
    with pytest.raises(ValueError, match=r"unknown categories \['Other'\] in column 'sex'"):
        ct.transform(bad)


def test_rejects_stateful_sklearn_transformer(adult):
    ct = ColumnTransformer([("num", skp.StandardScaler(), ["age"])])
    with pytest.raises(TypeError, match="learns from the data but is not a dml transformer"):
        ct.fit(adult)
    with pytest.raises(ValueError, match="'drop' or 'passthrough'"):
        ColumnTransformer([("x", "keep", ["age"])]).fit(adult)
    with pytest.raises(ValueError, match="remainder"):
        ColumnTransformer([("x", "drop", ["age"])], remainder="keep").fit(adult)


@pytest.mark.parametrize("ohe", [{}, {"drop": "first"}, {"min_frequency": 8},
                                 {"categories": [["c1", "c2", "c3"], ["u", "v", "w"]],
                                  "handle_unknown": "ignore"}])
def test_sparse_threshold_decides_as_sklearn(inprocess_client, ohe):
    """With OneHotEncoder(sparse_output=True) the output is sparse exactly when scikit-learn's
    is: the density of the training output (counted from the fit, no extra pass) against
    sparse_threshold, just below and just above it; sparse output equals scikit-learn's."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.choice([f"c{i}" for i in range(12)], 150).astype(object),
                       "b": rng.normal(size=150),
                       "c": rng.choice(["u", "v", "w"], 150).astype(object)})
    ref_full = skc.ColumnTransformer([("o", skp.OneHotEncoder(**ohe), ["a", "c"]),
                                      ("s", skp.StandardScaler(), ["b"])], sparse_threshold=1.0)
    Xs = ref_full.fit_transform(df)
    assert sp.issparse(Xs)
    density = Xs.nnz / (Xs.shape[0] * Xs.shape[1])
    for thr in (density - 1e-9, density + 1e-9):
        ref = skc.ColumnTransformer([("o", skp.OneHotEncoder(**ohe), ["a", "c"]),
                                     ("s", skp.StandardScaler(), ["b"])],
                                    sparse_threshold=thr).fit(df)
        ct = ColumnTransformer([("o", OneHotEncoder(sparse_output=True, **ohe), ["a", "c"]),
                                ("s", StandardScaler(), ["b"])],
                               sparse_threshold=thr).fit(dd.from_pandas(df, npartitions=3))
        assert ct.sparse_output_ == ref.sparse_output_ == (thr > density)
        out = ct.transform(dd.from_pandas(df, npartitions=4))
        want = ref.transform(df)
        if ct.sparse_output_:
            assert isinstance(out.blocks[0].compute(), sp.csr_matrix)
            out = out.compute()
            assert sp.issparse(out) and out.format == "csr"
            out, want = out.toarray(), want.toarray()
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-12, atol=1e-12)
