"""Gradient-boosted trees (dml.ensemble.GradientBoosting*): losses, equality with scikit-learn's
HistGradientBoosting on exact bins, quality, partitionings, early stopping, missing values."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

from conftest import QUICK_ON_PROCESS_CLUSTER
import dml
from dml.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from dml.ensemble._gb_fit import _should_stop
from dml.ensemble._gb_losses import make_loss


@pytest.fixture(autouse=True)
def _a_group_per_thread(monkeypatch):
    """Tiny data would be grown as one group (``MIN_GROUP_CELLS``); these tests exercise the
    groups and the exchanges between them."""
    from dml.ensemble import _gb_fit

    monkeypatch.setattr(_gb_fit, "MIN_GROUP_CELLS", 0)
    # Every block counted on its own (small blocks are otherwise joined into runs of
    # RUN_ROWS rows, tested on their own in tests/test_gbt.py).
    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 0)


def _exact_data(n=1500, d=5, seed=0, nan=0.0):
    """Few distinct values per feature (<= max_bins): dml's bins are scikit-learn's."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 25, size=(n, d)).astype(float)
    y = 2 * X[:, 0] + np.sin(X[:, 1]) + 0.3 * X[:, 2] * (X[:, 3] > 10) + rng.normal(size=n)
    if nan:
        X[rng.random(X.shape) < nan] = np.nan
    return X, y


# --------------------------------------------------------------------------------------------
# losses
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,k", [("squared_error", 1), ("absolute_error", 1), ("quantile", 1),
                                    ("poisson", 1), ("log_loss", 2), ("log_loss", 4)])
def test_gradients_and_hessians_match_finite_differences(name, k):
    rng = np.random.default_rng(1)
    n = 50
    loss = make_loss(name, k, quantile=0.3)
    if name == "log_loss":
        y = rng.integers(0, k, n).astype(float)
    elif name == "poisson":
        y = rng.poisson(2.0, n).astype(float)
    else:
        y = rng.normal(size=n)
    raw = rng.normal(size=(n, loss.n_outputs))
    if name in ("absolute_error", "quantile"):
        raw[np.abs(raw[:, 0] - y) < 1e-3, 0] += 0.01  # away from the kink
    g, h = loss.grad_hess(y, raw)
    eps = 1e-6
    for j in range(loss.n_outputs):
        e = np.zeros_like(raw)
        e[:, j] = eps
        num_g = (loss.pointwise(y, raw + e) - loss.pointwise(y, raw - e)) / (2 * eps)
        np.testing.assert_allclose(g[:, j], num_g, rtol=1e-5, atol=1e-7)
        if name in ("absolute_error", "quantile", "squared_error"):
            # Piecewise linear losses use hessian 1, as scikit-learn's (squared: exactly 1).
            assert np.all(h[:, j] == 1.0)
        else:
            gp, _ = loss.grad_hess(y, raw + e)
            gm, _ = loss.grad_hess(y, raw - e)
            np.testing.assert_allclose(h[:, j], (gp[:, j] - gm[:, j]) / (2 * eps), rtol=1e-5,
                                       atol=1e-7)


def test_baselines_are_scikit_learns():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 200)
    w = rng.random(200)
    loss = make_loss("log_loss", 3)
    from sklearn._loss.loss import HalfMultinomialLoss

    expected = HalfMultinomialLoss(n_classes=3).fit_intercept_only(y.astype(float), w)
    np.testing.assert_allclose(loss.baseline(loss.baseline_stats(y, w)), expected)


def test_should_stop_is_scikit_learns_rule():
    assert not _should_stop([-1.0, -0.9, -0.8], 2, 1e-7)
    assert _should_stop([-1.0, -0.9, -0.95, -0.92], 2, 1e-7)
    assert not _should_stop([-1.0, -0.9, -0.95, -0.89], 2, 1e-7)


# --------------------------------------------------------------------------------------------
# equality with scikit-learn on exact bins
# --------------------------------------------------------------------------------------------

_REG_CASES = [("squared_error", {}), ("absolute_error", {}), ("quantile", {"quantile": 0.8}),
              ("poisson", {})]


@pytest.mark.parametrize("loss,extra", _REG_CASES)
@pytest.mark.parametrize("weighted", [False, True])
def test_regressor_equals_scikit_learn_on_exact_bins(loss, extra, weighted):
    X, y = _exact_data(nan=0.05)
    if loss == "poisson":
        y = np.exp(y / 20)
    w = np.random.default_rng(3).random(len(y)) * 2 if weighted else None
    for rounds in (1, 4):
        kw = dict(loss=loss, max_iter=rounds, learning_rate=0.3, early_stopping=False, **extra)
        ours = GradientBoostingRegressor(**kw).fit(X, y, sample_weight=w)
        ref = HistGradientBoostingRegressor(**kw).fit(X, y, sample_weight=w)
        np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=0, atol=1e-10)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_equals_scikit_learn_on_exact_bins(n_classes):
    X, y = _exact_data(nan=0.05)
    yc = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    kw = dict(max_iter=3, learning_rate=0.5, early_stopping=False, max_leaf_nodes=15,
              min_samples_leaf=10, l2_regularization=0.5)
    ours = GradientBoostingClassifier(**kw).fit(X, yc)
    ref = HistGradientBoostingClassifier(**kw).fit(X, yc)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))


