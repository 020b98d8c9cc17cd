"""RBFSampler and Nystroem: scikit-learn's feature maps, fitted on the client, applied per block.

And the point of them: random features plus a linear SVM trained on Dask blocks separate a
problem that no linear model can.
"""
from __future__ import annotations

import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn import kernel_approximation as ska
from sklearn.datasets import make_circles, make_moons
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.pipeline import make_pipeline

from dml.kernel_approximation import Nystroem, RBFSampler
from dml.linear_model import LinearSVC, SGDClassifier

KERNELS = [("rbf", dict(gamma=0.2)), ("laplacian", dict(gamma=0.3)),
           ("poly", dict(degree=3, coef0=1.0, gamma=0.1)), ("sigmoid", dict(gamma=0.05, coef0=0.2)),
           ("linear", {}), ("cosine", {})]


def data(n=400, d=5, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def chunked(X, n_blocks):
    return da.from_array(X, chunks=(-(-len(X) // n_blocks), X.shape[1]))


# --------------------------------------------------------------------------------------------
# RBFSampler
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [0.5, "scale"])
@pytest.mark.parametrize("n_blocks", [1, 3, 7, 64])
def test_rbf_sampler_equals_sklearn(client, gamma, n_blocks):
    X = data() * 3.0 + 1.0
    sk = ska.RBFSampler(gamma=gamma, n_components=60, random_state=4).fit(X)
    ours = RBFSampler(gamma=gamma, n_components=60, random_state=4).fit(chunked(X, n_blocks))
    # The same generator calls in the same order: the same random weights.
    np.testing.assert_allclose(ours.random_weights_, sk.random_weights_, rtol=1e-12)
    np.testing.assert_array_equal(ours.random_offset_, sk.random_offset_)
    Z = ours.transform(chunked(X, n_blocks))
    assert isinstance(Z, da.Array) and Z.shape == (len(X), 60)
    np.testing.assert_allclose(Z.compute(), sk.transform(X), rtol=1e-12, atol=1e-14)


def test_rbf_sampler_on_local_data_dtypes_and_seeds():
    X = data(50)
    sk = ska.RBFSampler(n_components=20, random_state=np.random.RandomState(1)).fit(X)
    ours = RBFSampler(n_components=20, random_state=np.random.RandomState(1)).fit(X)
    np.testing.assert_array_equal(ours.transform(X), sk.transform(X))
    X32 = X.astype(np.float32)
    ours32 = RBFSampler(n_components=20, random_state=1).fit(X32)
    assert ours32.random_weights_.dtype == np.float32 and ours32.transform(X32).dtype == np.float32
    np.testing.assert_allclose(ours32.transform(X32),
                               ska.RBFSampler(n_components=20, random_state=1).fit(X32)
                               .transform(X32), rtol=1e-6, atol=1e-6)
    # A NumPy Generator is accepted (and seeds reproducibly).
    a = RBFSampler(n_components=5, random_state=np.random.default_rng(3)).fit(X)
    b = RBFSampler(n_components=5, random_state=np.random.default_rng(3)).fit(X)
    np.testing.assert_array_equal(a.random_weights_, b.random_weights_)
    assert list(a.get_feature_names_out()) == [f"rbfsampler{i}" for i in range(5)]


def test_rbf_sampler_approximates_the_kernel():
    X = data(200, d=3)
    Z = RBFSampler(gamma=0.3, n_components=4000, random_state=0).fit_transform(X)
    exact = pairwise_kernels(X, metric="rbf", gamma=0.3)
    assert np.abs(Z @ Z.T - exact).mean() < 0.02


# --------------------------------------------------------------------------------------------
# Nystroem
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel, params", KERNELS)
def test_nystroem_equals_sklearn_on_local_data(kernel, params):
    """NumPy input: the same rows as scikit-learn picks, the same normalisation and map."""
    X = np.abs(data()) if kernel == "chi2" else data()
    sk = ska.Nystroem(kernel, n_components=40, random_state=2, **params).fit(X)
    ours = Nystroem(kernel, n_components=40, random_state=2, **params).fit(X)
    np.testing.assert_array_equal(ours.component_indices_, sk.component_indices_)
    np.testing.assert_array_equal(ours.components_, sk.components_)
    np.testing.assert_allclose(ours.normalization_, sk.normalization_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.transform(X), sk.transform(X), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("n_blocks", [1, 3, 7, 64])
@pytest.mark.parametrize("kernel, params", KERNELS[:3])
def test_nystroem_on_dask_equals_sklearn_with_the_same_components(client, kernel, params,
                                                                  n_blocks):
    """Dask input: rows sampled by global index (the same for every partitioning); the map
    from those rows equals scikit-learn's map from the same rows."""
    X = data()
    ours = Nystroem(kernel, n_components=30, random_state=5, **params).fit(chunked(X, n_blocks))
    ref = Nystroem(kernel, n_components=30, random_state=5, **params).fit(chunked(X, 2))
    np.testing.assert_array_equal(ours.component_indices_, ref.component_indices_)
    np.testing.assert_array_equal(ours.components_, X[ours.component_indices_])
    assert len(set(ours.component_indices_)) == 30
    # scikit-learn fitted on exactly the sampled rows (it permutes them: compare the kernel
    # approximation Z Zᵀ, which does not depend on the order of the components).
    sk = ska.Nystroem(kernel, n_components=30, random_state=0, **params).fit(ours.components_)
    Z = ours.transform(chunked(X, n_blocks))
    assert isinstance(Z, da.Array)
    Z = Z.compute()
    Zs = sk.transform(X)
    np.testing.assert_allclose(Z @ Z.T, Zs @ Zs.T, rtol=1e-7, atol=1e-8)


def test_nystroem_details():
    X = data(30)
    with pytest.warns(UserWarning, match="n_components > n_samples"):
        ny = Nystroem(n_components=50, random_state=0).fit(X)
    assert ny.normalization_.shape == (30, 30) and ny.transform(X).shape == (30, 30)
    with pytest.raises(ValueError, match="Don't pass gamma, coef0 or degree"):
        Nystroem(kernel=lambda a, b: float(a @ b), gamma=1.0).fit(X)
    ny = Nystroem(kernel=_dot, n_components=5, random_state=0).fit(X)
    np.testing.assert_allclose(
        ny.transform(X), ska.Nystroem(_dot, n_components=5, random_state=0).fit(X).transform(X),
        rtol=1e-9, atol=1e-12)
    # float32 input: computed in float64 (a nearly singular kernel matrix is inverted).
    assert Nystroem(n_components=5, random_state=0).fit(X.astype(np.float32)).transform(
        X.astype(np.float32)).dtype == np.float64
    frame = pd.DataFrame(X, columns=list("abcde"))
    ny = Nystroem(n_components=4, random_state=0).fit(dd.from_pandas(frame, npartitions=3))
    assert list(ny.feature_names_in_) == list("abcde")
    with pytest.raises(ValueError, match="feature names"):
        ny.transform(frame.rename(columns={"e": "f"}))


def _dot(a, b):
    return float(a @ b)


# --------------------------------------------------------------------------------------------
# A kernel SVM at scale: random features + a linear model on Dask blocks
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("problem", ["circles", "moons"])
def test_random_features_make_a_linear_svm_nonlinear(client, problem):
    # 2,000 rows in 4 blocks (was 4,000): the scores below are the same to 0.01 (linear /
    # random features / Nystroem: circles 0.50 / 0.996 / 0.995, moons 0.87 / 0.98 / 0.97).
    if problem == "circles":
        X, y = make_circles(2000, noise=0.1, factor=0.5, random_state=0)
    else:
        X, y = make_moons(2000, noise=0.2, random_state=0)
    Xd, yd = chunked(X, 4), da.from_array(y, chunks=500)
    linear = LinearSVC().fit(Xd, yd).score(Xd, yd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rff = make_pipeline(RBFSampler(gamma=2.0, n_components=150, random_state=0),
                            LinearSVC()).fit(Xd, yd).score(Xd, yd)
        nys = make_pipeline(Nystroem(gamma=2.0, n_components=80, random_state=0),
                            SGDClassifier(loss="hinge", max_iter=10, random_state=0)
                            ).fit(Xd, yd).score(Xd, yd)
    assert rff > 0.95 and nys > 0.95
    # No line separates concentric circles (about chance); the moons are half separable.
    gap = 0.4 if problem == "circles" else 0.08
    assert rff - linear > gap and nys - linear > gap, (linear, rff, nys)
