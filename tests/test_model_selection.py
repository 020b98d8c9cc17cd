"""dml.model_selection against scikit-learn: splits, cross-validation and searches."""
from __future__ import annotations

import time

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn import model_selection as skms
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import LogisticRegression as SkLogistic
from sklearn.linear_model import Ridge as SkRidge
from sklearn.naive_bayes import GaussianNB as SkGaussianNB
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from conftest import QUICK_ON_PROCESS_CLUSTER

from dml.linear_model import Ridge, SGDClassifier
from dml.model_selection import (GridSearchCV, KFold, RandomizedSearchCV, ShuffleSplit,
                                 StratifiedKFold, cross_val_score, cross_validate, take_rows,
                                 train_test_split)
from dml.naive_bayes import GaussianNB


@pytest.fixture(scope="module")
def clf_data():
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, n_classes=3,
                               random_state=0)
    return X, y


@pytest.fixture(scope="module")
def reg_data():
    X, y = make_regression(n_samples=240, n_features=5, noise=5.0, random_state=0)
    return X, y


def _same_splits(a, b):
    a, b = list(a), list(b)
    assert len(a) == len(b)
    for (tr1, te1), (tr2, te2) in zip(a, b):
        np.testing.assert_array_equal(tr1, tr2)
        np.testing.assert_array_equal(te1, te2)


# ---- splitters --------------------------------------------------------------------------------

@pytest.mark.parametrize("chunks", [103, 17, (50, 3, 50)])
@pytest.mark.parametrize("shuffle,seed", [(False, None), (True, 0), (True, 7)])
def test_kfold_equals_sklearn_on_any_partitioning(chunks, shuffle, seed):
    X = np.random.default_rng(0).normal(size=(103, 2))
    Xd = da.from_array(X, chunks=(chunks, 2))
    ours = KFold(5, shuffle=shuffle, random_state=seed)
    ref = skms.KFold(5, shuffle=shuffle, random_state=seed)
    _same_splits(ours.split(Xd), ref.split(X))
    tests = np.concatenate([te for _, te in ours.split(Xd)])
    assert np.array_equal(np.sort(tests), np.arange(103))  # disjoint and covering
    sizes = [len(te) for _, te in ours.split(Xd)]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("shuffle,seed", [(False, None), (True, 3)])
def test_stratified_kfold_equals_sklearn_and_keeps_proportions(shuffle, seed):
    rng = np.random.default_rng(1)
    y = rng.choice(["a", "b", "c"], size=211, p=[0.6, 0.3, 0.1])
    X = rng.normal(size=(211, 2))
    Xd, yd = da.from_array(X, chunks=(40, 2)), da.from_array(y, chunks=70)
    ours = list(StratifiedKFold(4, shuffle=shuffle, random_state=seed).split(Xd, yd))
    _same_splits(ours, skms.StratifiedKFold(4, shuffle=shuffle, random_state=seed).split(X, y))
    for label in "abc":
        counts = [np.sum(y[te] == label) for _, te in ours]
        assert max(counts) - min(counts) <= 1


def test_splitters_on_dask_dataframe():
    df = pd.DataFrame({"a": np.arange(50.0), "t": np.arange(50) % 2})
    ddf = dd.from_pandas(df, npartitions=4)
    _same_splits(KFold(3, shuffle=True, random_state=0).split(ddf),
                 skms.KFold(3, shuffle=True, random_state=0).split(df))
    _same_splits(ShuffleSplit(3, test_size=0.2, random_state=0).split(ddf),
                 skms.ShuffleSplit(3, test_size=0.2, random_state=0).split(df))
    _same_splits(StratifiedKFold(5).split(ddf, ddf["t"]),
                 skms.StratifiedKFold(5).split(df, df["t"]))
    _, test = next(KFold(3, shuffle=True, random_state=0).split(ddf))
    part = take_rows(ddf, test)
    assert part.npartitions == 4
    pd.testing.assert_frame_equal(part.compute(), df.iloc[np.sort(test)])


def test_take_rows_keeps_partitions_and_is_lazy():
    X = np.arange(40.0).reshape(20, 2)
    Xd = da.from_array(X, chunks=(7, 2))
    idx = np.array([19, 0, 8, 3, 14])
    out = take_rows(Xd, idx)
    assert isinstance(out, da.Array) and out.chunks[0] == (2, 1, 2)
    np.testing.assert_array_equal(out.compute(), X[np.sort(idx)])