def test_depth_limited_level_growth_equals_scikit_learn():
    X, y = _exact_data()
    kw = dict(max_iter=5, early_stopping=False, max_depth=3, max_leaf_nodes=None,
              min_samples_leaf=5)
    ours = GradientBoostingRegressor(**kw).fit(X, y)
    ref = HistGradientBoostingRegressor(**kw).fit(X, y)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=0, atol=1e-10)


def test_missing_values_in_prediction_follow_scikit_learn():
    """Features with NaN in training learn a direction; features without NaN in training send
    NaN (met at prediction) to the child with more rows."""
    X, y = _exact_data(nan=0.0)
    X[::7, 1] = np.nan  # only feature 1 has missing values in training
    ours = GradientBoostingRegressor(max_iter=5, early_stopping=False).fit(X, y)
    ref = HistGradientBoostingRegressor(max_iter=5, early_stopping=False).fit(X, y)
    Xt = X[:200].copy()
    Xt[::3, 0] = np.nan
    Xt[1::3, 1] = np.nan
    np.testing.assert_allclose(ours.predict(Xt), ref.predict(Xt), rtol=0, atol=1e-10)
    assert ours.has_missing_values_.tolist() == [False, True, False, False, False]


# --------------------------------------------------------------------------------------------
# on a cluster: quality, partitionings (the multi-process cluster: the same-model tests below)
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_classification_quality_close_to_scikit_learn(inprocess_client):
    X, y = make_classification(n_samples=6000, n_features=12, n_informative=6, random_state=0)
    Xtr, Xte, ytr, yte = X[:4500], X[4500:], y[:4500], y[4500:]
    Xd, yd = da.from_array(Xtr, chunks=(700, -1)), da.from_array(ytr, chunks=700)
    kw = dict(max_iter=60, early_stopping=False, random_state=0)
    ours = GradientBoostingClassifier(**kw).fit(Xd, yd)
    ref = HistGradientBoostingClassifier(**kw).fit(Xtr, ytr)
    assert ours.score(Xte, yte) >= ref.score(Xte, yte) - 0.005 - 1 / len(yte)
    # Dask input gives a lazy Dask output with the same values.
    np.testing.assert_allclose(ours.predict_proba(da.from_array(Xte, chunks=500)).compute(),
                               ours.predict_proba(Xte))


@pytest.mark.slow
def test_regression_quality_close_to_scikit_learn(inprocess_client):
    X, y = make_regression(n_samples=5000, n_features=10, n_informative=6, noise=5.0,
                           random_state=0)
    y = y + 20 * np.sin(X[:, 0])
    Xtr, Xte, ytr, yte = X[:4000], X[4000:], y[:4000], y[4000:]
    Xd, yd = da.from_array(Xtr, chunks=(600, -1)), da.from_array(ytr, chunks=600)
    kw = dict(max_iter=40, learning_rate=0.2, early_stopping=False)
    ours = GradientBoostingRegressor(**kw).fit(Xd, yd)
    ref = HistGradientBoostingRegressor(**kw).fit(Xtr, ytr)

    def rmse(m):
        return float(np.sqrt(np.mean((m.predict(Xte) - yte) ** 2)))

    assert rmse(ours) <= 1.02 * rmse(ref)


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["squared_error", "log_loss"])
def test_partitionings_agree_when_the_bins_do(inprocess_client, loss):
    """Bin edges are partition independent when every feature has at most 2048 distinct values
    (the sketch is then exact); the summed histograms then differ only by rounding, so the
    models agree to rounding (and split the same way)."""
    X, y = _exact_data(n=1280, seed=4)
    X[:, 4] = np.random.default_rng(5).normal(size=len(X))  # 1280 distinct values
    Est = GradientBoostingRegressor if loss == "squared_error" else GradientBoostingClassifier
    if loss == "log_loss":
        y = (y > np.median(y)).astype(int)
    kw = dict(max_iter=4, early_stopping=False, max_features=0.6, subsample=1.0,
              random_state=0)
    ref = Est(**kw).fit(X, y)
    for nb in (3, 7, 64):
        rows = int(np.ceil(len(X) / nb))
        m = Est(**kw).fit(da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows))
        for k in ("feature", "bin_threshold", "children_left"):
            np.testing.assert_array_equal(m.nodes_[k], ref.nodes_[k])
        np.testing.assert_allclose(m.nodes_["value"], ref.nodes_["value"], rtol=1e-9,
                                   atol=1e-12)


@pytest.mark.slow
def test_same_model_with_and_without_a_cluster(client):
    """The schedule (workers, threads) does not change the model: bit for bit."""
    X, y = make_classification(n_samples=3000, n_features=8, random_state=1)
    Xd, yd = da.from_array(X, chunks=(400, -1)), da.from_array(y, chunks=400)
    kw = dict(max_iter=10, subsample=0.7, max_features=0.5, early_stopping=True,
              n_iter_no_change=3, random_state=0)
    a = GradientBoostingClassifier(**kw).fit(Xd, yd)
    import dask

    with dask.config.set(scheduler="sync"):
        b = GradientBoostingClassifier(**kw).fit(Xd, yd)
    for k in a.nodes_:
        np.testing.assert_array_equal(a.nodes_[k], b.nodes_[k])
    np.testing.assert_array_equal(a.validation_score_, b.validation_score_)


