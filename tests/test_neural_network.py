"""dml.neural_network: gradients, scikit-learn forward pass, accuracy, partitionings, clusters."""
from __future__ import annotations

import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_digits, make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier as SkMLPClassifier
from sklearn.neural_network import MLPRegressor as SkMLPRegressor

from dml.neural_network import MLPClassifier, MLPRegressor
from dml.neural_network._problem import MLPProblem
from dml.optim.engine import RoundPlan, initial_state, local_sgd_steps
from dml.optim.streams import RoundSpec

ACTS = ["relu", "tanh", "logistic", "identity"]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X / 16.0, y, test_size=0.3, random_state=0)


def _blobs(n=300, seed=0, k=3):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3, size=(k, 4))
    y = rng.integers(0, k, n)
    return centres[y] + rng.normal(size=(n, 4)), y


def _numeric_grad(problem, w, X, Y, sw, h=1e-6):
    num = np.empty_like(w)
    for i in range(len(w)):
        e = np.zeros_like(w)
        e[i] = h
        num[i] = (problem.batch_loss_grad(w + e, X, Y, sw)[0]
                  - problem.batch_loss_grad(w - e, X, Y, sw)[0]) / (2 * h)
    return num


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("output", ["identity", "logistic", "softmax"])
def test_gradient_matches_finite_differences(act, output):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(9, 4))
    classes = {"identity": None, "logistic": np.array([0, 1]), "softmax": np.arange(3)}[output]
    Y = rng.normal(size=(9, 1)) if classes is None else rng.integers(0, len(classes), 9)
    K = 3 if output == "softmax" else 1
    problem = MLPProblem([4, 5, 3, K], act, output, classes=classes)
    w = problem.init_params(rng) + 0.1 * rng.normal(size=problem.n_params)
    sw = rng.uniform(0.5, 2.0, size=9)
    for weights in (None, sw):
        _, g = problem.batch_loss_grad(w, X, Y, weights)
        num = _numeric_grad(problem, w, X, Y, weights)
        assert np.linalg.norm(num - g) / np.linalg.norm(num + g) < 1e-6


def test_dropout_gradient_matches_finite_differences_for_a_fixed_mask():
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(8, 3)), rng.integers(0, 3, 8)
    problem = MLPProblem([3, 6, 3], "tanh", "softmax", classes=np.arange(3), dropout=0.5)
    w = problem.init_params(rng)

    def f(params):
        return problem.batch_loss_grad(params, X, Y, None, rng=np.random.default_rng(7))

    _, g = f(w)
    num = np.array([(f(w + e)[0] - f(w - e)[0]) / 2e-6 for e in np.eye(len(w)) * 1e-6])
    assert np.linalg.norm(num - g) / np.linalg.norm(num + g) < 1e-6
    # Some units are dropped: the loss differs from the one without noise.
    assert f(w)[0] != problem.batch_loss_grad(w, X, Y, None)[0]


@pytest.mark.parametrize("act", ACTS)
def test_forward_pass_equals_scikit_learn_with_copied_weights(act):
    rng = np.random.default_rng(3)
    X, y = _blobs(120)
    yb = (y > 0).astype(int)
    for Xy, cls in ((y, 3), (yb, 2)):
        sk = SkMLPClassifier(hidden_layer_sizes=(7, 5), activation=act, max_iter=2,
                             random_state=0).fit(X, Xy)
        ours = MLPClassifier((7, 5), activation=act, max_iter=1, random_state=0).fit(X, Xy)
        # ours -> scikit-learn and scikit-learn -> ours
        sk.coefs_ = [c.copy() for c in ours.coefs_]
        sk.intercepts_ = [b.copy() for b in ours.intercepts_]
        np.testing.assert_allclose(ours.predict_proba(X), sk.predict_proba(X), rtol=0,
                                   atol=1e-12)
        np.testing.assert_array_equal(ours.predict(X), sk.predict(X))
        sk2 = SkMLPClassifier(hidden_layer_sizes=(7, 5), activation=act, max_iter=3,
                              random_state=1).fit(X, Xy)
        ours.coefs_, ours.intercepts_ = sk2.coefs_, sk2.intercepts_
        np.testing.assert_allclose(ours.predict_proba(X), sk2.predict_proba(X), rtol=0,
                                   atol=1e-12)
        assert ours.predict_proba(X).shape == (len(X), cls)
    Xr = rng.normal(size=(100, 4))
    yr = Xr @ [1.0, 2.0, -1.0, 0.5]
    skr = SkMLPRegressor(hidden_layer_sizes=(6,), activation=act, max_iter=2,
                         random_state=0).fit(Xr, yr)
    reg = MLPRegressor((6,), activation=act, max_iter=1, random_state=0).fit(Xr, yr)
    reg.coefs_, reg.intercepts_ = skr.coefs_, skr.intercepts_
    np.testing.assert_allclose(reg.predict(Xr), skr.predict(Xr), rtol=0, atol=1e-12)


