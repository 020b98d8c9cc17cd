"""scikit-learn's conventions of searches and cross-validation: ``scoring=None`` and ``groups``."""
from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn import model_selection as skms
from sklearn.datasets import make_blobs, make_classification, make_regression
from sklearn.naive_bayes import GaussianNB as SkGaussianNB
from sklearn.pipeline import Pipeline

import dml
from dml.cluster import KMeans
from dml.linear_model import Ridge
from dml.model_selection import (GridSearchCV, GroupKFold, KFold, LeaveOneGroupOut,
                                 RandomizedSearchCV, StratifiedGroupKFold, cross_val_score,
                                 cross_validate, split_indices, take_rows)
from dml.naive_bayes import GaussianNB
from dml.preprocessing import StandardScaler


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(n_samples=240, centers=3, n_features=3, random_state=0)
    return X


def _hand_scores(make, X, y, splits):
    """Each fold scored by hand: fit on the train rows, the estimator's own ``score``."""
    out = []
    for train, test in splits:
        est = make()
        if y is None:
            out.append(est.fit(take_rows(X, train)).score(take_rows(X, test)))
        else:
            yt = np.asarray(take_rows(y, test).compute())
            est.fit(take_rows(X, train), take_rows(y, train))
            out.append(est.score(np.asarray(take_rows(X, test).compute()), yt))
    return np.array(out)


# ---- scoring=None: the estimator's own score ---------------------------------------------------

@pytest.mark.slow  # about 15 s: runs in the full suite, kept out of the quick one
def test_grid_search_kmeans_scores_with_kmeans_score(inprocess_client, blobs, tmp_path):
    # Some thirty k-means fits: each with one random initialisation (k-means|| takes several
    # passes before the first iteration); what is checked is the scoring, not the seeding.
    km = dict(init="random", n_init=1, random_state=0)
    Xd = da.from_array(blobs, chunks=(60, 3))
    grid = {"n_clusters": [2, 3, 4]}
    search = GridSearchCV(KMeans(**km), grid, cv=3).fit(Xd)
    splits = list(KFold(3).split(Xd))
    means = [_hand_scores(lambda k=k: KMeans(n_clusters=k, **km), Xd, None,
                          splits).mean() for k in grid["n_clusters"]]
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], means, rtol=1e-10)
    assert search.best_score_ == pytest.approx(max(means), rel=1e-10)
    assert np.isfinite(search.best_score_) and search.best_score_ < 0  # -inertia
    # The search's own score is the refitted model's score.
    assert search.score(Xd) == pytest.approx(search.best_estimator_.score(Xd), rel=1e-12)
    # The scorer of scoring=None is saved with the search (a model file holds no code).
    loaded = dml.load(dml.save(search, tmp_path / "search.dml"))
    assert loaded.score(Xd) == pytest.approx(search.score(Xd), rel=1e-12)
    # cross_validate too, and a pipeline ending in KMeans scores with KMeans' score.
    res = cross_validate(KMeans(n_clusters=3, **km), Xd, cv=3)
    np.testing.assert_allclose(res["test_score"], _hand_scores(
        lambda: KMeans(n_clusters=3, **km), Xd, None, splits), rtol=1e-10)
    pipe = Pipeline([("scale", StandardScaler()), ("km", KMeans(n_clusters=3, **km))])
    scores = cross_val_score(pipe, Xd, cv=3)
    assert np.isfinite(scores).all() and (scores < 0).all()


def test_supervised_scoring_none_is_the_estimators_score(inprocess_client):
    X, y = make_regression(n_samples=200, n_features=4, noise=10.0, random_state=0)
    Xd, yd = da.from_array(X, chunks=(50, 4)), da.from_array(y, chunks=50)
    grid = {"alpha": [0.1, 1000.0]}
    search = GridSearchCV(Ridge(), grid, cv=4).fit(Xd, yd)
    splits = list(KFold(4).split(Xd))
    means = [_hand_scores(lambda a=a: Ridge(alpha=a), Xd, yd, splits).mean()
             for a in grid["alpha"]]
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], means, rtol=1e-9)
    assert search.best_score_ == pytest.approx(max(means), rel=1e-9)
    # GaussianNB has a score of its own (accuracy, reduced blockwise).
    Xc, yc = make_classification(n_samples=200, n_features=4, random_state=0)
    Xcd, ycd = da.from_array(Xc, chunks=(50, 4)), da.from_array(yc, chunks=50)
    splits = list(skms.StratifiedKFold(4).split(Xc, yc))
    res = cross_validate(GaussianNB(), Xcd, ycd, cv=4)
    np.testing.assert_allclose(res["test_score"],
                               _hand_scores(GaussianNB, Xcd, ycd, splits), rtol=1e-12)


