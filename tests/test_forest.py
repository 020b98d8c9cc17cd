"""dml.ensemble forests: accuracy against scikit-learn, bootstrap statistics, determinism across
clusters and rounds, OOB score, importances, input types."""
from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import RandomForestClassifier as SKForest
from sklearn.ensemble import RandomForestRegressor as SKForestReg
from sklearn.model_selection import train_test_split

from conftest import QUICK_ON_PROCESS_CLUSTER

from dml.ensemble import RandomForestClassifier, RandomForestRegressor
from dml.tree._grow import boot_kernel


def _assert_same_nodes(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _data(n=2500, d=12, seed=0):
    X, y = make_classification(n_samples=n, n_features=d, n_informative=6, random_state=seed)
    return train_test_split(X, y, test_size=0.3, random_state=0)


def test_accuracy_within_one_point_of_sklearn():
    X_tr, X_te, y_tr, y_te = _data(n=4000)
    params = dict(n_estimators=40, max_depth=10, random_state=0)
    ours = RandomForestClassifier(**params).fit(da.from_array(X_tr, chunks=(700, -1)), y_tr)
    sk = SKForest(**params).fit(X_tr, y_tr)
    acc, acc_sk = ours.score(X_te, y_te), sk.score(X_te, y_te)
    assert acc >= acc_sk - 0.01, (acc, acc_sk)


@pytest.mark.slow
def test_adult_accuracy_within_one_point_of_sklearn(real_data):
    # 8,000 rows of the real data set (a 2,000-row test part). The repository's 1,000-row sample
    # is too small for a one-point comparison (one point is 2.5 of its 250 test rows): without
    # the real data the test skips.
    adult = pd.read_csv(real_data / "adult" / "adult.csv").sample(8000, random_state=0)
    y = (adult.pop("income").str.strip().str.startswith(">")).astype(int).to_numpy()
    cats = [c for c in adult.columns if not pd.api.types.is_numeric_dtype(adult[c])]
    X_cat = adult.astype({c: "category" for c in cats})
    X_codes = adult.copy()
    for c in cats:  # scikit-learn needs numbers: ordinal codes
        X_codes[c] = X_cat[c].cat.codes
    idx_tr, idx_te = train_test_split(np.arange(len(y)), test_size=0.25, random_state=0)
    params = dict(n_estimators=40, random_state=0, min_samples_leaf=2)
    sk = SKForest(**params).fit(X_codes.iloc[idx_tr], y[idx_tr])
    acc_sk = sk.score(X_codes.iloc[idx_te], y[idx_te])
    ours = RandomForestClassifier(**params).fit(
        dd.from_pandas(X_cat.iloc[idx_tr], npartitions=3, sort=False), y[idx_tr])
    acc = ours.score(X_cat.iloc[idx_te], y[idx_te])
    assert acc >= acc_sk - 0.01, (acc, acc_sk)


def test_bootstrap_unique_fraction():
    part = (np.zeros((5000, 1), dtype=np.uint8), None, None)
    counts = boot_kernel(0, part, 123, np.arange(20))
    frac = (counts > 0).mean(axis=0)
    assert abs(frac.mean() - (1 - np.exp(-1))) < 0.01
    # Every tree its own stream, the same whatever block of trees it is grown with.
    again = boot_kernel(0, part, 123, np.arange(5, 8))
    np.testing.assert_array_equal(again, counts[:, 5:8])


# Quick tier: the process cluster; the in-process cluster with the slow tests.
@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_same_forest_on_both_clusters_and_in_rounds(client):
    X_tr, _, y_tr, _ = _data(n=800)
    params = dict(n_estimators=6, max_depth=5, random_state=3)
    Xd, yd = da.from_array(X_tr, chunks=(150, -1)), da.from_array(y_tr, chunks=150)
    ours = RandomForestClassifier(**params).fit(Xd, yd)
    with __import__("dask").config.set(scheduler="sync"):
        local = RandomForestClassifier(**params, trees_per_pass=4).fit(
            da.from_array(X_tr, chunks=(150, -1)), da.from_array(y_tr, chunks=150))
    _assert_same_nodes(ours.nodes_, local.nodes_)


@pytest.mark.slow
def test_same_forest_with_three_workers():
    X_tr, _, y_tr, _ = _data(n=600)
    params = dict(n_estimators=4, max_depth=4, random_state=1)
    ref = RandomForestClassifier(**params).fit(da.from_array(X_tr, chunks=(100, -1)), y_tr)
    with LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster):
        est = RandomForestClassifier(**params).fit(da.from_array(X_tr, chunks=(100, -1)), y_tr)
    _assert_same_nodes(est.nodes_, ref.nodes_)


