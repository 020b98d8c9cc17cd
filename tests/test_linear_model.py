"""dml.linear_model against scikit-learn references, across partitionings and clusters."""
import warnings

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.optimize
import scipy.special
from distributed import Client, LocalCluster
from sklearn import linear_model as sk
from sklearn.datasets import make_classification, make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss, r2_score
from sklearn.svm import LinearSVC as SkLinearSVC

from conftest import QUICK_ON_PROCESS_CLUSTER

from dml.linear_model import (ElasticNet, Lasso, LinearRegression, LinearSVC,
                              LogisticRegression, Perceptron, Ridge, SGDClassifier,
                              SGDRegressor)
from dml.linear_model._svm import primal_objective
from dml.optim import checkpoint as ckpt
from dml.optim.training import DivergedError



def partitionings(X, y, w=None):
    """The same data as NumPy, 1/3/7 blocks, uneven chunks and a dataframe with y by name."""
    n = len(X)
    yield "numpy", (X, y, w)
    for k in (1, 3, 7):
        rows = -(-n // k)
        yield f"{k}-blocks", (da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows),
                              None if w is None else da.from_array(w, chunks=rows))
    uneven = (n // 2, n // 8, n - n // 2 - n // 8)
    yield "uneven", (da.from_array(X, chunks=(uneven, -1)), da.from_array(y, chunks=uneven),
                     None if w is None else da.from_array(w, chunks=uneven))
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).assign(target=y)
    if w is not None:
        df["weight"] = w
    yield "dataframe", (dd.from_pandas(df, npartitions=4), "target",
                        None if w is None else "weight")


@pytest.fixture(scope="module")
def regression():
    X, y = make_regression(400, 6, noise=2.0, bias=3.0, random_state=0)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=400)
    return X, y, w


@pytest.fixture(scope="module")
def binary():
    return make_classification(600, 8, n_informative=5, random_state=0)


@pytest.fixture(scope="module")
def multiclass():
    return make_classification(600, 8, n_informative=6, n_classes=3, random_state=1)


# ---------------------------------------------------------------------------------------------
# Exact least squares, ridge, lasso, elastic net
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("est,ref", [(LinearRegression(), sk.LinearRegression()),
                                     (Ridge(alpha=2.5), sk.Ridge(alpha=2.5)),
                                     (Ridge(alpha=0.7, fit_intercept=False),
                                      sk.Ridge(alpha=0.7, fit_intercept=False))])
def test_least_squares_equal_scikit_learn_on_every_partitioning(regression, est, ref):
    X, y, w = regression
    ref.fit(X, y, sample_weight=w)
    for name, (Xp, yp, wp) in partitionings(X, y, w):
        est.fit(Xp, yp, sample_weight=wp)
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8, atol=1e-8, err_msg=name)
        assert est.intercept_ == pytest.approx(ref.intercept_, rel=1e-8, abs=1e-8)


def test_least_norm_solution_when_singular(regression):
    X, y, _ = regression
    Xs = np.c_[X, X[:, 0], 2 * X[:, 1]]  # two dependent columns
    ours = LinearRegression().fit(da.from_array(Xs, chunks=(90, -1)), y)
    ref = sk.LinearRegression().fit(Xs, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-8, atol=1e-8)
    lstsq = np.linalg.lstsq(Xs - Xs.mean(0), y - y.mean(), rcond=None)[0]
    np.testing.assert_allclose(ours.coef_, lstsq, rtol=1e-8, atol=1e-8)
    assert ours.rank_ == 6 == ref.rank_
    np.testing.assert_allclose(ours.singular_[:6], ref.singular_[:6], rtol=1e-8)


@pytest.mark.parametrize("est,ref", [(Lasso(alpha=0.5, tol=1e-10), sk.Lasso(alpha=0.5, tol=1e-10)),
                                     (ElasticNet(alpha=2.0, l1_ratio=0.7, tol=1e-10),
                                      sk.ElasticNet(alpha=2.0, l1_ratio=0.7, tol=1e-10))])