# Quick tier: the process cluster; the in-process cluster with the slow tests.
@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_small_blocks_are_counted_in_runs_as_one_block_of_their_rows(client, monkeypatch):
    """Blocks of fewer than ``RUN_ROWS`` rows are joined into runs of consecutive blocks, each
    counted as one block of its rows: 64 blocks of 20 rows with ``RUN_ROWS`` 100 make 8 runs
    of 160 rows (a power of two of equal runs) and grow, bit for bit, the model 8 blocks of 160
    rows grow block by block, subsampling included, in any number of groups, on a cluster and
    without one."""
    import dask

    from dml.ensemble import _gb_fit

    X, y = _exact_data(n=1280, seed=3)
    small = da.from_array(X, chunks=(20, -1)), da.from_array(y, chunks=20)
    kw = dict(max_iter=3, max_leaf_nodes=5, subsample=0.8, early_stopping=False,
              random_state=0)
    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 100)
    models = []
    for n_groups, sync in ((8, True), (3, True), (1, True), (2, False)):
        monkeypatch.setattr(_gb_fit, "default_n_tasks", lambda n=n_groups: n)
        with dask.config.set(scheduler="sync") if sync else client.as_current():
            models.append(GradientBoostingRegressor(**kw).fit(*small))
    assert [(m._fit_stats["runs"], m._fit_stats["groups"]) for m in models] == [
        (8, 8), (8, 3), (8, 1), (8, 2)]
    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 0)
    monkeypatch.setattr(_gb_fit, "default_n_tasks", lambda: 3)
    with dask.config.set(scheduler="sync"):
        ref = GradientBoostingRegressor(**kw).fit(da.from_array(X, chunks=(160, -1)),
                                                  da.from_array(y, chunks=160))
    assert ref._fit_stats["runs"] == 8
    for m in models:
        for k in ref.nodes_:
            np.testing.assert_array_equal(m.nodes_[k], ref.nodes_[k], err_msg=k)
        np.testing.assert_array_equal(m.train_score_, ref.train_score_)


def test_runs_keep_validation_blocks_apart_and_the_model_whatever_the_grouping(monkeypatch):
    """Runs never join training and validation blocks (``X_val``; the validation rows drawn
    from the training blocks are drawn per block, before the join): the same model in 1, 2 or
    5 groups."""
    import dask

    from dml.ensemble import _gb_fit

    X, y = _exact_data(n=900, seed=5)
    Xv, yv = _exact_data(n=300, seed=6)
    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 90)
    fits = []
    for n_groups in (1, 2, 5):
        monkeypatch.setattr(_gb_fit, "default_n_tasks", lambda n=n_groups: n)
        with dask.config.set(scheduler="sync"):
            for given in (True, False):
                kw = dict(max_iter=6, max_leaf_nodes=5, early_stopping=True, n_iter_no_change=2,
                          random_state=0, validation_fraction=None if given else 0.2)
                val = dict(X_val=da.from_array(Xv, chunks=(30, -1)),
                           y_val=da.from_array(yv, chunks=30)) if given else {}
                fits.append(GradientBoostingRegressor(**kw).fit(
                    da.from_array(X, chunks=(30, -1)), da.from_array(y, chunks=30), **val))
    # 900 training rows in blocks of 30 with RUN_ROWS 90: 8 runs of 3 or 4 blocks; 300
    # validation rows: 2 more runs.
    assert [m._fit_stats["runs"] for m in fits] == [10, 8] * 3
    assert [m._fit_stats["groups"] for m in fits] == [1, 1, 2, 2, 5, 5]
    for m in fits[2:]:
        ref = fits[0] if m._fit_stats["runs"] == 10 else fits[1]
        for k in ref.nodes_:
            np.testing.assert_array_equal(m.nodes_[k], ref.nodes_[k], err_msg=k)
        np.testing.assert_array_equal(m.validation_score_, ref.validation_score_)


def test_runs_do_not_depend_on_whether_the_input_states_its_lengths(monkeypatch):
    """A persisted Dask DataFrame does not state its partitions' lengths (an array's chunks
    do): they are counted, so the same rows in the same partitions make the same runs and the
    same model."""
    import dask
    import dask.dataframe as dd
    import pandas as pd

    from dml.ensemble import _gb_fit

    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 100)
    X, y = _exact_data(n=1280, seed=7)
    frame = dd.from_pandas(pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
                           .assign(y=y), npartitions=64, sort=False).persist()
    lengths = frame.map_partitions(len).compute().tolist()
    chunks = (tuple(lengths), (X.shape[1],))
    kw = dict(max_iter=3, max_leaf_nodes=5, subsample=0.8, early_stopping=False,
              random_state=0)
    with dask.config.set(scheduler="sync"):
        a = GradientBoostingRegressor(**kw).fit(frame, "y")
        b = GradientBoostingRegressor(**kw).fit(da.from_array(X, chunks=chunks),
                                                da.from_array(y, chunks=chunks[0]))
    assert a._fit_stats["runs"] == b._fit_stats["runs"] == 8
    for k in a.nodes_:
        np.testing.assert_array_equal(a.nodes_[k], b.nodes_[k], err_msg=k)