def test_oob_score_and_importances():
    X_tr, X_te, y_tr, y_te = _data(n=1500)
    est = RandomForestClassifier(n_estimators=25, max_depth=8, oob_score=True,
                                 random_state=0).fit(X_tr, y_tr)
    assert abs(est.oob_score_ - est.score(X_te, y_te)) < 0.05
    fi = est.feature_importances_
    assert fi.shape == (12,) and fi.sum() == pytest.approx(1.0)
    sk = SKForest(n_estimators=25, max_depth=8, random_state=0).fit(X_tr, y_tr)
    top = set(np.argsort(sk.feature_importances_)[-3:])
    assert len(top & set(np.argsort(fi)[-4:])) >= 2


def test_regressor_close_to_sklearn_and_dask_output():
    X, y = make_regression(n_samples=1500, n_features=8, n_informative=5, noise=5.0,
                           random_state=0)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, random_state=0)
    params = dict(n_estimators=20, max_depth=10, random_state=0)
    ours = RandomForestRegressor(**params, oob_score=True).fit(X_tr, y_tr)
    sk = SKForestReg(**params).fit(X_tr, y_tr)
    assert ours.score(X_te, y_te) >= sk.score(X_te, y_te) - 0.03
    assert 0.5 < ours.oob_score_ < 1.0
    pred = ours.predict(da.from_array(X_te, chunks=(100, -1)))
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), ours.predict(X_te))


def test_proba_and_labels():
    X_tr, X_te, y_tr, _ = _data(n=600)
    labels = np.array(["no", "yes"], dtype=object)[y_tr]
    est = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X_tr, labels)
    proba = est.predict_proba(X_te)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert set(est.predict(X_te)) <= {"no", "yes"}
    pred = est.predict(da.from_array(X_te, chunks=(50, -1)))
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), est.predict(X_te))


def test_bad_parameters():
    X_tr, _, y_tr, _ = _data(n=200)
    with pytest.raises(ValueError, match=r"The 'n_estimators' parameter of RandomForestClassifier "
                                         r"must be an int in the range \[1, inf\)"):
        RandomForestClassifier(n_estimators=0).fit(X_tr, y_tr)
    with pytest.raises(ValueError, match=r"The 'oob_score' parameter of RandomForestClassifier "
                                         r"must be False unless bootstrap=True \(out-of-bag"):
        RandomForestClassifier(bootstrap=False, oob_score=True).fit(X_tr, y_tr)
    with pytest.raises(ValueError, match="class_weight"):
        RandomForestClassifier(class_weight={7: 2.0}).fit(X_tr, y_tr)
    with pytest.raises(ValueError, match="single class"):
        RandomForestClassifier().fit(X_tr, np.ones(len(y_tr)))


# --------------------------------------------------------------------------------------------
# bagging
# --------------------------------------------------------------------------------------------

def test_bagging_any_estimator_on_the_cluster(client):
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

    from dml.ensemble import BaggingClassifier

    X_tr, X_te, y_tr, y_te = _data(n=900)
    Xd, yd = da.from_array(X_tr, chunks=(200, -1)), da.from_array(y_tr, chunks=200)
    bag = BaggingClassifier(LogisticRegression(), n_estimators=4, max_samples=0.5,
                            random_state=0).fit(Xd, yd)
    assert len(bag.estimators_) == 4
    assert all(len(e.coef_) == 1 for e in bag.estimators_)
    ref = LogisticRegression().fit(X_tr, y_tr).score(X_te, y_te)
    assert bag.score(X_te, y_te) >= ref - 0.03
    # Same members on any cluster (per-member and per-block generators).
    with __import__("dask").config.set(scheduler="sync"):
        again = BaggingClassifier(LogisticRegression(), n_estimators=4, max_samples=0.5,
                                  random_state=0).fit(Xd, yd)
    for a, b in zip(bag.estimators_, again.estimators_):
        np.testing.assert_array_equal(a.coef_, b.coef_)
    knn = BaggingClassifier(KNeighborsClassifier(), n_estimators=3, random_state=0).fit(Xd, yd)
    pred = knn.predict(da.from_array(X_te, chunks=(100, -1)))
    assert isinstance(pred, da.Array) and pred.compute().shape == (len(X_te),)


