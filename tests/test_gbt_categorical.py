"""Gradient-boosted trees: categorical features (equal to scikit-learn's HistGradientBoosting on
exact bins, partitionings, a cluster, bad input) and early stopping on a given validation set
(``X_val``/``y_val``, scikit-learn's trajectory and rules)."""
from __future__ import annotations

import importlib.util

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

import dml
from dml.ensemble import GradientBoostingClassifier, GradientBoostingRegressor


@pytest.fixture(autouse=True)
def _a_group_per_thread(monkeypatch):
    """Tiny data would be grown as one group (``MIN_GROUP_CELLS``); these tests exercise the
    groups and the exchanges between them."""
    from dml.ensemble import _gb_fit

    monkeypatch.setattr(_gb_fit, "MIN_GROUP_CELLS", 0)
    # Every block counted on its own (small blocks are otherwise joined into runs of
    # RUN_ROWS rows, tested on their own in tests/test_gbt.py).
    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 0)


def _cat_data(n=1500, seed=0, nan=0.05):
    """Features 1 and 3 are categorical codes (12 and 40 categories, 3 with gaps of 3) with
    effects that are not monotone in the code; the others are exact-bin numeric features."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 25, size=(n, 5)).astype(float)
    X[:, 1] = rng.integers(0, 12, n)
    X[:, 3] = rng.integers(0, 40, n) * 3
    eff = rng.normal(size=40)
    y = (2 * X[:, 0] + 3 * eff[X[:, 1].astype(int)] + eff[(X[:, 3] // 3).astype(int)]
         + rng.normal(size=n))
    if nan:
        X[rng.random(X.shape) < nan] = np.nan
    return X, y


def _frame(X, cats=(1, 3)):
    """X as a dataframe whose categorical features have the pandas 'category' dtype (string
    categories: only the dtype marks them)."""
    df = pd.DataFrame(X, columns=list("abcde"))
    for j in cats:
        col = df.columns[j]
        values = np.unique(X[~np.isnan(X[:, j]), j])
        codes = np.where(np.isnan(X[:, j]), -1, np.searchsorted(values, X[:, j]))
        df[col] = pd.Categorical.from_codes(codes.astype(int),
                                            categories=[f"k{int(v)}" for v in values])
    return df


def _same_nodes(a, b, rtol=0.0):
    for k in a.nodes_:
        if k in ("value", "sum_hessians", "threshold") and rtol:
            np.testing.assert_allclose(a.nodes_[k], b.nodes_[k], rtol=rtol, atol=1e-12,
                                       err_msg=k)
        else:
            np.testing.assert_array_equal(a.nodes_[k], b.nodes_[k], err_msg=k)


# --------------------------------------------------------------------------------------------
# equality with scikit-learn on exact bins
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["indices", "mask", "names", "from_dtype"])
def test_categorical_regressor_equals_scikit_learn(spec):
    X, y = _cat_data()
    if spec in ("names", "from_dtype"):
        Xf = _frame(X) if spec == "from_dtype" else pd.DataFrame(X, columns=list("abcde"))
        cf = "from_dtype" if spec == "from_dtype" else ["b", "d"]
    else:
        Xf = X
        cf = [1, 3] if spec == "indices" else [False, True, False, True, False]
    for rounds in (1, 4):
        kw = dict(max_iter=rounds, learning_rate=0.3, early_stopping=False,
                  categorical_features=cf)
        ours = GradientBoostingRegressor(**kw).fit(Xf, y)
        ref = HistGradientBoostingRegressor(**kw).fit(Xf, y)
        np.testing.assert_allclose(ours.predict(Xf), ref.predict(Xf), rtol=0, atol=1e-10)
    assert ours.is_categorical_.tolist() == [False, True, False, True, False]
    assert len(ours.nodes_["cat_bitsets"]) > 0  # categorical splits were made


def test_categorical_classifier_equals_scikit_learn_with_unknown_categories():
    """Binary and multinomial log loss (hessians not constant); at prediction categories not
    seen in training (and missing values) follow the missing-value direction, as
    scikit-learn's."""
    X, y = _cat_data(seed=1)
    for k in (2, 3):
        yc = np.digitize(y, np.quantile(y, np.linspace(0, 1, k + 1)[1:-1]))
        kw = dict(max_iter=3, learning_rate=0.5, early_stopping=False, max_leaf_nodes=15,
                  min_samples_leaf=10, l2_regularization=0.5, categorical_features=[1, 3])
        ours = GradientBoostingClassifier(**kw).fit(X, yc)
        ref = HistGradientBoostingClassifier(**kw).fit(X, yc)
        Xt = X[:300].copy()
        Xt[:50, 1] = 99      # unknown code
        Xt[50:100, 3] = 4    # a code between known ones (they are multiples of 3)
        Xt[100:150, 1] = np.nan
        for Z in (X, Xt):
            np.testing.assert_allclose(ours.predict_proba(Z), ref.predict_proba(Z), rtol=0,
                                       atol=1e-10)