def test_scoring_none_without_a_score_method(inprocess_client, blobs):
    Xd = da.from_array(blobs, chunks=(60, 3))
    with pytest.raises(TypeError, match="should have a 'score' method"):
        GridSearchCV(StandardScaler(), {"with_mean": [True, False]}, cv=3).fit(Xd)


# ---- groups reach the splitter -----------------------------------------------------------------

@pytest.fixture(scope="module")
def grouped():
    X, y = make_classification(n_samples=240, n_features=5, n_informative=3, random_state=0)
    groups = np.random.default_rng(0).integers(0, 9, size=len(y))
    return X, y, groups


def _no_shared_group(splits, groups):
    for train, test in splits:
        assert not set(groups[train]) & set(groups[test])
        assert len(train) + len(test) == len(groups)


@pytest.mark.parametrize("dask_groups", [True, False])
def test_cross_validate_group_kfold_folds_equal_sklearn(inprocess_client, grouped, dask_groups):
    X, y, groups = grouped
    Xd, yd = da.from_array(X, chunks=(70, 5)), da.from_array(y, chunks=70)
    g = da.from_array(groups, chunks=70) if dask_groups else groups
    res = cross_validate(GaussianNB(), Xd, yd, groups=g, cv=GroupKFold(4), return_indices=True)
    ref_splits = list(skms.GroupKFold(4).split(X, y, groups))
    ours = list(zip(res["indices"]["train"], res["indices"]["test"]))
    _no_shared_group(ours, groups)
    for (tr, te), (rtr, rte) in zip(ours, ref_splits, strict=True):
        np.testing.assert_array_equal(tr, rtr)
        np.testing.assert_array_equal(te, rte)
    ref = skms.cross_validate(SkGaussianNB(), X, y, groups=groups, cv=skms.GroupKFold(4))
    np.testing.assert_allclose(res["test_score"], ref["test_score"], rtol=1e-12)


def test_search_passes_groups_to_sklearn_and_dml_splitters(inprocess_client, grouped):
    X, y, groups = grouped
    # 4 groups, not the fixture's 9: leave-one-group-out makes a split (and a fit per candidate
    # and search) per group, and any number of groups shows that they are passed on.
    groups = groups % 4
    grid = {"var_smoothing": [1e-9, 0.5]}
    ref = skms.GridSearchCV(SkGaussianNB(), grid, cv=skms.LeaveOneGroupOut()).fit(
        X, y, groups=groups)
    # scikit-learn's splitter, Dask X and y, NumPy groups: the client-thread path.
    Xd, yd = da.from_array(X, chunks=(70, 5)), da.from_array(y, chunks=70)
    ours = GridSearchCV(GaussianNB(), grid, cv=skms.LeaveOneGroupOut()).fit(Xd, yd, groups=groups)
    assert ours.n_splits_ == len(np.unique(groups)) == ref.n_splits_
    for key in ("mean_test_score", "split0_test_score", "split3_test_score"):
        np.testing.assert_allclose(ours.cv_results_[key], ref.cv_results_[key], rtol=1e-12)
    # dml's splitter and a Dask DataFrame with the groups as a Dask Series.
    df = dd.from_pandas(pd.DataFrame(X, columns=list("abcde")), npartitions=3)
    gs = dd.from_pandas(pd.Series(groups), npartitions=3)
    ys = dd.from_pandas(pd.Series(y), npartitions=3)
    ours = RandomizedSearchCV(GaussianNB(), grid, n_iter=2, cv=LeaveOneGroupOut(),
                              random_state=0).fit(df, ys, groups=gs)
    np.testing.assert_allclose(np.sort(ours.cv_results_["mean_test_score"]),
                               np.sort(ref.cv_results_["mean_test_score"]), rtol=1e-12)
    # scikit-learn's estimator on NumPy data: the task path.
    tasks = GridSearchCV(SkGaussianNB(), grid, cv=skms.GroupKFold(3)).fit(X, y, groups=groups)
    ref3 = skms.GridSearchCV(SkGaussianNB(), grid, cv=skms.GroupKFold(3)).fit(X, y,
                                                                             groups=groups)
    np.testing.assert_allclose(tasks.cv_results_["split2_test_score"],
                               ref3.cv_results_["split2_test_score"], rtol=1e-12)