def test_one_block_equals_sequential_minibatch_sgd():
    X, y = _blobs(150)
    est = MLPClassifier((8,), batch_size=16, max_iter=2, tol=None, random_state=5,
                        dropout=0.2).fit(X, y)
    # The same steps written out: one block, the engine's step function over each epoch.
    problem = est._problem(4, np.arange(3))
    cfg = est._sgd_config(problem, len(X))
    state = initial_state(problem, cfg, 5)
    from dml._blocks import block_rng

    Xp, Yp, _ = problem.prepare_block(X, y, None)
    params, slots, t = state.params, state.opt.slots, 0
    for epoch in (1, 2):
        order = block_rng(5, "shuffle", epoch, 0).permutation(len(X))
        plan = RoundPlan(epoch, RoundSpec(0, 10, (1.0,), (10,)), 5, t, 1.0, cfg)
        local_sgd_steps(problem, params, slots, Xp, Yp, None, order, 0, 10, t, plan,
                        rng=block_rng(5, "noise", epoch, 0, 0))
        t += 10
    coefs, intercepts = problem.unpack(params)
    for a, b in zip(est.coefs_ + est.intercepts_, coefs + intercepts):
        np.testing.assert_array_equal(a, b)


def test_digits_accuracy(digits):
    Xtr, Xte, ytr, yte = digits
    clf = MLPClassifier((64,), batch_size=64, learning_rate_init=0.01, max_iter=30,
                        random_state=0).fit(da.from_array(Xtr, chunks=420), ytr)
    assert clf.score(Xte, yte) >= 0.95


def test_regressor_r2():
    X, y = make_regression(n_samples=1000, n_features=10, noise=1.0, random_state=0)
    y = y / y.std()
    reg = MLPRegressor((32,), batch_size=32, learning_rate_init=0.01, max_iter=60,
                       random_state=0).fit(X[:800], y[:800])
    assert reg.score(X[800:], y[800:]) >= 0.95
    assert reg.predict(X[:3]).shape == (3,)


def test_same_model_on_both_clusters_as_threaded(client, digits):
    Xtr, _, ytr, _ = digits
    Xd = da.from_array(Xtr[:600], chunks=200)
    kw = dict(hidden_layer_sizes=(16,), batch_size=32, max_iter=3, tol=None, random_state=1,
              dropout=0.1)
    on_cluster = MLPClassifier(**kw).fit(Xd, ytr[:600])
    with __import__("dask").config.set(scheduler="threads"):
        threaded = MLPClassifier(**kw).fit(Xd, ytr[:600])
    for a, b in zip(on_cluster.coefs_ + on_cluster.intercepts_,
                    threaded.coefs_ + threaded.intercepts_):
        np.testing.assert_array_equal(a, b)
    pred = on_cluster.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), on_cluster.predict(Xtr[:600]))
    assert len(on_cluster.history_) == 3


def test_partitionings_and_dataframe_with_target_column():
    X, y = _blobs(400)
    scores = []
    for chunks in (400, 150, (50, 120, 230)):
        clf = MLPClassifier((16,), batch_size=32, learning_rate_init=0.01, max_iter=20,
                            random_state=0).fit(da.from_array(X, chunks=(chunks, 4)), y)
        scores.append(clf.score(X, y))
    frame = pd.DataFrame(X, columns=list("abcd")).assign(label=y)
    clf = MLPClassifier((16,), batch_size=32, learning_rate_init=0.01, max_iter=20,
                        random_state=0).fit(dd.from_pandas(frame, npartitions=3), "label")
    scores.append(clf.score(frame[list("abcd")], y))
    assert min(scores) > 0.95


def test_float32_and_string_labels():
    X, y = _blobs(300)
    labels = np.array(["a", "b", "c"])[y]
    clf = MLPClassifier((8,), dtype="float32", batch_size=32, learning_rate_init=0.01,
                        max_iter=20, random_state=0).fit(X, labels)
    assert all(c.dtype == np.float32 for c in clf.coefs_ + clf.intercepts_)
    assert clf.score(X, labels) > 0.95
    assert clf.predict(X[:2]).dtype == labels.dtype
    assert clf.predict_proba(X[:2]).dtype == np.float64