def test_lasso_elastic_net_coordinate_descent_equals_scikit_learn(est, ref):
    X, y = make_regression(500, 12, n_informative=4, noise=3.0, random_state=2)
    ref.fit(X, y)
    for name, (Xp, yp, _) in partitionings(X, y):
        est.fit(Xp, yp)
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-8, err_msg=name)
        assert est.intercept_ == pytest.approx(ref.intercept_, rel=1e-7)
    assert np.sum(est.coef_ == 0) == np.sum(ref.coef_ == 0) > 0


def _enet_objective(coef, intercept, X, y, alpha, l1_ratio):
    r = y - X @ coef - intercept
    return (0.5 * np.mean(r * r) + alpha * l1_ratio * np.abs(coef).sum()
            + 0.5 * alpha * (1 - l1_ratio) * coef @ coef)


def test_lasso_by_proximal_sgd_reaches_the_objective():
    X, y = make_regression(2000, 10, n_informative=3, noise=3.0, random_state=3)
    ref = sk.Lasso(alpha=1.0).fit(X, y)
    ours = Lasso(alpha=1.0, solver="sgd", random_state=0).fit(da.from_array(X, chunks=700), y)
    assert _enet_objective(ours.coef_, ours.intercept_, X, y, 1.0, 1.0) <= \
        1.01 * _enet_objective(ref.coef_, ref.intercept_, X, y, 1.0, 1.0)
    # The proximal step makes exact zeros. 2,000 rows are one stream (63 steps per epoch, under
    # stream_steps): sequential proximal SGD, whose last steps may leave a few noise
    # coefficients just off zero (2 to 7 of the 7 are exactly zero, depending on random_state
    # and the partitioning); all of them are tiny next to the informative ones.
    noise = np.argsort(np.abs(ref.coef_))[:7]
    assert np.sum(ours.coef_ == 0) >= 2
    assert np.abs(ours.coef_[noise]).max() < 1e-3 * np.abs(ours.coef_).max()


# ---------------------------------------------------------------------------------------------
# SGD regression
# ---------------------------------------------------------------------------------------------

def test_sgd_regressor_r2_matches_least_squares():
    X, y = make_regression(4000, 10, noise=10.0, random_state=4)
    Xtr, Xte, ytr, yte = X[:3000], X[3000:], y[:3000], y[3000:]
    exact = LinearRegression().fit(Xtr, ytr)
    ours = SGDRegressor(random_state=0).fit(da.from_array(Xtr, chunks=1000),
                                            da.from_array(ytr, chunks=1000))
    assert abs(r2_score(yte, ours.predict(Xte)) - r2_score(yte, exact.predict(Xte))) < 0.001
    assert ours.coef_.shape == (10,) and ours.intercept_.shape == (1,)
    assert ours.n_iter_ == len(ours.history_) and ours.t_ > 0


def test_huber_objective_matches_a_direct_minimiser():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 5))
    y = X @ rng.normal(size=5) + 1.0 + rng.standard_t(df=1.5, size=3000)  # heavy tails
    alpha, eps = 1e-3, 1.0

    def objective(theta):
        r = X @ theta[:-1] + theta[-1] - y
        a = np.abs(r)
        loss = np.where(a <= eps, 0.5 * r * r, eps * (a - 0.5 * eps))
        return loss.mean() + 0.5 * alpha * theta[:-1] @ theta[:-1]

    best = scipy.optimize.minimize(objective, np.zeros(6), method="BFGS").fun
    ours = SGDRegressor(loss="huber", epsilon=eps, alpha=alpha, learning_rate="adaptive",
                        eta0=0.05, random_state=0)
    ours.fit(da.from_array(X, chunks=1000), y)
    assert objective(np.r_[ours.coef_, ours.intercept_]) <= 1.01 * best


# ---------------------------------------------------------------------------------------------
# Logistic regression
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
def test_logistic_exact_solvers_equal_scikit_learn(binary, multiclass, solver):
    for X, y in (binary, multiclass):
        ref = sk.LogisticRegression(C=0.5, tol=1e-10, max_iter=1000).fit(X, y)
        for name, (Xp, yp, _) in partitionings(X, y):
            ours = LogisticRegression(C=0.5, solver=solver, tol=1e-8).fit(Xp, yp)
            np.testing.assert_allclose(ours.coef_, ref.coef_, atol=2e-6, err_msg=name)
            np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=2e-6)
        assert ours.coef_.shape == ref.coef_.shape and ours.n_iter_.shape == (1,)
        np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-6)


