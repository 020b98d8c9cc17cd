"""Gaussian-mixture workload ``gmm`` (issue 19): 10 EM iterations, 8 full-covariance components.

Data: ``make_blobs(n_samples=1_000_000, n_features=20, centers=8, cluster_std=2.0,
random_state=0)`` for the fit; 100,000 held-out rows around the same centres (another seed) for
the quality column. dml and scikit-learn start from the same initial parameters (equal weights,
8 training rows drawn with numpy seed 0 as means, identity precisions) and run exactly 10 EM
iterations (``tol=0``), so they compute the same model and the fit time over 10 is the time per
EM step. Spark MLlib's Python API cannot start from given parameters: it runs its own random
initialisation (noted). dask-ml has no Gaussian mixture.

Quality: mean held-out log-likelihood of the fitted mixture, computed the same way for everyone
(scikit-learn's ``score`` with the fitted weights, means and covariances).
"""
from __future__ import annotations

import numpy as np

from benchmarks.registry import Arrays, Implementation, Metric, Workload, register, unavailable

N_SAMPLES = 1_000_000
N_TEST = 100_000
N_FEATURES = 20
N_COMPONENTS = 8
N_ITER = 10


def _rows(scale: float, n: int) -> int:
    return max(200, int(round(n * scale)))


def blobs(scale: float = 1.0) -> Arrays:
    from sklearn.datasets import make_blobs

    n, n_test = _rows(scale, N_SAMPLES), _rows(scale, N_TEST)
    X, y, centers = make_blobs(n_samples=n, n_features=N_FEATURES, centers=N_COMPONENTS,
                               cluster_std=2.0, random_state=0, return_centers=True)
    X_test, y_test = make_blobs(n_samples=n_test, n_features=N_FEATURES, centers=centers,
                                cluster_std=2.0, random_state=1)
    return Arrays(X, y, X_test, y_test,
                  f"`sklearn.datasets.make_blobs(n_samples={n:,}, n_features={N_FEATURES}, "
                  f"centers={N_COMPONENTS}, cluster_std=2.0, random_state=0)`, float64; "
                  f"held-out: {n_test:,} rows around the same centres (random_state=1); "
                  f"{N_COMPONENTS} full-covariance components, {N_ITER} EM iterations, tol = 0, "
                  "the same initial parameters for dml and scikit-learn. Per-iteration time = "
                  f"fit median / {N_ITER}")


def initial_parameters(X: np.ndarray) -> dict:
    idx = np.sort(np.random.default_rng(0).choice(len(X), N_COMPONENTS, replace=False))
    d = X.shape[1]
    return dict(weights_init=np.full(N_COMPONENTS, 1.0 / N_COMPONENTS),
                means_init=np.ascontiguousarray(X[idx]),
                precisions_init=np.stack([np.eye(d)] * N_COMPONENTS))


LOGLIK = Metric("held-out mean log-likelihood", lambda y_true, y_pred: float("nan"))


class _State:
    def __init__(self, X, X_test, init):
        self.X, self.X_test, self.init = X, X_test, init


def _numpy_state(dataset):
    s = dataset.numpy()
    return _State(s.X_train, s.X_test, initial_parameters(s.X_train))


def _dask_state(dataset):
    s = dataset.numpy()
    return _State(dataset.dask().X_train, s.X_test, initial_parameters(s.X_train))


def heldout_loglik(weights, means, covariances, X_test) -> float:
    """Mean log-likelihood of the held-out rows under a full-covariance mixture."""
    from sklearn.mixture import GaussianMixture
    from sklearn.mixture._gaussian_mixture import _compute_precision_cholesky

    gm = GaussianMixture(len(weights), covariance_type="full")
    gm.weights_, gm.means_ = np.asarray(weights), np.asarray(means)
    gm.covariances_ = np.asarray(covariances)
    gm.precisions_cholesky_ = _compute_precision_cholesky(gm.covariances_, "full")
    gm.n_features_in_ = gm.means_.shape[1]
    return float(gm.score(X_test))


def _score(model, state):
    if hasattr(model, "gaussiansDF"):  # Spark
        rows = model.gaussiansDF.collect()
        means = np.stack([r["mean"].toArray() for r in rows])
        covs = np.stack([r["cov"].toArray() for r in rows])
        return heldout_loglik(np.asarray(model.weights), means, covs, state.X_test)
    return heldout_loglik(model.weights_, model.means_, model.covariances_, state.X_test)


def _fixed_iterations(cls, X, init):
    """``N_ITER`` EM steps from ``init`` (tol=0 never converges: that warning is expected)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return cls(N_COMPONENTS, max_iter=N_ITER, tol=0.0, **init).fit(X)


def _dml_fit(state):
    from dml.mixture import GaussianMixture

    return _fixed_iterations(GaussianMixture, state.X, state.init)


def _sklearn_fit(state):
    from sklearn.mixture import GaussianMixture

    return _fixed_iterations(GaussianMixture, state.X, state.init)


def _spark_state(dataset):
    s = dataset.numpy()
    return _State(dataset.spark().train, s.X_test, None)


def _spark_fit(state):
    from pyspark.ml.clustering import GaussianMixture

    return GaussianMixture(k=N_COMPONENTS, maxIter=N_ITER, tol=0.0, seed=0,
                           featuresCol="features").fit(state.X)


register(Workload(
    name="gmm",
    title=f"Gaussian mixture, {N_ITER} EM iterations, {N_COMPONENTS} full-covariance "
          f"components, on make_blobs (1,000,000 × {N_FEATURES})",
    build=blobs,
    metric=LOGLIK,
    implementations={
        "dml": Implementation(
            _dask_state, _dml_fit, _score, requires=("dml.mixture",),
            note=f"`dml.mixture.GaussianMixture(8, max_iter={N_ITER}, tol=0, weights_init, "
                 "means_init, precisions_init)` on persisted Dask arrays"),
        "sklearn": Implementation(
            _numpy_state, _sklearn_fit, _score, requires=("sklearn",),
            note=f"`sklearn.mixture.GaussianMixture(8, max_iter={N_ITER}, tol=0, ...)` from the "
                 "same initial parameters, on NumPy in the client process"),
        "dask-ml": unavailable("dask-ml has no Gaussian mixture"),
        "spark": Implementation(
            _spark_state, _spark_fit, _score, requires=("pyspark",),
            note=f"`pyspark.ml.clustering.GaussianMixture(k=8, maxIter={N_ITER}, tol=0, seed=0)` "
                 "on a cached DataFrame; cannot start from given parameters, so it runs its own "
                 "random initialisation"),
    },
))
