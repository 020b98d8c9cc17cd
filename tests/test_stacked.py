"""Stacked SGD fits (dml.optim.stacked): several candidates trained in the same passes.

The contract: each stacked model is the model its own ``fit`` gives (same epochs, same
coefficients up to the rounding of one matrix product instead of several), a candidate that fails
on its own fails alone, and a search over stackable candidates reports what separate fits would.
"""
from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

from dml.linear_model import Perceptron, SGDClassifier, SGDRegressor
from dml.model_selection import (GridSearchCV, KFold, ShuffleSplit, StratifiedKFold,
                                 cross_validate)
from dml.optim.stacked import check_stackable
from dml.optim.engine import SGDConfig
from dml.optim.training import TrainConfig


def _separate(cls, params_list, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = []
        for p in params_list:
            try:
                out.append(cls(**p).fit(X, y))
            except Exception as exc:  # noqa: BLE001
                out.append(exc)
        return out


def _stacked(cls, params_list, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls._fit_stacked([cls(**p) for p in params_list], X, y)


def _assert_same_models(stacked, separate):
    for s, r in zip(stacked, separate):
        assert s.n_iter_ == r.n_iter_ and s.t_ == r.t_
        # Rounding differences of order 1e-16 accumulate over the steps: compare on the scale
        # of the model.
        scale = max(np.abs(r.coef_).max(), np.abs(r.intercept_).max(), 1e-300)
        np.testing.assert_allclose(s.coef_, r.coef_, rtol=0, atol=1e-9 * scale)
        np.testing.assert_allclose(s.intercept_, r.intercept_, rtol=0, atol=1e-9 * scale)
        np.testing.assert_allclose([h["objective"] for h in s.history_],
                                   [h["objective"] for h in r.history_], rtol=1e-7)


CASES = {
    # tol=1e-3: the models stop after different numbers of epochs and leave the stack.
    "binary-log-optimal-tol": (SGDClassifier, dict(loss="log_loss", max_iter=40, tol=1e-3),
                               "alpha", [1e-4, 1e-3, 1e-2, 1e-1]),
    "ovr-hinge-averaged": (SGDClassifier, dict(loss="hinge", max_iter=6, tol=None, average=5),
                           "alpha", [1e-4, 1e-3, 1e-2]),
    "elasticnet-l1-ratio": (SGDRegressor, dict(penalty="elasticnet", alpha=1e-2, max_iter=6,
                                               tol=None, learning_rate="invscaling", eta0=0.02),
                            "l1_ratio", [0.0, 0.5, 1.0]),
    "regressor-eta0-momentum": (SGDRegressor, dict(learning_rate="constant", optimizer="momentum",
                                                   max_iter=4, tol=None),
                                "eta0", [1e-3, 3e-3, 1e-2]),
    "adaptive-power-t": (SGDRegressor, dict(learning_rate="adaptive", eta0=0.01, max_iter=30,
                                            tol=1e-2, n_iter_no_change=2),
                         "alpha", [1e-5, 1e-1]),
}


def _data(cls, case):
    if cls is SGDRegressor:
        X, y = make_regression(n_samples=1500, n_features=8, noise=3.0, random_state=1)
        return X / 10.0, y / 100.0
    k = 3 if "ovr" in case else 2
    return make_classification(n_samples=1500, n_features=8, n_informative=5, n_classes=k,
                               random_state=0)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("chunks", [1500, (700, 100, 700)])
def test_stacked_models_equal_their_own_fits(case, chunks):
    cls, base, name, values = CASES[case]
    X, y = _data(cls, case)
    Xd = da.from_array(X, chunks=(chunks, -1))
    yd = da.from_array(y, chunks=(Xd.chunks[0],))
    params = [dict(base, random_state=3, **{name: v}) for v in values]
    stacked = _stacked(cls, params, Xd, yd)
    separate = _separate(cls, params, Xd, yd)
    _assert_same_models(stacked, separate)
    if case == "binary-log-optimal-tol":
        assert len({m.n_iter_ for m in stacked}) > 1  # they did leave the stack at different epochs


def test_stacked_on_the_cluster_equals_own_fits(client):
    X, y = make_classification(n_samples=3000, n_features=10, random_state=0)
    Xd = client.persist(da.from_array(X, chunks=(700, 10)))
    yd = client.persist(da.from_array(y, chunks=700))
    params = [dict(loss="log_loss", max_iter=5, tol=None, random_state=0, alpha=a)
              for a in (1e-4, 1e-3, 1e-2)]
    _assert_same_models(_stacked(SGDClassifier, params, Xd, yd),
                        _separate(SGDClassifier, params, Xd, yd))


def test_a_candidate_that_fails_fails_alone():
    X, y = make_regression(n_samples=600, n_features=5, random_state=0)
    Xd, yd = da.from_array(X, chunks=200), da.from_array(y, chunks=200)
    params = [dict(learning_rate="constant", eta0=e, max_iter=5, tol=None, random_state=0)
              for e in (1e-3, 1e3, 2e-3)]  # eta0=1e3 diverges
    params.append(dict(params[0], alpha=-1.0))  # invalid on its own
    stacked = _stacked(SGDRegressor, params, Xd, yd)
    separate = _separate(SGDRegressor, params, Xd, yd)
    assert isinstance(stacked[1], ArithmeticError) and "diverged" in str(stacked[1])
    assert type(stacked[1]) is type(separate[1])
    assert isinstance(stacked[3], ValueError) and "alpha" in str(stacked[3])
    _assert_same_models([stacked[0], stacked[2]], [separate[0], separate[2]])


def test_search_over_stackable_candidates_equals_separate_cross_validation(inprocess_client,
                                                                          monkeypatch):
    X, y = make_classification(n_samples=2000, n_features=12, random_state=0)
    Xd = inprocess_client.persist(da.from_array(X, chunks=(500, 12)))
    yd = inprocess_client.persist(da.from_array(y, chunks=500))
    est = SGDClassifier(loss="log_loss", max_iter=5, tol=None, random_state=0)
    alphas = [1e-3, 1e-1]
    cv = KFold(3)
    stacks = []
    original = SGDClassifier._fit_stacked.__func__

    def spy(cls, estimators, *args, **kwargs):
        stacks.append([sorted(e.alpha for e in row) for row in estimators])
        return original(cls, estimators, *args, **kwargs)

    monkeypatch.setattr(SGDClassifier, "_fit_stacked", classmethod(spy))
    s = GridSearchCV(est, {"alpha": alphas, "loss": ["log_loss", "hinge"]}, cv=cv,
                     scoring="accuracy").fit(Xd, yd)
    # One grid per loss: the three folds and the whole data (for the refit) × the alphas, in
    # shared passes.
    assert stacks == [[alphas] * 4] * 2
    _assert_search_equals_own_fits(s, est, Xd, yd, cv)
    # The refit (trained in the grid) is an ordinary fit with the best parameters.
    best = SGDClassifier(**dict(est.get_params(), **s.best_params_)).fit(Xd, yd)
    _assert_same_models([s.best_estimator_], [best])


def _assert_search_equals_own_fits(search, est, Xd, yd, cv):
    """Every (candidate, fold) score equals the accuracy of the candidate's own fit on the
    fold's rows (``take_rows``), computed here one fit at a time."""
    from dml.model_selection import take_rows

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, params in enumerate(search.cv_results_["params"]):
            for k, (train, test) in enumerate(cv.split(Xd, yd)):
                own = SGDClassifier(**dict(est.get_params(), **params)).fit(
                    take_rows(Xd, train), take_rows(yd, train))
                expected = float((own.predict(take_rows(Xd, test)).compute()
                                  == take_rows(yd, test).compute()).mean())
                assert search.cv_results_[f"split{k}_test_score"][i] == pytest.approx(
                    expected, abs=1e-12), (params, k)


def test_search_with_balanced_class_weights_stacks_per_fold(inprocess_client):
    """class_weight="balanced" weighs classes by each fold's counts: the folds are separate
    problems, so each fold gets its own stack — still the candidates' own fits."""
    X, y = make_classification(n_samples=1200, n_features=6, weights=[0.7], random_state=0)
    Xd = inprocess_client.persist(da.from_array(X, chunks=(300, 6)))
    yd = inprocess_client.persist(da.from_array(y, chunks=300))
    est = SGDClassifier(loss="hinge", max_iter=3, tol=None, class_weight="balanced",
                        random_state=0)
    cv = KFold(3)
    s = GridSearchCV(est, {"alpha": [1e-4, 1e-2]}, cv=cv, scoring="accuracy").fit(Xd, yd)
    _assert_search_equals_own_fits(s, est, Xd, yd, cv)
    # cross_validate of one stackable estimator trains its folds in one grid too.
    res = cross_validate(SGDClassifier(loss="hinge", max_iter=3, tol=None, random_state=0),
                         Xd, yd, cv=cv, scoring="accuracy")
    s2 = GridSearchCV(SGDClassifier(loss="hinge", max_iter=3, tol=None, random_state=0),
                      {"alpha": [1e-4]}, cv=cv, scoring="accuracy").fit(Xd, yd)
    _assert_search_equals_own_fits(s2, SGDClassifier(loss="hinge", max_iter=3, tol=None,
                                                     random_state=0), Xd, yd, cv)
    np.testing.assert_array_equal(res["test_score"],
                                  [s2.cv_results_[f"split{k}_test_score"][0] for k in range(3)])


def test_search_error_score_for_a_failing_stacked_candidate(inprocess_client):
    X, y = make_regression(n_samples=800, n_features=5, random_state=0)
    est = SGDRegressor(learning_rate="constant", max_iter=3, tol=None, random_state=0)
    with pytest.warns(Warning, match="fits failed"):
        s = GridSearchCV(est, {"eta0": [1e-3, 1e3]}, cv=3, error_score=np.nan).fit(X, y)
    scores = s.cv_results_["mean_test_score"]
    assert np.isfinite(scores[0]) and np.isnan(scores[1])
    assert s.best_params_ == {"eta0": 1e-3}
    with pytest.raises(ArithmeticError, match="diverged"):
        GridSearchCV(est, {"eta0": [1e-3, 1e3]}, cv=3, error_score="raise").fit(X, y)


@pytest.mark.parametrize("extra", [dict(early_stopping=True), dict(verbose=1),
                                   dict(checkpoint_dir="x"), dict(warm_start=True),
                                   dict(random_state=np.random.RandomState(0))])
def test_per_fit_features_are_not_stacked(extra):
    assert SGDClassifier(**extra)._stack_key() is None
    assert SGDClassifier(alpha=1.0)._stack_key() == SGDClassifier(alpha=2.0, eta0=3.0)._stack_key()
    assert SGDClassifier(batch_size=8)._stack_key() != SGDClassifier()._stack_key()
    assert Perceptron(eta0=0.5)._stack_key() == Perceptron(eta0=2.0)._stack_key()


def test_check_stackable_refuses_different_passes():
    with pytest.raises(ValueError, match="share"):
        check_stackable([SGDConfig(batch_size=8), SGDConfig(batch_size=16)], [TrainConfig()] * 2)
    with pytest.raises(ValueError, match="per-fit"):
        check_stackable([SGDConfig()] * 2, [TrainConfig(early_stopping=True), TrainConfig()])


FOLD_CASES = {
    "kfold-log": (SGDClassifier, dict(loss="log_loss", max_iter=4, tol=None), "alpha",
                  [1e-4, 1e-2], lambda: KFold(4)),
    "stratified-shuffled-tol": (SGDClassifier, dict(loss="hinge", max_iter=30, tol=1e-3),
                                "alpha", [1e-4, 1e-3, 1e-1],
                                lambda: StratifiedKFold(3, shuffle=True, random_state=0)),
    "shufflesplit-ovr-local-steps-adam": (
        SGDClassifier, dict(loss="log_loss", max_iter=3, tol=None, local_steps=4,
                            optimizer="adam", learning_rate="constant", average=10),
        "eta0", [1e-3, 1e-2], lambda: ShuffleSplit(3, test_size=0.3, random_state=0)),
    "regressor-momentum-elasticnet": (
        SGDRegressor, dict(penalty="elasticnet", optimizer="momentum", max_iter=4, tol=None,
                           eta0=0.002), "l1_ratio", [0.1, 0.9], lambda: KFold(3)),
}


@pytest.mark.parametrize("case", sorted(FOLD_CASES))
@pytest.mark.parametrize("chunks,kind", [(400, "array"), ((700, 100, 700), "array"),
                                         (400, "dataframe")])
def test_fold_grid_models_equal_fits_on_each_folds_rows(case, chunks, kind):
    """Including folds that leave a block empty: a Dask array's fold drops that block (the
    later blocks' permutations shift), a DataFrame's keeps it as an empty partition."""
    import dask.dataframe as dd
    import pandas as pd

    from dml.model_selection import take_rows

    cls, base, name, values, make_cv = FOLD_CASES[case]
    X, y = _data(cls, "ovr" if "ovr" in case else case)
    Xd = da.from_array(X, chunks=(chunks, -1))
    yd = da.from_array(y, chunks=(Xd.chunks[0],))
    if kind == "dataframe":
        Xd = dd.from_pandas(pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])]),
                            chunksize=chunks)
        yd = dd.from_pandas(pd.Series(y, name="y"), chunksize=chunks)
    splits = list(make_cv().split(X, y))
    params = [dict(base, random_state=5, **{name: v}) for v in values]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid = cls._fit_stacked([[cls(**p) for p in params] for _ in splits], Xd, yd,
                                train_indices=[tr for tr, _ in splits])
    for (train, _), row in zip(splits, grid):
        separate = _separate(cls, params, take_rows(Xd, train), take_rows(yd, train))
        _assert_same_models(row, separate)
    if case.startswith("regressor") and chunks == 400:
        # KFold(3) of 1,500 rows in blocks of 400: fold 0 leaves the first block empty.
        assert set(range(400)) <= set(splits[0][1].tolist())