def test_logistic_weights_and_balanced_classes(binary):
    X, y = binary
    sw = np.random.default_rng(6).uniform(0.2, 3.0, size=len(y))
    y = y.copy()
    y[:150] = 0  # unbalanced
    for kw in ({"class_weight": "balanced"}, {"class_weight": {0: 1.0, 1: 3.0}}):
        ref = sk.LogisticRegression(tol=1e-10, **kw).fit(X, y, sample_weight=sw)
        ours = LogisticRegression(tol=1e-8, **kw).fit(da.from_array(X, chunks=100), y,
                                                      sample_weight=sw)
        np.testing.assert_allclose(ours.coef_, ref.coef_, atol=2e-6)


def test_logistic_labels_strings_and_minus_one(binary):
    X, y = binary
    for labels in (np.array(["no", "yes"]), np.array([-1, 1])):
        yl = labels[y]
        ours = LogisticRegression().fit(X, yl)
        ref = sk.LogisticRegression().fit(X, yl)
        assert list(ours.classes_) == list(ref.classes_)
        assert (ours.predict(X) == ref.predict(X)).mean() > 0.99
        assert ours.predict(X).dtype == ref.predict(X).dtype


def test_logistic_sgd_solver_reaches_the_exact_log_loss(multiclass):
    X, y = multiclass
    ref = sk.LogisticRegression().fit(X, y)
    ours = LogisticRegression(solver="sgd", random_state=0).fit(da.from_array(X, chunks=200), y)
    assert log_loss(y, ours.predict_proba(X)) <= 1.01 * log_loss(y, ref.predict_proba(X))
    assert ours.history_[-1]["objective"] < ours.history_[0]["objective"]


def test_multinomial_option_for_two_classes(binary):
    X, y = binary
    soft = LogisticRegression(multi_class="multinomial", C=2.0, tol=1e-10).fit(X, y)
    # Softmax over two classes with ½‖W‖² equals the binomial model with half the penalty.
    bino = LogisticRegression(C=4.0, tol=1e-10).fit(X, y)
    assert soft.coef_.shape == (2, 8)
    np.testing.assert_allclose(soft.coef_[1] - soft.coef_[0], bino.coef_[0], atol=1e-6)
    np.testing.assert_allclose(soft.predict_proba(X), bino.predict_proba(X), atol=1e-6)


@pytest.mark.parametrize("K", [2, 3])
def test_softmax_hessian_equals_finite_differences(K):
    # The full K(d+1) × K(d+1) softmax Hessian, cross-class blocks −p_k p_l x xᵀ included,
    # against central differences of the reduced gradient (weighted rows, with intercepts).
    from dml.linear_model._problem import LinearProblem
    from dml.optim.losses import Softmax

    rng = np.random.default_rng(K)
    X, y, w = rng.normal(size=(60, 4)), rng.integers(0, K, 60), rng.uniform(0.5, 2.0, 60)
    problem = LinearProblem(4, Softmax(), task="multinomial", n_outputs=K, classes=np.arange(K))
    x0 = rng.normal(size=problem.n_params)
    eps = 1e-6
    fd = np.array([(problem.batch_loss_grad(x0 + eps * e, X, y, w)[1]
                    - problem.batch_loss_grad(x0 - eps * e, X, y, w)[1]) / (2 * eps)
                   for e in np.eye(problem.n_params)])
    np.testing.assert_allclose(problem.batch_hess(x0, X, y, w), fd, atol=1e-7)


