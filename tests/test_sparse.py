"""Sparse X end to end: CSR blocks through the shared core and the estimators that train on them.

Every estimator that accepts sparse X is compared with scikit-learn on the same matrix (where the
algorithm is exact) and with its own fit on the densified matrix (SGD), for 1/3/7 and 64 blocks,
on the in-process and the multi-process cluster. A fit on 2^20 columns shows that no block is
densified: densified, one of its blocks would need gigabytes (and the multi-process workers have
3 GiB each).
"""
from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.linear_model as skl
import sklearn.naive_bayes as skb
import sklearn.preprocessing as skp
from sklearn.exceptions import ConvergenceWarning

from _matrix import checkerboard
from dml import linear_model as lm
from dml import naive_bayes as nb
from dml import neural_network as nn
from dml import preprocessing as pp
from dml._blocks import SPARSE_META, BlockSpec, as_blocks, sparse_blocks

N, D = 300, 40
BLOCKS = [1, 3, 7, 64]


def counts(n=N, d=D, density=0.15, seed=0):
    """A CSR matrix of small counts, and class labels (3 classes) that depend on it."""
    X = sp.random(n, d, density=density, format="csr", random_state=seed,
                  data_rvs=lambda k: np.random.default_rng(seed).integers(1, 5, k))
    y = np.asarray(X[:, :3].argmax(axis=1)).ravel()
    return X.astype(np.float64), y


def rows_per_block(n, blocks):
    return -(-n // blocks)


def dask_xy(X, y, blocks, w=None):
    rows = rows_per_block(X.shape[0], blocks)
    out = (sparse_blocks(X, rows), da.from_array(y, chunks=rows))
    return out if w is None else (*out, da.from_array(w, chunks=rows))


class NoDense(sp.csr_matrix):
    """A CSR matrix that fails when anything densifies it."""

    def toarray(self, *args, **kwargs):
        raise AssertionError("a sparse block was densified")

    todense = toarray

    def __array__(self, *args, **kwargs):
        raise AssertionError("a sparse block was densified")


# --------------------------------------------------------------------------------------------
# The shared core
# --------------------------------------------------------------------------------------------

def test_sparse_blocks_are_csr_row_blocks():
    X, _ = counts()
    A = sparse_blocks(X, 70)
    assert isinstance(A._meta, sp.csr_matrix)
    assert A.chunks == ((70, 70, 70, 70, 20), (D,))
    block = A.blocks[1].compute()
    assert sp.issparse(block) and block.format == "csr"
    assert (block != X[70:140]).nnz == 0


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "lil", "csr_array"])
def test_as_blocks_takes_any_scipy_format_as_csr(fmt):
    X, y = counts()
    Xf = sp.csr_array(X) if fmt == "csr_array" else X.asformat(fmt)
    blocks = as_blocks(Xf, y, spec=BlockSpec(accept_sparse=True), block_rows=100)
    assert blocks.npartitions == 3 and blocks.known_lengths.tolist() == [100, 100, 100]
    xb, yb, _ = blocks.parts[2].compute()
    assert sp.issparse(xb) and xb.format == "csr"
    assert (xb != X[200:]).nnz == 0 and (yb == y[200:]).all()


def test_y_chunked_differently_is_realigned_to_sparse_blocks():
    X, y = counts()
    blocks = as_blocks(sparse_blocks(X, 100), da.from_array(y, chunks=77),
                       spec=BlockSpec(accept_sparse=True))
    xb, yb, _ = blocks.parts[1].compute()
    assert xb.shape[0] == len(yb) == 100 and (yb == y[100:200]).all()


def test_pydata_sparse_blocks_are_converted_at_the_block_boundary():
    sparse = pytest.importorskip("sparse")
    X, y = counts()
    A = da.from_array(sparse.COO.from_scipy_sparse(X), chunks=(100, D), asarray=False)
    m = nb.MultinomialNB().fit(A, da.from_array(y, chunks=100))
    np.testing.assert_allclose(m.feature_count_, skb.MultinomialNB().fit(X, y).feature_count_)


