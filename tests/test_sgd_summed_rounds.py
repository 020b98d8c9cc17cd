"""Summed SGD rounds are kept short enough (dml.optim.summed_rounds).

Without the cap, a squared-loss model that trains well on one block diverged on 64 blocks with
a constant step size of 0.01 (a round of 256 summed steps overshoots along the steepest
direction), and with the default decaying step size it ran away once the data had a few hundred
streams or more. These tests pin that the partition count no longer decides it.
"""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification, make_regression
from sklearn.preprocessing import StandardScaler

from dml._blocks import BlockSpec, as_blocks
from dml.linear_model import SGDClassifier, SGDRegressor
from dml.optim import summed_rounds
from dml.optim.summed_rounds import RoundLimit, data_curvature, sum_scale


_SPARSE = BlockSpec(accept_sparse=True)


def _regression(n, d=20, seed=0):
    X, y = make_regression(n_samples=n + 2000, n_features=d, n_informative=d, noise=10,
                           random_state=seed)
    X = StandardScaler().fit_transform(X)
    y = (y - y.mean()) / y.std()
    return X[:n], y[:n], X[n:], y[n:]


def _mse(model, X, y):
    return float(np.mean((np.asarray(model.predict(X)) - y) ** 2))


def _fit(cls, X, y, blocks, client=None, **params):
    rows = -(-len(y) // blocks)
    Xd, yd = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
    if client is not None:
        Xd, yd = client.persist(Xd), client.persist(yd)
    return cls(random_state=0, tol=None, **params).fit(Xd, yd)


@pytest.mark.parametrize("loss", ["squared_error", "squared_epsilon_insensitive"])
def test_constant_step_squared_loss_trains_on_many_partitions(client, loss):
    # 32 blocks of ~390 rows, each its own stream (stream_steps=8): rounds of 256 summed steps
    # at eta0=0.01, which diverged before the cap.
    X, y, Xt, yt = _regression(12_500)
    params = dict(loss=loss, learning_rate="constant", eta0=0.01, max_iter=3, stream_steps=8)
    one = _mse(_fit(SGDRegressor, X, y, 1, **params), Xt, yt)
    many = _mse(_fit(SGDRegressor, X, y, 32, client=client, **params), Xt, yt)
    assert np.isfinite(many) and many <= 1.02 * one, (one, many)


def test_squared_hinge_with_a_constant_step_trains_on_many_partitions():
    X, y = make_classification(n_samples=14_500, n_features=20, n_informative=10,
                               n_redundant=6, random_state=0)
    X = StandardScaler().fit_transform(X)
    X, y, Xt, yt = X[:12_500], y[:12_500], X[12_500:], y[12_500:]
    params = dict(loss="squared_hinge", learning_rate="constant", eta0=0.01, max_iter=3,
                  stream_steps=8)
    one = _fit(SGDClassifier, X, y, 1, **params).score(Xt, yt)
    many = _fit(SGDClassifier, X, y, 32, **params).score(Xt, yt)
    assert many >= one - 0.01, (one, many)


def test_many_streams_of_the_default_schedule_do_not_run_away():
    # 1,024 streams of 2 steps each: a round sums 1,024 steps. Before the cap the default
    # (invscaling) step size made the first rounds overshoot without bound (MSE in the
    # thousands); now the model is the one-block model's quality.
    X, y, Xt, yt = _regression(40_000)
    params = dict(max_iter=2, stream_steps=1)
    one = _mse(_fit(SGDRegressor, X, y, 1, **params), Xt, yt)
    many = _mse(_fit(SGDRegressor, X, y, 1024, **params), Xt, yt)
    assert many <= 1.02 * one, (one, many)


def test_only_losses_with_unbounded_gradients_are_capped():
    # Hinge, log-loss, Huber, ... have bounded gradients: an overshooting round cannot grow
    # without bound, and their rounds keep the plain sum (and make no curvature pass).
    from dml.optim.losses import get_loss
    for name in ("hinge", "log_loss", "huber", "epsilon_insensitive", "modified_huber",
                 "perceptron"):
        assert get_loss(name).summed_curvature == 0.0, name
    assert get_loss("squared_error").summed_curvature == 1.0
    assert get_loss("squared_hinge").summed_curvature == 2.0
    assert get_loss("squared_epsilon_insensitive").summed_curvature == 2.0


def test_data_curvature_is_the_largest_eigenvalue_of_the_weighted_gram_matrix():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6)) @ rng.normal(size=(6, 6))
    w = rng.uniform(0.5, 2.0, size=300)
    Xa = np.hstack([X, np.ones((300, 1))])
    expected = np.linalg.eigvalsh((Xa * w[:, None]).T @ Xa / 300)[-1]
    for blocks in (as_blocks(X, sample_weight=w, block_rows=300),
                   as_blocks(X, sample_weight=w, block_rows=37),
                   as_blocks(sp.csr_matrix(X), sample_weight=w, block_rows=50, spec=_SPARSE)):
        assert data_curvature(blocks, 6, fit_intercept=True) == pytest.approx(expected,
                                                                             rel=1e-10)
    no_intercept = np.linalg.eigvalsh(X.T @ X / 300)[-1]
    assert data_curvature(as_blocks(X, block_rows=64), 6, fit_intercept=False) == \
        pytest.approx(no_intercept, rel=1e-10)