@pytest.mark.parametrize("stratify", [False, True])
def test_train_test_split_matches_sklearn(stratify):
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(90, 3)), rng.integers(0, 3, 90)
    kw = dict(test_size=0.3, random_state=4)
    ref = skms.train_test_split(X, y, stratify=y if stratify else None, **kw)
    local = train_test_split(X, y, stratify=y if stratify else None, **kw)
    for a, b in zip(local, ref):
        np.testing.assert_array_equal(a, b)
    yd = da.from_array(y, chunks=25)
    dsk = train_test_split(da.from_array(X, chunks=(25, 3)), yd,
                           stratify=yd if stratify else None, **kw)
    assert all(isinstance(p, da.Array) for p in dsk)
    # Dask keeps rows in source order; the same rows as scikit-learn's.
    order = [np.argsort(ref[3], kind="stable"), np.argsort(ref[2], kind="stable")]
    assert sorted(dsk[3].compute().tolist()) == sorted(ref[3].tolist())
    assert dsk[1].shape[0] == len(ref[1]) and order


def test_train_test_split_errors():
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        train_test_split(np.zeros((5, 2)), np.zeros(4))
    with pytest.raises(ValueError, match="At least one array"):
        train_test_split()


# ---- cross-validation -------------------------------------------------------------------------

def test_cross_val_score_equals_sklearn_threaded(clf_data, reg_data):
    X, y = clf_data
    cv = skms.StratifiedKFold(5, shuffle=True, random_state=0)
    np.testing.assert_allclose(cross_val_score(GaussianNB(), X, y, cv=cv),
                               skms.cross_val_score(SkGaussianNB(), X, y, cv=cv), rtol=1e-12)
    Xr, yr = reg_data
    ours = cross_validate(Ridge(alpha=2.0), da.from_array(Xr, chunks=(60, 5)),
                          da.from_array(yr, chunks=60), cv=4,
                          scoring=["r2", "neg_mean_squared_error"], return_train_score=True)
    ref = skms.cross_validate(SkRidge(alpha=2.0), Xr, yr, cv=4,
                              scoring=["r2", "neg_mean_squared_error"], return_train_score=True)
    for key in ("test_r2", "train_r2", "test_neg_mean_squared_error"):
        np.testing.assert_allclose(ours[key], ref[key], rtol=1e-9)


def test_cross_validate_sklearn_estimator_as_tasks(inprocess_client, clf_data):
    X, y = clf_data
    res = cross_validate(SkLogistic(max_iter=500), X, y, cv=4, return_estimator=True,
                         return_indices=True, scoring="accuracy")
    ref = skms.cross_validate(SkLogistic(max_iter=500), X, y, cv=4, scoring="accuracy")
    np.testing.assert_allclose(res["test_score"], ref["test_score"])
    assert len(res["estimator"]) == 4 and len(res["indices"]["test"]) == 4


# ---- searches ---------------------------------------------------------------------------------

def _check_like_sklearn(ours, ref, score_keys):
    assert set(ref.cv_results_) == set(ours.cv_results_)
    for key in score_keys:
        np.testing.assert_allclose(ours.cv_results_[key], ref.cv_results_[key], rtol=1e-9,
                                   atol=1e-12)
    for key in ours.cv_results_:
        if key.startswith("rank_"):
            np.testing.assert_array_equal(ours.cv_results_[key], ref.cv_results_[key])
    assert ours.best_params_ == ref.best_params_
    assert ours.best_index_ == ref.best_index_
    np.testing.assert_allclose(ours.best_score_, ref.best_score_, rtol=1e-12)


# Quick tier: the process cluster; the in-process cluster with the slow tests.
@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_grid_search_gaussian_nb_equals_sklearn_on_both_clusters(client, clf_data):
    X, y = clf_data
    grid = {"var_smoothing": [1e-9, 1.0]}
    cv = skms.StratifiedKFold(3, shuffle=True, random_state=1)
    ref = skms.GridSearchCV(SkGaussianNB(), grid, cv=cv, return_train_score=True).fit(X, y)
    # dml estimator on Dask data: concurrent driver loops from client threads.
    Xd, yd = da.from_array(X, chunks=(70, 6)), da.from_array(y, chunks=70)
    ours = GridSearchCV(GaussianNB(), grid, cv=cv, return_train_score=True).fit(Xd, yd)
    _check_like_sklearn(ours, ref, ["mean_test_score", "split0_test_score", "std_test_score",
                                    "mean_train_score"])
    np.testing.assert_allclose(ours.best_estimator_.theta_, ref.best_estimator_.theta_)
    # scikit-learn's own estimator on in-memory data: one task per fit on scattered data.
    tasks = GridSearchCV(SkGaussianNB(), grid, cv=cv, return_train_score=True).fit(X, y)
    _check_like_sklearn(tasks, ref, ["mean_test_score", "split2_train_score"])
    assert ours.cv_results_["mean_fit_time"].shape == (2,)