def test_validation_reads_only_the_stored_values():
    X, y = counts()
    spec = BlockSpec(accept_sparse=True, estimator="E")
    blocks = as_blocks(NoDense(X), y, spec=spec)  # one block: the NoDense matrix itself
    xb, _, _ = blocks.parts[0].compute(scheduler="sync")
    assert xb.nnz == X.nnz


# --------------------------------------------------------------------------------------------
# Naive Bayes
# --------------------------------------------------------------------------------------------

NB = {
    "multinomial": (nb.MultinomialNB, skb.MultinomialNB, {"alpha": 0.5}),
    "complement": (nb.ComplementNB, skb.ComplementNB, {"alpha": 0.5}),
    "complement_norm": (nb.ComplementNB, skb.ComplementNB, {"norm": True}),
    "bernoulli": (nb.BernoulliNB, skb.BernoulliNB, {"alpha": 0.7, "binarize": 1.5}),
}
NB_ATTRS = ["class_count_", "feature_count_", "feature_log_prob_", "class_log_prior_"]


@pytest.mark.parametrize("kind,blocks", checkerboard(list(NB), BLOCKS))
def test_naive_bayes_on_sparse_blocks_equals_scikit_learn(client, kind, blocks):
    ours, ref, params = NB[kind]
    X, y = counts()
    w = np.random.default_rng(1).uniform(0.5, 2.0, N)
    A, Y, W = dask_xy(X, y, blocks, w)
    m = ours(**params).fit(A, Y, sample_weight=W)
    r = ref(**params).fit(X, y, sample_weight=w)
    for attr in NB_ATTRS + (["feature_all_"] if kind.startswith("complement") else []):
        np.testing.assert_allclose(getattr(m, attr), getattr(r, attr), rtol=1e-10, atol=1e-12,
                                   err_msg=attr)
    proba = m.predict_proba(A)
    np.testing.assert_allclose(proba.compute(), r.predict_proba(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(m.predict(X), r.predict(X))  # local sparse input
    assert m.score(A, Y) == pytest.approx(r.score(X, y))


@pytest.mark.parametrize("kind", list(NB))
def test_naive_bayes_dense_and_sparse_give_the_same_model(kind):
    ours, _, params = NB[kind]
    X, y = counts()
    a = ours(**params).fit(*dask_xy(X, y, 3))
    b = ours(**params).fit(X.toarray(), y)
    for attr in NB_ATTRS:
        np.testing.assert_allclose(getattr(a, attr), getattr(b, attr), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("per_value", [0, 1e9])
def test_sparse_class_sums_by_used_columns_and_by_dense_product_agree(monkeypatch, per_value):
    """Both ways of summing a CSR block per class (re-indexed onto its used columns, or one
    dense product for blocks with many values per column) give scikit-learn's sums, also for
    explicitly stored zeros and a class with no values."""
    from dml.naive_bayes import _kernels

    monkeypatch.setattr(_kernels, "_DENSE_SUMS_PER_VALUE", per_value)
    X, _ = counts(n=40, d=200, density=0.05)
    X.data[::5] = 0.0  # stored zeros
    inverse = np.arange(40) % 4
    inverse[inverse == 3] = 0  # class 3 of 4 has no rows
    w = np.random.default_rng(2).uniform(0.5, 2.0, 40)
    out = _kernels._class_sums(X, inverse, w, 4)
    assert sp.issparse(out) and out.shape == (4, 200) and out.has_sorted_indices
    Y = np.where(inverse[:, None] == np.arange(4), w[:, None], 0.0)
    np.testing.assert_allclose(out.toarray(), np.asarray(X.T @ Y).T, rtol=1e-14)


def test_naive_bayes_sparse_sums_with_many_classes_and_missing_classes_per_block():
    """Per-block class sums stay sparse (the used columns only); blocks that lack some of the
    classes, more classes than the dense one-hot path takes, and NaN counts ignored all reduce
    to scikit-learn's counts."""
    rng = np.random.default_rng(3)
    n, d, k = 300, 50, 20
    X = sp.random(n, d, density=0.1, format="csr", random_state=3) * 4
    X.data = np.floor(X.data)
    y = np.sort(rng.integers(0, k, n))  # sorted: each block holds a few classes only
    w = rng.uniform(0.5, 2.0, n)
    m = nb.MultinomialNB().fit(*dask_xy(X, y, 7, w))
    r = skb.MultinomialNB().fit(X, y, sample_weight=w)
    for attr in NB_ATTRS:
        np.testing.assert_allclose(getattr(m, attr), getattr(r, attr), rtol=1e-10, atol=1e-12,
                                   err_msg=attr)
    Xn = X.copy()
    Xn.data[::7] = np.nan
    m = nb.MultinomialNB(missing="ignore").fit(*dask_xy(Xn, y, 3))
    Xz = Xn.copy()
    Xz.data[::7] = 0.0
    r = skb.MultinomialNB().fit(Xz, y)
    np.testing.assert_allclose(m.feature_count_, r.feature_count_, rtol=1e-12)


def test_complement_nb_dense_equals_scikit_learn():
    X, y = counts()
    Xd = X.toarray()
    for params in ({}, {"norm": True}, {"fit_prior": False}, {"alpha": [0.5] * D}):
        m, r = nb.ComplementNB(**params).fit(Xd, y), skb.ComplementNB(**params).fit(Xd, y)
        np.testing.assert_allclose(m.feature_log_prob_, r.feature_log_prob_, rtol=1e-12)
        np.testing.assert_allclose(m.predict_joint_log_proba(Xd),
                                   r.predict_joint_log_proba(Xd), rtol=1e-12)
    # A single class: the prior is what decides (scikit-learn's rule).
    m = nb.ComplementNB().fit(Xd, np.zeros(N, int))
    r = skb.ComplementNB().fit(Xd, np.zeros(N, int))
    np.testing.assert_allclose(m.predict_joint_log_proba(Xd), r.predict_joint_log_proba(Xd))


def test_naive_bayes_partial_fit_over_sparse_pieces_equals_fit():
    X, y = counts()
    m = nb.ComplementNB()
    for lo in range(0, N, 100):
        m.partial_fit(X[lo:lo + 100], y[lo:lo + 100], classes=[0, 1, 2])
    r = skb.ComplementNB().fit(X, y)
    np.testing.assert_allclose(m.feature_log_prob_, r.feature_log_prob_, rtol=1e-12)


def test_bernoulli_missing_ignore_on_sparse_equals_dense():
    X, y = counts()
    X = X.copy()
    X.data[::7] = np.nan
    a = nb.BernoulliNB(missing="ignore").fit(X, y)
    b = nb.BernoulliNB(missing="ignore").fit(X.toarray(), y)
    np.testing.assert_allclose(a.feature_log_prob_, b.feature_log_prob_, rtol=1e-12)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X.toarray()), rtol=1e-10)


# --------------------------------------------------------------------------------------------
# SGD
# --------------------------------------------------------------------------------------------

def regression_target(X, seed=0):
    rng = np.random.default_rng(seed)
    return X @ rng.normal(size=X.shape[1]) + 0.1 * rng.normal(size=X.shape[0])


SGD = {
    "classifier": (lm.SGDClassifier, {}),
    "classifier_log_multiclass": (lm.SGDClassifier, {"loss": "log_loss", "alpha": 1e-3}),
    "classifier_optimal_strong_l2": (lm.SGDClassifier, {"alpha": 0.5}),
    "perceptron": (lm.Perceptron, {}),
    "regressor": (lm.SGDRegressor, {"learning_rate": "invscaling", "eta0": 0.05}),
    # Not the scale-factor path (their steps touch every weight): still equal to dense.
    "elasticnet_average": (lm.SGDClassifier, {"penalty": "elasticnet", "average": 10}),
    "momentum": (lm.SGDRegressor, {"optimizer": "momentum", "learning_rate": "constant",
                                   "eta0": 0.01}),
}


def _sgd_target(name, X, y):
    if name.startswith("regressor") or name == "momentum":
        return regression_target(X)
    return y if "multiclass" in name else (y > 0).astype(int)


@pytest.mark.parametrize("name,blocks", checkerboard(list(SGD), [1, 3, 7]))
def test_sgd_sparse_and_dense_give_the_same_model(client, name, blocks):
    est, params = SGD[name]
    X, y = counts()
    t = _sgd_target(name, X, y)
    w = np.random.default_rng(2).uniform(0.5, 2.0, N)
    A, T, W = dask_xy(X, t, blocks, w)
    rows = rows_per_block(N, blocks)
    Dn = da.from_array(X.toarray(), chunks=(rows, D))
    a = est(max_iter=4, tol=None, random_state=0, **params).fit(A, T, sample_weight=W)
    b = est(max_iter=4, tol=None, random_state=0, **params).fit(Dn, T, sample_weight=W)
    assert np.abs(b.coef_).max() > 1e-3  # a model that learned something
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-8, atol=1e-10)
    # Decision values, not classes: a class at a tie of the decision value follows rounding.
    out = "decision_function" if hasattr(a, "decision_function") else "predict"
    np.testing.assert_allclose(getattr(a, out)(A).compute(), getattr(b, out)(Dn).compute(),
                               rtol=1e-8, atol=1e-10)