def test_early_stopping_history_and_best_weights():
    X, y = _blobs(400)
    clf = MLPClassifier((8,), early_stopping=True, n_iter_no_change=2, max_iter=100,
                        batch_size=32, learning_rate_init=0.05, random_state=0).fit(X, y)
    assert clf.n_iter_ < 100
    assert all("validation_score" in h for h in clf.history_)
    assert clf.best_validation_score_ == max(clf.validation_scores_)
    assert len(clf.loss_curve_) == clf.n_iter_


def test_partial_fit_and_warm_start():
    X, y = _blobs(300)
    kw = dict(hidden_layer_sizes=(8,), batch_size=32, random_state=0, tol=None)
    a = MLPClassifier(max_iter=3, **kw).fit(X, y)
    b = MLPClassifier(**kw)
    for _ in range(3):
        b.partial_fit(X, y, classes=[0, 1, 2])
    for u, v in zip(a.coefs_, b.coefs_):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-14)
    assert b.n_iter_ == 3 and len(b.history_) == 3
    warm = MLPClassifier(max_iter=1, warm_start=True, **kw).fit(X, y)
    first = [c.copy() for c in warm.coefs_]
    warm.fit(X, y)
    cold = MLPClassifier(max_iter=1, **kw).fit(X, y)
    assert not np.allclose(warm.coefs_[0], first[0])
    np.testing.assert_array_equal(cold.coefs_[0], first[0])
    with pytest.raises(ValueError, match="not in the classes"):
        b.partial_fit(X[:5], np.array([0, 1, 2, 3, 0]))


def test_checkpoint_resume_equals_uninterrupted(tmp_path):
    from dml.optim.training import StopTraining

    X, y = _blobs(200)
    kw = dict(hidden_layer_sizes=(8,), batch_size=32, max_iter=4, tol=None, random_state=2)
    full = MLPClassifier(**kw).fit(X, y)

    def stop_after_two(state, record):
        if record["epoch"] == 2:
            raise StopTraining

    MLPClassifier(checkpoint_dir=str(tmp_path), callbacks=[stop_after_two], **kw).fit(X, y)
    resumed = MLPClassifier(checkpoint_dir=str(tmp_path), **kw).fit(X, y)
    for a, b in zip(full.coefs_, resumed.coefs_):
        np.testing.assert_array_equal(a, b)


def test_bad_input():
    X, y = _blobs(60)
    bad = "The '{}' parameter of MLPClassifier must be "
    with pytest.raises(ValueError, match=bad.format("activation") + "a str among"):
        MLPClassifier(activation="softplus").fit(X, y)
    with pytest.raises(ValueError, match=bad.format("hidden_layer_sizes") +
                       r"a positive int or a tuple of positive ints\. Got \(4, 0\)"):
        MLPClassifier(hidden_layer_sizes=(4, 0)).fit(X, y)
    with pytest.raises(ValueError, match=bad.format("solver") + "a str among"):
        MLPClassifier(solver="lbfgs").fit(X, y)
    with pytest.raises(ValueError, match=bad.format("dropout") +
                       r"a float in the range \[0\.0, 1\.0\)"):
        MLPClassifier(dropout=1.0).fit(X, y)
    with pytest.raises(ValueError, match=bad.format("dtype") + "'float32' or 'float64'"):
        MLPClassifier(dtype="float16").fit(X, y)
    with pytest.raises(ValueError, match=bad.format("batch_size") +
                       r"an int in the range \[1, inf\) or a str among \{'auto'\}"):
        MLPClassifier(batch_size=0).fit(X, y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        MLPClassifier().fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="NaN"):
        MLPRegressor().fit(np.where(X > 2, np.nan, X), y)
    fitted = MLPClassifier((4,), max_iter=1).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        fitted.predict(X[:, :3])
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        MLPRegressor().predict(X)


def test_same_model_for_1_2_3_workers(digits):
    from distributed import Client, LocalCluster

    Xtr, _, ytr, _ = digits
    kw = dict(hidden_layer_sizes=(16,), batch_size=32, max_iter=2, tol=None, random_state=4,
              dropout=0.1)
    results = []
    for n in (1, 2, 3):
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=False,
                          dashboard_address=":0") as cluster, Client(cluster):
            est = MLPClassifier(**kw).fit(da.from_array(Xtr[:600], chunks=130), ytr[:600])
            results.append(est.coefs_ + est.intercepts_)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)
