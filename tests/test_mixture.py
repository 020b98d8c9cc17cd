"""GaussianMixture: distributed EM equals scikit-learn's from the same initial parameters.

The kernels (log densities, per-block moments and their merge, the M-step) are tested without a
cluster; the estimator on the in-process and the multi-process cluster, on 1, 3, 7 and 64
partitions.
"""
from __future__ import annotations

import re
import warnings

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture as SkGaussianMixture
from sklearn.mixture import _gaussian_mixture as skgm

from dml.mixture import GaussianMixture
from dml.mixture import _gmm_kernels as K

TYPES = list(K.COVARIANCE_TYPES)
TOL = dict(rtol=1e-8, atol=1e-10)


def blobs(n=900, d=3, k=4, seed=0):
    X, y = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=1.5, random_state=seed)
    return X, y


def chunked(X, n_blocks):
    return da.from_array(X, chunks=(-(-len(X) // n_blocks), X.shape[1]))


def start(X, covariance_type, k=4, seed=0):
    """Initial parameters: equal weights, k rows as means, precisions of different scales."""
    rng = np.random.default_rng(seed)
    d = X.shape[1]
    means = X[rng.choice(len(X), k, replace=False)]
    scales = np.linspace(0.5, 2.0, k)
    precisions = {"full": np.stack([np.eye(d) * s for s in scales]),
                  "tied": np.eye(d) * 0.7,
                  "diag": np.outer(scales, np.linspace(1.0, 1.5, d)),
                  "spherical": scales}[covariance_type]
    return dict(weights_init=np.full(k, 1.0 / k), means_init=means, precisions_init=precisions)


FITTED = ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_")


def assert_same_model(ours, theirs, tol=TOL):
    for name in FITTED:
        np.testing.assert_allclose(getattr(ours, name), getattr(theirs, name), err_msg=name,
                                   **tol)
    np.testing.assert_allclose(ours.lower_bound_, theirs.lower_bound_, rtol=1e-10)
    np.testing.assert_allclose(ours.lower_bounds_, theirs.lower_bounds_, rtol=1e-10)
    assert ours.n_iter_ == theirs.n_iter_
    assert ours.converged_ == theirs.converged_


def sk_fit(X, covariance_type, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return SkGaussianMixture(4, covariance_type=covariance_type, **kw).fit(X)


def dml_fit(X, covariance_type, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GaussianMixture(4, covariance_type=covariance_type, **kw).fit(X)


# --------------------------------------------------------------------------------------------
# Kernels, no cluster
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("covariance_type", TYPES)
def test_log_densities_equal_sklearn(covariance_type):
    X, _ = blobs(200)
    p = start(X, covariance_type)
    chol = K.precision_cholesky_from_precisions(p["precisions_init"], covariance_type)
    expected = skgm._compute_precision_cholesky_from_precisions(
        p["precisions_init"], covariance_type, xp=np)
    np.testing.assert_allclose(chol, expected, rtol=1e-14)
    got = K.log_gaussian_prob(X, p["means_init"], chol, covariance_type)
    ref = skgm._estimate_log_gaussian_prob(X, p["means_init"], chol, covariance_type)
    np.testing.assert_allclose(got, ref, rtol=1e-13)


@pytest.mark.parametrize("covariance_type", TYPES)
def test_merged_block_moments_give_sklearns_m_step(covariance_type):
    """Moments of blocks merged in any split equal the moments of all rows, and the M-step on
    them equals scikit-learn's estimate from the same responsibilities."""
    X, _ = blobs(300)
    X = X + 50.0  # away from the origin: the centred scatter must not lose the small spread
    resp = np.random.default_rng(1).dirichlet(np.ones(4), size=len(X))
    whole = K.block_moments(X, resp, covariance_type)
    for cuts in ([0, 300], [0, 1, 150, 150, 299, 300], [0, 17, 64, 200, 300]):
        parts = [[K.block_moments(X[a:b], resp[a:b], covariance_type)]
                 for a, b in zip(cuts[:-1], cuts[1:])]
        merged = K.combine_stats(parts)[0]
        for key in ("n", "s"):
            np.testing.assert_allclose(merged[key], whole[key], rtol=1e-12)
        nk, means, cov = K.m_step(merged, 1e-6, covariance_type)
        sk_nk, sk_means, sk_cov = skgm._estimate_gaussian_parameters(
            X, resp, 1e-6, covariance_type)
        np.testing.assert_allclose(nk, sk_nk, rtol=1e-12)
        np.testing.assert_allclose(means, sk_means, rtol=1e-12)
        # scikit-learn's diag/tied estimates subtract raw squares (≈50² here): agree to its
        # own round-off.
        np.testing.assert_allclose(cov, sk_cov, rtol=1e-9)


def test_random_responsibilities_depend_on_the_row_not_the_block():
    whole = K.random_resp(7, 0, 10_000, 3)
    np.testing.assert_array_equal(K.random_resp(7, 4000, 3000, 3), whole[4000:7000])
    np.testing.assert_array_equal(K.random_resp(7, 4095, 2, 3), whole[4095:4097])
    np.testing.assert_allclose(whole.sum(axis=1), 1.0)
    assert not np.allclose(K.random_resp(8, 0, 10, 3), whole[:10])
    assert K.random_resp(7, 5, 0, 3).shape == (0, 3)


def test_empty_block_returns_zero_moments():
    X = np.zeros((0, 2))
    for ct in TYPES:
        stats = K.em_block(X, None, None, [(np.array([0.5, 0.5]), np.zeros((2, 2)),
                                            K.precision_cholesky_from_precisions(
                                                start(np.ones((4, 2)), ct, k=2)[
                                                    "precisions_init"], ct))], ct)[0]
        assert stats["loglik"] == 0.0 and not stats["n"].any()


# --------------------------------------------------------------------------------------------
# The estimator against scikit-learn
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_blocks", [1, pytest.param(3, marks=pytest.mark.slow),
                                      pytest.param(7, marks=pytest.mark.slow), 64])
@pytest.mark.parametrize("covariance_type", TYPES)
def test_em_equals_sklearn_from_the_same_start(client, covariance_type, n_blocks):
    X, _ = blobs()
    init = start(X, covariance_type)
    sk = sk_fit(X, covariance_type, max_iter=12, tol=0, **init)
    ours = dml_fit(chunked(X, n_blocks), covariance_type, max_iter=12, tol=0, **init)
    assert_same_model(ours, sk)
    assert not ours.converged_ and ours.n_iter_ == 12


@pytest.mark.parametrize("covariance_type", TYPES)
def test_em_converges_like_sklearn(inprocess_client, covariance_type):
    """With the default tol both stop at the same iteration, with the same model."""
    X, _ = blobs(seed=3)
    init = start(X, covariance_type, seed=3)
    sk = sk_fit(X, covariance_type, **init)
    ours = dml_fit(chunked(X, 5), covariance_type, **init)
    assert sk.converged_ and ours.converged_
    assert_same_model(ours, sk)


# "full" in the quick suite; the other covariance types (about 8 s) in the full one.
@pytest.mark.parametrize("covariance_type", [
    t if t == "full" else pytest.param(t, marks=pytest.mark.slow) for t in TYPES])
def test_lower_bound_never_decreases(inprocess_client, covariance_type):
    X, _ = blobs(800, k=5, seed=2)
    # From uniform random responsibilities EM has a long way to go (the bound rises a lot);
    # from k-means it is near the optimum (the last of the 12 steps rise by about 1e-4). 12
    # iterations, not 25: a wrong M-step shows in the first few.
    for init_params in ("kmeans", "random"):
        gm = dml_fit(chunked(X, 6), covariance_type, max_iter=12, tol=0,
                     init_params=init_params, random_state=0)
        lb = gm.lower_bounds_
        assert len(lb) == 12 and gm.lower_bound_ == lb[-1]
        assert np.all(np.diff(lb) >= -1e-10 * np.abs(lb[1:])), np.diff(lb).min()
        assert lb[-1] > lb[0]


@pytest.mark.parametrize("covariance_type", TYPES)
def test_inference_equals_sklearn_with_the_same_parameters(inprocess_client, covariance_type):
    X, _ = blobs(seed=4)
    gm = dml_fit(X, covariance_type, random_state=0)
    sk = SkGaussianMixture(4, covariance_type=covariance_type, random_state=0)
    for name in FITTED:
        setattr(sk, name, getattr(gm, name))
    sk.n_features_in_ = X.shape[1]
    Xd = chunked(X, 4)
    for method in ("predict", "predict_proba", "score_samples"):
        ref = getattr(sk, method)(X)
        np.testing.assert_allclose(getattr(gm, method)(X), ref, rtol=1e-12, err_msg=method)
        lazy = getattr(gm, method)(Xd)
        assert isinstance(lazy, da.Array)
        np.testing.assert_allclose(lazy.compute(), ref, rtol=1e-12, err_msg=method)
    for method in ("score", "bic", "aic"):
        assert getattr(gm, method)(Xd) == pytest.approx(getattr(sk, method)(X), rel=1e-12)
    Xs, ys = gm.sample(50)
    Xr, yr = sk.sample(50)
    np.testing.assert_allclose(Xs, Xr)
    np.testing.assert_array_equal(ys, yr)


# --------------------------------------------------------------------------------------------
# Initialisation, n_init, warm start, determinism
# --------------------------------------------------------------------------------------------

# "kmeans" in the quick suite; the other initialisations (3-6 s each under load) in the full one.
@pytest.mark.parametrize("init_params", ["kmeans"] + [
    pytest.param(i, marks=pytest.mark.slow) for i in ("k-means++", "random", "random_from_data")])
def test_initialisations_find_the_blobs_whatever_the_partitioning(inprocess_client,
                                                                  init_params):
    X, y = blobs(600, seed=5)
    fits = [GaussianMixture(4, init_params=init_params, n_init=2, random_state=0,
                            max_iter=200).fit(chunked(X, b)) for b in (3, 7)]
    for gm in fits:
        assert gm.converged_
    # Every random choice is keyed by the global row index: the partitioning does not matter.
    np.testing.assert_allclose(fits[0].means_, fits[1].means_, rtol=1e-6)
    assert fits[0].n_iter_ == fits[1].n_iter_
    if init_params in ("kmeans", "k-means++"):  # the random starts may end in local optima
        assert adjusted_rand_score(y, fits[0].predict(X)) > 0.9


# The 1-block case in the quick suite (the 8-block one took 7.6 s there).
@pytest.mark.parametrize("n_blocks", [1, pytest.param(8, marks=pytest.mark.slow),
                                      pytest.param(64, marks=pytest.mark.slow),
                                      pytest.param(256, marks=pytest.mark.slow)])
def test_chained_iterations_equal_one_pass_per_iteration(client, n_blocks, monkeypatch,
                                                         capsys):
    """On held blocks the EM iterations run chained on the workers, several per graph
    submission; the model, its history and the verbose messages are those of one pass per
    iteration, including runs that converge in the middle of a chain."""
    from dml.mixture import _em
    from dml.mixture import _gaussian_mixture as G

    X, _ = blobs(1024, k=5, seed=4)
    Xd = chunked(X, n_blocks).persist()
    # Chains of 4: the runs (from different starts) converge in the middle of some chain.
    monkeypatch.setattr(_em, "ITERS_PER_SUBMIT", 4)
    chains = []
    real_chain_steps = _em.chain_steps

    def counting(*args, **kwargs):
        chains.append(args[5])  # n_steps
        return real_chain_steps(*args, **kwargs)

    monkeypatch.setattr(_em, "chain_steps", counting)
    # Runs stopping after 5, 8 and 11 iterations (two of them inside a chain of 4): a short
    # per-pass reference (11 passes over the blocks, not 32 with random_state=2, tol=1e-4).
    kw = dict(n_init=3, init_params="random_from_data", random_state=7, tol=1e-3, max_iter=40,
              verbose=2, verbose_interval=1)
    chained = dml_fit(Xd, "full", **kw)
    chained_log = capsys.readouterr().out
    monkeypatch.setattr(G, "run_chained", _em.run_per_pass)
    ref = dml_fit(Xd, "full", **kw)
    ref_log = capsys.readouterr().out
    for name in FITTED + ("lower_bounds_",):
        np.testing.assert_array_equal(getattr(chained, name), getattr(ref, name), err_msg=name)
    assert (chained.n_iter_, chained.converged_) == (ref.n_iter_, ref.converged_)
    assert chained_log == ref_log
    # The runs stopped at different iterations, the last one at ``slowest``: ceil(slowest / 4)
    # submissions, not one per iteration.
    stops = {}
    for it in re.findall(r"Iteration (\d+)\t", ref_log):
        stops[int(it)] = stops.get(int(it), 0) + 1
    slowest = max(stops)
    assert 8 < slowest < 40 and len(set(stops.values())) > 1, stops
    assert chains == [4] * (-(-slowest // 4)), (chains, slowest)


@pytest.mark.parametrize("init_params", ["kmeans", "random_from_data"])
def test_same_model_on_every_scheduler(client, init_params):
    """The fit depends on data, partitioning and seed only, never on the cluster."""
    X, _ = blobs(600)
    Xd = chunked(X, 5)
    kw = dict(init_params=init_params, n_init=2, random_state=3, max_iter=6)
    gm = dml_fit(Xd, "full", **kw)
    with dask.config.set(scheduler="sync"):
        ref = dml_fit(Xd, "full", **kw)
    for name in FITTED:
        np.testing.assert_array_equal(getattr(gm, name), getattr(ref, name))


def test_n_init_keeps_the_best_run(inprocess_client):
    X, _ = blobs(600, k=6, seed=6)
    one = dml_fit(X, "full", init_params="random_from_data", random_state=1, max_iter=15,
                  n_init=1)
    many = dml_fit(X, "full", init_params="random_from_data", random_state=1, max_iter=15,
                   n_init=3)
    # The first of the four runs is the single run: the best can only be as good or better.
    assert many.lower_bound_ >= one.lower_bound_


def test_warm_start_continues_where_it_stopped(inprocess_client):
    X, _ = blobs(seed=7)
    init = start(X, "diag")
    full = dml_fit(X, "diag", max_iter=10, tol=0, **init)
    warm = GaussianMixture(4, covariance_type="diag", max_iter=4, tol=0, warm_start=True,
                           **init)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warm.fit(X)
        warm.set_params(max_iter=6).fit(X)
    np.testing.assert_allclose(warm.means_, full.means_, rtol=1e-12)
    np.testing.assert_allclose(warm.covariances_, full.covariances_, rtol=1e-12)
    assert warm.n_iter_ == 6


def test_max_iter_zero_keeps_the_initial_parameters(inprocess_client):
    X, _ = blobs()
    init = start(X, "full")
    gm = GaussianMixture(4, max_iter=0, **init).fit(X)
    np.testing.assert_allclose(gm.precisions_, init["precisions_init"], rtol=1e-12)
    np.testing.assert_allclose(gm.covariances_, np.linalg.inv(init["precisions_init"]),
                               rtol=1e-12)
    assert gm.n_iter_ == 0 and not gm.converged_ and gm.lower_bound_ == -np.inf


def test_dataframe_input_with_target_column_and_float32(inprocess_client):
    X, _ = blobs(400)
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(label=0)
    ddf = dd.from_pandas(frame, npartitions=3)
    init = start(X, "spherical")
    gm = GaussianMixture(4, covariance_type="spherical", **init).fit(ddf, "label")
    ref = GaussianMixture(4, covariance_type="spherical", **init).fit(X.astype(np.float32))
    assert list(gm.feature_names_in_) == ["a", "b", "c"]
    assert gm.means_.dtype == np.float64
    np.testing.assert_allclose(gm.means_, ref.means_, rtol=1e-5)
    labels = GaussianMixture(4, covariance_type="spherical", **init).fit_predict(frame, "label")
    np.testing.assert_array_equal(labels, gm.predict(frame[["a", "b", "c"]]))


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

def test_bad_initial_parameters_and_data(inprocess_client):
    X, _ = blobs(100, d=2)
    with pytest.raises(ValueError, match="Expected n_samples >= n_components"):
        GaussianMixture(5).fit(X[:4])
    with pytest.raises(ValueError, match="a minimum of 2 is required"):
        GaussianMixture(1).fit(X[:1])
    with pytest.raises(ValueError, match=r"'weights' should have the shape of \(2,\)"):
        GaussianMixture(2, weights_init=[0.2, 0.3, 0.5]).fit(X)
    with pytest.raises(ValueError, match="'weights' should be normalized"):
        GaussianMixture(2, weights_init=[0.2, 0.3]).fit(X)
    with pytest.raises(ValueError, match="'weights' should be in the range"):
        GaussianMixture(2, weights_init=[-0.5, 1.5]).fit(X)
    with pytest.raises(ValueError, match=r"'means' should have the shape of \(2, 2\)"):
        GaussianMixture(2, means_init=np.zeros((2, 3))).fit(X)
    with pytest.raises(ValueError, match="'full precision' should be symmetric, positive"):
        GaussianMixture(2, precisions_init=np.stack([np.eye(2), -np.eye(2)])).fit(X)
    with pytest.raises(ValueError, match="'diag precision' should be positive"):
        GaussianMixture(2, covariance_type="diag", precisions_init=np.zeros((2, 2))).fit(X)
    with pytest.raises(ValueError, match="'tied precision' should have the shape"):
        GaussianMixture(2, covariance_type="tied", precisions_init=np.eye(3)).fit(X)
    with pytest.raises(NotFittedError):
        GaussianMixture(2).predict(X)


def test_collapsed_component_says_what_to_do(inprocess_client):
    X = np.vstack([np.zeros((5, 2)), np.random.default_rng(0).normal(size=(20, 2))])
    with pytest.raises(ValueError, match="ill-defined empirical covariance.*reg_covar"):
        GaussianMixture(2, reg_covar=0, means_init=[[0.0, 0.0], [1.0, 1.0]],
                        weights_init=[0.5, 0.5], precisions_init=np.stack([np.eye(2) * 1e8,
                                                                            np.eye(2)]),
                        max_iter=5).fit(X)


def test_not_converged_warns(inprocess_client):
    X, _ = blobs()
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        GaussianMixture(4, max_iter=2, random_state=0).fit(X)


# --------------------------------------------------------------------------------------------
# The `dml` command
# --------------------------------------------------------------------------------------------

def test_job_file_trains_a_gaussian_mixture(tmp_path, capsys, inprocess_client):
    """``model: {name: gaussian_mixture}`` in a job file: trained on the current cluster,
    scored against the generating labels and saved as a model file that loads."""
    import json

    import dml
    from dml import cli

    job = tmp_path / "gmm.yaml"
    job.write_text(
        "data: {generator: make_blobs, params: {n_samples: 4000, n_features: 3, centers: 3, "
        "chunks: 1000, random_state: 0}}\n"
        "target: y\n"
        "model: {name: gaussian_mixture, params: {n_components: 3, random_state: 0}}\n"
        "metrics: [ari]\n"
        "output: out\n")
    code = cli.main(["train", str(job)])
    out = capsys.readouterr()
    assert code == 0, out.err
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["metrics"]["ari"] > 0.9, metrics
    model = dml.load(tmp_path / "out" / "model.dml")
    assert type(model[-1] if hasattr(model, "steps") else model).__name__ == "GaussianMixture"