def test_sgd_partial_fit_on_sparse_equals_dense():
    X, y = counts()
    a, b = lm.SGDClassifier(random_state=0), lm.SGDClassifier(random_state=0)
    for lo in range(0, N, 100):
        a.partial_fit(X[lo:lo + 100], y[lo:lo + 100], classes=[0, 1, 2])
        b.partial_fit(X[lo:lo + 100].toarray(), y[lo:lo + 100], classes=[0, 1, 2])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-10)


def test_sgd_with_one_block_and_single_steps_is_scikit_learns():
    """batch_size=1, no shuffling, one block: scikit-learn's sequential SGD on the same matrix.

    Densified, that is: scikit-learn damps the intercept's steps by 0.01 on sparse input (and
    only there), so its own sparse and dense fits differ; dml's do not (docs/sparse.md).
    """
    X, y = counts()
    t = regression_target(X)
    kw = dict(max_iter=3, tol=None, shuffle=False, learning_rate="invscaling", eta0=0.01,
              alpha=1e-3)
    a = lm.SGDRegressor(batch_size=1, random_state=0, **kw).fit(X, t)
    r = skl.SGDRegressor(random_state=0, **kw).fit(X.toarray(), t)
    np.testing.assert_allclose(a.coef_, r.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.intercept_, r.intercept_, rtol=1e-8, atol=1e-10)