def test_pandas_categories_absent_from_training_are_unknown():
    """Categories of the dtype that no training row has go where missing values go at
    prediction (scikit-learn learns its categories from the data, so they are unknown to it)."""
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 10, 1500)
    y = (rng.normal(size=12)[codes] + rng.normal(size=1500) * 0.5 > 0).astype(int)
    cats = [f"c{i}" for i in range(12)]  # c10 and c11 are never used in training
    df = pd.DataFrame({"a": pd.Categorical.from_codes(codes, categories=cats),
                       "b": rng.normal(size=1500)})
    df.loc[::9, "a"] = np.nan
    kw = dict(max_iter=3, learning_rate=0.5, early_stopping=False, min_samples_leaf=10)
    ours = GradientBoostingClassifier(**kw).fit(df, y)
    ref = HistGradientBoostingClassifier(**kw).fit(df, y)
    new = pd.DataFrame({"a": pd.Categorical.from_codes([10, 11, 3, -1, 0], categories=cats),
                        "b": np.zeros(5)})
    for Z in (df, new):
        np.testing.assert_allclose(ours.predict_proba(Z), ref.predict_proba(Z), rtol=0,
                                   atol=1e-10)


def test_categorical_without_missing_values_in_training_follows_scikit_learn():
    """A categorical feature without missing values in training sends them (at prediction)
    to the child with more rows; weights and depth-limited growth as scikit-learn's."""
    X, y = _cat_data(nan=0.0, seed=2)
    w = np.random.default_rng(3).random(len(y)) * 2
    kw = dict(max_iter=3, early_stopping=False, max_depth=3, max_leaf_nodes=None,
              min_samples_leaf=5, categorical_features=[1, 3])
    ours = GradientBoostingRegressor(**kw).fit(X, y, sample_weight=w)
    ref = HistGradientBoostingRegressor(**kw).fit(X, y, sample_weight=w)
    Xt = X[:200].copy()
    Xt[::2, 1] = np.nan
    Xt[1::2, 3] = np.nan
    np.testing.assert_allclose(ours.predict(Xt), ref.predict(Xt), rtol=0, atol=1e-10)


# --------------------------------------------------------------------------------------------
# partitionings, a cluster, warm start, model files
# --------------------------------------------------------------------------------------------

def test_categorical_partitionings_agree():
    """The categories (and so the bins) do not depend on the partitioning: 1, 3, 7 and 64
    blocks grow the same trees (values to rounding)."""
    X, y = _cat_data(n=1280, seed=4)
    kw = dict(max_iter=2, max_leaf_nodes=8, early_stopping=False, categorical_features=[1, 3])
    ref = GradientBoostingRegressor(**kw).fit(X, y)
    for nb in (3, 7, 64):
        rows = int(np.ceil(len(X) / nb))
        m = GradientBoostingRegressor(**kw).fit(da.from_array(X, chunks=(rows, -1)),
                                                da.from_array(y, chunks=rows))
        _same_nodes(m, ref, rtol=1e-9)
        np.testing.assert_allclose(m.predict(X), ref.predict(X), rtol=1e-9)


def test_categorical_dask_dataframe_on_a_cluster(client):
    """pandas categories through a Dask dataframe on the cluster (threads or worker processes):
    the model of the in-memory fit."""
    X, y = _cat_data(n=600, seed=5)
    df = _frame(X)
    kw = dict(max_iter=2, max_leaf_nodes=6, early_stopping=False)
    ref = GradientBoostingRegressor(**kw).fit(df, y)
    ddf = dd.from_pandas(df.assign(y=y), npartitions=3)
    m = GradientBoostingRegressor(**kw).fit(ddf[list("abcde")], ddf["y"])
    _same_nodes(m, ref, rtol=1e-9)
    np.testing.assert_allclose(m.predict(df), ref.predict(df), rtol=1e-9)