def test_group_splitters_on_dask_equal_sklearn(grouped):
    X, y, groups = grouped
    Xd = da.from_array(X, chunks=(70, 5))
    gd, yd = da.from_array(groups, chunks=70), da.from_array(y, chunks=70)
    for ours, ref in ((GroupKFold(3), skms.GroupKFold(3)),
                      (StratifiedGroupKFold(3, shuffle=True, random_state=0),
                       skms.StratifiedGroupKFold(3, shuffle=True, random_state=0)),
                      (LeaveOneGroupOut(), skms.LeaveOneGroupOut()),
                      (skms.GroupShuffleSplit(2, random_state=0),
                       skms.GroupShuffleSplit(2, random_state=0))):
        got = split_indices(ours, Xd, yd, gd)
        want = list(ref.split(X, y, groups))
        _no_shared_group(got, groups)
        assert len(got) == len(want)
        for (tr, te), (rtr, rte) in zip(got, want):
            np.testing.assert_array_equal(tr, rtr)
            np.testing.assert_array_equal(te, rte)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        split_indices(GroupKFold(3), Xd, None, gd[:-1])
    with pytest.raises(TypeError, match="pass groups as an array"):
        split_indices(GroupKFold(3), Xd, None, "g")
    # A splitter that ignores groups says so, as scikit-learn's does.
    with pytest.warns(UserWarning, match="groups parameter is ignored by KFold"):
        split_indices(KFold(3), Xd, None, gd)


# ---- sample_weight weights the scores too ------------------------------------------------------

# Several metrics (9 s under load) in the full suite only; the default score in the quick one.
@pytest.mark.parametrize("scoring", [None, pytest.param(["accuracy", "neg_log_loss"],
                                                        marks=pytest.mark.slow)])
def test_search_weights_its_scores_as_sklearn(inprocess_client, grouped, scoring):
    """scikit-learn's searches (1.7+) pass fit's sample_weight to the scorers, cut to each
    fold's rows (test and train scores): the same cv_results_ on both of dml's paths."""
    X, y, _ = grouped
    w = np.random.default_rng(1).uniform(0.1, 3.0, size=len(y))
    grid = {"var_smoothing": [1e-9, 0.5]}
    cv = skms.KFold(4)
    ref = skms.GridSearchCV(SkGaussianNB(), grid, cv=cv, scoring=scoring,
                            return_train_score=True, refit=False).fit(X, y, sample_weight=w)
    unweighted = skms.GridSearchCV(SkGaussianNB(), grid, cv=cv, scoring=scoring,
                                   return_train_score=True, refit=False).fit(X, y)
    keys = [k for k in ref.cv_results_ if k.startswith(("split", "mean_test", "mean_train"))]
    assert any(not np.allclose(ref.cv_results_[k], unweighted.cv_results_[k]) for k in keys)
    Xd, yd = da.from_array(X, chunks=(70, 5)), da.from_array(y, chunks=70)
    runs = {"dask X, Dask weights": (GaussianNB(), Xd, yd, da.from_array(w, chunks=70)),
            "dask X, NumPy weights": (GaussianNB(), Xd, yd, w),
            "scikit-learn estimator, NumPy (tasks)": (SkGaussianNB(), X, y, w)}
    for what, (est, Xs, ys, ws) in runs.items():
        ours = GridSearchCV(est, grid, cv=cv, scoring=scoring, return_train_score=True,
                            refit=False).fit(Xs, ys, sample_weight=ws)
        for k in keys:
            np.testing.assert_allclose(ours.cv_results_[k], ref.cv_results_[k], rtol=1e-7,
                                       err_msg=f"{what}: {k}")


def test_search_warns_when_a_scorer_cannot_weigh(inprocess_client, grouped):
    X, y, _ = grouped
    w = np.random.default_rng(1).uniform(0.1, 3.0, size=len(y))

    def plain(estimator, X, y):  # no sample_weight: unweighted scores, with a warning
        return float(np.mean(estimator.predict(X) == np.asarray(y)))

    Xd, yd = da.from_array(X, chunks=(70, 5)), da.from_array(y, chunks=70)
    with pytest.warns(UserWarning, match="does not take sample_weight"):
        ours = GridSearchCV(GaussianNB(), {"var_smoothing": [1e-9]}, cv=3, scoring=plain,
                            refit=False).fit(Xd, yd, sample_weight=w)
    assert np.isfinite(ours.cv_results_["mean_test_score"]).all()