def test_bagging_regressor_and_sample_size():
    from dml.ensemble import BaggingRegressor

    X, y = make_regression(n_samples=600, n_features=5, noise=1.0, random_state=0)
    bag = BaggingRegressor(n_estimators=5, max_samples=300, random_state=0).fit(
        da.from_array(X, chunks=(130, -1)), y)
    assert all(e.tree_.n_node_samples[0] == 300 for e in bag.estimators_)
    assert bag.score(X, y) > 0.8
    with pytest.raises(ValueError, match="max_samples"):
        BaggingRegressor(max_samples=0).fit(X, y)


@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_rows_and_histogram_levels_grow_the_same_forest(client, monkeypatch):
    # Deep levels send each node's rows instead of its histograms when they are the smaller
    # message. With integer weights every sum is exact, so forcing either form at every level
    # must grow the same forest as the default choice.
    from dml.tree import _grow

    X_tr, _, y_tr, _ = _data(n=900)
    w = np.random.default_rng(0).integers(1, 3, len(y_tr)).astype(float)
    Xd = da.from_array(X_tr, chunks=(150, -1))
    params = dict(n_estimators=3, max_depth=6, random_state=2)
    default = RandomForestClassifier(**params).fit(Xd, y_tr, sample_weight=w)
    fits = {}
    for name, extra in (("rows", -10**9), ("histograms", 10**9)):
        monkeypatch.setattr(_grow, "ROW_BYTES_EXTRA", extra)
        fits[name] = RandomForestClassifier(**params).fit(Xd, y_tr, sample_weight=w)
    _assert_same_nodes(fits["rows"].nodes_, default.nodes_)
    _assert_same_nodes(fits["histograms"].nodes_, default.nodes_)
    # Regression: with an integer target the sums of w·y and w·y² are exact too. (With a real
    # target the two forms sum in different orders, and exact ties between candidates, common
    # in small nodes, can then resolve either way.)
    reg = dict(n_estimators=2, max_depth=5, max_features=0.5, random_state=0)
    yr = np.round(X_tr[:, 0] * 3) + np.round(X_tr[:, 1])
    monkeypatch.setattr(_grow, "ROW_BYTES_EXTRA", -10**9)
    rows = RandomForestRegressor(**reg).fit(Xd, yr)
    monkeypatch.setattr(_grow, "ROW_BYTES_EXTRA", 10**9)
    hist = RandomForestRegressor(**reg).fit(Xd, yr)
    _assert_same_nodes(rows.nodes_, hist.nodes_)


def test_forest_from_rows_with_fractional_weights_is_the_same_on_any_cluster(client,
                                                                              monkeypatch):
    # Fractional weights: a node's rows are summed in block order, then row order, whatever
    # worker holds them, so the distributed fit equals the single-threaded one.
    import dask

    from dml.tree import _grow

    monkeypatch.setattr(_grow, "ROW_BYTES_EXTRA", -10**9)
    X_tr, _, y_tr, _ = _data(n=700)
    w = np.random.default_rng(1).random(len(y_tr)) + 0.1
    params = dict(n_estimators=4, max_depth=6, random_state=5)
    Xd = da.from_array(X_tr, chunks=(100, -1))
    ours = RandomForestClassifier(**params).fit(Xd, y_tr, sample_weight=w)
    with dask.config.set(scheduler="sync"):
        local = RandomForestClassifier(**params).fit(Xd, y_tr, sample_weight=w)
    _assert_same_nodes(ours.nodes_, local.nodes_)


@pytest.mark.parametrize("n_blocks, client", [
    (8, "inprocess"), pytest.param(8, "multiprocess", marks=pytest.mark.multiprocess),
    (64, "inprocess"), (256, "inprocess")], indirect=["client"])