@pytest.mark.parametrize("n_blocks", [64, 256])
def test_many_persisted_blocks_run_no_task_per_block(n_blocks, inprocess_client, monkeypatch):
    """Data that fits is sketched, validated, binned and joined into runs a group of blocks per
    task: no kind of task of a fit on hundreds of persisted blocks runs once per block, and the
    model is the one of the per-block tasks (used for data larger than memory), bit for bit."""
    import collections

    import dask
    from distributed import get_task_stream, wait

    import dml.optim.data
    from dml.ensemble import _gb_fit

    monkeypatch.setattr(_gb_fit, "RUN_ROWS", 64)
    X, y = make_classification(n_samples=8 * n_blocks, n_features=5, random_state=0)
    Xd, yd = dask.persist(da.from_array(X, chunks=(8, -1)), da.from_array(y, chunks=8))
    wait([Xd, yd])
    kw = dict(max_iter=3, max_leaf_nodes=6, subsample=0.8, early_stopping=True,
              validation_fraction=0.2, n_iter_no_change=5, random_state=0)
    with get_task_stream() as ts:
        grouped = GradientBoostingClassifier(**kw).fit(Xd, yd)
    kinds = collections.Counter(
        (t["key"][0] if isinstance(t["key"], tuple) else t["key"]).rsplit("-", 1)[0]
        for t in ts.data)
    assert max(kinds.values()) < n_blocks // 2, kinds.most_common(3)
    assert grouped._fit_stats["runs"] == n_blocks // 8
    monkeypatch.setattr(dml.optim.data, "should_persist", lambda *a, **k: False)
    with get_task_stream() as ts:
        per_block = GradientBoostingClassifier(**kw).fit(Xd, yd)
    assert max(collections.Counter(t["key"][0] for t in ts.data
                                   if isinstance(t["key"], tuple)).values()) >= n_blocks
    for k in grouped.nodes_:
        np.testing.assert_array_equal(grouped.nodes_[k], per_block.nodes_[k], err_msg=k)
    np.testing.assert_array_equal(grouped.validation_score_, per_block.validation_score_)


def test_small_fit_is_the_same_on_a_cluster(client):
    """The chained growth on a real cluster (threads or worker processes) gives the model of
    the single-process scheduler, bit for bit (a quick check; the slow test above is bigger)."""
    import dask

    X, y = make_classification(n_samples=600, n_features=5, random_state=2)
    Xd, yd = da.from_array(X, chunks=(150, -1)), da.from_array(y, chunks=150)
    kw = dict(max_iter=3, max_leaf_nodes=6, subsample=0.8, early_stopping=False, random_state=0)
    a = GradientBoostingClassifier(**kw).fit(Xd, yd)
    with dask.config.set(scheduler="sync"):
        b = GradientBoostingClassifier(**kw).fit(Xd, yd)
    assert a.n_iter_ == 3 and a._fit_stats["submissions"] >= 1
    for k in a.nodes_:
        np.testing.assert_array_equal(a.nodes_[k], b.nodes_[k])
    np.testing.assert_array_equal(a.train_score_, b.train_score_)


@pytest.mark.parametrize("loss", ["squared_error",
                                  pytest.param("absolute_error", marks=pytest.mark.slow)])
def test_same_model_however_the_blocks_are_grouped(monkeypatch, loss):
    """The chained growth runs one task per group of consecutive blocks; each group sends its
    pieces of the fixed block tree, so 64 blocks give the same model bit for bit in 64, 3 or 1
    groups (early stopping and subsampling included)."""
    import dask

    from dml.ensemble import _gb_fit

    X, y = _exact_data(n=1280, seed=3)
    Xd, yd = da.from_array(X, chunks=(20, -1)), da.from_array(y, chunks=20)
    kw = dict(loss=loss, max_iter=3, max_leaf_nodes=5, subsample=0.8, early_stopping=True,
              n_iter_no_change=1, random_state=0)
    from dml.optim.data import cluster_memory, smallest_worker_memory

    state = len(y) * _gb_fit._row_bytes(X.shape[1], 1)
    limit = smallest_worker_memory() or cluster_memory()
    models = []
    for n_groups, share in ((64, 1.0), (3, 1.0), (1, 1.0), (1, state / (3.5 * limit))):
        # one per thread: 64, 3 and 1 groups; a group's state at most 1/3.5 of it: 4 groups
        monkeypatch.setattr(_gb_fit, "default_n_tasks", lambda n=n_groups: n)
        monkeypatch.setattr(_gb_fit, "GROUP_MEMORY_SHARE", share)
        with dask.config.set(scheduler="sync"):
            models.append(GradientBoostingRegressor(**kw).fit(Xd, yd))
    assert [m._fit_stats["groups"] for m in models] == [64, 3, 1, 4]
    for m in models[1:]:
        for k in m.nodes_:
            np.testing.assert_array_equal(m.nodes_[k], models[0].nodes_[k])
        np.testing.assert_array_equal(m.validation_score_, models[0].validation_score_)



