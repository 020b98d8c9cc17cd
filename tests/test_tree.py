"""dml.tree: SPEC §6/§11 worked examples, equality with scikit-learn's trees on exact bins,
partitionings and clusters, the missing-value rule, categorical columns, bad input."""
from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.tree import DecisionTreeClassifier as SKTree
from sklearn.tree import DecisionTreeRegressor as SKRegTree

from conftest import QUICK_ON_PROCESS_CLUSTER

from dml.tree import DecisionTreeClassifier, DecisionTreeRegressor, impurity, information_gain


# --------------------------------------------------------------------------------------------
# SPEC §11 worked examples
# --------------------------------------------------------------------------------------------

def test_entropy_and_gini_examples():
    assert impurity([0.5, 0.5], "entropy") == pytest.approx(1.0)
    assert impurity([1, 2], "entropy") == pytest.approx(0.918296, abs=1e-6)
    for c in (2, 3, 5):
        assert impurity(np.ones(c), "gini") == pytest.approx(1 - 1 / c)
    assert impurity([3, 1], "misclassification") == pytest.approx(0.25)


PLAY_TENNIS = [  # Day, Outlook, Temperature, Humidity, Wind, PlayTennis (seed 000 §4.3.1)
    ("Sunny", "Hot", "High", "Weak", "No"),
    ("Sunny", "Hot", "High", "Strong", "No"),
    ("Overcast", "Hot", "High", "Weak", "Yes"),
    ("Rain", "Mild", "High", "Weak", "Yes"),
    (None, "Cool", "Normal", "Weak", "Yes"),
    ("Rain", "Cool", "Normal", "Strong", "No"),
    ("Overcast", "Cool", "Normal", "Strong", "Yes"),
    ("Sunny", "Mild", "High", "Weak", "No"),
    ("Sunny", "Cool", "Normal", "Weak", "Yes"),
]


def _fractional_branch_counts(j):
    """Class counts per value of attribute j, a missing value split by the values' frequencies."""
    rows = [r for r in PLAY_TENNIS]
    values = sorted({r[j] for r in rows if r[j] is not None})
    known = [r for r in rows if r[j] is not None]
    freq = {v: sum(r[j] == v for r in known) / len(known) for v in values}
    counts = {v: np.zeros(2) for v in values}
    for r in rows:
        c = 1 if r[4] == "Yes" else 0
        if r[j] is None:
            for v in values:
                counts[v][c] += freq[v]
        else:
            counts[r[j]][c] += 1
    return [counts[v] for v in values]


def test_play_tennis_fractional_gains_pick_outlook():
    parent = np.array([4.0, 5.0])
    assert impurity(parent, "entropy") == pytest.approx(0.9911, abs=1e-4)
    # D5 (Outlook missing) becomes Sunny 1/2, Overcast 1/4, Rain 1/4.
    sunny = dict(zip(sorted({"Sunny", "Overcast", "Rain"}), _fractional_branch_counts(0)))["Sunny"]
    assert sunny.tolist() == [3.0, 1.5]
    expected = {"entropy": [0.2842, 0.1022, 0.0911, 0.0728],
                "gini": [0.1481, 0.0679, 0.0605, 0.0494]}
    for criterion, gains in expected.items():
        got = [information_gain(parent, _fractional_branch_counts(j), criterion)
               for j in range(4)]
        np.testing.assert_allclose(got, gains, atol=1e-4)
        assert int(np.argmax(got)) == 0  # Outlook


# --------------------------------------------------------------------------------------------
# equality with scikit-learn on exact bins
# --------------------------------------------------------------------------------------------

