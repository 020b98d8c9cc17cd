"""Naive Bayes (SPEC §7): one-pass count reductions equal scikit-learn's estimators."""
from __future__ import annotations

import threading
import warnings
from collections import Counter

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import sklearn.naive_bayes as skb
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from dml import naive_bayes as nb
from dml.naive_bayes import _kernels as nb_kernels

TOL = dict(rtol=1e-10, atol=1e-12)
KINDS = ["gaussian", "multinomial", "bernoulli", "categorical"]
ESTIMATORS = {
    "gaussian": (nb.GaussianNB, skb.GaussianNB, {}),
    "multinomial": (nb.MultinomialNB, skb.MultinomialNB, {"alpha": 0.5}),
    "bernoulli": (nb.BernoulliNB, skb.BernoulliNB, {"alpha": 0.7, "binarize": 0.5}),
    "categorical": (nb.CategoricalNB, skb.CategoricalNB, {"alpha": 0.9}),
}
ATTRS = {
    "gaussian": ["class_count_", "class_prior_", "theta_", "var_", "epsilon_"],
    "multinomial": ["class_count_", "feature_count_", "feature_log_prob_", "class_log_prior_"],
    "bernoulli": ["class_count_", "feature_count_", "feature_log_prob_", "class_log_prior_"],
    "categorical": ["class_count_", "class_log_prior_", "n_categories_", "category_count_",
                    "feature_log_prob_"],
}
N_CATS = (2, 3, 5, 4)