def test_groups_follow_the_memory_a_group_holds_not_the_block_count(monkeypatch):
    """Hundreds of small blocks make no more groups than the worker threads (every extra group
    costs every growth wave a wait); data whose per-row state would take more than
    GROUP_MEMORY_SHARE of a worker makes as many groups as that needs; data of unknown length
    keeps at most MAX_GROUP_BLOCKS blocks a group."""
    from dml.ensemble import _gb_fit
    from dml.optim import data

    monkeypatch.setattr(_gb_fit, "default_n_tasks", lambda: 2)
    monkeypatch.setattr(data, "smallest_worker_memory", lambda: 2**30)
    monkeypatch.setattr(_gb_fit, "MIN_GROUP_CELLS", 0)
    assert _gb_fit._n_groups(256, 160_000, 30, 1) == 2
    assert _gb_fit._n_groups(1024, 200_000, 30, 1) == 2
    rows = 100 * 2**30 // _gb_fit._row_bytes(30, 3)  # 100 workers' memory of state
    assert _gb_fit._n_groups(256, rows, 30, 3) == 1600  # a sixteenth of a worker each
    assert _gb_fit._n_groups(256, None, 30, 1) == 16
    monkeypatch.setattr(_gb_fit, "MIN_GROUP_CELLS", 2_000_000)
    assert _gb_fit._n_groups(256, 100_000, 30, 1) == 1  # 3 million cells: one group


def test_speculation_changes_only_the_waves(monkeypatch):
    """How many open nodes a wave expands ahead of time changes the waves a tree needs, never
    the tree: every node expanded (as wide as the leaves left), the default width, and one
    node a wave grow the same trees bit for bit."""
    import dask

    from dml.ensemble import _gb_grow

    X, y = _exact_data(n=1200, seed=5)
    yc = (y > np.median(y)).astype(int)
    Xd, yd = da.from_array(X, chunks=(300, -1)), da.from_array(yc, chunks=300)
    models = []
    for least, share in ((10**6, 1), (_gb_grow.SPECULATE_MIN, _gb_grow.SPECULATE_SHARE),
                         (1, 10**6)):
        monkeypatch.setattr(_gb_grow, "SPECULATE_MIN", least)
        monkeypatch.setattr(_gb_grow, "SPECULATE_SHARE", share)
        with dask.config.set(scheduler="sync"):
            models.append(GradientBoostingClassifier(
                max_iter=3, max_leaf_nodes=31, min_samples_leaf=5, early_stopping=False,
                random_state=0).fit(Xd, yd))
    for m in models[1:]:
        for k in m.nodes_:
            np.testing.assert_array_equal(m.nodes_[k], models[0].nodes_[k])
    waves = [sum(m._fit_stats["waves"]) for m in models]
    assert waves[0] <= waves[1] < waves[2]

# --------------------------------------------------------------------------------------------
# early stopping, staged predictions, warm start, importances
# --------------------------------------------------------------------------------------------

def test_early_stopping_stops_on_noise():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 5))
    y = rng.normal(size=3000)  # nothing to learn: the validation loss soon stops improving
    m = GradientBoostingRegressor(max_iter=200, early_stopping=True, n_iter_no_change=5,
                                  random_state=0).fit(X, y)
    assert m.do_early_stopping_ and m.n_iter_ < 200
    assert len(m.validation_score_) == len(m.train_score_) == m.n_iter_ + 1
    assert _should_stop(list(m.validation_score_), 5, 1e-7)
    assert not GradientBoostingRegressor(max_iter=5).fit(X[:500], y[:500]).do_early_stopping_
    assert GradientBoostingRegressor(max_iter=5).fit(X, y).validation_score_.size == 0


def test_staged_predict_and_train_scores():
    X, y = _exact_data()
    m = GradientBoostingRegressor(max_iter=6, early_stopping=False).fit(X, y)
    stages = list(m.staged_predict(X))
    assert len(stages) == 6
    np.testing.assert_allclose(stages[-1], m.predict(X))
    losses = [0.5 * np.mean((y - s) ** 2) for s in stages]
    np.testing.assert_allclose(-m.train_score_[1:], losses)
    assert np.all(np.diff(m.train_score_) > 0)
    yc = (y > np.median(y)).astype(int)
    c = GradientBoostingClassifier(max_iter=4, early_stopping=False).fit(X, yc)
    np.testing.assert_allclose(list(c.staged_predict_proba(X))[-1], c.predict_proba(X))
    np.testing.assert_array_equal(list(c.staged_predict(X))[-1], c.predict(X))


def test_warm_start_adds_rounds():
    X, y = _exact_data()
    full = GradientBoostingRegressor(max_iter=8, early_stopping=False).fit(X, y)
    warm = GradientBoostingRegressor(max_iter=3, early_stopping=False, warm_start=True)
    warm.fit(X, y)
    warm.set_params(max_iter=8).fit(X, y)
    assert warm.n_iter_ == 8
    np.testing.assert_allclose(warm.predict(X), full.predict(X), rtol=0, atol=1e-10)
    np.testing.assert_allclose(warm.train_score_, full.train_score_)
    with pytest.raises(ValueError, match="max_iter=2 must be at least"):
        warm.set_params(max_iter=2).fit(X, y)