def test_categorical_warm_start_and_model_file(tmp_path):
    X, y = _cat_data(n=600, seed=6)
    kw = dict(early_stopping=False, categorical_features=[1, 3])
    once = GradientBoostingRegressor(max_iter=4, **kw).fit(X, y)
    warm = GradientBoostingRegressor(max_iter=2, warm_start=True, **kw).fit(X, y)
    warm.set_params(max_iter=4).fit(X, y)
    np.testing.assert_allclose(warm.predict(X), once.predict(X), rtol=0, atol=1e-12)
    dml.save(warm, tmp_path / "m")
    back = dml.load(tmp_path / "m")
    Xt = X.copy()
    Xt[:20, 1] = 77  # unknown category
    np.testing.assert_array_equal(back.predict(Xt), warm.predict(Xt))


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------

def test_categorical_bad_input():
    X, y = _cat_data(n=300, nan=0.0)
    Est = GradientBoostingRegressor
    with pytest.raises(ValueError, match="more than max_bins=10"):
        Est(max_iter=1, max_bins=10, categorical_features=[1]).fit(X, y)
    Xn = X.copy()
    Xn[0, 1] = -1
    with pytest.raises(ValueError, match="negative values"):
        Est(max_iter=1, categorical_features=[1]).fit(Xn, y)
    Xn[0, 1] = 2.5
    with pytest.raises(ValueError, match="non-integer values"):
        Est(max_iter=1, categorical_features=[1]).fit(Xn, y)
    with pytest.raises(ValueError, match="one entry per feature"):
        Est(max_iter=1, categorical_features=[True, False]).fit(X, y)
    with pytest.raises(ValueError, match=r"in \[0, 4\]"):
        Est(max_iter=1, categorical_features=[7]).fit(X, y)
    with pytest.raises(ValueError, match="no column names"):
        Est(max_iter=1, categorical_features=["b"]).fit(X, y)
    df = _frame(X)
    with pytest.raises(ValueError, match="not columns of X"):
        Est(max_iter=1, categorical_features=["zz"]).fit(df, y)
    with pytest.raises(ValueError, match=r"\['b', 'd'\] have the pandas 'category' dtype"):
        Est(max_iter=1, categorical_features=None).fit(df, y)
    big = pd.DataFrame({"a": pd.Categorical([f"c{i % 300}" for i in range(600)])})
    with pytest.raises(ValueError, match="300 categories, more than max_bins=255"):
        Est(max_iter=1).fit(big, np.arange(600.0))


# --------------------------------------------------------------------------------------------
# early stopping on a given validation set
# --------------------------------------------------------------------------------------------

def _val_data():
    rng = np.random.default_rng(7)
    X = rng.integers(0, 25, size=(1200, 4)).astype(float)
    Xv = rng.integers(0, 25, size=(300, 4)).astype(float)
    f = lambda Z, n: 2 * Z[:, 0] + np.sin(Z[:, 1]) + 8 * rng.normal(size=n)  # noqa: E731
    return X, f(X, len(X)), Xv, f(Xv, len(Xv)), rng.random(len(Xv))


def test_validation_set_early_stopping_equals_scikit_learn():
    """The whole trajectory (validation and training scores, stopping round, predictions);
    the validation set as Dask arrays with chunks unlike X's gives the same."""
    X, y, Xv, yv, wv = _val_data()
    kw = dict(max_iter=60, learning_rate=0.5, early_stopping=True, n_iter_no_change=3)
    ref = HistGradientBoostingRegressor(**kw).fit(X, y, X_val=Xv, y_val=yv,
                                                  sample_weight_val=wv)
    ours = GradientBoostingRegressor(**kw).fit(X, y, X_val=Xv, y_val=yv, sample_weight_val=wv)
    assert ours.n_iter_ == ref.n_iter_ < 60
    np.testing.assert_allclose(ours.validation_score_, ref.validation_score_, rtol=1e-12)
    np.testing.assert_allclose(ours.train_score_, ref.train_score_, rtol=1e-12)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=0, atol=1e-10)
    dk = GradientBoostingRegressor(**kw).fit(
        da.from_array(X, chunks=(250, -1)), da.from_array(y, chunks=250),
        X_val=da.from_array(Xv, chunks=(70, -1)), y_val=da.from_array(yv, chunks=70),
        sample_weight_val=da.from_array(wv, chunks=70))
    assert dk.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(dk.validation_score_, ref.validation_score_, rtol=1e-12)

    # Warm start continues the validation trajectory.
    wkw = dict(kw, max_iter=3, warm_start=True, n_iter_no_change=50)
    ours = GradientBoostingRegressor(**wkw).fit(X, y, X_val=Xv, y_val=yv)
    ref = HistGradientBoostingRegressor(**wkw).fit(X, y, X_val=Xv, y_val=yv)
    ours.set_params(max_iter=6).fit(X, y, X_val=Xv, y_val=yv)
    ref.set_params(max_iter=6).fit(X, y, X_val=Xv, y_val=yv)
    assert ours.n_iter_ == ref.n_iter_ == 6
    np.testing.assert_allclose(ours.validation_score_, ref.validation_score_, rtol=1e-12)

    yc, yvc = (y > np.median(y)).astype(int), (yv > np.median(y)).astype(int)
    kw["class_weight"] = "balanced"  # applies to the training rows only, as scikit-learn's
    ref = HistGradientBoostingClassifier(**kw).fit(X, yc, X_val=Xv, y_val=yvc)
    ours = GradientBoostingClassifier(**kw).fit(X, yc, X_val=Xv, y_val=yvc)
    assert ours.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(ours.validation_score_, ref.validation_score_, rtol=1e-12)