def test_grid_search_ridge_multimetric_and_refit_name(inprocess_client, reg_data):
    X, y = reg_data
    grid = {"alpha": [0.01, 100.0], "fit_intercept": [True, False]}
    scoring = {"r2": "r2", "mse": "neg_mean_squared_error"}
    ref = skms.GridSearchCV(SkRidge(), grid, cv=3, scoring=scoring, refit="mse").fit(X, y)
    ours = GridSearchCV(Ridge(), grid, cv=3, scoring=scoring, refit="mse").fit(X, y)
    _check_like_sklearn(ours, ref, ["mean_test_r2", "mean_test_mse", "split2_test_mse"])
    np.testing.assert_array_equal(ours.cv_results_["param_alpha"], ref.cv_results_["param_alpha"])
    np.testing.assert_allclose(ours.best_estimator_.coef_, ref.best_estimator_.coef_,
                               rtol=1e-8)
    assert ours.score(X, y) == pytest.approx(ref.score(X, y))
    np.testing.assert_allclose(ours.predict(X[:5]), ref.predict(X[:5]), rtol=1e-8)


def test_pipeline_prefix_shared_and_equal_to_sklearn(inprocess_client, clf_data):
    X, y = clf_data
    pipe = Pipeline([("scale", StandardScaler()), ("clf", SkLogistic(max_iter=300))])
    grid = {"scale__with_mean": [True, False], "clf__C": [0.01, 1.0, 100.0]}
    ref = skms.GridSearchCV(pipe, grid, cv=3).fit(X, y)
    ours = GridSearchCV(pipe, grid, cv=3, verbose=1).fit(X, y)
    _check_like_sklearn(ours, ref, ["mean_test_score", "split1_test_score"])
    # 2 prefixes x 3 folds fitted once each, plus 6 x 3 final fits (names on the scheduler).
    prefix_tasks = [k for k in inprocess_client.run_on_scheduler(
        lambda dask_scheduler: list(dask_scheduler.task_prefixes)) if "prefix" in k]
    assert prefix_tasks


def test_randomized_search_same_candidates_as_sklearn(inprocess_client, clf_data):
    from scipy.stats import loguniform

    X, y = clf_data
    dist = {"var_smoothing": loguniform(1e-9, 1.0)}
    ref = skms.RandomizedSearchCV(SkGaussianNB(), dist, n_iter=3, cv=3, random_state=0,
                                  scoring="neg_log_loss").fit(X, y)
    ours = RandomizedSearchCV(GaussianNB(), dist, n_iter=3, cv=3, random_state=0,
                              scoring="neg_log_loss").fit(X, y)
    _check_like_sklearn(ours, ref, ["mean_test_score"])


def test_error_score_and_raise(inprocess_client, clf_data):
    X, y = clf_data
    grid = {"var_smoothing": [1e-9, -1.0]}
    with pytest.warns(Warning, match="fits failed"):
        s = GridSearchCV(GaussianNB(), grid, cv=3, error_score=np.nan).fit(X, y)
    assert np.isnan(s.cv_results_["mean_test_score"][1])
    assert s.best_params_ == {"var_smoothing": 1e-9}
    with pytest.raises(ValueError, match="var_smoothing"):
        GridSearchCV(GaussianNB(), grid, cv=3, error_score="raise").fit(X, y)
    with pytest.raises(ValueError, match="All the 3 fits failed"):
        GridSearchCV(GaussianNB(), {"var_smoothing": [-1.0]}, cv=3).fit(X, y)


def test_bad_arguments(clf_data):
    X, y = clf_data
    with pytest.raises(ValueError, match="not supported for dml estimators"):
        GridSearchCV(GaussianNB(), {"var_smoothing": [1e-9]}, scoring="nope").fit(X, y)
    with pytest.raises(ValueError, match="refit must be set to a scorer key"):
        GridSearchCV(GaussianNB(), {"var_smoothing": [1e-9]},
                     scoring=["accuracy", "f1_macro"]).fit(X, y)
    with pytest.raises(TypeError, match="pass y as an array"):
        GridSearchCV(GaussianNB(), {"var_smoothing": [1e-9]}).fit(pd.DataFrame(X), "t")


def test_callable_scoring_and_no_refit(inprocess_client, clf_data):
    X, y = clf_data

    def balanced(est, X_, y_):
        from sklearn.metrics import balanced_accuracy_score
        return balanced_accuracy_score(np.asarray(y_), np.asarray(est.predict(X_)))

    s = GridSearchCV(GaussianNB(), {"var_smoothing": [1e-9, 1.0]}, cv=3, scoring=balanced,
                     refit=False).fit(X, y)
    ref = skms.GridSearchCV(SkGaussianNB(), {"var_smoothing": [1e-9, 1.0]}, cv=3,
                            scoring=balanced, refit=False).fit(X, y)
    np.testing.assert_allclose(s.cv_results_["mean_test_score"],
                               ref.cv_results_["mean_test_score"])
    assert not hasattr(s, "best_estimator_")