def test_feature_importances():
    X, y = _exact_data()
    m = GradientBoostingRegressor(max_iter=10, early_stopping=False).fit(X, y)
    fi = m.feature_importances_
    assert fi.shape == (5,) and np.isclose(fi.sum(), 1.0) and fi.argmax() == 0


def test_subsample_and_max_features_are_seeded():
    X, y = _exact_data()
    kw = dict(max_iter=5, subsample=0.5, max_features=0.4, early_stopping=False)
    a = GradientBoostingRegressor(random_state=1, **kw).fit(X, y).predict(X)
    b = GradientBoostingRegressor(random_state=1, **kw).fit(X, y).predict(X)
    c = GradientBoostingRegressor(random_state=2, **kw).fit(X, y).predict(X)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


# --------------------------------------------------------------------------------------------
# input checks, model files
# --------------------------------------------------------------------------------------------

def test_clear_errors():
    import pandas as pd

    X, y = _exact_data(n=200)
    df = pd.DataFrame(X, columns=list("abcde"))
    df["c"] = df["c"].astype("category")
    with pytest.raises(ValueError, match="'category' dtype but are not in categorical_features"):
        GradientBoostingRegressor(max_iter=2, categorical_features=[0]).fit(df, y)
    with pytest.raises(ValueError, match="y >= 0"):
        GradientBoostingRegressor(loss="poisson", max_iter=2).fit(X, y - 100)
    with pytest.raises(ValueError, match="quantile"):
        GradientBoostingRegressor(loss="quantile", max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="single class"):
        GradientBoostingClassifier(max_iter=2).fit(X, np.zeros(len(y), int))


@pytest.mark.parametrize("Est", [GradientBoostingClassifier, GradientBoostingRegressor])
def test_model_file_round_trip(Est, tmp_path):
    X, y = _exact_data(nan=0.05)
    if Est is GradientBoostingClassifier:
        y = np.digitize(y, np.quantile(y, [0.3, 0.6]))
    m = Est(max_iter=4, early_stopping=False).fit(X, y)
    dml.save(m, tmp_path / "m")
    back = dml.load(tmp_path / "m")
    out = "predict_proba" if Est is GradientBoostingClassifier else "predict"
    np.testing.assert_array_equal(getattr(back, out)(X), getattr(m, out)(X))


@pytest.mark.slow
def test_adult_quality_close_to_scikit_learn(real_data):
    import pandas as pd
    from sklearn.preprocessing import OrdinalEncoder

    df = pd.read_csv(real_data / "adult" / "adult.csv", nrows=20000)
    y = (df.pop("income").astype(str).str.strip().str.startswith(">50K")).astype(int).to_numpy()
    cats = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
    df[cats] = OrdinalEncoder(encoded_missing_value=np.nan).fit_transform(df[cats].astype(object))
    X = df.to_numpy(dtype=float)
    Xtr, Xte, ytr, yte = X[:15000], X[15000:], y[:15000], y[15000:]
    kw = dict(max_iter=100, early_stopping=False)
    ours = GradientBoostingClassifier(**kw).fit(da.from_array(Xtr, chunks=(4000, -1)),
                                                da.from_array(ytr, chunks=4000))
    ref = HistGradientBoostingClassifier(**kw).fit(Xtr, ytr)
    assert ours.score(Xte, yte) >= ref.score(Xte, yte) - 0.005


# --------------------------------------------------------------------------------------------
# AdaBoost (SAMME)
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("n_classes", [2, 3])
def test_adaboost_equals_scikit_learns_samme_on_exact_bins(client, n_classes):
    """Stumps on few distinct values are scikit-learn's stumps, so the learner weights, the
    scores and the probabilities are scikit-learn's; with Dask input the weights are updated
    on the workers and the result is the same. Six rounds: each round reweights the rows by
    the previous stumps' errors, so a mismatch shows from the second round on (twelve rounds
    took twice the time and checked the same update again)."""
    from sklearn.ensemble import AdaBoostClassifier as SkAda
    from sklearn.tree import DecisionTreeClassifier as SkTree

    from dml.ensemble import AdaBoostClassifier

    rng = np.random.default_rng(0)
    X = rng.integers(0, 20, size=(600, 4)).astype(float)
    s = X[:, 0] + X[:, 1] + rng.normal(scale=3, size=600)
    y = np.digitize(s, np.quantile(s, np.linspace(0, 1, n_classes + 1)[1:-1]))
    ref = SkAda(SkTree(max_depth=1), n_estimators=6).fit(X, y)
    ours = AdaBoostClassifier(n_estimators=6).fit(X, y)
    np.testing.assert_allclose(ours.estimator_weights_,
                               ref.estimator_weights_[:len(ours.estimator_weights_)], atol=1e-12)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-12)
    dist = AdaBoostClassifier(n_estimators=6).fit(da.from_array(X, chunks=(90, -1)),
                                                   da.from_array(y, chunks=90))
    np.testing.assert_allclose(dist.estimator_weights_, ours.estimator_weights_, atol=1e-12)
    np.testing.assert_array_equal(
        dist.predict(da.from_array(X, chunks=(200, -1))).compute(), ours.predict(X))


# The 1-block case in the quick suite (the 8-block one took 8.5 s there).
@pytest.mark.parametrize("n_blocks", [1, pytest.param(8, marks=pytest.mark.slow),
                                      pytest.param(64, marks=pytest.mark.slow)])