def test_fold_grid_refuses_what_separate_problems_need():
    from dml.linear_model._base import NotStackable

    X, y = make_classification(n_samples=300, n_features=4, random_state=0)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]  # fold 0 of KFold(2) holds only class 0
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    splits = [(tr, te) for tr, te in KFold(2).split(X)]
    est = dict(loss="log_loss", max_iter=2, tol=None, random_state=0)
    with pytest.raises(NotStackable, match="class"):
        SGDClassifier._fit_stacked([[SGDClassifier(**est)] for _ in splits], Xd, yd,
                                   train_indices=[tr for tr, _ in splits])
    with pytest.raises(NotStackable, match="class weights"):
        SGDClassifier._fit_stacked([[SGDClassifier(class_weight="balanced", **est)]] * 2, Xd,
                                   yd, train_indices=[tr for tr, _ in splits])
    with pytest.raises(NotStackable, match="local"):
        SGDClassifier._fit_stacked([[SGDClassifier(**est)]] * 2, X, y,
                                   train_indices=[tr for tr, _ in splits])


@pytest.mark.parametrize("loss", ["squared_error", "huber", "epsilon_insensitive",
                                  "squared_epsilon_insensitive", "log_loss", "hinge",
                                  "perceptron", "squared_hinge", "modified_huber"])