def test_two_class_multinomial_uses_newton_and_reaches_the_optimum():
    # 110 features: 222 softmax parameters (over the "auto" Newton limit) but 111 binomial ones.
    # The forced two-class softmax is the binomial model with 2C split as ±½, so "auto" must
    # still pick Newton and converge in a few iterations to the binomial optimum (L-BFGS took
    # ~80 linearly converging iterations on the one-hot encoded Adult data and stopped short).
    X, y = make_classification(1500, 110, n_informative=20, random_state=3)
    Xd, yd = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    ref = sk.LogisticRegression(C=2.0, tol=1e-10, max_iter=10_000).fit(X, y)
    ours = LogisticRegression(multi_class="multinomial", tol=1e-8).fit(Xd, yd)
    assert ours.solver_ == "newton" and ours.n_iter_[0] <= 12
    assert ours.coef_.shape == (2, 110) and ours.intercept_.shape == (2,)
    np.testing.assert_allclose(ours.coef_[1] - ours.coef_[0], ref.coef_[0], atol=1e-6)
    np.testing.assert_allclose(ours.coef_[0] + ours.coef_[1], 0.0, atol=1e-12)
    np.testing.assert_allclose(ours.intercept_[1] - ours.intercept_[0], ref.intercept_[0],
                               atol=1e-6)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-6)
    # Its objective (½‖W‖² + C Σ log-loss, mean scaling) is that of the softmax model.
    F = X @ ours.coef_.T + ours.intercept_
    softmax_obj = (np.mean(scipy.special.logsumexp(F, axis=1) - F[np.arange(len(y)), y])
                   + 0.5 * np.sum(ours.coef_ ** 2) / len(y))
    assert abs(ours.history_[-1]["objective"] - softmax_obj) <= 1e-8
    # Warm starts from the two-row coefficients.
    warm = LogisticRegression(multi_class="multinomial", tol=1e-8, warm_start=True)
    warm.coef_, warm.intercept_ = ours.coef_.copy(), ours.intercept_.copy()
    assert warm.fit(Xd, yd).n_iter_[0] <= 2


@pytest.mark.slow
def test_logistic_200k_test_log_loss_within_one_percent_of_lbfgs():
    X, y = make_classification(200_000, 20, n_informative=10, n_redundant=5, flip_y=0.05,
                               random_state=0)
    Xtr, Xte, ytr, yte = X[:160_000], X[160_000:], y[:160_000], y[160_000:]
    ref = log_loss(yte, sk.LogisticRegression(C=1.0).fit(Xtr, ytr).predict_proba(Xte))
    Xd, yd = da.from_array(Xtr, chunks=40_000), da.from_array(ytr, chunks=40_000)
    for solver in ("auto", "lbfgs", "sgd"):
        model = LogisticRegression(C=1.0, solver=solver, random_state=0).fit(Xd, yd)
        proba = model.predict_proba(da.from_array(Xte, chunks=20_000))
        assert isinstance(proba, da.Array)
        assert log_loss(yte, proba.compute()) <= 1.01 * ref, solver


@pytest.mark.slow
def test_adult_multinomial_logistic_regression_accuracy(real_data):
    from dml.compose import ColumnTransformer
    from dml.preprocessing import OneHotEncoder, StandardScaler

    df = pd.read_csv(real_data / "adult" / "adult.csv", skipinitialspace=True)
    y = (df.pop("income").str.strip() == ">50K").astype(int).to_numpy()
    rng = np.random.default_rng(0)
    test = rng.random(len(df)) < 0.2
    numeric = [c for c in df.columns if df[c].dtype.kind in "if"]
    categorical = [c for c in df.columns if c not in numeric]
    ct = ColumnTransformer([("num", StandardScaler(), numeric),
                            ("cat", OneHotEncoder(handle_unknown="ignore"), categorical)])
    train = dd.from_pandas(df[~test], npartitions=3)
    Xtr = ct.fit_transform(train).persist()  # the solvers make many passes: encode once
    Xte = ct.transform(df[test])
    for model in (LogisticRegression(multi_class="multinomial", max_iter=200),
                  LogisticRegression(solver="sgd", multi_class="multinomial", random_state=0)):
        model.fit(Xtr, dd.from_pandas(pd.Series(y[~test]), npartitions=3))
        assert model.coef_.shape[0] == 2
        assert (model.predict(Xte) == y[test]).mean() >= 0.84