def test_validation_set_rules_and_errors():
    X, y, Xv, yv, _ = _val_data()
    Est = GradientBoostingRegressor
    # "auto" early stopping is off at 1,200 rows: the validation set is not used.
    m = Est(max_iter=3).fit(X, y, X_val=Xv, y_val=yv)
    assert not m.do_early_stopping_ and m.validation_score_.size == 0 and m.n_iter_ == 3
    with pytest.raises(ValueError, match="X_val is provided, but y_val was not"):
        Est(max_iter=2, early_stopping=True).fit(X, y, X_val=Xv)
    with pytest.raises(ValueError, match="y_val is provided, but X_val was not"):
        Est(max_iter=2, early_stopping=True).fit(X, y, y_val=yv)
    with pytest.raises(ValueError, match="early_stopping is False"):
        Est(max_iter=2, early_stopping=False).fit(X, y, X_val=Xv, y_val=yv)
    with pytest.raises(ValueError, match="X has 3 features, but GradientBoostingRegressor is "
                                         "expecting 4"):
        Est(max_iter=2, early_stopping=True).fit(X, y, X_val=Xv[:, :3], y_val=yv)
    with pytest.raises(ValueError, match="X has 300 rows but y has 295"):
        Est(max_iter=2, early_stopping=True).fit(X, y, X_val=Xv, y_val=yv[:-5])
    with pytest.raises(ValueError, match=r"y_val has labels \[7\]"):
        GradientBoostingClassifier(max_iter=2, early_stopping=True).fit(
            X, (y > 0).astype(int), X_val=Xv, y_val=np.full(len(Xv), 7))


@pytest.mark.slow
def test_adult_with_categorical_columns_close_to_scikit_learn_and_lightgbm(real_data):
    """Adult with its eight string columns as pandas categories (a Dask dataframe): accuracy
    within 0.5 point of scikit-learn's HistGradientBoosting and, when installed, LightGBM on
    the same categorical columns."""
    df = pd.read_csv(real_data / "adult" / "adult.csv")
    y = (df.pop("income").astype(str).str.strip().str.startswith(">50K")).astype(int).to_numpy()
    for c in df.columns:
        if not pd.api.types.is_numeric_dtype(df[c]):
            df[c] = df[c].astype(str).str.strip().astype("category")
    n = 22000
    tr, te = df.iloc[:n], df.iloc[n:]
    kw = dict(max_iter=100, early_stopping=False)
    ours = GradientBoostingClassifier(**kw).fit(
        dd.from_pandas(tr.assign(y=y[:n]), npartitions=5)[list(df.columns)],
        dd.from_pandas(tr.assign(y=y[:n]), npartitions=5)["y"])
    score = ours.score(te, y[n:])
    ref = HistGradientBoostingClassifier(**kw).fit(tr, y[:n]).score(te, y[n:])
    assert score >= ref - 0.005, (score, ref)
    if importlib.util.find_spec("lightgbm") is None:  # an optional peer
        return
    import lightgbm

    lgb = lightgbm.LGBMClassifier(n_estimators=100, num_leaves=31, learning_rate=0.1,
                                  min_child_samples=20, verbose=-1).fit(tr, y[:n])
    assert score >= lgb.score(te, y[n:]) - 0.005, (score, lgb.score(te, y[n:]))