def test_same_trees_however_the_binned_blocks_are_grouped(n_blocks, client, monkeypatch):
    # The binned blocks are held in a few groups and every level is a task per group; the
    # blocks' histograms are summed in the fixed tree over all blocks whatever the groups, so
    # the default grouping (one group per worker thread) and other layouts grow the same trees
    # bit for bit: on 8 blocks one block per group (every level a task per block, the old
    # layout); on 64 blocks 13 uneven groups, on 256 blocks 3 and 13 (no per-block layout
    # there, to keep the test short; each extra layout is 3 more fits).
    # With fractional weights, missing values, bootstrap counts, per-node feature draws, the
    # rows form of deep levels, out-of-bag scores, and the single tree's sibling subtraction
    # on the client.
    import dask

    from dml.tree import DecisionTreeRegressor, _model

    rng = np.random.default_rng(n_blocks)
    n = 1024
    X = rng.normal(size=(n, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2 + rng.normal(size=n) > 1)
    y = y.astype(int) + (np.nan_to_num(X[:, 2]) > 1)
    yr = np.nan_to_num(X[:, 0]) * 2 + np.nan_to_num(X[:, 3]) + rng.normal(size=n)
    w = rng.random(n) + 0.5
    # Persisted, as data read again and again would be: the fits below read it 9 times.
    Xd, y, yr, w = dask.persist(*(da.from_array(a, chunks=(n // n_blocks,) + a.shape[1:])
                                  for a in (X, y, yr, w)))
    made = []
    real_hold = _model._binned_groups

    def hold(blocks, n_groups, bin_args):
        groups, bounds = real_hold(blocks, n_groups, bin_args)
        made.append(len(groups))
        return groups, bounds

    monkeypatch.setattr(_model, "_binned_groups", hold)
    fits = {}
    layouts = {8: (None, 8), 64: (None, 13)}.get(n_blocks, (None, 3, 13))
    for n_groups in layouts:
        monkeypatch.setattr(_model, "N_GROUPS", n_groups)
        fits[n_groups] = (
            RandomForestClassifier(n_estimators=2, max_depth=6, oob_score=True,
                                   class_weight={0: 1.0, 1: 2.0, 2: 0.5}, random_state=0,
                                   trees_per_pass=1).fit(Xd, y, sample_weight=w),
            RandomForestRegressor(n_estimators=2, max_depth=8, oob_score=True,
                                  random_state=1).fit(Xd, yr),
            DecisionTreeRegressor(max_depth=4).fit(Xd, yr, sample_weight=w))
    threads = sum(client.nthreads().values())
    assert made == [n_groups or threads for n_groups in layouts for _ in range(3)]
    for got in (fits[n_groups] for n_groups in layouts[1:]):
        for a, b in zip(got, fits[None]):
            _assert_same_nodes(a.nodes_, b.nodes_)
            np.testing.assert_array_equal(a.feature_importances_, b.feature_importances_)
        for a, b in zip(got[:2], fits[None][:2]):
            assert a.oob_score_ == b.oob_score_


@pytest.mark.parametrize("n_blocks", [128, 256])
def test_trees_on_many_held_blocks_run_no_task_per_block(n_blocks, inprocess_client):
    # Data that fits is validated, sketched and binned a group of consecutive blocks per task,
    # and its trees grow a few tasks per group and level: no kind of task of a fit on hundreds
    # of persisted blocks runs once per block (a task per block cost milliseconds each).
    import collections

    import dask
    from distributed import get_task_stream, wait

    from dml.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(4 * n_blocks, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    Xd, yd = dask.persist(da.from_array(X, chunks=(4, 4)), da.from_array(y, chunks=4))
    wait([Xd, yd])
    for model in (RandomForestClassifier(n_estimators=2, max_depth=3, random_state=0),
                  DecisionTreeClassifier(max_depth=3)):
        with get_task_stream() as ts:
            model.fit(Xd, yd)
        kinds = collections.Counter(
            (t["key"][0] if isinstance(t["key"], tuple) else t["key"]).rsplit("-", 1)[0]
            for t in ts.data)
        assert max(kinds.values()) < n_blocks // 2, kinds.most_common(3)
        assert model.score(X, y) > 0.8