# ---------------------------------------------------------------------------------------------
# Linear SVM
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
def test_linear_svc_accuracy_and_primal_objective(loss):
    X, y = make_classification(3000, 10, n_informative=6, flip_y=0.1, random_state=7)
    Xtr, Xte, ytr, yte = X[:2400], X[2400:], y[:2400], y[2400:]
    ref = SkLinearSVC(loss=loss, C=1.0, max_iter=100_000, tol=1e-8).fit(Xtr, ytr)
    ours = LinearSVC(loss=loss, C=1.0).fit(da.from_array(Xtr, chunks=500), ytr)
    assert ours.coef_.shape == (1, 10) and ours.intercept_.shape == (1,)
    assert abs(ours.score(Xte, yte) - ref.score(Xte, yte)) <= 0.005
    ours_obj = primal_objective(ours.coef_, ours.intercept_, Xtr, ytr, loss=loss)
    ref_obj = primal_objective(ref.coef_, ref.intercept_, Xtr, ytr, loss=loss)
    # Ours minimises this objective (intercept unpenalised); liblinear penalises b² too.
    assert ours_obj <= 1.02 * ref_obj


def test_linear_svc_multiclass_and_sgd_solver(multiclass):
    X, y = multiclass
    ref = SkLinearSVC(C=0.1, max_iter=100_000).fit(X, y)
    ours = LinearSVC(C=0.1).fit(X, y)
    assert ours.coef_.shape == (3, 8)
    assert ours.decision_function(X).shape == (600, 3)
    assert abs(ours.score(X, y) - ref.score(X, y)) <= 0.01
    sgd = LinearSVC(C=0.1, loss="hinge", solver="sgd", random_state=0).fit(X, y)
    assert sgd.score(X, y) >= ref.score(X, y) - 0.03


# ---------------------------------------------------------------------------------------------
# SGD classifiers
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loss", ["hinge", "log_loss", "modified_huber", "squared_hinge",
                                  "perceptron"])
def test_sgd_classifier_losses(binary, multiclass, loss):
    for X, y in (binary, multiclass):
        Xs = (X - X.mean(0)) / X.std(0)
        kw = {"learning_rate": "constant", "eta0": 0.01} if loss == "squared_hinge" else {}
        ours = SGDClassifier(loss=loss, random_state=0, average=True, **kw)
        ours.fit(da.from_array(Xs, chunks=150), y)
        ref = sk.SGDClassifier(loss=loss, random_state=0, average=True).fit(Xs, y)
        assert ours.score(Xs, y) >= ref.score(Xs, y) - 0.05, loss
        K = len(np.unique(y))
        assert ours.coef_.shape == ((1, 8) if K == 2 else (K, 8))
        if loss in ("log_loss", "modified_huber"):
            p = ours.predict_proba(Xs)
            np.testing.assert_allclose(p.sum(axis=1), 1.0)
        else:
            assert not hasattr(ours, "predict_proba")


def test_perceptron_equals_scikit_learn_per_sample():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(200, 3))
    y = (X @ [1.0, -2.0, 0.5] + 0.3 > 0).astype(int)  # separable
    ref = sk.Perceptron(eta0=1.0, shuffle=False, tol=None, max_iter=20).fit(X, y)
    ours = Perceptron(batch_size=1, shuffle=False, tol=None, max_iter=20).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-12)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-12)
    assert ours.score(X, y) == 1.0