def test_adaboost_bins_dask_data_once_and_grows_the_same_trees(inprocess_client, monkeypatch,
                                                               n_blocks):
    """With dml's tree on Dask input, the data is validated, sketched and binned once, each
    round grows its tree on those bins with its own row weights, and the weights are updated
    beside the bins from the rows' leaves: the same trees, learner weights and errors as
    fitting every round's tree from X and predicting X (a subclass of the tree takes that path),
    with sample and class weights, three classes and depth-2 trees."""
    from dml.ensemble import AdaBoostClassifier
    from dml.tree import DecisionTreeClassifier
    from dml.tree import _model

    class RoundByRound(DecisionTreeClassifier):
        pass

    rng = np.random.default_rng(5)
    X = rng.normal(size=(512, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) > 0).astype(int) + (X[:, 2] > 1)
    chunks = -(-len(X) // n_blocks)
    Xd, yd = da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=chunks)
    wd = da.from_array(rng.uniform(0.5, 2.0, len(y)), chunks=chunks)
    sketches = []
    real = _model.bin_data
    monkeypatch.setattr(_model, "bin_data", lambda *a, **k: sketches.append(1) or real(*a, **k))
    predicts = []
    real_predict = DecisionTreeClassifier.predict
    monkeypatch.setattr(DecisionTreeClassifier, "predict",
                        lambda self, X: predicts.append(1) or real_predict(self, X))
    kw = dict(max_depth=2, class_weight={0: 1.0, 1: 2.0, 2: 0.5}, random_state=0)
    rounds = 3
    once = AdaBoostClassifier(DecisionTreeClassifier(**kw), n_estimators=rounds,
                              random_state=1).fit(Xd, yd, sample_weight=wd)
    assert len(once.estimators_) == rounds and len(sketches) == 1
    # The rounds' errors and weights came from the leaves the rows reached while each tree
    # grew, beside the bins: X was not read again to predict.
    assert not predicts
    each = AdaBoostClassifier(RoundByRound(**kw), n_estimators=rounds,
                              random_state=1).fit(Xd, yd, sample_weight=wd)
    assert len(sketches) == 1 + rounds  # every round of the subclass's fit bins X again
    assert len(predicts) == rounds  # and predicts X
    np.testing.assert_array_equal(once.estimator_weights_, each.estimator_weights_)
    np.testing.assert_array_equal(once.estimator_errors_, each.estimator_errors_)
    for a, b in zip(once.estimators_, each.estimators_):
        assert a.n_features_in_ == 5
        for key in a.nodes_:
            np.testing.assert_array_equal(a.nodes_[key], b.nodes_[key], err_msg=key)
    if n_blocks > 8:
        return
    # Data larger than the persist budget: the bins, node assignments and round bins are
    # streamed (re-read from X), the weights still held; the same model.
    import dml.optim.data

    with monkeypatch.context() as m:
        m.setattr(dml.optim.data, "PERSIST_FRACTION", 0.0)
        streamed = AdaBoostClassifier(DecisionTreeClassifier(**kw), n_estimators=rounds,
                                      random_state=1).fit(Xd, yd, sample_weight=wd)
    np.testing.assert_array_equal(streamed.estimator_weights_, each.estimator_weights_)
    for a, b in zip(streamed.estimators_, each.estimators_):
        for key in a.nodes_:
            np.testing.assert_array_equal(a.nodes_[key], b.nodes_[key], err_msg=key)
    # Blocks whose row counts are not known to be X's chunks: the first round still grows on
    # its bins, the later rounds fit from X (one binning each), and the model is the same.
    def unknown_lengths(*a, **k):
        sketches.append(1)
        data = real(*a, **k)
        data.blocks.known_lengths = None
        return data

    monkeypatch.setattr(_model, "bin_data", unknown_lengths)
    sketches.clear()
    fallback = AdaBoostClassifier(DecisionTreeClassifier(**kw), n_estimators=rounds,
                                  random_state=1).fit(Xd, yd, sample_weight=wd)
    assert len(sketches) == rounds
    np.testing.assert_array_equal(fallback.estimator_weights_, each.estimator_weights_)
    for a, b in zip(fallback.estimators_, each.estimators_):
        for key in a.nodes_:
            np.testing.assert_array_equal(a.nodes_[key], b.nodes_[key], err_msg=key)