#: (fit's training state id, time) at the end of every epoch, from the search's driver threads.
_EPOCH_ENDS: list = []


def _record_epoch(state, record):
    _EPOCH_ENDS.append((id(state), time.perf_counter()))


def _most_at_once(epoch_ends) -> int:
    """The most fits in progress at one moment (a fit spans its first to its last epoch end)."""
    spans: dict = {}
    for fit, t in epoch_ends:
        a, b = spans.get(fit, (t, t))
        spans[fit] = (min(a, t), max(b, t))
    events = sorted([(a, 1) for a, _ in spans.values()] + [(b, -1) for _, b in spans.values()],
                    key=lambda e: (e[0], -e[1]))
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


@pytest.mark.slow
def test_dml_fits_run_concurrently(client):
    """Fits interleave: while one fit waits for its tasks, the others run (several fits are in
    progress at the same moment). Checked by the fits' own start and end times, not by a ratio
    of durations, which a loaded machine distorts."""
    X, y = make_classification(n_samples=4000, n_features=10, random_state=0)
    Xd = client.persist(da.from_array(X, chunks=(500, 10)))
    yd = client.persist(da.from_array(y, chunks=500))
    est = SGDClassifier(loss="log_loss", max_iter=3, tol=None, random_state=0,
                        callbacks=[_record_epoch])
    # batch_size changes the passes themselves: these candidates are not stacked, so the search
    # runs 6 driver loops at once.
    grid = {"batch_size": [16, 128]}
    _EPOCH_ENDS.clear()
    s = GridSearchCV(est, grid, cv=3, refit=False).fit(Xd, yd)
    assert len(_EPOCH_ENDS) == 6 * 3
    assert _most_at_once(_EPOCH_ENDS) >= 2, _EPOCH_ENDS
    # Deterministic: the same scores again, whatever finished first.
    again = GridSearchCV(est, grid, cv=3, refit=False).fit(Xd, yd)
    np.testing.assert_array_equal(again.cv_results_["mean_test_score"],
                                  s.cv_results_["mean_test_score"])


def test_cli_job_search_section(inprocess_client, tmp_path, capsys):
    import json

    from dml.cli import main

    job = tmp_path / "search.yaml"
    job.write_text(
        "name: search_nb\n"
        "data:\n  generator: make_classification\n"
        "  params: {n_samples: 600, n_features: 4, chunks: 200, random_state: 0}\n"
        "target: y\npreprocessing: none\nmodel: {name: gaussian_nb}\n"
        "search:\n  grid: {var_smoothing: [1.0e-9, 1.0]}\n  cv: 2\n  scoring: accuracy\n"
        f"output: {tmp_path / 'out'}\n")
    assert main(["train", str(job)]) == 0
    report = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert report["search"]["candidates"] == 2
    assert report["search"]["best_params"] in ({"var_smoothing": 1e-9}, {"var_smoothing": 1.0})
    bad = tmp_path / "bad.yaml"
    bad.write_text(job.read_text().replace("var_smoothing: [1.0e-9, 1.0]", "nope: [1]"))
    assert main(["train", str(bad)]) == 2
    assert "has no parameter 'nope'" in capsys.readouterr().err


def test_split_dataframe_parts_convert_to_arrays_on_a_cluster(inprocess_client):
    """Split DataFrame/Series parts stay usable as Dask arrays on a distributed cluster.

    Regression: the parts used to be built with ``from_delayed(verify_meta=False)``, whose alias
    tasks made ``to_dask_array()`` fail with "lost dependencies" on a distributed scheduler (seen
    when GridSearchCV mixed encoded arrays with split Series labels)."""
    df = pd.DataFrame({"a": np.arange(40.0), "y": np.arange(40) % 2})
    ddf = dd.from_pandas(df, npartitions=4)
    X_train, X_test, y_train, y_test = train_test_split(ddf[["a"]], ddf["y"], test_size=0.25,
                                                        random_state=0)
    labels = y_train.to_dask_array(lengths=True)
    assert labels.chunks[0] == tuple(len(p) for p in y_train.partitions)
    np.testing.assert_array_equal(labels.compute(), y_train.compute().to_numpy())
    np.testing.assert_array_equal(X_test.to_dask_array().compute().ravel(),
                                  X_test["a"].compute().to_numpy())