def test_every_loss_of_the_compiled_kernel_matches_its_own_fit(loss, monkeypatch):
    """The compiled window kernel (plain SGD, one output) against the NumPy single-fit path,
    with averaging and an elastic-net penalty (its soft-threshold) on."""
    import dml.optim.stacked as stacked
    from dml.optim._stacked_kernels import LOSS_CODES

    assert loss in LOSS_CODES
    calls = []
    kernel = stacked.sgd_segment

    def counted(*args):
        calls.append(1)
        return kernel(*args)

    monkeypatch.setattr(stacked, "sgd_segment", counted)
    regression = loss in ("squared_error", "huber", "epsilon_insensitive",
                          "squared_epsilon_insensitive")
    cls = SGDRegressor if regression else SGDClassifier
    X, y = _data(cls, "binary")
    Xd = da.from_array(X, chunks=(400, -1))
    yd = da.from_array(y, chunks=(Xd.chunks[0],))
    params = [dict(loss=loss, penalty="elasticnet", l1_ratio=0.3, average=7, max_iter=3,
                   tol=None, learning_rate="invscaling", eta0=0.01, epsilon=0.2,
                   random_state=0, alpha=a) for a in (1e-4, 1e-2)]
    _assert_same_models(_stacked(cls, params, Xd, yd), _separate(cls, params, Xd, yd))
    assert calls  # the compiled kernel did the steps