# --------------------------------------------------------------------------------------------
# Exact linear models: normal equations and Newton / L-BFGS
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,blocks", checkerboard(
    ["ridge", "ridge_no_intercept", "linear_regression"], BLOCKS))
def test_least_squares_on_sparse_blocks_equals_scikit_learn(client, name, blocks):
    est, params = {"ridge": (lm.Ridge, {"alpha": 0.3}),
                   "ridge_no_intercept": (lm.Ridge, {"fit_intercept": False}),
                   "linear_regression": (lm.LinearRegression, {})}[name]
    X, _ = counts()
    t = regression_target(X) + 3.0
    w = np.random.default_rng(4).uniform(0.5, 2.0, N)
    A, T, W = dask_xy(X, t, blocks, w)
    a = est(**params).fit(A, T, sample_weight=W)
    # scikit-learn's exact solution (its sparse solvers are iterative).
    r = getattr(skl, est.__name__)(**params).fit(X.toarray(), t, sample_weight=w)
    np.testing.assert_allclose(a.coef_, r.coef_, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(a.intercept_, r.intercept_, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(a.predict(A).compute(), r.predict(X.toarray()), rtol=1e-9)


def test_least_squares_refuse_sparse_x_too_wide_for_the_normal_equations():
    X = sp.random(10, 5000, density=0.01, format="csr", random_state=0)
    with pytest.raises(ValueError, match="Ridge: sparse X with 5000 columns; the normal "
                                         "equations .* Use SGDRegressor"):
        lm.Ridge().fit(X, np.arange(10.0))


@pytest.mark.slow
@pytest.mark.parametrize("blocks", [1, 3, 7])
@pytest.mark.parametrize("name", ["logistic_newton", "logistic_lbfgs_multinomial",
                                  "logistic_sgd", "svc", "svc_hinge_multiclass"])
def test_exact_linear_classifiers_sparse_equal_dense(client, name, blocks):
    est, params, multi = {
        "logistic_newton": (lm.LogisticRegression, {}, False),
        "logistic_lbfgs_multinomial": (lm.LogisticRegression, {"solver": "lbfgs"}, True),
        "logistic_sgd": (lm.LogisticRegression, {"solver": "sgd", "max_iter": 5}, False),
        "svc": (lm.LinearSVC, {}, False),
        # Two smoothing stages (1, 0.1), not the default three: the continuation is exercised,
        # and the last stage (μ = 0.01, the most Newton iterations) checked nothing more while
        # taking ~40% of these cases' time (37 s of 3 in-process cases, 21 s now). C=0.1: both
        # stages still converge (5 + 18 Newton iterations, line searches in the second), in
        # half the iterations of C=1 (46), whose near-separable fit added nothing to compare.
        "svc_hinge_multiclass": (lm.LinearSVC, {"loss": "hinge", "smoothing": 0.1, "C": 0.1},
                                 True)}[name]
    X, y = counts()
    t = y if multi else (y > 0).astype(int)
    A, T = dask_xy(X, t, blocks)
    Dn = da.from_array(X.toarray(), chunks=(rows_per_block(N, blocks), D))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the sgd solver's short run
        a = est(random_state=0, **params).fit(A, T)
        b = est(random_state=0, **params).fit(Dn, T)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-8, atol=1e-9)


def test_logistic_regression_on_sparse_x_equals_scikit_learn():
    X, y = counts()
    t = (y > 0).astype(int)
    a = lm.LogisticRegression(C=0.5, tol=1e-10).fit(X, t)
    r = skl.LogisticRegression(C=0.5, tol=1e-10).fit(X, t)
    np.testing.assert_allclose(a.coef_, r.coef_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(a.predict_proba(X), r.predict_proba(X), atol=1e-6)


def test_newton_refuses_a_hessian_too_large_to_hold():
    X = sp.random(20, 2 ** 15, density=0.001, format="csr", random_state=0)
    with pytest.raises(ValueError, match="solver='newton' needs a dense Hessian .* use "
                                         "solver='sgd'"):
        lm.LinearSVC().fit(X, np.arange(20) % 2)


@pytest.mark.parametrize("name,blocks", checkerboard(
    ["classifier", "regressor", "classifier_dropout"], [1, 3, 7]))
def test_mlp_sparse_and_dense_give_the_same_model(client, name, blocks):
    """Only the first layer reads X: its products are sparse, the rest of the network dense."""
    est, params = {"classifier": (nn.MLPClassifier, {}),
                   "regressor": (nn.MLPRegressor, {"alpha": 0.01}),
                   "classifier_dropout": (nn.MLPClassifier, {"dropout": 0.2})}[name]
    X, y = counts()
    t = regression_target(X) if name == "regressor" else y
    A, T = dask_xy(X, t, blocks)
    Dn = da.from_array(X.toarray(), chunks=(rows_per_block(N, blocks), D))
    kw = dict(hidden_layer_sizes=(8,), max_iter=5, random_state=0, **params)
    with pytest.warns(Warning, match="maximum number of iterations"):
        a = est(**kw).fit(A, T)
    with pytest.warns(Warning, match="maximum number of iterations"):
        b = est(**kw).fit(Dn, T)
    for ca, cb in zip(a.coefs_ + a.intercepts_, b.coefs_ + b.intercepts_):
        np.testing.assert_allclose(ca, cb, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.predict(A).compute(), b.predict(Dn).compute(), rtol=1e-8)
    np.testing.assert_allclose(a.predict(X), b.predict(X.toarray()), rtol=1e-8)


# --------------------------------------------------------------------------------------------
# Scalers: sparse in, sparse out
# --------------------------------------------------------------------------------------------

SCALERS = {
    "maxabs": (pp.MaxAbsScaler, skp.MaxAbsScaler, {}),
    "standard": (pp.StandardScaler, skp.StandardScaler, {"with_mean": False}),
    "normalizer_l2": (pp.Normalizer, skp.Normalizer, {}),
    "normalizer_l1": (pp.Normalizer, skp.Normalizer, {"norm": "l1"}),
    "normalizer_max": (pp.Normalizer, skp.Normalizer, {"norm": "max"}),
}


@pytest.mark.parametrize("name,blocks", checkerboard(list(SCALERS), BLOCKS))
def test_scalers_keep_sparse_and_equal_scikit_learn(client, name, blocks):
    ours, ref, params = SCALERS[name]
    X, _ = counts()
    X = X.copy()
    X.data[::3] *= -1.5
    A = sparse_blocks(X, rows_per_block(N, blocks))
    m, r = ours(**params).fit(A), ref(**params).fit(X)
    for attr in ("scale_", "var_", "max_abs_", "n_samples_seen_"):
        if getattr(r, attr, None) is not None:
            np.testing.assert_allclose(getattr(m, attr), getattr(r, attr), rtol=1e-12)
    out = m.transform(A)
    assert isinstance(out._meta, type(SPARSE_META))
    got, want = out.compute(), r.transform(X)
    assert sp.issparse(got) and abs(got - want).max() < 1e-12
    local = m.transform(X)
    assert sp.issparse(local) and abs(local - want).max() < 1e-12
    if hasattr(r, "inverse_transform"):
        back = m.inverse_transform(out).compute()
        assert sp.issparse(back) and abs(back - X).max() < 1e-12


def test_standard_scaler_weighted_sparse_equals_scikit_learn():
    X, _ = counts()
    w = np.random.default_rng(3).uniform(0.1, 3.0, N)
    A, _, W = dask_xy(X, np.zeros(N), 7, w)
    m = pp.StandardScaler(with_mean=False).fit(A, sample_weight=W)
    r = skp.StandardScaler(with_mean=False).fit(X, sample_weight=w)
    np.testing.assert_allclose(m.var_, r.var_, rtol=1e-10)
    np.testing.assert_allclose(m.mean_, r.mean_, rtol=1e-10)


def test_standard_scaler_refuses_to_center_sparse_data():
    X, _ = counts()
    with pytest.raises(ValueError, match="Cannot center sparse matrices: pass `with_mean=False`"):
        pp.StandardScaler().fit(X)
    fitted = pp.StandardScaler().fit(X.toarray())
    with pytest.raises(ValueError, match="Cannot center sparse"):
        fitted.transform(sparse_blocks(X, 100))


def test_maxabs_scaler_partial_fit_and_nan():
    X, _ = counts()
    X = X.copy()
    X.data[5] = np.nan
    m = pp.MaxAbsScaler().partial_fit(X[:150]).partial_fit(X[150:])
    r = skp.MaxAbsScaler().fit(X)
    np.testing.assert_allclose(m.max_abs_, r.max_abs_)
    assert m.n_samples_seen_ == r.n_samples_seen_
    Xd = X.toarray()
    np.testing.assert_allclose(pp.MaxAbsScaler().fit(Xd).transform(Xd),
                               skp.MaxAbsScaler().fit(Xd).transform(Xd))


# --------------------------------------------------------------------------------------------
# 2^20 columns
# --------------------------------------------------------------------------------------------

def wide(n=2000, d=2 ** 20, per_row=12, seed=0):
    """Hashed-text-like rows: ``per_row`` random columns out of 2^20, two classes that differ in
    which block of columns their words come from."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    lo = np.where(y == 0, 0, d // 2)
    cols = (lo[:, None] + rng.integers(0, d // 2, (n, per_row))).ravel()
    cols[::4] = rng.integers(0, d, len(cols[::4]))  # noise words anywhere
    data = rng.integers(1, 4, n * per_row).astype(np.float64)
    indptr = np.arange(0, n * per_row + 1, per_row)
    return sp.csr_matrix((data, cols, indptr), shape=(n, d)), y


def test_two_to_the_twenty_columns_fit_without_densifying(process_client):
    """Densified, each 500-row block would be 4 GiB, over the workers' 3 GiB limit."""
    X, y = wide()
    A, Y = dask_xy(X, y, 4)
    m = nb.MultinomialNB().fit(A, Y)
    r = skb.MultinomialNB().fit(X, y)
    np.testing.assert_allclose(m.feature_log_prob_, r.feature_log_prob_, rtol=1e-10)
    np.testing.assert_array_equal(m.predict(A).compute(), r.predict(X))
    # Two epochs: the epochs are alike for the property (each moves the 2^20-wide model, never
    # a densified block); scores 0.993 on the training rows (chance is 0.5).
    s = lm.SGDClassifier(max_iter=2, tol=None, random_state=0).fit(A, Y)
    assert s.coef_.shape == (1, 2 ** 20)
    assert s.score(A, Y) > 0.9
    out = pp.MaxAbsScaler().fit(A).transform(A).compute()
    assert sp.issparse(out) and out.nnz == X.nnz


def test_nothing_densifies_a_block_on_the_way():
    """The same kernels on a matrix that refuses to be densified."""
    X, y = counts()
    Xn = NoDense(X)
    for est in (nb.MultinomialNB(), nb.ComplementNB(), nb.BernoulliNB()):
        est.fit(Xn, y).predict(Xn)
    for est in (pp.MaxAbsScaler(), pp.StandardScaler(with_mean=False), pp.Normalizer()):
        est.fit(Xn).transform(Xn)
    lm.SGDClassifier(max_iter=2, tol=None, random_state=0).fit(Xn, y).predict(Xn)


def test_pandas_output_refuses_a_sparse_result():
    X, _ = counts()
    scaler = pp.MaxAbsScaler().set_output(transform="pandas").fit(X)
    with pytest.raises(ValueError, match="cannot hold a sparse result"):
        scaler.transform(X)
    np.testing.assert_allclose(scaler.transform(X.toarray()).to_numpy(),
                               skp.MaxAbsScaler().fit(X).transform(X).toarray())


@pytest.mark.parametrize("algorithm", ["gram_eigh", "randomized"])
def test_truncated_svd_on_sparse_blocks(client, algorithm):
    """The decomposition's kernels multiply blocks by dense matrices: CSR blocks as they are."""
    from sklearn.decomposition import TruncatedSVD as SkTSVD

    from dml.decomposition import TruncatedSVD

    X, _ = counts()
    A = sparse_blocks(X, 70)
    a = TruncatedSVD(3, algorithm=algorithm, random_state=0).fit(A)
    b = TruncatedSVD(3, algorithm=algorithm, random_state=0).fit(X.toarray())
    np.testing.assert_allclose(a.components_, b.components_, rtol=1e-9, atol=1e-11)
    out = a.transform(A).compute()
    np.testing.assert_allclose(out, b.transform(X.toarray()), rtol=1e-9, atol=1e-11)
    if algorithm == "gram_eigh":  # exact: scikit-learn's answer on the same sparse matrix
        r = SkTSVD(3, algorithm="arpack").fit(X)
        np.testing.assert_allclose(a.singular_values_, r.singular_values_, rtol=1e-10)
        np.testing.assert_allclose(np.abs(out), np.abs(r.transform(X)), rtol=1e-8, atol=1e-10)


def test_text_producers_to_estimators_end_to_end(client):
    """Hashed and TF-IDF documents (CSR blocks made on the workers) train the estimators."""
    import dask.dataframe as dd
    import pandas as pd
    import sklearn.feature_extraction.text as skt

    from dml.feature_extraction.text import HashingVectorizer, TfidfVectorizer

    rng = np.random.default_rng(0)
    words = np.array(["spam", "cheap", "offer", "win", "free", "meeting", "lunch", "report",
                      "team", "notes"])
    y = rng.integers(0, 2, 400)
    docs = [" ".join(rng.choice(words[:5] if c else words[5:], 6)) + " "
            + " ".join(rng.choice(words, 2)) for c in y]
    s, yd = (dd.from_pandas(pd.Series(v), npartitions=4) for v in (docs, y))
    Xh = HashingVectorizer(n_features=2 ** 20, alternate_sign=False).fit_transform(s)
    m = nb.MultinomialNB().fit(Xh, yd)
    Xs = skt.HashingVectorizer(n_features=2 ** 20, alternate_sign=False).fit_transform(docs)
    r = skb.MultinomialNB().fit(Xs, y)
    np.testing.assert_allclose(m.feature_log_prob_, r.feature_log_prob_, rtol=1e-10)
    assert lm.SGDClassifier(random_state=0).fit(Xh, yd).score(Xh, yd) > 0.95
    Xt = TfidfVectorizer().fit_transform(s)
    assert nb.ComplementNB().fit(Xt, yd).score(Xt, yd) > 0.95