def _few_values_data(n=400, d=5, seed=0, n_classes=2):
    rng = np.random.default_rng(seed)
    # Each feature has 8 irregular distinct values: the bins are the values themselves.
    levels = np.sort(rng.normal(size=(d, 8)), axis=1)
    X = np.stack([levels[j][rng.integers(0, 8, n)] for j in range(d)], axis=1)
    score = X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 2] + rng.normal(0, 0.6, n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return X, y


def _gain(X, y, rows, f, t, criterion):
    left = rows & (X[:, f] <= t)
    right = rows & ~(X[:, f] <= t)
    k = y.max() + 1
    return information_gain(np.bincount(y[rows], minlength=k),
                            [np.bincount(y[left], minlength=k),
                             np.bincount(y[right], minlength=k)], criterion)


def _compare(nodes, sk_tree, X, y, criterion, rows, i=0, j=0, ties=None):
    """Walk both trees: the same split at every node, or an exact tie in gain (then the subtree
    is skipped and its rows recorded). Returns the number of nodes compared."""
    f = nodes["feature"][i]
    if sk_tree.children_left[j] == -1:
        assert f == -2, f"dml splits where scikit-learn has a leaf (node {j})"
        v = sk_tree.value[j][0]
        np.testing.assert_allclose(nodes["value"][i], v / v.sum())
        return 1
    assert f >= 0, f"dml has a leaf where scikit-learn splits (node {j})"
    t, t_sk = nodes["threshold"][i], sk_tree.threshold[j]
    if f != sk_tree.feature[j] or abs(t - t_sk) > 1e-6:
        g = _gain(X, y, rows, f, t, criterion)
        g_sk = _gain(X, y, rows, sk_tree.feature[j], t_sk, criterion)
        assert g == pytest.approx(g_sk, abs=1e-12), f"node {j}: different splits, gains " \
                                                      f"{g} != {g_sk}"
        ties.append(rows)
        return 1
    go = X[:, f] <= t
    return 1 + _compare(nodes, sk_tree, X, y, criterion, rows & go,
                        nodes["children_left"][i], sk_tree.children_left[j], ties) + \
        _compare(nodes, sk_tree, X, y, criterion, rows & ~go, nodes["children_right"][i],
                 sk_tree.children_right[j], ties)


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_same_splits_as_sklearn(criterion, n_classes):
    X, y = _few_values_data(n_classes=n_classes, seed=n_classes)
    X = X.astype(np.float32).astype(np.float64)  # scikit-learn splits float32 values
    params = dict(criterion=criterion, max_depth=6, min_samples_leaf=3)
    sk = SKTree(random_state=0, **params).fit(X, y)
    ours = DecisionTreeClassifier(**params).fit(X, y)
    ties = []
    n = _compare(ours.nodes_, sk.tree_, X, y, criterion, np.ones(len(y), bool), ties=ties)
    tied = np.any(ties, axis=0) if ties else np.zeros(len(y), bool)
    assert n >= 15 and tied.mean() < 0.25  # ties (verified equal gains) in small nodes
    if not ties:
        assert n == sk.tree_.node_count
        np.testing.assert_allclose(ours.feature_importances_, sk.feature_importances_,
                                   atol=1e-12)
    np.testing.assert_array_equal(ours.predict(X)[~tied], sk.predict(X)[~tied])
    np.testing.assert_allclose(ours.predict_proba(X)[~tied], sk.predict_proba(X)[~tied])


def test_regressor_same_predictions_as_sklearn():
    X, _ = _few_values_data(seed=5)
    X = X.astype(np.float32).astype(np.float64)
    y = X[:, 0] * 3 + np.sin(X[:, 1]) + np.random.default_rng(1).normal(0, 0.1, len(X))
    sk = SKRegTree(max_depth=5, min_samples_leaf=4, random_state=0).fit(X, y)
    ours = DecisionTreeRegressor(max_depth=5, min_samples_leaf=4).fit(X, y)
    np.testing.assert_allclose(ours.predict(X), sk.predict(X), rtol=1e-10)
    assert ours.score(X, y) == pytest.approx(sk.score(X, y), rel=1e-10)


# --------------------------------------------------------------------------------------------
# partitionings, clusters, input types
# --------------------------------------------------------------------------------------------

def _assert_same_nodes(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_same_tree_for_every_partitioning():
    X, y = _few_values_data(n=300, seed=7, n_classes=3)
    ref = DecisionTreeClassifier(max_depth=5, max_features=3, random_state=1).fit(X, y)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).assign(label=y)
    inputs = [
        (da.from_array(X, chunks=(300, 5)), da.from_array(y, chunks=300)),
        (da.from_array(X, chunks=(100, 5)), da.from_array(y, chunks=100)),
        (da.from_array(X, chunks=((10, 90, 5, 95, 40, 30, 30), 5)),
         da.from_array(y, chunks=((10, 90, 5, 95, 40, 30, 30),))),
        (dd.from_pandas(frame, npartitions=4), "label"),
    ]
    for Xi, yi in inputs:
        est = DecisionTreeClassifier(max_depth=5, max_features=3, random_state=1).fit(Xi, yi)
        _assert_same_nodes(est.nodes_, ref.nodes_)
    pred = est.predict(dd.from_pandas(frame.drop(columns="label"), npartitions=3))
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), ref.predict(X))
    assert isinstance(ref.predict(X), np.ndarray)


# Quick tier: the process cluster; the in-process cluster with the slow tests.
@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_same_tree_on_both_clusters(client):
    X, y = _few_values_data(n=300, seed=3)
    ref = DecisionTreeClassifier(max_depth=4).fit(X, y)
    Xd, yd = da.from_array(X, chunks=(70, 5)), da.from_array(y, chunks=70)
    est = DecisionTreeClassifier(max_depth=4).fit(Xd, yd)
    _assert_same_nodes(est.nodes_, ref.nodes_)
    np.testing.assert_array_equal(est.predict(Xd).compute(), ref.predict(X))


def test_quantile_bins_on_continuous_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    y = (X[:, 0] > 0.3).astype(int)
    est = DecisionTreeClassifier(max_depth=1, max_bins=32).fit(X, y)
    assert est.n_bins_.max() <= 32
    assert abs(est.nodes_["threshold"][0] - 0.3) < 0.1
    assert est.score(X, y) > 0.97