def test_search_with_sample_weight_equals_weighted_own_fits(inprocess_client):
    """fit params reach the grid: each fold's models see their rows' weights, and its
    scorer the test rows' weights."""
    from dml.model_selection import take_rows

    X, y = make_classification(n_samples=900, n_features=5, random_state=2)
    sw = np.random.default_rng(0).uniform(0.2, 3.0, size=len(y))
    est = SGDClassifier(loss="log_loss", max_iter=3, tol=None, random_state=0)
    cv = KFold(3)
    s = GridSearchCV(est, {"alpha": [1e-3, 1e-1]}, cv=cv, scoring="accuracy").fit(
        X, y, sample_weight=sw)
    Xd = inprocess_client.persist(da.from_array(X, chunks=(900 // 8, -1)))
    for i, params in enumerate(s.cv_results_["params"]):
        for k, (train, test) in enumerate(cv.split(X, y)):
            own = SGDClassifier(**dict(est.get_params(), **params)).fit(
                take_rows(Xd, train), y[train], sample_weight=sw[train])
            # Weighted accuracy: the search passes fit's sample_weight to the scorer, as
            # scikit-learn's does.
            expected = float(np.average(np.asarray(own.predict(X[test])) == y[test],
                                        weights=sw[test]))
            assert s.cv_results_[f"split{k}_test_score"][i] == pytest.approx(expected, abs=1e-12)
    # The weights matter here: without them the scores differ.
    plain = GridSearchCV(est, {"alpha": [1e-3, 1e-1]}, cv=cv, scoring="accuracy").fit(X, y)
    assert not np.array_equal(plain.cv_results_["split0_test_score"],
                              s.cv_results_["split0_test_score"]) or not np.array_equal(
        plain.cv_results_["split1_test_score"], s.cv_results_["split1_test_score"])


# ---- several streams (blocks walked in sequence, updates summed or averaged) ----------------

STREAM_CASES = {
    "optimal-average": (SGDClassifier, dict(loss="log_loss", max_iter=4, tol=None,
                                            stream_steps=16, local_steps=3),
                        "alpha", [1e-4, 1e-2]),
    "invscaling-sum-asgd": (SGDRegressor, dict(max_iter=4, tol=None, stream_steps=16,
                                               average=30, eta0=0.01), "alpha", [1e-4, 1e-1]),
    "constant-sum-momentum": (SGDRegressor, dict(max_iter=3, tol=None, stream_steps=12,
                                                 optimizer="momentum", learning_rate="constant",
                                                 eta0=1e-3), "eta0", [1e-3, 3e-3]),
    "ovr-hinge-sum": (SGDClassifier, dict(loss="hinge", max_iter=3, tol=None, stream_steps=16,
                                          combine="sum", learning_rate="constant", eta0=0.01),
                      "alpha", [1e-4, 1e-3]),
}


@pytest.mark.parametrize("case", sorted(STREAM_CASES))
def test_stacked_streams_equal_their_own_fits(case):
    cls, base, name, values = STREAM_CASES[case]
    X, y = _data(cls, "ovr" if "ovr" in case else case)
    Xd = da.from_array(X, chunks=(150, -1))   # 10 blocks of 5 steps: streams of 4 and 6 blocks
    yd = da.from_array(y, chunks=(Xd.chunks[0],))
    params = [dict(base, random_state=3, **{name: v}) for v in values]
    stacked = _stacked(cls, params, Xd, yd)
    separate = _separate(cls, params, Xd, yd)
    _assert_same_models(stacked, separate)


@pytest.mark.parametrize("stream_steps", [2, 20])
def test_fold_grid_with_streams(stream_steps):
    """Streams of one block each agree between the folds and the whole data: the grid equals
    the folds' own fits. Longer streams are cut differently on a fold's fewer rows: the grid
    says so (NotStackable) instead of training other models than the folds' own fits."""
    from dml.linear_model._base import NotStackable
    from dml.model_selection import take_rows

    X, y = _data(SGDRegressor, "reg")
    Xd = da.from_array(X, chunks=(400, -1))
    yd = da.from_array(y, chunks=(Xd.chunks[0],))
    splits = list(KFold(3, shuffle=True, random_state=0).split(X))
    params = [dict(max_iter=3, tol=None, random_state=2, stream_steps=stream_steps, alpha=a)
              for a in (1e-4, 1e-2)]
    grid = [[SGDRegressor(**p) for p in params] for _ in splits]
    if stream_steps == 20:
        # With the refit's group (all rows): 13-step blocks make 2 streams, the folds' 9-step
        # blocks one.
        with pytest.raises(NotStackable):
            SGDRegressor._fit_stacked(grid + [[SGDRegressor(**p) for p in params]], Xd, yd,
                                      train_indices=[tr for tr, _ in splits] + [None])
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid = SGDRegressor._fit_stacked(grid, Xd, yd, train_indices=[tr for tr, _ in splits])
    for (train, _), row in zip(splits, grid):
        _assert_same_models(row, _separate(SGDRegressor, params, take_rows(Xd, train),
                                           take_rows(yd, train)))


@pytest.mark.parametrize("folds,schedule", [(False, "constant"), (True, "constant"),
                                             (False, "invscaling")])
def test_stacked_equals_own_fits_when_summed_rounds_are_capped(folds, schedule):
    """Candidates whose summed rounds are capped by their own step sizes (squared loss,
    steps of different sizes, 32 blocks as 32 streams) take rounds of different lengths —
    with a decaying step, rounds that lengthen within the epoch: they are trained in one grid
    per sequence of round lengths, each still its own fit."""
    from sklearn.preprocessing import StandardScaler

    from dml.model_selection import take_rows

    X, y = make_regression(n_samples=6400, n_features=6, noise=5.0, random_state=2)
    X = StandardScaler().fit_transform(X)
    y = (y - y.mean()) / y.std()
    Xd = da.from_array(X, chunks=(200, -1))
    yd = da.from_array(y, chunks=(200,))
    params = [dict(learning_rate=schedule, max_iter=3, tol=None, stream_steps=None,
                   random_state=1, eta0=e) for e in (1e-3, 1e-2, 3e-2)]
    if not folds:
        _assert_same_models(_stacked(SGDRegressor, params, Xd, yd),
                            _separate(SGDRegressor, params, Xd, yd))
        return
    splits = list(KFold(3, shuffle=True, random_state=0).split(X, y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid = SGDRegressor._fit_stacked([[SGDRegressor(**p) for p in params] for _ in splits],
                                         Xd, yd, train_indices=[tr for tr, _ in splits])
    for (train, _), row in zip(splits, grid):
        _assert_same_models(row, _separate(SGDRegressor, params, take_rows(Xd, train),
                                           take_rows(yd, train)))


def test_stacked_equals_own_fits_when_averaged_rounds_start_as_stream_ranges():
    """Averaged candidates whose first epoch runs as ranges of streams by their own schedules'
    memory (dml.optim.averaged_rounds: alpha 3e-2 here, not 1e-3) are trained in one grid per
    plan, each still its own fit."""
    from dml.optim.averaged_rounds import averaged_limit, limited_shares
    from dml.optim.engine import SGDConfig
    from dml.optim.schedules import Optimal, optimal_t0
    from dml.optim.streams import EqualShares, StreamRanges, make_streams

    X, y = make_classification(n_samples=6000, n_features=8, random_state=3)
    Xd = da.from_array(X, chunks=(250, -1))
    yd = da.from_array(y, chunks=(250,))
    params = [dict(loss="log_loss", alpha=a, max_iter=2, tol=None, stream_steps=20,
                   random_state=1) for a in (1e-3, 3e-2)]
    layout = make_streams([250] * 24, 32, 20)
    plans = []
    for a in (1e-3, 3e-2):
        schedule = Optimal(alpha=a, t0=optimal_t0(a))
        plans.append(limited_shares(EqualShares(4), layout,
                                    averaged_limit(SGDConfig(schedule=schedule)), schedule, 0))
    assert plans[0] == EqualShares(4) and isinstance(plans[1], StreamRanges), plans
    _assert_same_models(_stacked(SGDClassifier, params, Xd, yd),
                        _separate(SGDClassifier, params, Xd, yd))