def make_data(kind, n=240, seed=0, labels="int"):
    """Small data where each class differs a little, so predictions are not trivial."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    if kind == "gaussian":
        X = rng.normal(size=(n, 4)) * [1.0, 2.0, 0.5, 3.0] + y[:, None] * [0.5, -0.3, 0.2, 0.0]
    elif kind == "multinomial":
        X = rng.poisson(1.0 + y[:, None] * [0.5, 0.0, 1.0, 0.2, 0.0]).astype(np.float64)
    elif kind == "bernoulli":
        X = rng.uniform(size=(n, 5)) + y[:, None] * [0.1, 0.0, -0.1, 0.2, 0.0]
    else:
        X = np.column_stack([(rng.integers(0, k, n) + y * (j % 2)) % k
                             for j, k in enumerate(N_CATS)]).astype(np.int64)
    w = rng.uniform(0.2, 3.0, n)
    if labels == "str":
        y = np.array(["ant", "bee", "cat"], dtype=object)[y]
    return X, y, w


def uneven(n, parts):
    """Uneven row chunks summing to n."""
    if parts == 1:
        return (n,)
    cuts = np.sort(np.random.default_rng(parts).choice(np.arange(1, n), parts - 1,
                                                       replace=False))
    return tuple(int(c) for c in np.diff(np.concatenate(([0], cuts, [n]))))


def as_frame(X, y, w, parts, kind):
    cols = [f"f{j}" for j in range(X.shape[1])]
    df = pd.DataFrame(X, columns=cols)
    if kind == "categorical":
        # Label columns whose sorted order is the code order; the last column stays integer.
        for c in cols[:-1]:
            df[c] = np.array([f"v{k}" for k in range(10)], dtype=object)[df[c].to_numpy()]
    df["label"] = y
    df["w"] = w
    ddf = dd.from_pandas(df, npartitions=1)
    bounds = np.concatenate(([0], np.cumsum(uneven(len(df), parts))))
    bounds[-1] = len(df) - 1
    return ddf.repartition(divisions=[int(b) for b in bounds]), cols


def fitted_equal(ours, ref, kind, exact=False):
    np.testing.assert_array_equal(ours.classes_, ref.classes_)
    assert ours.n_features_in_ == ref.n_features_in_
    check = np.testing.assert_array_equal if exact else \
        (lambda a, b, **k: np.testing.assert_allclose(a, b, **TOL, **k))
    for name in ATTRS[kind]:
        a, b = getattr(ours, name), getattr(ref, name)
        if isinstance(b, list):
            assert len(a) == len(b)
            for j, (aj, bj) in enumerate(zip(a, b)):
                check(aj, bj, err_msg=f"{name}[{j}]")
        else:
            check(a, b, err_msg=name)


def ours_and_ref(kind, **params):
    ours, ref, defaults = ESTIMATORS[kind]
    return ours(**{**defaults, **params}), ref(**{**defaults, **params})


# --------------------------------------------------------------------------------------------
# Equality with scikit-learn on both clusters and several partitionings
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_matches_sklearn_on_cluster(client, kind):
    X, y, w = make_data(kind)
    Xs, ys, _ = make_data(kind, labels="str")
    ref = ESTIMATORS[kind][1](**ESTIMATORS[kind][2]).fit(X, y)
    ref_w = ESTIMATORS[kind][1](**ESTIMATORS[kind][2]).fit(X, ys, sample_weight=w)
    for parts in (1, 3, 7):
        # Dask arrays, y chunked differently from X (realigned), no weights.
        Xd = da.from_array(X, chunks=(uneven(len(X), parts), X.shape[1]))
        yd = da.from_array(y, chunks=uneven(len(y), max(parts - 1, 1)))
        est = ours_and_ref(kind)[0].fit(Xd, yd)
        fitted_equal(est, ref, kind)
        proba, pred = est.predict_proba(Xd), est.predict(Xd)
        assert isinstance(proba, da.Array) and isinstance(pred, da.Array)
        proba, pred = dask.compute(proba, pred)
        np.testing.assert_allclose(proba, ref.predict_proba(X), **TOL)
        np.testing.assert_array_equal(pred, ref.predict(X))

        # Dask dataframe with y and sample_weight as column names, string labels.
        ddf, cols = as_frame(X, ys, w, parts, kind)
        assert ddf.npartitions == parts
        est = ours_and_ref(kind)[0].fit(ddf, "label", sample_weight="w")
        fitted_equal(est, ref_w, kind)
        np.testing.assert_array_equal(est.feature_names_in_, cols)
        out = est.predict_log_proba(ddf[cols])
        assert isinstance(out, da.Array)
        np.testing.assert_allclose(out.compute(), ref_w.predict_log_proba(X), **TOL)
        if parts == 3:  # accuracy as a reduction over the partitions
            assert est.score(ddf, "label", sample_weight="w") == pytest.approx(
                ref_w.score(X, ys, sample_weight=w), abs=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_numpy_in_numpy_out_matches_sklearn(kind):
    X, y, w = make_data(kind, labels="str")
    for sw in (None, w):
        ours, ref = ours_and_ref(kind)
        ours.fit(X, y, sample_weight=sw)
        ref.fit(X, y, sample_weight=sw)
        fitted_equal(ours, ref, kind)
        for method in ("predict", "predict_proba", "predict_log_proba",
                       "predict_joint_log_proba"):
            got = getattr(ours, method)(X[:50])
            assert type(got) is np.ndarray, method
            want = getattr(ref, method)(X[:50])
            if method == "predict":
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_allclose(got, want, **TOL, err_msg=method)
        assert ours.score(X, y, sample_weight=sw) == pytest.approx(
            ref.score(X, y, sample_weight=sw), abs=1e-12)
    # pandas in -> NumPy out, with feature names recorded
    df = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])])
    ours = ours_and_ref(kind)[0].fit(df, y)
    assert type(ours.predict_proba(df)) is np.ndarray
    assert list(ours.feature_names_in_) == list(df.columns)


def test_dask_in_dask_out_is_lazy():
    X, y, _ = make_data("gaussian")
    est = nb.GaussianNB().fit(X, y)
    Xd = da.from_array(X, chunks=50)
    for method in ("predict", "predict_proba", "predict_log_proba", "predict_joint_log_proba"):
        out = getattr(est, method)(Xd)
        assert isinstance(out, da.Array), method
        assert out.chunks[0] == Xd.chunks[0]
    assert est.predict_proba(Xd).shape == (len(X), 3)


def test_score_on_dask_is_a_reduction():
    X, y, w = make_data("multinomial", labels="str")
    ours, ref = ours_and_ref("multinomial")
    ours.fit(X, y)
    ref.fit(X, y)
    Xd, yd, wd = (da.from_array(a, chunks=70) for a in (X, y, w))
    assert ours.score(Xd, yd, sample_weight=wd) == pytest.approx(
        ref.score(X, y, sample_weight=w), abs=1e-12)
    assert ours.score(Xd, yd) == pytest.approx(ref.score(X, y), abs=1e-12)


# --------------------------------------------------------------------------------------------
# One pass over the data
# --------------------------------------------------------------------------------------------

_produced: Counter = Counter()
_lock = threading.Lock()


def _make_block(i, rows, kind):
    with _lock:
        _produced[i] += 1
    X, y, _ = make_data(kind, n=rows, seed=100 + i)
    return np.column_stack([X.astype(np.float64), y])


@pytest.mark.parametrize("kind", KINDS)
def test_fit_produces_each_block_exactly_once(kind):
    rows = [30, 45, 1, 12, 60]
    d = make_data(kind, n=3)[0].shape[1]
    pieces = [da.from_delayed(dask.delayed(_make_block, pure=True)(i, r, kind),
                              shape=(r, d + 1), dtype=np.float64)
              for i, r in enumerate(rows)]
    source = da.concatenate(pieces)
    X, y = source[:, :d], source[:, d]
    _produced.clear()
    with dask.config.set(scheduler="threads"):
        est = ESTIMATORS[kind][0](**ESTIMATORS[kind][2]).fit(X, y)
    assert dict(_produced) == {i: 1 for i in range(len(rows))}
    # and the one-pass model is the right one
    Xn = np.concatenate([_make_block(i, r, kind) for i, r in enumerate(rows)])
    ref = ESTIMATORS[kind][1](**ESTIMATORS[kind][2]).fit(Xn[:, :d], Xn[:, d])
    fitted_equal(est, ref, kind)


# --------------------------------------------------------------------------------------------
# partial_fit
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_partial_fit_equals_fit(kind):
    X, y, w = make_data(kind, labels="str")
    full = ours_and_ref(kind)[0].fit(X, y, sample_weight=w)
    ref = ours_and_ref(kind)[1].fit(X, y, sample_weight=w)
    est = ours_and_ref(kind)[0]
    bounds = [0, 17, 90, 91, 160, 240]
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        Xb, yb, wb = X[a:b], y[a:b], w[a:b]
        if k % 2:  # mix NumPy and Dask batches
            Xb, yb, wb = (da.from_array(v, chunks=20) for v in (Xb, yb, wb))
        est.partial_fit(Xb, yb, classes=["ant", "bee", "cat"] if k == 0 else None,
                        sample_weight=wb)
    fitted_equal(est, full, kind)
    fitted_equal(est, ref, kind)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), **TOL)


def test_gaussian_partial_fit_epsilon_uses_all_data():
    X, y, _ = make_data("gaussian")
    X[:100] *= 0.01  # the first batch has a much smaller variance than the rest
    est = nb.GaussianNB().partial_fit(X[:100], y[:100], classes=[0, 1, 2])
    est.partial_fit(X[100:], y[100:])
    assert est.epsilon_ == pytest.approx(1e-9 * X.var(axis=0).max(), rel=1e-12)
    # scikit-learn keeps the latest batch's variance only (documented difference)
    sk = skb.GaussianNB().partial_fit(X[:100], y[:100], classes=[0, 1, 2])
    sk.partial_fit(X[100:], y[100:])
    np.testing.assert_allclose(est.theta_, sk.theta_, **TOL)
    assert sk.epsilon_ == pytest.approx(1e-9 * X[100:].var(axis=0).max(), rel=1e-12)


def test_partial_fit_unseen_class_in_first_batch_and_errors():
    X, y, _ = make_data("multinomial")
    est = nb.MultinomialNB()
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        est.partial_fit(X, y)
    est.partial_fit(X[y != 2], y[y != 2], classes=[0, 1, 2, 3])
    np.testing.assert_array_equal(est.classes_, [0, 1, 2, 3])
    assert est.class_count_[2] == 0 and est.class_count_[3] == 0
    with pytest.raises(ValueError, match=r"label\(s\) \[7\].*not in classes"):
        est.partial_fit(X[:5], np.array([0, 7, 1, 1, 0]))
    with pytest.raises(ValueError, match="not the same as on the first call"):
        est.partial_fit(X[:5], y[:5], classes=[0, 1])
    sk = skb.MultinomialNB().partial_fit(X[y != 2], y[y != 2], classes=[0, 1, 2, 3])
    est.partial_fit(X[y == 2], y[y == 2])
    sk.partial_fit(X[y == 2], y[y == 2])
    fitted_equal(est, sk, "multinomial")
    with pytest.raises(ValueError, match="X has 3 features, but MultinomialNB is expecting 5"):
        est.partial_fit(X[:5, :3], y[:5])


def test_categorical_partial_fit_grows_categories():
    df = pd.DataFrame({"c": ["b", "a", "b", "d", "c", "a"], "k": [0, 1, 1, 4, 2, 0]})
    y = np.array([0, 1, 0, 1, 1, 0])
    est = nb.CategoricalNB().partial_fit(df[:3], y[:3], classes=[0, 1])
    assert list(est.categories_[0]) == ["a", "b"] and est.n_categories_.tolist() == [2, 2]
    est.partial_fit(df[3:], y[3:])
    full = nb.CategoricalNB().fit(df, y)
    assert list(est.categories_[0]) == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(est.n_categories_, [4, 5])
    for j in range(2):
        np.testing.assert_array_equal(est.category_count_[j], full.category_count_[j])
        np.testing.assert_allclose(est.feature_log_prob_[j], full.feature_log_prob_[j], **TOL)
    with pytest.raises(ValueError, match="feature kinds"):
        est.partial_fit(pd.DataFrame({"c": ["a"], "k": ["x"]}), [0])


# --------------------------------------------------------------------------------------------
# Missing values (SPEC §7)
# --------------------------------------------------------------------------------------------

NAN = np.nan


def test_gaussian_missing_rule_by_hand():
    X = np.array([[1.0, 2.0], [3.0, NAN], [NAN, 6.0], [5.0, 8.0]])
    y = np.array([0, 0, 1, 1])
    eps = 1e-9 * max(np.var([1, 3, 5]), np.var([2, 6, 8]))  # observed values per feature
    for Xf in (X, da.from_array(X, chunks=1), da.from_array(X, chunks=3)):
        est = nb.GaussianNB(missing="ignore").fit(Xf, y)
        np.testing.assert_allclose(est.theta_, [[2.0, 2.0], [5.0, 7.0]], rtol=1e-15)
        np.testing.assert_allclose(est.var_, np.array([[1.0, 0.0], [0.0, 1.0]]) + eps,
                                   rtol=1e-12, atol=1e-20)
        assert est.epsilon_ == pytest.approx(eps, rel=1e-12)
        np.testing.assert_array_equal(est.class_count_, [2.0, 2.0])
    rows = np.array([[NAN, 7.0], [4.0, NAN], [NAN, NAN]])
    var = est.var_

    def log_pdf(x, mu, v):
        return -0.5 * (np.log(2 * np.pi * v) + (x - mu) ** 2 / v)

    want = np.log(0.5) + np.array([
        [log_pdf(7.0, 2.0, var[0, 1]), log_pdf(7.0, 7.0, var[1, 1])],
        [log_pdf(4.0, 2.0, var[0, 0]), log_pdf(4.0, 5.0, var[1, 0])],
        [0.0, 0.0]])
    np.testing.assert_allclose(est.predict_joint_log_proba(rows), want, rtol=1e-12)
    np.testing.assert_allclose(est.predict_proba(rows)[2], [0.5, 0.5])


def test_multinomial_missing_rule_by_hand():
    X = np.array([[1, NAN, 2], [0, 3, 1], [NAN, 1, 1], [2, 2, NAN]])
    y = np.array(["a", "a", "b", "b"])
    est = nb.MultinomialNB(missing="ignore").fit(X, y)
    np.testing.assert_array_equal(est.feature_count_, [[1, 3, 3], [2, 3, 1]])
    flp = np.log(np.array([[2, 4, 4], [3, 4, 2]]) / np.array([[10], [9]]))
    np.testing.assert_allclose(est.feature_log_prob_, flp, rtol=1e-14)
    want = np.log(0.5) + np.array([flp[0, 1] + 2 * flp[0, 2], flp[1, 1] + 2 * flp[1, 2]])
    np.testing.assert_allclose(est.predict_joint_log_proba(np.array([[NAN, 1, 2]]))[0], want,
                               rtol=1e-14)


def test_bernoulli_missing_rule_by_hand():
    X = np.array([[1, 0], [NAN, 1], [0, NAN], [1, 1]])
    y = np.array(["a", "a", "b", "b"])
    for Xf in (X, da.from_array(X, chunks=1)):
        est = nb.BernoulliNB(missing="ignore").fit(Xf, y)
        # a: f0 observed once (1), f1 twice (0, 1); b: f0 twice (0, 1), f1 once (1)
        p = np.array([[2 / 3, 2 / 4], [2 / 4, 2 / 3]])
        np.testing.assert_allclose(np.exp(est.feature_log_prob_), p, rtol=1e-14)
        np.testing.assert_array_equal(est.class_count_, [2, 2])
    jll = est.predict_joint_log_proba(np.array([[NAN, 1], [0, NAN]]))
    want = np.log(0.5) + np.log([[p[0, 1], p[1, 1]], [1 - p[0, 0], 1 - p[1, 0]]])
    np.testing.assert_allclose(jll, want, rtol=1e-14)


def test_categorical_missing_rule_by_hand():
    df = pd.DataFrame({
        "color": pd.Series(["red", None, "red", "blue", NAN, "blue"], dtype=object),
        "size": pd.array([0, 1, 1, pd.NA, 0, 1], dtype="Int64"),
        "y": ["a", "a", "a", "b", "b", "b"]})
    for X in (df, dd.from_pandas(df, npartitions=3)):
        est = nb.CategoricalNB(missing="ignore").fit(X, "y")
        assert list(est.categories_[0]) == ["blue", "red"]
        np.testing.assert_array_equal(est.category_count_[0], [[0, 2], [2, 0]])
        np.testing.assert_array_equal(est.category_count_[1], [[1, 2], [1, 1]])
        np.testing.assert_array_equal(est.class_count_, [3, 3])
        np.testing.assert_allclose(np.exp(est.feature_log_prob_[0]),
                                   [[1 / 4, 3 / 4], [3 / 4, 1 / 4]], rtol=1e-14)
        np.testing.assert_allclose(np.exp(est.feature_log_prob_[1]),
                                   [[2 / 5, 3 / 5], [1 / 2, 1 / 2]], rtol=1e-14)
    rows = pd.DataFrame({"color": pd.Series([pd.NA, "blue"], dtype=object),
                         "size": pd.array([1, pd.NA], dtype="Int64")})
    want = np.log(0.5) + np.log([[3 / 5, 1 / 2], [1 / 4, 3 / 4]])
    np.testing.assert_allclose(est.predict_joint_log_proba(rows), want, rtol=1e-14)
    with pytest.raises(ValueError, match="missing values .*'color'"):
        nb.CategoricalNB().fit(df, "y")
    with pytest.raises(ValueError, match="missing values .*'color'"):
        nb.CategoricalNB().fit(df.fillna({"color": "x", "size": 0}), "y").predict(rows)


@pytest.mark.parametrize("kind", KINDS)
def test_missing_ignore_equals_error_without_nan(kind):
    X, y, w = make_data(kind)
    Xd = da.from_array(X, chunks=(uneven(len(X), 3), X.shape[1]))
    a = ESTIMATORS[kind][0](**ESTIMATORS[kind][2]).fit(Xd, y, sample_weight=w)
    b = ESTIMATORS[kind][0](**ESTIMATORS[kind][2], missing="ignore").fit(Xd, y, sample_weight=w)
    fitted_equal(a, b, kind, exact=True)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_nan_is_an_error_by_default(kind):
    X, y, _ = make_data(kind)
    X = X.astype(np.float64)
    X[5, 1] = NAN
    est = ESTIMATORS[kind][0]()
    with pytest.raises(ValueError, match="contains (NaN|missing values)"):
        est.fit(X, y)
    with pytest.raises(ValueError, match="contains (NaN|missing values)"):
        est.fit(da.from_array(X, chunks=50), y)
    est.fit(X[6:], y[6:])
    with pytest.raises(ValueError, match="contains (NaN|missing values)"):
        est.predict(X[:10])


@pytest.mark.parametrize("kind", KINDS)
def test_inf_is_always_an_error(kind):
    X, y, _ = make_data(kind)
    X = X.astype(np.float64)
    est = ESTIMATORS[kind][0](missing="ignore")
    bad = X.copy()
    bad[3, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        est.fit(bad, y)
    est.fit(X, y)
    with pytest.raises(ValueError, match="infinity"):
        est.predict(bad[:5])


def test_multinomial_negative_counts():
    X, y, _ = make_data("multinomial")
    X[100, 2] = -1.0
    msg = "MultinomialNB needs non-negative counts; X contains negative values"
    with pytest.raises(ValueError, match=msg):
        nb.MultinomialNB().fit(X, y)
    with pytest.raises(ValueError, match=msg + r" \(row block 2"):
        nb.MultinomialNB().fit(da.from_array(X, chunks=40), y)


@pytest.mark.parametrize("est_class", [nb.MultinomialNB, nb.ComplementNB])
def test_count_models_check_finiteness_in_their_own_pass(est_class):
    """The count models skip the finiteness pass of block validation (their compiled sums
    show NaN/infinity): the errors are the same, also where the sums alone could hide them."""
    X, y, w = make_data("multinomial")
    name = est_class.__name__
    for value, msg in ((np.inf, "infinity"), (NAN, "NaN")):
        bad = X.copy()
        bad[100, 3] = value
        for Xin in (bad, da.from_array(bad, chunks=40)):
            with pytest.raises(ValueError, match=f"{name}: Input X contains {msg} "
                                                 r"\(row block"):
                est_class().fit(Xin, y)
        zero_w = w.copy()
        zero_w[100] = 0.0  # a weight of 0 must not hide the bad value
        with pytest.raises(ValueError, match=msg):
            est_class().fit(da.from_array(bad, chunks=40), y, sample_weight=zero_w)
    # Finite values whose sums overflow are valid input (the exact check decides).
    big = X.copy()
    big[np.flatnonzero(y == 0)[:2], 0] = 1e308
    est = est_class().fit(da.from_array(big, chunks=40), y)
    assert np.isinf(est.feature_count_[:, 0]).any()
    # A negative count in a block whose other values are fine is still found, as is -inf.
    neg = X.copy()
    neg[7, 4] = -np.inf
    with pytest.raises(ValueError, match="infinity"):
        est_class().fit(neg, y)


@pytest.mark.parametrize("kind", ["multinomial", "bernoulli"])
def test_compiled_and_numpy_count_paths_agree(kind):
    """Dense blocks are summed by a compiled row pass; non-contiguous blocks and blocks with
    missing values take the NumPy products: all give scikit-learn's counts."""
    X, y, w = make_data(kind, n=300, seed=3)
    for sw in (None, w):
        ref = ours_and_ref(kind)[1].fit(X, y, sample_weight=sw)
        for Xin in (X, np.asfortranarray(X), da.from_array(X, chunks=70)):
            ours = ours_and_ref(kind)[0].fit(Xin, y, sample_weight=sw)
            fitted_equal(ours, ref, kind)
        withnan = X.copy()
        withnan[::50, 1] = NAN  # the NumPy path: missing entries are not counted
        ours = ESTIMATORS[kind][0](**ESTIMATORS[kind][2], missing="ignore").fit(
            withnan, y, sample_weight=sw)
        np.testing.assert_allclose(ours.feature_count_[:, 0], ref.feature_count_[:, 0], **TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_structural_input_errors(kind):
    X, y, _ = make_data(kind)
    Est = ESTIMATORS[kind][0]
    with pytest.raises(ValueError, match="X has 240 rows but y has 239"):
        Est().fit(X, y[:-1])
    with pytest.raises(ValueError, match="X has 240 rows but y has 239"):
        Est().fit(da.from_array(X, chunks=50), da.from_array(y[:-1], chunks=50))
    with pytest.raises(ValueError, match="0 rows"):
        Est().fit(X[:0], y[:0])
    with pytest.raises(ValueError, match="0 rows"):
        Est().partial_fit(da.from_array(X[:0], chunks=10), y[:0], classes=[0, 1, 2])
    with pytest.raises(ValueError, match=r"1-D array.*reshape\(-1, 1\)"):
        Est().fit(X[:, 0], y)
    est = Est().fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features, but .* is expecting"):
        est.predict(X[:, :2])
    with pytest.raises(ValueError, match="X has 2 features, but .* is expecting"):
        est.predict_proba(da.from_array(X[:, :2], chunks=50))
    with pytest.raises(ValueError, match=r"The 'missing' parameter of \w+NB must be a str among "
                                         r"\{'(ignore|error)', '(ignore|error)'\}\. Got 'skip'"):
        Est(missing="skip").fit(X, y)
    with pytest.raises(ValueError, match=r"0 feature\(s\) \(shape=\(240, 0\)\)"):
        Est().fit(X[:, :0], y)
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        Est().fit(da.from_array(X, chunks=50), y + 0.5)
    with pytest.raises(ValueError, match="y contains infinity"):
        Est().fit(X, np.where(y == 1, np.inf, y))
    with pytest.raises(ValueError, match="y contains NaN"):
        Est().fit(X, np.where(y == 1, np.nan, y))
    with pytest.raises(ValueError, match="Sample weights must contain at least one non-zero"):
        Est().fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(TypeError, match="y mixes labels of different types"):
        Est().fit(X, np.array([1, "a"] * 120, dtype=object))


# --------------------------------------------------------------------------------------------
# Many classes, missing values, BLAS threads and label encodings
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_classes", [1, 2, 20, 90])
@pytest.mark.parametrize("kind", ["gaussian", "multinomial", "bernoulli"])
def test_many_classes_match_sklearn(kind, n_classes):
    rng = np.random.default_rng(n_classes)
    X = make_data(kind, n=900, seed=n_classes)[0]
    y = rng.integers(0, n_classes, len(X)) * 7 - 30  # sparse, negative labels
    w = rng.uniform(0.2, 3.0, len(X))
    Xd = da.from_array(X, chunks=(uneven(len(X), 3), X.shape[1]))
    for sw in (None, w):
        ours, ref = ours_and_ref(kind)
        fitted_equal(ours.fit(Xd, y, sample_weight=sw), ref.fit(X, y, sample_weight=sw), kind)


@pytest.mark.parametrize("kind", ["gaussian", "multinomial", "bernoulli"])
def test_missing_values_match_nan_aware_numpy(kind):
    """``missing="ignore"`` with 30 classes and sample weights: the per-class statistics are
    NumPy's nan-aware weighted ones (each missing entry left out of its feature only)."""
    rng = np.random.default_rng(5)
    X = make_data(kind, n=500, seed=5)[0].astype(np.float64)
    X[rng.uniform(size=X.shape) < 0.15] = np.nan
    X[:, 0][rng.integers(0, 3, len(X)) == 0] = np.nan
    y = rng.integers(0, 30, len(X))
    w = rng.uniform(0.2, 3.0, len(X))
    for sw in (None, w):
        est = ESTIMATORS[kind][0](**ESTIMATORS[kind][2], missing="ignore")
        est.fit(da.from_array(X, chunks=170), y, sample_weight=sw)
        ww = np.ones(len(X)) if sw is None else sw
        for c in (0, 13, 29):
            rows, wc = X[y == c], ww[y == c][:, None]
            seen = np.where(np.isnan(rows), 0.0, wc)
            if kind == "gaussian":
                mean = np.nansum(rows * wc, axis=0) / seen.sum(axis=0)
                var = np.nansum(wc * (rows - mean) ** 2, axis=0) / seen.sum(axis=0)
                np.testing.assert_allclose(est.theta_[c], mean, **TOL)
                np.testing.assert_allclose(est.var_[c] - est.epsilon_, var, **TOL)
            else:
                v = rows if kind == "multinomial" else np.where(rows > 0.5, 1.0, 0.0)
                v = np.where(np.isnan(rows), 0.0, v)
                np.testing.assert_allclose(est.feature_count_[c], (v * wc).sum(axis=0), **TOL)
        if kind == "gaussian" and sw is None:
            assert est.epsilon_ == pytest.approx(1e-9 * np.nanvar(X, axis=0).max(), rel=1e-12)


@pytest.mark.parametrize("kind", ["gaussian", "multinomial"])
def test_block_statistics_do_not_depend_on_blas_threads(kind):
    """A block's statistics are the same bits with one BLAS thread (a ``dask worker``, whose
    nanny sets ``OMP_NUM_THREADS=1``) and with two (a worker thread of an in-process cluster).
    A BLAS product of the thin one-hot label matrix with the block split its sums between the
    threads: two threads gave other last bits (one out-of-core CI run failed on it)."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(11)
    # 20 columns: with 4 or 8 the product was not split (seen with OpenBLAS 0.3.31).
    X = rng.normal(size=(40_000, 20)) ** 2
    X[rng.uniform(size=X.shape) < 0.01] = np.nan
    y = rng.integers(0, 2, len(X))
    w = rng.uniform(0.5, 2.0, len(X))
    if kind == "gaussian":
        def stats():
            return nb_kernels._gaussian_block(0, X, y, w, "GaussianNB", "ignore")
    else:
        def stats():
            return nb_kernels._count_block(0, X, y, w, None, True, "MultinomialNB", "ignore")
    with threadpool_limits(1):
        one = stats()
    with threadpool_limits(2):
        two = stats()
    for key, value in one.items():
        np.testing.assert_array_equal(two[key], value, err_msg=key)


@pytest.mark.parametrize("labels", [
    np.array([True, False]), np.array([-3, 250], dtype=np.int16), np.array([7, 200], np.uint8),
    np.array([-(2 ** 62), 2 ** 62]), np.array([2.0, -1.0]), np.array(["spam", "ham"]),
    np.array(["b", "a"], dtype=object), np.array([2 ** 63 + 1, 5], dtype=np.uint64)])
def test_label_encodings_match_sklearn(labels):
    X, idx, _ = make_data("gaussian")
    y = labels[idx % 2]
    est = nb.GaussianNB().fit(da.from_array(X, chunks=70), y)
    ref = skb.GaussianNB().fit(X, y)
    if labels.dtype != object:  # object labels stay object (scikit-learn makes them str)
        assert est.classes_.dtype == ref.classes_.dtype
    fitted_equal(est, ref, "gaussian")
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))


def test_single_feature_as_column_works():
    X, y, _ = make_data("gaussian")
    ours = nb.GaussianNB().fit(X[:, :1], y)
    ref = skb.GaussianNB().fit(X[:, :1], y)
    fitted_equal(ours, ref, "gaussian")


def test_categorical_unknown_category_is_a_clear_error():
    X, y, _ = make_data("categorical")
    est = nb.CategoricalNB().fit(X, y)
    bad = X[:4].copy()
    bad[2, 1] = 3  # feature 1 has 3 categories: 0, 1, 2
    with pytest.raises(ValueError, match="feature 1 has the value 3, which is not one of the 3"):
        est.predict(bad)
    with pytest.raises(ValueError, match="feature 1 has the value 3"):
        est.predict(da.from_array(bad, chunks=2)).compute()
    with pytest.raises(ValueError, match="negative value"):
        est.predict(X[1:3] - 10)
    df = pd.DataFrame({"pet": ["cat", "dog", "cat"], "n": [0, 1, 2]})
    est = nb.CategoricalNB().fit(df, [0, 1, 0])
    with pytest.raises(ValueError, match="feature 'pet' has the value 'fish', which was not "
                                         r"seen during fit \(known categories: \['cat', 'dog'\]"):
        est.predict(pd.DataFrame({"pet": ["dog", "fish"], "n": [0, 0]}))
    with pytest.raises(ValueError, match="integer category codes"):
        nb.CategoricalNB().fit(np.array([[0.5], [1.0]]), [0, 1])


def test_categorical_declared_categories_are_used_as_is():
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 3, 90)  # "mid" (code 3 below) never occurs
    y = rng.integers(0, 2, 90)
    order = ["low", "high", "top", "mid"]
    col = pd.Categorical(np.array(order)[codes], categories=order)
    df = pd.DataFrame({"level": col, "y": y})
    for X in (df, dd.from_pandas(df, npartitions=4)):
        est = nb.CategoricalNB().fit(X, "y")
        assert list(est.categories_[0]) == order
        ref = skb.CategoricalNB(min_categories=4).fit(codes[:, None], y)
        np.testing.assert_allclose(est.category_count_[0], ref.category_count_[0], **TOL)
        np.testing.assert_allclose(est.feature_log_prob_[0], ref.feature_log_prob_[0], **TOL)
        test = pd.DataFrame({"level": pd.Categorical(["mid", "top"], categories=order)})
        np.testing.assert_allclose(est.predict_proba(test),
                                   ref.predict_proba(np.array([[3], [2]])), **TOL)
    # categories unknown to Dask's metadata are learned from the partitions' dtypes
    unknown = dd.from_pandas(df, npartitions=3)
    unknown["level"] = unknown["level"].cat.as_unknown()
    est = nb.CategoricalNB().fit(unknown, "y")
    assert sorted(est.categories_[0]) == sorted(order)


def test_categorical_min_categories_and_string_arrays():
    X, y, _ = make_data("categorical")
    ours = nb.CategoricalNB(min_categories=[3, 1, 7, 2]).fit(X, y)
    ref = skb.CategoricalNB(min_categories=[3, 1, 7, 2]).fit(X, y)
    fitted_equal(ours, ref, "categorical")
    np.testing.assert_array_equal(ours.categories_[2], np.arange(7))
    strings = np.array(list("pqrstu"), dtype=object)[X]
    est = nb.CategoricalNB().fit(da.from_array(strings, chunks=50), y)
    ref = skb.CategoricalNB().fit(X, y)
    for j in range(X.shape[1]):
        np.testing.assert_array_equal(est.categories_[j], list("pqrstu")[:N_CATS[j]])
        np.testing.assert_allclose(est.category_count_[j], ref.category_count_[j], **TOL)
    np.testing.assert_array_equal(est.predict(strings), ref.predict(X))
    with pytest.raises(ValueError, match="'min_categories' should have shape"):
        nb.CategoricalNB(min_categories=[1, 2]).fit(X, y)


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------

def test_discrete_parameters_match_sklearn():
    X, y, w = make_data("multinomial")
    for params in ({"alpha": np.array([0.1, 1.0, 2.0, 0.5, 3.0])}, {"fit_prior": False},
                   {"class_prior": [0.2, 0.5, 0.3]}, {"alpha": 0.0}):
        for kind in ("multinomial", "bernoulli"):
            if kind == "bernoulli" and isinstance(params.get("alpha"), np.ndarray):
                continue  # scikit-learn 1.9's BernoulliNB cannot broadcast array alphas
            ours, ref = ours_and_ref(kind, **params)
            fitted_equal(ours.fit(X, y, sample_weight=w), ref.fit(X, y, sample_weight=w), kind)
    with pytest.warns(UserWarning, match="alpha too small"):
        ours = nb.MultinomialNB(alpha=0.0, force_alpha=False).fit(X, y)
    with pytest.warns(UserWarning, match="alpha too small"):
        ref = skb.MultinomialNB(alpha=0.0, force_alpha=False).fit(X, y)
    fitted_equal(ours, ref, "multinomial")
    with pytest.raises(ValueError, match=r"The 'alpha' parameter of MultinomialNB must be a float "
                                         r"in the range \[0\.0, inf\) or an array-like"):
        nb.MultinomialNB(alpha=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="number of priors"):
        nb.BernoulliNB(class_prior=[0.5, 0.5]).fit(X, y)


def test_bernoulli_array_alpha_is_per_feature():
    X, y, _ = make_data("bernoulli")
    alpha = np.array([0.1, 1.0, 2.0, 0.5, 3.0])
    est = nb.BernoulliNB(alpha=alpha, binarize=0.5).fit(X, y)
    fc, cc = est.feature_count_, est.class_count_
    np.testing.assert_allclose(est.feature_log_prob_,
                               np.log((fc + alpha) / (cc[:, None] + 2 * alpha)), rtol=1e-14)


def test_gaussian_priors_and_validation():
    X, y, w = make_data("gaussian")
    ours = nb.GaussianNB(priors=[0.2, 0.3, 0.5], var_smoothing=1e-3).fit(X, y, sample_weight=w)
    ref = skb.GaussianNB(priors=[0.2, 0.3, 0.5], var_smoothing=1e-3).fit(X, y, sample_weight=w)
    fitted_equal(ours, ref, "gaussian")
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), **TOL)
    with pytest.raises(ValueError, match="number of priors"):
        nb.GaussianNB(priors=[0.5, 0.5]).fit(X, y)
    with pytest.raises(ValueError, match="sum of the priors should be 1"):
        nb.GaussianNB(priors=[0.5, 0.5, 0.5]).fit(X, y)
    with pytest.raises(ValueError, match="var_smoothing"):
        nb.GaussianNB(var_smoothing=-1).fit(X, y)


def test_sklearn_composition_and_empty_partitions():
    X, y, _ = make_data("gaussian", labels="str")
    pipe = make_pipeline(FunctionTransformer(), nb.GaussianNB(var_smoothing=1e-6))
    ref = skb.GaussianNB(var_smoothing=1e-6).fit(X, y)
    np.testing.assert_array_equal(pipe.fit(X, y).predict(X), ref.predict(X))
    assert clone(nb.CategoricalNB(min_categories=3)).get_params()["min_categories"] == 3
    # a Dask dataframe with empty partitions after filtering
    df = pd.DataFrame(X, columns=list("abcd")).assign(t=y, rid=np.arange(len(X)))
    ddf = dd.from_pandas(df, npartitions=6)
    ddf = ddf[(ddf.rid < 40) | (ddf.rid >= 200)].drop(columns="rid")
    est = nb.GaussianNB(var_smoothing=1e-6).fit(ddf, "t")
    keep = (np.arange(len(X)) < 40) | (np.arange(len(X)) >= 200)
    fitted_equal(est, skb.GaussianNB(var_smoothing=1e-6).fit(X[keep], y[keep]), "gaussian")
    # a Dask array with an empty chunk, for every estimator
    for kind in KINDS:
        X, y, _ = make_data(kind)
        Xd = da.from_array(X, chunks=((100, 0, 140), X.shape[1]))
        assert 0 in Xd.chunks[0]
        ours, ref = ours_and_ref(kind)
        fitted_equal(ours.fit(Xd, y), ref.fit(X, y), kind)
        np.testing.assert_allclose(ours.predict_proba(Xd).compute(), ref.predict_proba(X), **TOL)


EXPECTED_CHECK_FAILURES = {
    # dml._blocks.as_blocks accepts NumPy/pandas/Dask containers only (not any __array__ object)
    "check_sample_weights_not_an_array": "array-likes without a known container type",
    "check_classifier_data_not_an_array": "array-likes without a known container type",
    # complex X raises a TypeError naming the dtype (shared block validation)
    "check_complex_data": "TypeError instead of ValueError",
}
CATEGORICAL_EXTRA = {
    # scikit-learn truncates non-integer floats to codes; dml raises instead
    "check_sample_weight_equivalence_on_dense_data": "float X is not integer codes",
    "check_classifiers_one_label_sample_weights": "float X is not integer codes",
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_sklearn_estimator_checks(kind):
    from sklearn.utils.estimator_checks import check_estimator

    expected = dict(EXPECTED_CHECK_FAILURES)
    if kind == "categorical":
        expected.update(CATEGORICAL_EXTRA)
    with dask.config.set(scheduler="sync"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(ESTIMATORS[kind][0](), expected_failed_checks=expected)


def _laid_out(X, order="C", offset=0):
    """A copy of X in the given memory order starting ``offset`` bytes into its buffer."""
    buf = np.zeros(X.nbytes + offset, dtype=np.uint8)
    out = buf[offset:].view(X.dtype).reshape(X.shape, order=order)
    out[...] = X
    return out


@pytest.mark.parametrize("make", [nb.GaussianNB, nb.MultinomialNB])
def test_same_model_whatever_the_memory_layout_of_the_blocks(make):
    """The same block in C or Fortran order (a pandas frame's ``to_numpy()``), as a strided
    view, or not aligned (a block read back from a worker's spill file) gives the same model bit
    for bit. BLAS sums a Fortran-ordered block in another order, and NumPy copies an unaligned
    one to C order first: the class sums differed in their last bits."""
    rng = np.random.default_rng(3)
    X = rng.uniform(0.0, 1.0, size=(3000, 7)) * np.array([1, 10, 1e3, 1e4, 3, 7, 1e5])
    y = rng.integers(0, 2, size=len(X))
    layouts = {"F": _laid_out(X, "F"), "strided": np.repeat(X, 2, axis=0)[::2],
               "unaligned C": _laid_out(X, "C", 3), "unaligned F": _laid_out(X, "F", 3)}
    assert not layouts["unaligned F"].flags.aligned

    def as_is(a):  # a one-block Dask array whose block is ``a`` itself (NumPy input is copied)
        return da.from_delayed(dask.delayed(a), a.shape, a.dtype)

    def learned(m):
        return [getattr(m, k) for k in ("theta_", "var_", "feature_count_") if hasattr(m, k)]

    ref = learned(make().fit(as_is(X), da.from_array(y, chunks=len(y))))
    for name, x in layouts.items():
        got = learned(make().fit(as_is(x), da.from_array(y, chunks=len(y))))
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b, err_msg=name)