@pytest.mark.parametrize("routed", [True, False])
def test_grow_kernel_routes_and_counts_as_the_reference(routed):
    """The one-pass wave kernel equals routing with the trees' route kernel followed by a
    plain NumPy histogram of the used rows, added in row order (so bit for bit), with two
    trees, missing values, a categorical split, unused rows and uncounted nodes; the rows it
    keeps grouped by node are those of the new assignment, in increasing order per node."""
    from dml.ensemble._gb_grow import assign_of, grow_kernel, nodes_of
    from dml.tree._kernels import route as ref_route

    rng = np.random.default_rng(3)
    n, d, T, M, nb = 500, 4, 2, 7, 9
    xb = rng.integers(0, nb, (n, d)).astype(np.uint8)
    xb[rng.random((n, d)) < 0.1] = 255
    g = rng.normal(size=(n, T)).astype(np.float32)
    h = rng.random((n, T)).astype(np.float32)
    use = rng.random(n) < 0.8
    assign = rng.integers(0, 3, (n, T)).astype(np.int32)
    feature = np.full((T, M), -2, dtype=np.int32)
    feature[0, 1], feature[1, 2], feature[1, 0] = 2, 0, 3
    thr = np.full((T, M), 4, dtype=np.int32)
    mleft = np.zeros((T, M), dtype=bool)
    mleft[1, 2] = True
    left = np.tile(np.arange(M, dtype=np.int32), (T, 1))
    left[:, :3] = [3, 3, 5]
    right = left.copy()
    right[:, :3] = [4, 4, 6]
    cat_idx = np.full((T, M), -1, dtype=np.int32)
    cat_idx[1, 0] = 0
    bitsets = rng.random((1, 256)) < 0.5
    route = (feature, thr, mleft, left, right, cat_idx, bitsets) if routed else None
    slot_map = np.full((T, M), -1, dtype=np.int32)
    slot_map[0, [3, 6]] = [0, 1]
    slot_map[1, [5, 1]] = [2, 3]
    before = nodes_of(assign)
    kept = tuple(a.copy() for a in before)
    nodes, hist = grow_kernel((xb,), (None, g, h, use), before, route, slot_map, 4, nb)
    for a, b in zip(before, kept):  # a graph's task leaves its input as it was
        np.testing.assert_array_equal(a, b)
    in_place = grow_kernel((xb,), (None, g, h, use), before, route, slot_map, 4, nb, True)
    for a, b in zip(nodes + (hist,), in_place[0] + (in_place[1],)):
        np.testing.assert_array_equal(a, b)
    new = assign_of(nodes)

    want_assign = ref_route(xb, assign, *route) if routed else assign
    np.testing.assert_array_equal(new, want_assign)
    for t in range(T):
        np.testing.assert_array_equal(np.sort(nodes[0][t]), np.arange(n))
        for a in range(M):
            first, count = nodes[1][t, a], nodes[2][t, a]
            np.testing.assert_array_equal(nodes[0][t, first:first + count],
                                          np.flatnonzero(want_assign[:, t] == a))
    assert routed == (not np.array_equal(new, assign))
    want = np.zeros((4, d, nb + 1, 3))
    bins = np.where(xb == 255, nb, xb)
    for t in range(T):
        s = slot_map[t, want_assign[:, t]]
        for r in np.flatnonzero(use & (s >= 0)):
            want[s[r], np.arange(d), bins[r], 0] += np.float64(g[r, t])
            want[s[r], np.arange(d), bins[r], 1] += np.float64(h[r, t])
            want[s[r], np.arange(d), bins[r], 2] += 1.0
    assert want[..., 2].sum() > 0
    np.testing.assert_array_equal(hist, want)


def test_group_histograms_add_up_in_the_block_tree_order():
    """A group's wave counts its blocks into a stack of partial sums (a binary counter's
    carries) and returns the pieces of the fixed block tree that ``range_reduce`` gives, with
    the same additions in the same order: bit for bit the sums of every block's own
    histograms, whatever consecutive range of the blocks the group holds."""
    from dml._block_groups import range_reduce
    from dml.ensemble._gb_grow import count_group, grow_kernel, init_nodes, tree_plan

    def nested(parts):  # the order of the additions, as a string
        return parts[0] if len(parts) == 1 else "(" + "+".join(parts) + ")"

    for n in range(1, 21):
        for lo in range(n):
            for hi in range(lo + 1, n + 1):
                plan, labels = tree_plan(lo, hi, n)
                stack = []
                for j, (top, merges) in zip(range(lo, hi), plan):
                    assert top == len(stack)
                    stack.append(str(j))
                    for _ in range(merges):
                        right = stack.pop()
                        stack[-1] = f"({stack[-1]}+{right})"
                assert dict(zip(labels, stack)) == range_reduce(
                    [str(j) for j in range(lo, hi)], lo, n, nested, 2)

    rng = np.random.default_rng(5)
    n_blocks, T, nb = 11, 2, 17
    blocks = [rng.integers(0, nb, (int(rng.integers(1, 40)), 3)).astype(np.uint8)
              for _ in range(n_blocks)]
    prep = [(xb,) for xb in blocks]
    carried = [(None, rng.normal(size=(len(xb), T)).astype(np.float32),
                rng.random((len(xb), T)).astype(np.float32), rng.random(len(xb)) < 0.9,
                init_nodes((xb,), T)) for xb in blocks]
    slot_map = np.array([[0], [1]], dtype=np.int32)

    def add_into_first(parts):
        out = parts[0]
        for p in parts[1:]:
            out += p
        return out

    for lo, hi in ((0, 11), (0, 4), (3, 9), (5, 11), (10, 11)):
        own = [grow_kernel(p, c, c[4], None, slot_map, 2, nb)[1]
               for p, c in zip(prep[lo:hi], carried[lo:hi])]
        want = range_reduce(own, lo, n_blocks, add_into_first, 2)
        _, got = count_group(prep[lo:hi], carried[lo:hi], None, slot_map, 2, nb, lo, n_blocks)
        assert got.keys() == want.keys()
        for k in want:
            assert got[k].tobytes() == want[k].tobytes()
