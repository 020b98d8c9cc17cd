"""Transformers' output containers: scikit-learn's ``set_output``, pandas and Dask DataFrames."""
from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import sklearn
from dask import delayed
import sklearn.cluster as skc
import sklearn.compose as skcompose
import sklearn.preprocessing as skp
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import (check_global_output_transform_pandas,
                                            check_set_output_transform,
                                            check_set_output_transform_pandas)

from dml.cluster import KMeans
from dml.compose import ColumnTransformer
from dml.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler


def _frame(n=24):
    rng = np.random.default_rng(0)
    # A non-default index: the output must keep it.
    return pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n) * 10 + 3,
                         "c": rng.choice(["x", "y", "z"], size=n)},
                        index=pd.Index(np.arange(1000, 1000 + 3 * n, 3), name="row"))


#: (name, dml transformer, scikit-learn's counterpart, columns it reads)
CASES = [
    ("standard", lambda: StandardScaler(), lambda: skp.StandardScaler(), ["a", "b"]),
    ("minmax", lambda: MinMaxScaler(), lambda: skp.MinMaxScaler(), ["a", "b"]),
    ("onehot", lambda: OneHotEncoder(), lambda: skp.OneHotEncoder(sparse_output=False), ["c"]),
    ("column", lambda: ColumnTransformer([("num", StandardScaler(), ["a", "b"]),
                                          ("cat", OneHotEncoder(), ["c"])]),
     lambda: skcompose.ColumnTransformer([("num", skp.StandardScaler(), ["a", "b"]),
                                          ("cat", skp.OneHotEncoder(sparse_output=False),
                                           ["c"])]), ["a", "b", "c"]),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("make", [StandardScaler, MinMaxScaler,
                                  lambda: OneHotEncoder(handle_unknown="ignore"),
                                  lambda: KMeans(2, n_init=1, max_iter=5, random_state=0),
                                  lambda: ColumnTransformer([("s", StandardScaler(), [0])],
                                                            remainder="passthrough")])
def test_scikit_learn_set_output_checks(make):
    est = make()
    name = type(est).__name__
    check_set_output_transform(name, est)
    check_set_output_transform_pandas(name, est)
    check_global_output_transform_pandas(name, est)


@pytest.mark.parametrize("name,make,make_sk,cols", CASES, ids=IDS)
def test_pandas_in_pandas_out_as_scikit_learn(name, make, make_sk, cols):
    df = _frame()[cols]
    ours = make().set_output(transform="pandas")
    ref = make_sk().set_output(transform="pandas")
    out, want = ours.fit_transform(df), ref.fit_transform(df)
    pd.testing.assert_frame_equal(out, want, rtol=1e-12)
    pd.testing.assert_frame_equal(ours.transform(df), ref.transform(df), rtol=1e-12)
    assert list(out.columns) == list(ours.get_feature_names_out())
    # The default container is scikit-learn's: an array, whatever the input.
    plain = make().fit(df)
    assert isinstance(plain.transform(df), np.ndarray)
    np.testing.assert_allclose(plain.transform(df), want.to_numpy(), rtol=1e-12)


@pytest.mark.parametrize("name,make,make_sk,cols", CASES, ids=IDS)
def test_dask_dataframe_in_dask_dataframe_out(inprocess_client, name, make, make_sk, cols):
    df = _frame()[cols]
    ddf = dd.from_pandas(df, npartitions=4)
    est = make().set_output(transform="pandas").fit(ddf)
    out = est.transform(ddf)
    assert isinstance(out, dd.DataFrame)
    assert out.npartitions == ddf.npartitions and out.divisions == ddf.divisions
    assert list(out.columns) == list(est.get_feature_names_out())
    want = make_sk().set_output(transform="pandas").fit_transform(df)
    pd.testing.assert_frame_equal(out.compute(), want, rtol=1e-12, check_index_type=False)
    # Repartitioned and filtered frames (an empty partition) keep their index too.
    with_empty = dd.from_delayed([delayed(df.iloc[:0]), delayed(df.iloc[:9]),
                                  delayed(df.iloc[9:])], meta=df.iloc[:0])
    for frame in (ddf.repartition(npartitions=7), with_empty):
        got = est.transform(frame)
        assert got.npartitions == frame.npartitions
        pd.testing.assert_frame_equal(got.compute(), want.loc[frame.index.compute()],
                                      rtol=1e-12, check_index_type=False)
    # fit_transform too, and the scikit-learn configuration of the whole process.
    with sklearn.config_context(transform_output="pandas"):
        again = make().fit_transform(ddf)
    assert isinstance(again, dd.DataFrame)
    pd.testing.assert_frame_equal(again.compute(), want, rtol=1e-12, check_index_type=False)


def _poison(part):
    raise RuntimeError("the Dask data was computed")


@pytest.mark.parametrize("name,make,make_sk,cols", CASES, ids=IDS)
def test_dask_output_is_lazy(inprocess_client, name, make, make_sk, cols):
    """transform and the DataFrame wrapping read no Dask data: partitions that fail when
    computed go through until the result is computed."""
    df = _frame()[cols]
    est = make().set_output(transform="pandas").fit(df)
    ddf = dd.from_pandas(df, npartitions=3)
    poisoned = ddf.map_partitions(_poison, meta=ddf._meta)
    out = est.transform(poisoned)
    assert isinstance(out, dd.DataFrame) and out.npartitions == 3
    with pytest.raises(RuntimeError, match="the Dask data was computed"):
        out.compute()


def test_dask_array_in_dask_dataframe_out(inprocess_client):
    X = _frame()[["a", "b"]].to_numpy()
    Xd = da.from_array(X, chunks=(7, 2))
    out = StandardScaler().set_output(transform="pandas").fit(Xd).transform(Xd)
    assert isinstance(out, dd.DataFrame) and out.npartitions == Xd.numblocks[0]
    want = skp.StandardScaler().set_output(transform="pandas").fit_transform(X)
    pd.testing.assert_frame_equal(out.compute(), want, rtol=1e-12, check_index_type=False)
    km = KMeans(2, random_state=0).set_output(transform="pandas").fit(Xd)
    dist = km.transform(Xd)
    assert isinstance(dist, dd.DataFrame)
    assert list(dist.columns) == ["kmeans0", "kmeans1"]
    ref = skc.KMeans(2).set_output(transform="pandas").fit(X)
    assert list(ref.get_feature_names_out()) == list(km.get_feature_names_out())
    # The default stays a Dask array, as before.
    assert isinstance(StandardScaler().fit(Xd).transform(Xd), da.Array)


def test_pipeline_set_output_and_bad_containers(inprocess_client):
    df = _frame()
    pipe = Pipeline([("ct", ColumnTransformer([("num", StandardScaler(), ["a", "b"])])),
                     ("mm", MinMaxScaler())]).set_output(transform="pandas")
    out = pipe.fit_transform(dd.from_pandas(df, npartitions=2))
    assert isinstance(out, dd.DataFrame)
    assert list(out.columns) == ["num__a", "num__b"]
    pd.testing.assert_index_equal(out.compute().index, df.index)
    with pytest.raises(ValueError, match="transform must be one of"):
        StandardScaler().set_output(transform="arrow")
    est = StandardScaler().fit(df[["a"]])
    est._sklearn_output_config = {"transform": "polars"}  # polars may not be installed
    with pytest.raises(ValueError, match="Dask input gives a Dask DataFrame"):
        est.transform(dd.from_pandas(df[["a"]], npartitions=2))


def test_column_transformer_set_output_reaches_its_transformers():
    """As scikit-learn's: set_output on the ColumnTransformer configures its transformers
    (before and after fit, and an estimator remainder) and the stacked output is a DataFrame."""
    import pandas as pd
    from sklearn.compose import ColumnTransformer as SkColumnTransformer
    from sklearn.preprocessing import StandardScaler as SkStandardScaler

    from dml.compose import ColumnTransformer
    from dml.preprocessing import StandardScaler

    df = pd.DataFrame({"a": [1.0, 2.0, 4.0], "b": [0.0, 1.0, 0.0], "c": [5.0, 5.0, 6.0]},
                      index=[7, 8, 9])
    ct = ColumnTransformer([("s", StandardScaler(), ["a"])], remainder=StandardScaler())
    ct.set_output(transform="pandas")
    assert ct.transformers[0][1]._sklearn_output_config["transform"] == "pandas"
    assert ct.remainder._sklearn_output_config["transform"] == "pandas"
    out = ct.fit_transform(df)
    ref = SkColumnTransformer([("s", SkStandardScaler(), ["a"])], remainder=SkStandardScaler()
                              ).set_output(transform="pandas").fit_transform(df)
    assert isinstance(out, pd.DataFrame) and list(out.index) == [7, 8, 9]
    assert list(out.columns) == list(ref.columns)
    np.testing.assert_allclose(out.to_numpy(), ref.to_numpy())
    ct.set_output(transform="default")
    assert all(t._sklearn_output_config["transform"] == "default"
               for _, t, _ in ct.transformers_ if t not in ("passthrough", "drop"))
    assert isinstance(ct.transform(df), np.ndarray)