def test_partial_fit_is_one_epoch_of_fit(binary):
    X, y = binary
    Xd = da.from_array(X, chunks=200)
    one = SGDClassifier(loss="log_loss", random_state=3, max_iter=1, tol=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        one.fit(Xd, y)
    part = SGDClassifier(loss="log_loss", random_state=3).partial_fit(Xd, y, classes=[0, 1])
    np.testing.assert_array_equal(part.coef_, one.coef_)
    part.partial_fit(Xd, y)
    assert part.n_iter_ == 2 and len(part.history_) == 2


def test_early_stopping_and_history(binary):
    X, y = binary
    m = SGDClassifier(early_stopping=True, n_iter_no_change=3, random_state=0,
                      max_iter=200).fit(da.from_array(X, chunks=200), y)
    assert m.n_iter_ < 200
    assert all(0 <= h["validation_score"] <= 1 for h in m.history_)
    assert {"epoch", "objective", "seconds", "learning_rate"} <= set(m.history_[0])


def test_warm_start_continues_from_the_previous_coefficients(binary):
    X, y = binary
    m = SGDClassifier(loss="log_loss", max_iter=2, tol=None, warm_start=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, y)
        first, first_b = m.coef_.copy(), m.intercept_.copy()
        m.fit(X, y)
        again = SGDClassifier(loss="log_loss", max_iter=2, tol=None, random_state=0).fit(
            X, y, coef_init=first, intercept_init=first_b)
    assert not np.array_equal(m.coef_, first)
    np.testing.assert_array_equal(m.coef_, again.coef_)


def test_numpy_in_numpy_out_dask_in_lazy_dask_out(binary):
    X, y = binary
    m = LogisticRegression().fit(X, y)
    assert isinstance(m.predict(X), np.ndarray)
    out = m.predict_proba(da.from_array(X, chunks=100))
    assert isinstance(out, da.Array) and out.shape == (600, 2)
    np.testing.assert_allclose(out.compute(), m.predict_proba(X))
    assert isinstance(m.decision_function(dd.from_pandas(pd.DataFrame(X), npartitions=2)),
                      da.Array)


def test_data_re_read_every_pass_gives_the_same_model(tmp_path, binary):
    """persist=False (data larger than the cluster): every pass re-reads the Parquet files."""
    X, y = binary
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(8)]).assign(label=y)
    dd.from_pandas(df, npartitions=3).to_parquet(tmp_path / "data")
    frame = dd.read_parquet(tmp_path / "data")
    kw = dict(loss="log_loss", random_state=0, max_iter=3, tol=None, local_steps=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        streamed = SGDClassifier(persist=False, **kw).fit(frame, "label")
        kept = SGDClassifier(persist=True, **kw).fit(frame, "label")
    np.testing.assert_array_equal(streamed.coef_, kept.coef_)
    exact = LogisticRegression(persist=False).fit(frame, "label")
    np.testing.assert_allclose(exact.coef_, LogisticRegression().fit(X, y).coef_, atol=1e-7)


@pytest.mark.parametrize("make", [
    lambda: SGDClassifier(loss="log_loss", penalty="elasticnet", l1_ratio=0.3, alpha=1e-3),
    lambda: SGDClassifier(loss="hinge", average=50),
    lambda: SGDClassifier(loss="modified_huber", learning_rate="invscaling", eta0=0.05),
    lambda: SGDRegressor(loss="huber", penalty="l1", alpha=1e-3),
    lambda: SGDRegressor(average=True, fit_intercept=False),
], ids=["log-elasticnet", "hinge-asgd", "modified_huber", "huber-l1", "squared-asgd"])
def test_compiled_dense_steps_equal_the_numpy_steps(make, regression, binary, monkeypatch):
    """Dense one-output plain-SGD steps run compiled (dml.optim.dense_steps): the same batches,
    step sizes, penalty and iterate average as the NumPy steps, equal up to rounding, on one
    block and on 7 blocks whose batches cross the blocks' boundaries."""
    from dml.optim import dense_steps

    is_clf = isinstance(make(), SGDClassifier)
    X, y = binary if is_clf else regression[:2]
    if not is_clf:
        y = (y - y.mean()) / y.std()
    calls = []
    terms = dense_steps.terms

    def recorded(*a):
        calls.append(terms(*a))
        return calls[-1]

    monkeypatch.setattr(dense_steps, "terms", recorded)
    for chunks in (len(X), 97):
        kw = dict(max_iter=3, tol=None, random_state=0, batch_size=10)
        compiled = make().set_params(**kw).fit(da.from_array(X, chunks=(chunks, -1)), y)
        assert calls and all(t is not None for t in calls)  # every block's steps compiled
        with monkeypatch.context() as mp:
            mp.setattr(dense_steps, "terms", lambda *a: None)
            plain = make().set_params(**kw).fit(da.from_array(X, chunks=(chunks, -1)), y)
        np.testing.assert_allclose(compiled.coef_, plain.coef_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(compiled.intercept_, plain.intercept_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose([h["objective"] for h in compiled.history_],
                                   [h["objective"] for h in plain.history_], rtol=1e-9)
        assert compiled.t_ == plain.t_


# ---------------------------------------------------------------------------------------------
# Determinism, clusters, checkpoints
# ---------------------------------------------------------------------------------------------

def _sgd_fit(X, y):
    return SGDClassifier(loss="log_loss", random_state=11, max_iter=4, tol=None,
                         local_steps=3).fit(da.from_array(X, chunks=130), y)


def test_same_model_for_1_2_3_workers(binary):
    X, y = binary
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        results = []
        for n in (1, 2, 3):
            with LocalCluster(n_workers=n, threads_per_worker=1, processes=False,
                              dashboard_address=":0") as cluster, Client(cluster):
                results.append((_sgd_fit(X, y).coef_,
                                LinearSVC().fit(da.from_array(X, chunks=130), y).coef_))
    for sgd, svc in results[1:]:
        np.testing.assert_array_equal(sgd, results[0][0])
        np.testing.assert_array_equal(svc, results[0][1])


# Quick tier: the process cluster; the in-process cluster with the slow tests.
@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_main_fits_on_both_clusters(client, binary, multiclass):
    X, y = multiclass
    Xd = da.from_array(X, chunks=130)
    ref = sk.LogisticRegression(tol=1e-10, max_iter=1000).fit(X, y)
    ours = LogisticRegression(tol=1e-8).fit(Xd, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=2e-6)
    Xb, yb = binary
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        on_cluster = _sgd_fit(Xb, yb).coef_
        with dask.config.set(scheduler="sync"):
            local = _sgd_fit(Xb, yb).coef_
    np.testing.assert_array_equal(on_cluster, local)
    pred = ours.predict(Xd)
    assert isinstance(pred, da.Array) and (pred.compute() == ref.predict(X)).mean() > 0.99


class _Interrupted(Exception):
    pass


def _stop_at(epoch):
    def cb(state, record):
        if record["epoch"] == epoch:
            raise _Interrupted
    return cb


def test_checkpoint_resume_equals_uninterrupted_fit(client, tmp_path, binary):
    X, y = binary
    Xd = da.from_array(X, chunks=150)
    kw = dict(loss="modified_huber", optimizer="momentum", learning_rate="invscaling",
              eta0=0.01, average=True, early_stopping=True, max_iter=8, tol=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # random_state=None: the resumed fit must reuse the checkpoint's seed.
        full_dir = tmp_path / "full"
        full = SGDClassifier(checkpoint_dir=str(full_dir), **kw).fit(Xd, y)
        seed = ckpt.load(full_dir).seed
        ref = SGDClassifier(random_state=seed, **kw).fit(Xd, y)
        np.testing.assert_array_equal(full.coef_, ref.coef_)
        d = tmp_path / "run"
        with pytest.raises(_Interrupted):
            SGDClassifier(random_state=seed, checkpoint_dir=str(d), checkpoint_every=2,
                          callbacks=[_stop_at(5)], **kw).fit(Xd, y)
        assert ckpt.load(d).epoch == 4  # every 2 epochs: the last one written was epoch 4
        resumed = SGDClassifier(random_state=seed, checkpoint_dir=str(d), **kw).fit(Xd, y)
    np.testing.assert_array_equal(resumed.coef_, ref.coef_)
    np.testing.assert_array_equal(resumed.intercept_, ref.intercept_)
    assert resumed.n_iter_ == 8
    assert [h["objective"] for h in resumed.history_] == [h["objective"] for h in ref.history_]
    with pytest.raises(ValueError, match="different fit"):
        SGDClassifier(random_state=seed, checkpoint_dir=str(d), **{**kw, "eta0": 0.1}).fit(Xd, y)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------

def test_bad_input_errors(binary):
    X, y = binary
    Xn = X.copy()
    Xn[5, 2] = np.nan
    with pytest.raises(ValueError, match="contains NaN"):
        LogisticRegression().fit(da.from_array(Xn, chunks=100), y)
    with pytest.raises(ValueError, match="at least 2 classes.*only one class: 1"):
        SGDClassifier().fit(X, np.ones(len(y), dtype=int))
    with pytest.raises(ValueError, match="at least 2 classes"):
        LinearSVC().fit(X, np.zeros(len(y)))
    m = SGDClassifier(random_state=0).partial_fit(X[:100], np.where(y[:100] > 0, 2, 1))
    with pytest.raises(ValueError, match=r"labels \[3\] that are not in the classes \[1, 2\]"):
        m.partial_fit(X[:10], np.array([1, 2, 3, 1, 2, 1, 2, 1, 2, 1]))
    with pytest.raises(ValueError, match="classes=.*not the same"):
        m.partial_fit(X[:10], np.ones(10, int), classes=[1, 2, 3])
    with pytest.raises(DivergedError, match=r"diverged at epoch \d+ \(objective .*\); lower the "
                                            r"learning rate \(learning_rate='constant', "
                                            r"eta0=1e\+06\)"):
        SGDRegressor(learning_rate="constant", eta0=1e6).fit(X, X @ np.arange(8.0))
    with pytest.raises(ValueError, match=r"The 'alpha' parameter of SGDClassifier must be a float "
                                         r"in the range \[0\.0, inf\)\. Got -1 instead\."):
        SGDClassifier(alpha=-1).fit(X, y)
    with pytest.raises(ValueError, match=r"The 'loss' parameter of SGDRegressor must be a str "
                                         r"among"):
        SGDRegressor(loss="hinge").fit(X, y)
    with pytest.raises(ValueError, match=r"The 'l1_ratio' parameter of LogisticRegression must "
                                         r"be 0 unless solver='sgd'"):
        LogisticRegression(l1_ratio=0.5).fit(X, y)
    with pytest.raises(ValueError, match="X has 3 features, but LogisticRegression is expecting 8"):
        LogisticRegression().fit(X, y).predict(X[:, :3])
    with pytest.raises(ValueError, match="Unknown label type: 'continuous'"):
        LogisticRegression().fit(X, X[:, 0])
    with pytest.raises(ValueError, match="weight is zero"):
        LogisticRegression().fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match="weight is zero|positive weight"):
        Ridge().fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match="weight is zero"):
        SGDRegressor().fit(X, y, sample_weight=np.zeros(len(y)))
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        LogisticRegression().predict_proba(X)
    with pytest.raises(TypeError, match="mixes label types"):
        LogisticRegression().fit(X, np.array(["a", 1] * 300, dtype=object))


def test_elastic_net_dual_gap_bounds_the_suboptimality():
    """``dual_gap_`` (coordinate descent) is scikit-learn's duality gap of the objective
    divided by the weight sum: never below the primal objective's distance to the optimum,
    near zero at the optimum, None with the SGD solver."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 6))
    y = X @ [1.5, 0.0, -2.0, 0.0, 0.5, 0.0] + 0.3 * rng.normal(size=200)

    def primal(est):
        r = y - X @ est.coef_ - est.intercept_
        l1, l2 = est.alpha * est.l1_ratio, est.alpha * (1 - est.l1_ratio)
        return (r @ r / (2 * len(y)) + l1 * np.abs(est.coef_).sum()
                + l2 / 2 * est.coef_ @ est.coef_)

    for make in (lambda **k: ElasticNet(alpha=0.1, l1_ratio=0.7, **k),
                 lambda **k: Lasso(alpha=0.05, **k),
                 lambda **k: ElasticNet(alpha=0.2, l1_ratio=0.0, **k)):
        best = make(tol=1e-12, max_iter=10_000).fit(X, y)
        assert abs(best.dual_gap_) < 1e-10  # zero up to rounding
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rough = make(max_iter=1).fit(X, y)
        assert rough.dual_gap_ >= primal(rough) - primal(best) - 1e-12
        assert rough.dual_gap_ > 1e3 * best.dual_gap_
    sgd = ElasticNet(alpha=0.1, solver="sgd", max_iter=2, random_state=0).fit(X, y)
    assert sgd.dual_gap_ is None


def test_elastic_net_and_lasso_docstrings_are_docstrings():
    """ElasticNet's docstring was a concatenation expression (so ``__doc__`` was None and its
    doctest never ran); Lasso's pointed at it."""
    for cls in (ElasticNet, Lasso):
        assert cls.__doc__ is not None and ">>> " in cls.__doc__
        assert "alpha : float, default=1.0" in cls.__doc__
        assert "dual_gap_ : float or None" in cls.__doc__