# --------------------------------------------------------------------------------------------
# missing values: learned default direction
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("missing_class, expect_left", [(1, False), (0, True)])
def test_missing_values_go_to_the_child_with_higher_gain(missing_class, expect_left):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, 400)
    y = (x > 5).astype(int)
    x[:60] = np.nan
    y[:60] = missing_class
    X = np.column_stack([x, rng.uniform(size=400)])
    est = DecisionTreeClassifier(max_depth=1).fit(X, y)
    assert est.nodes_["feature"][0] == 0
    assert bool(est.nodes_["missing_left"][0]) is expect_left
    assert (est.predict(np.array([[np.nan, 0.5]])) == missing_class).all()
    assert est.score(X, y) == 1.0


def test_missing_at_predict_only_goes_to_the_heavier_child():
    x = np.arange(100.0)
    y = (x >= 30).astype(int)  # right child holds 70 rows
    est = DecisionTreeClassifier(max_depth=1).fit(x[:, None], y)
    assert not est.nodes_["missing_left"][0]
    assert est.predict(np.array([[np.nan]]))[0] == 1


# --------------------------------------------------------------------------------------------
# categorical columns
# --------------------------------------------------------------------------------------------

def _categorical_frame(n=240, seed=0):
    rng = np.random.default_rng(seed)
    colour = np.array(["red", "green", "blue", "black"])[rng.integers(0, 4, n)]
    num = rng.normal(size=n)
    y = np.isin(colour, ["red", "blue"]).astype(int)  # not an ordinal split of sorted names
    frame = pd.DataFrame({"colour": pd.Categorical(colour), "num": num, "y": y})
    return frame


def test_categorical_column_of_a_dask_dataframe():
    frame = _categorical_frame()
    ddf = dd.from_pandas(frame, npartitions=3)
    est = DecisionTreeClassifier(max_depth=1).fit(ddf, "y")
    assert est.categorical_.tolist() == [True, False]
    assert est.score(frame[["colour", "num"]], frame["y"]) == 1.0
    # Categories given in another order, and an unseen one (treated as missing).
    new = pd.DataFrame({"colour": pd.Categorical(["blue", "black", "purple"],
                                                 categories=["purple", "black", "blue"]),
                        "num": [0.0, 0.0, 0.0]})
    pred = est.predict(new)
    assert pred[:2].tolist() == [1, 0]
    assert pred[2] in (0, 1)
    pred_d = est.predict(dd.from_pandas(frame[["colour", "num"]], npartitions=2))
    np.testing.assert_array_equal(pred_d.compute(), frame["y"].to_numpy())


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------

def test_bad_input():
    X, y = _few_values_data(n=100)
    with pytest.raises(ValueError, match="single class"):
        DecisionTreeClassifier().fit(X, np.zeros(100))
    with pytest.raises(ValueError, match=r"The 'max_bins' parameter of DecisionTreeClassifier "
                                         r"must be an int in the range \[2, 255\]"):
        DecisionTreeClassifier(max_bins=256).fit(X, y)
    with pytest.raises(ValueError, match=r"The 'criterion' parameter of DecisionTreeClassifier "
                                         r"must be a str among"):
        DecisionTreeClassifier(criterion="squared_error").fit(X, y)
    with pytest.raises(ValueError, match=r"The 'max_depth' parameter of DecisionTreeClassifier "
                                         r"must be an int in the range \[1, inf\) or None"):
        DecisionTreeClassifier(max_depth=0).fit(X, y)
    with pytest.raises(ValueError, match=r"The 'max_features' parameter of DecisionTreeClassifier "
                                         r"must be"):
        DecisionTreeClassifier(max_features="most").fit(X, y)
    Xinf = X.copy()
    Xinf[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        DecisionTreeClassifier().fit(Xinf, y)
    yn = y.astype(float)
    yn[2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DecisionTreeRegressor().fit(X, yn)
    est = DecisionTreeClassifier(max_depth=2).fit(X, y)
    with pytest.raises(ValueError, match="3 features, but DecisionTreeClassifier is expecting 5"):
        est.predict(X[:, :3])
    frame = pd.DataFrame(X, columns=list("abcde"))
    est = DecisionTreeClassifier(max_depth=2).fit(frame, y)
    with pytest.raises(ValueError, match="feature names"):
        est.predict(frame[list("edcba")])
    with pytest.raises(TypeError, match="category"):
        DecisionTreeClassifier().fit(frame.assign(s=np.array(["u", "v"] * 50)), y)
    big = pd.DataFrame({"c": pd.Categorical([str(i) for i in range(300)])})
    with pytest.raises(ValueError, match="more than max_bins"):
        DecisionTreeClassifier().fit(big, np.arange(300) % 2)