def test_wide_data_uses_the_trace_bound(monkeypatch):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 10))
    monkeypatch.setattr(summed_rounds, "EXACT_GRAM_FEATURES", 4)
    trace = float(np.mean((X * X).sum(axis=1) + 1.0))
    for blocks in (as_blocks(X, block_rows=30),
                   as_blocks(sp.csr_matrix(X), block_rows=70, spec=_SPARSE)):
        assert data_curvature(blocks, 10, fit_intercept=True) == pytest.approx(trace,
                                                                              rel=1e-12)
    assert trace >= np.linalg.eigvalsh(np.hstack([X, np.ones((200, 1))]).T
                                       @ np.hstack([X, np.ones((200, 1))]) / 200)[-1]


def test_limits_and_scales():
    assert RoundLimit(2.0).steps(0.01) == pytest.approx(50.0)
    assert RoundLimit(2.0, momentum=0.9).steps(0.01) == pytest.approx(5.0)
    assert RoundLimit(None).steps(0.01) == summed_rounds.ADAPTIVE_ROUND_STEPS
    assert RoundLimit(2.0, adaptive=True).steps(0.01) == summed_rounds.ADAPTIVE_ROUND_STEPS
    assert RoundLimit(0.0).steps(0.01) == float("inf")
    assert sum_scale(50.0, 25) == 1.0        # within the limit: the plain sum
    assert sum_scale(50.0, 200) == pytest.approx(0.25)
    assert sum_scale(float("inf"), 10 ** 6) == 1.0
    assert sum_scale(float("nan"), 100) == 1.0


def test_rounds_lengthen_as_the_step_size_decays():
    from dml.optim.streams import make_streams, round_plans

    layout = make_streams([3200] * 8, batch_size=32, stream_steps=None)  # 8 × 100 steps
    limit = RoundLimit(1.0)
    decaying = summed_rounds.limited_rounds(32, layout, limit, lambda t: 0.05 / t ** 0.25, 0)
    # Every round within the limit of the step size at its own start, and longer than the
    # first (limited by the epoch's first step size, the rule before).
    assert isinstance(decaying, tuple) and list(decaying) == sorted(decaying)
    assert decaying[0] == summed_rounds.capped_local_steps(32, layout, limit.steps(0.05))
    assert decaying[-1] > decaying[0]
    t = 0
    for spec in round_plans(layout, decaying):
        assert spec.total_steps <= limit.steps(0.05 / (t + 1) ** 0.25)
        t += spec.total_steps
    assert t == 800
    # A constant step or a limit that never binds: the uniform rounds.
    assert summed_rounds.limited_rounds(32, layout, limit, lambda t: 0.05, 0) == 2
    assert summed_rounds.limited_rounds(32, layout, limit, lambda t: 1e-4, 0) == 32
    assert summed_rounds.limited_rounds(32, layout, None, lambda t: 0.05, 0) == 32
    # Later in training (a larger step counter) the rounds are longer.
    later = summed_rounds.limited_rounds(32, layout, limit, lambda t: 0.05 / t ** 0.25, 800)
    assert later == 32 or later[0] > decaying[0]


@pytest.mark.parametrize("rows", [500, 100])
def test_partial_fit_measures_the_curvature_once_per_data_set(monkeypatch, rows):
    # 18 blocks of 500 rows: two streams of 9 blocks (at least 128 batches of 32 each), one
    # object per persisted block; 90 blocks of 100 rows: persisted in groups of 8 blocks, whose
    # keys are fresh on every call (the groups' token names the data).
    X, y, _, _ = _regression(9000, d=5)
    Xd, yd = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
    passes = []
    largest = summed_rounds._largest
    monkeypatch.setattr(summed_rounds, "_largest", lambda *a: passes.append(1) or largest(*a))
    monkeypatch.setattr(summed_rounds, "_CURVATURES", {})
    cached = SGDRegressor(random_state=0)
    for _ in range(3):
        cached.partial_fit(Xd, yd)
    assert len(passes) == 1
    # The same model as with a pass on every call.
    fresh = SGDRegressor(random_state=0)
    for _ in range(3):
        summed_rounds._CURVATURES.clear()
        fresh.partial_fit(Xd, yd)
    assert len(passes) == 4
    np.testing.assert_array_equal(cached.coef_, fresh.coef_)
    # Other data: its own pass.
    cached.partial_fit(Xd * 0.5, yd)
    assert len(passes) == 5


@pytest.mark.slow  # about 50 s for the four cases: runs in the full suite
@pytest.mark.parametrize("solver", ["adam", "sgd"])
def test_network_rounds_are_short_on_many_streams(client, solver):
    # 32 streams (stream_steps=8, blocks of 7 steps): rounds of 256 summed steps left the
    # network far behind its one-block fit; rounds of 32 steps in all train it as far.
    from dml.neural_network import MLPRegressor

    X, y, Xt, yt = _regression(20_000, d=10)
    params = dict(hidden_layer_sizes=(16,), solver=solver, max_iter=3, batch_size=50,
                  stream_steps=8)
    one = _mse(_fit(MLPRegressor, X, y, 1, **params), Xt, yt)
    many = _mse(_fit(MLPRegressor, X, y, 64, client=client, **params), Xt, yt)
    assert many <= 1.05 * one, (one, many)
