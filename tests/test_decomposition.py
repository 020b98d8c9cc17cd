"""dml.decomposition: PCA, TruncatedSVD and IncrementalPCA against scikit-learn.

The block kernels are checked on plain arrays; the estimators on a real cluster (in-process and
multi-process through the ``client`` fixture), on 1, 3, 7 and 64 blocks.
"""
from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn import decomposition as skd
from sklearn.utils._chunking import gen_batches
from sklearn.utils.extmath import svd_flip

from dml._blocks import as_blocks
from dml.compose import ColumnTransformer
from dml.decomposition import PCA, IncrementalPCA, TruncatedSVD
from dml.decomposition._pca_kernels import (batch_bounds, gram_product_kernel,
                                            incremental_update, merge_project, merge_qr,
                                            merge_scatter, project_kernel, qr_kernel,
                                            scatter_kernel, svd_flip_v)

TOL = 1e-8


def _data(n=420, d=7, seed=0, shift=3.0):
    """Rows with a well separated spectrum (distinct variances), away from the origin."""
    rng = np.random.default_rng(seed)
    scales = np.geomspace(10.0, 0.3, d)
    basis = np.linalg.qr(rng.normal(size=(d, d)))[0]
    return (rng.normal(size=(n, d)) * scales) @ basis.T + shift


def _chunked(X, n_blocks):
    return da.from_array(X, chunks=(-(-len(X) // n_blocks), X.shape[1]))


def _assert_same_pca(got, ref, tol=TOL):
    assert got.n_components_ == ref.n_components_
    np.testing.assert_allclose(got.components_, ref.components_, atol=tol, rtol=0)
    for attr in ("explained_variance_", "explained_variance_ratio_", "singular_values_",
                 "mean_"):
        np.testing.assert_allclose(getattr(got, attr), getattr(ref, attr), rtol=tol,
                                   atol=tol, err_msg=attr)
    np.testing.assert_allclose(got.noise_variance_, ref.noise_variance_, rtol=tol, atol=tol)
    assert got.n_samples_ == ref.n_samples_


# --------------------------------------------------------------------------------------------
# kernels (no cluster)
# --------------------------------------------------------------------------------------------

SPLITS = [[0, 420], [0, 1, 5, 5, 200, 420], [0, 60, 61, 300, 419, 420]]


@pytest.mark.parametrize("cuts", SPLITS)
def test_scatter_and_qr_merges_equal_the_whole(cuts):
    X = _data(shift=1e6)  # far from the origin: the merges must not lose the variance
    Xc = X - X.mean(axis=0)
    S_ref = Xc.T @ Xc
    parts = [(X[a:b], None, None) for a, b in zip(cuts[:-1], cuts[1:])]
    n, m, S = merge_scatter([scatter_kernel(*p) for p in parts])
    assert n == len(X)
    np.testing.assert_allclose(m, X.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(S, S_ref, rtol=1e-9, atol=1e-9 * np.abs(S_ref).max())
    n, m, R = merge_qr([qr_kernel(*p) for p in parts])
    np.testing.assert_allclose(R.T @ R, S_ref, rtol=1e-9, atol=1e-9 * np.abs(S_ref).max())


def test_project_merge_equals_scatter_times_omega():
    X = _data(shift=50.0)
    omega = np.random.default_rng(1).normal(size=(X.shape[1], 3))
    parts = [project_kernel(X[a:b], None, None, omega) for a, b in
             zip(SPLITS[2][:-1], SPLITS[2][1:])]
    n, m, p, M, ss = merge_project(parts)
    Xc = X - X.mean(axis=0)
    np.testing.assert_allclose(M, Xc.T @ (Xc @ omega), rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(p, omega.T @ X.mean(axis=0), rtol=1e-12)
    assert ss == pytest.approx(float((Xc ** 2).sum()), rel=1e-12)
    # The power passes' kernel, with the mean known: the same product, summed over blocks.
    total = sum(gram_product_kernel(X[a:b], None, None, omega, X.mean(axis=0))
                for a, b in zip(SPLITS[2][:-1], SPLITS[2][1:]))
    np.testing.assert_allclose(total, Xc.T @ (Xc @ omega), rtol=1e-10, atol=1e-8)
    assert gram_product_kernel(X[:0], None, None, omega, X.mean(axis=0)).shape == (7, 3)


def test_sign_rule_and_batches_are_scikit_learns():
    vt = np.random.default_rng(2).normal(size=(5, 6))
    np.testing.assert_array_equal(svd_flip_v(vt), svd_flip(None, vt.copy(),
                                                           u_based_decision=False)[1])
    for n, size, smallest in [(7, 3, 2), (7, 3, 0), (100, 30, 5), (5, 10, 2), (61, 20, 2)]:
        expected = [(s.start, s.stop) for s in gen_batches(n, size, min_batch_size=smallest)]
        assert batch_bounds(n, size, smallest) == expected


def test_incremental_update_is_scikit_learns_partial_fit():
    X = _data(n=90)
    ref = skd.IncrementalPCA(n_components=3)
    state = None
    for a, b in [(0, 30), (30, 61), (61, 90)]:
        ref.partial_fit(X[a:b])
        state = incremental_update(state, X[a:b], 3)
    np.testing.assert_allclose(state["components"], ref.components_, atol=1e-12)
    np.testing.assert_allclose(state["explained_variance"], ref.explained_variance_, rtol=1e-12)
    assert state["noise_variance"] == pytest.approx(ref.noise_variance_, rel=1e-12)


# --------------------------------------------------------------------------------------------
# PCA, exact solvers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("solver", ["covariance_eigh", "tsqr"])
@pytest.mark.parametrize("n_blocks", [1, 3, 7, 64])
def test_exact_pca_equals_scikit_learn_full_svd(client, solver, n_blocks):
    X = _data(n=640)
    ref = skd.PCA(svd_solver="full").fit(X)
    got = PCA(svd_solver=solver).fit(_chunked(X, n_blocks))
    assert got._fit_svd_solver == solver
    _assert_same_pca(got, ref)
    out = got.transform(_chunked(X, n_blocks))
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), ref.transform(X), atol=TOL)


@pytest.mark.parametrize("n_components", [None, 3, 2, 0.95, "mle", 0])
@pytest.mark.parametrize("solver", ["covariance_eigh", "tsqr"])
def test_n_components_rules(inprocess_client, n_components, solver):
    X = _data(n=300, d=6, seed=3)
    ref = skd.PCA(n_components=n_components, svd_solver="full").fit(X)
    got = PCA(n_components=n_components, svd_solver=solver).fit(_chunked(X, 3))
    _assert_same_pca(got, ref)


def test_wide_data_and_auto_solver(inprocess_client):
    """Fewer rows than features: min(n, d) components, tsqr's R is n×d."""
    X = _data(n=12, d=30, seed=4)
    for solver in ("tsqr", "covariance_eigh", "auto", "full"):
        ref = skd.PCA(svd_solver="full").fit(X)
        got = PCA(svd_solver=solver).fit(_chunked(X, 3))
        # Only the 11 non-zero variances are well defined (the 12th is round-off).
        k = 11
        np.testing.assert_allclose(np.abs(got.components_[:k]), np.abs(ref.components_[:k]),
                                   atol=1e-7)
        np.testing.assert_allclose(got.explained_variance_[:k], ref.explained_variance_[:k],
                                   rtol=1e-8)
    assert PCA().fit(_chunked(X, 3))._fit_svd_solver == "tsqr"
    assert PCA().fit(_chunked(_data(n=200, d=5), 3))._fit_svd_solver == "covariance_eigh"


def test_whiten_inverse_transform_and_likelihood(inprocess_client):
    X = _data(n=500, d=6, seed=5)
    ref = skd.PCA(n_components=3, whiten=True, svd_solver="full").fit(X)
    got = PCA(n_components=3, whiten=True).fit(_chunked(X, 7))
    Z = got.transform(X)
    assert isinstance(Z, np.ndarray)
    np.testing.assert_allclose(Z, ref.transform(X), atol=TOL)
    np.testing.assert_allclose(Z.std(axis=0, ddof=1), 1.0, rtol=1e-10)
    back = got.inverse_transform(_chunked(Z, 7))
    assert isinstance(back, da.Array)
    np.testing.assert_allclose(back.compute(), ref.inverse_transform(ref.transform(X)), atol=TOL)
    np.testing.assert_allclose(got.get_covariance(), ref.get_covariance(), atol=TOL)
    np.testing.assert_allclose(got.score_samples(_chunked(X, 7)).compute(),
                               ref.score_samples(X), rtol=1e-9)
    assert got.score(X) == pytest.approx(ref.score(X), rel=1e-10)
    full = PCA().fit(X)  # all components kept: no noise, inverse is exact
    np.testing.assert_allclose(full.inverse_transform(full.transform(X)), X, atol=1e-9)


def test_fit_transform_dataframes_and_float32(inprocess_client):
    X = _data(n=200, d=4, seed=6)
    frame = pd.DataFrame(X, columns=list("abcd"))
    got = PCA(2).fit_transform(dd.from_pandas(frame, npartitions=3))
    assert isinstance(got, da.Array)
    np.testing.assert_allclose(got.compute(), skd.PCA(2).fit_transform(X), atol=TOL)
    pca = PCA(2).fit(frame)
    assert list(pca.feature_names_in_) == list("abcd")
    assert list(pca.get_feature_names_out()) == ["pca0", "pca1"]
    p32 = PCA(2).fit(X.astype(np.float32))
    assert p32.components_.dtype == np.float32
    assert p32.transform(X.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(p32.components_, pca.components_, atol=1e-5)


def test_pca_inside_a_column_transformer(inprocess_client):
    X = _data(n=240, d=4, seed=7)
    frame = pd.DataFrame(X, columns=list("abcd"))
    ct = ColumnTransformer([("pca", PCA(2), ["a", "b", "c"])], remainder="passthrough")
    out = ct.fit(dd.from_pandas(frame, npartitions=4)).transform(frame)
    np.testing.assert_allclose(out[:, :2], skd.PCA(2).fit_transform(X[:, :3]), atol=TOL)
    np.testing.assert_allclose(out[:, 2], X[:, 3])
    with pytest.raises(ValueError, match="single pass"):
        ColumnTransformer([("pca", PCA(2, svd_solver="randomized"), ["a", "b"])]).fit(frame)


# --------------------------------------------------------------------------------------------
# PCA, randomized
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_blocks", [1, 7, 64])
def test_randomized_pca_is_close_to_exact(client, n_blocks):
    """Stated tolerance: with the default power passes, the kept singular values within 1e-6
    (relative) of the exact ones and the components within 1e-4, on a spectrum whose kept
    values are separated from the rest."""
    rng = np.random.default_rng(8)
    n, d = 640, 40
    scales = np.r_[np.geomspace(20, 5, 5), np.full(d - 5, 0.5)]
    X = rng.normal(size=(n, d)) * scales @ np.linalg.qr(rng.normal(size=(d, d)))[0].T
    exact = skd.PCA(5, svd_solver="full").fit(X)
    got = PCA(5, svd_solver="randomized", random_state=0).fit(_chunked(X, n_blocks))
    np.testing.assert_allclose(got.singular_values_, exact.singular_values_, rtol=1e-6)
    np.testing.assert_allclose(got.components_, exact.components_, atol=1e-4)
    np.testing.assert_allclose(got.explained_variance_ratio_, exact.explained_variance_ratio_,
                               rtol=1e-6)
    assert got.noise_variance_ == pytest.approx(exact.noise_variance_, rel=1e-6)
    # The test matrix depends on the seed only, not on the partitioning.
    other = PCA(5, svd_solver="randomized", random_state=0).fit(_chunked(X, 3))
    np.testing.assert_allclose(got.components_, other.components_, atol=1e-10)


def test_randomized_without_power_passes_is_rough_but_valid(inprocess_client):
    X = _data(n=300, d=20, seed=9)
    exact = skd.PCA(3, svd_solver="full").fit(X)
    got = PCA(3, svd_solver="randomized", iterated_power=0, n_oversamples=2,
              random_state=1).fit(_chunked(X, 3))
    # A Rayleigh-Ritz estimate never exceeds the exact singular value.
    assert np.all(got.singular_values_ <= exact.singular_values_ * (1 + 1e-12))
    np.testing.assert_allclose(got.components_ @ got.components_.T, np.eye(3), atol=1e-12)


# --------------------------------------------------------------------------------------------
# TruncatedSVD
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_blocks", [1, 3, 7, 64])
def test_truncated_svd_exact_equals_scikit_learn(client, n_blocks):
    X = _data(n=640, d=6, seed=10, shift=1.0)
    ref = skd.TruncatedSVD(3, algorithm="arpack", random_state=0).fit(X)
    got = TruncatedSVD(3, algorithm="gram_eigh").fit(_chunked(X, n_blocks))
    np.testing.assert_allclose(got.components_, ref.components_, atol=TOL)
    for attr in ("singular_values_", "explained_variance_", "explained_variance_ratio_"):
        np.testing.assert_allclose(getattr(got, attr), getattr(ref, attr), rtol=TOL,
                                   err_msg=attr)
    out = got.transform(_chunked(X, n_blocks))
    np.testing.assert_allclose(out.compute(), ref.transform(X), atol=TOL)
    np.testing.assert_allclose(got.inverse_transform(ref.transform(X)),
                               ref.inverse_transform(ref.transform(X)), atol=TOL)


def test_truncated_svd_randomized(inprocess_client):
    rng = np.random.default_rng(11)
    scales = np.r_[20.0, 15.0, 10.0, 7.0, np.full(26, 1.0)]
    X = rng.normal(size=(500, 30)) * scales + 0.5
    exact = skd.TruncatedSVD(4, algorithm="arpack", random_state=0).fit(X)
    got = TruncatedSVD(4, random_state=0).fit(_chunked(X, 7))
    np.testing.assert_allclose(got.singular_values_, exact.singular_values_, rtol=1e-6)
    np.testing.assert_allclose(got.components_, exact.components_, atol=1e-4)
    np.testing.assert_allclose(got.explained_variance_ratio_, exact.explained_variance_ratio_,
                               rtol=1e-4)


# --------------------------------------------------------------------------------------------
# IncrementalPCA
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_blocks", [1, 3, 7])
def test_incremental_pca_equals_scikit_learn_with_the_same_batches(client, n_blocks):
    X = _data(n=420, d=6, seed=12)
    ref = skd.IncrementalPCA(n_components=3, batch_size=30).fit(X)
    # Blocks of a multiple of the batch size: the batches are scikit-learn's.
    Xd = da.from_array(X, chunks=(30 * (-(-14 // n_blocks)), 6))
    got = IncrementalPCA(n_components=3, batch_size=30).fit(Xd)
    for attr in ("components_", "explained_variance_", "explained_variance_ratio_",
                 "singular_values_", "mean_", "var_"):
        np.testing.assert_allclose(getattr(got, attr), getattr(ref, attr), atol=TOL, rtol=TOL,
                                   err_msg=attr)
    assert got.noise_variance_ == pytest.approx(ref.noise_variance_, rel=TOL)
    assert got.n_samples_seen_ == ref.n_samples_seen_ == 420
    np.testing.assert_allclose(got.transform(Xd).compute(), ref.transform(X), atol=TOL)


def test_incremental_pca_local_input_and_partial_fit(inprocess_client):
    X = _data(n=203, d=5, seed=13)
    for kw in ({"n_components": 2}, {"n_components": 3, "batch_size": 50, "whiten": True}, {}):
        ref = skd.IncrementalPCA(**kw).fit(X)
        got = IncrementalPCA(**kw).fit(X)
        np.testing.assert_allclose(got.components_, ref.components_, atol=TOL)
        np.testing.assert_allclose(got.transform(X), ref.transform(X), atol=TOL)
        assert got.batch_size_ == ref.batch_size_
    ref, got = skd.IncrementalPCA(2), IncrementalPCA(2)
    for a, b in [(0, 50), (50, 120), (120, 203)]:
        ref.partial_fit(X[a:b])
        got.partial_fit(X[a:b])
    np.testing.assert_allclose(got.components_, ref.components_, atol=TOL)
    # Dask input to partial_fit: one batch per block.
    dask_got = IncrementalPCA(2).partial_fit(da.from_array(X, chunks=((50, 70, 83), 5)))
    np.testing.assert_allclose(dask_got.components_, ref.components_, atol=TOL)


# --------------------------------------------------------------------------------------------
# bad input and the shared fold
# --------------------------------------------------------------------------------------------

def test_bad_input_messages(inprocess_client):
    X = _data(n=20, d=4)
    with pytest.raises(ValueError, match=r"n_components=5 must be between 0 and min\(n_samples, "
                                         r"n_features\)=4"):
        PCA(5).fit(_chunked(X, 3))
    with pytest.raises(ValueError, match="n_components=5 must be between 1"):
        PCA(5, svd_solver="randomized").fit(X)
    with pytest.raises(ValueError, match="cannot be a string or a fraction"):
        PCA(0.5, svd_solver="randomized").fit(X)
    with pytest.raises(ValueError, match="n_samples=1, but at least 2 rows"):
        PCA().fit(_chunked(X[:1], 1))
    with pytest.raises(ValueError, match="'mle' is only supported if n_samples >= n_features"):
        PCA("mle").fit(X[:3])
    with pytest.raises(ValueError, match="n_components=5 must be <= n_features=4"):
        TruncatedSVD(5).fit(X)
    with pytest.raises(ValueError, match="must be less or equal to the batch number of samples"):
        IncrementalPCA(3).fit(da.from_array(X, chunks=2))
    bad = X.copy()
    bad[3, 1] = np.nan
    for est in (PCA(), TruncatedSVD(), IncrementalPCA()):
        with pytest.raises(ValueError, match="NaN"):
            est.fit(_chunked(bad, 3))


def test_fold_visits_blocks_in_row_order(inprocess_client):
    X = np.arange(14.0).reshape(7, 2)
    blocks = as_blocks(da.from_array(X, chunks=((1, 2, 0, 4), 2)))
    order = blocks.fold(lambda s, x, y, w: s + [x[:, 0].tolist()], [])
    assert order == [[0.0], [2.0, 4.0], [], [6.0, 8.0, 10.0, 12.0]]


def test_kernels_take_sparse_blocks():
    """The sparse branch of the kernels (for when the block core accepts sparse blocks)."""
    import scipy.sparse as sp

    X = sp.random(60, 6, density=0.4, format="csr", random_state=0)
    dense = X.toarray()
    omega = np.random.default_rng(3).normal(size=(6, 2))
    for kernel, args in ((scatter_kernel, ()), (project_kernel, (omega,))):
        a = kernel(X, None, None, *args)
        b = kernel(dense, None, None, *args)
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, atol=1e-12)
    np.testing.assert_allclose(qr_kernel(X)[2].T @ qr_kernel(X)[2], scatter_kernel(dense)[2],
                               atol=1e-12)


def test_pca_as_a_job_file_preprocessing_step(tmp_path, capsys, inprocess_client):
    """`preprocessing: [{pca: ...}]` in a job file: validated, fitted in the column
    transformer's one pass, saved in the model file."""
    import dml
    from dml import cli

    job = tmp_path / "job.yaml"
    job.write_text(
        "data: {generator: make_classification, params: {n_samples: 2000, n_features: 8, "
        "chunks: 500, random_state: 0}}\n"
        "target: y\n"
        "preprocessing:\n  - pca: {params: {n_components: 3}}\n"
        "model: {name: logistic_regression, params: {max_iter: 3}}\n"
        "split: {test_size: 0.25, random_state: 0}\n"
        "metrics: [accuracy]\noutput: out\n")
    assert cli.main(["validate", str(job)]) == 0
    assert cli.main(["train", str(job)]) == 0, capsys.readouterr().err
    model = dml.load(tmp_path / "out" / "model.dml")
    pca = model.steps[0][1].transformers_[0][1]
    assert isinstance(pca, PCA) and pca.components_.shape == (3, 8)
