"""Estimators and bad-input cases shared by ``tests/test_bad_input.py`` (and its docs table).

Each estimator is a small instance (tiny data, few epochs) with a ``kind`` that says how it is
used: ``clf``/``reg`` are fitted on (X, y) and predict, ``trans`` is fitted on X and transforms,
``clust`` is fitted on X and predicts. Every case is a function ``case(make, kind, dask)`` that
either returns normally (the case *works*; the function has asserted the result) or raises the
estimator's error, which the test then matches against the expected message.
"""
from __future__ import annotations

import dask.array as da
import numpy as np
import scipy.sparse as sp

from dml.cluster import KMeans
from dml.compose import ColumnTransformer
from dml.decomposition import PCA, IncrementalPCA, TruncatedSVD
from dml.ensemble import (AdaBoostClassifier, BaggingClassifier, BaggingRegressor,
                          GradientBoostingClassifier, GradientBoostingRegressor,
                          RandomForestClassifier,
                          RandomForestRegressor)
from dml.feature_extraction import (CountVectorizer, FeatureHasher, HashingVectorizer,
                                    TfidfTransformer, TfidfVectorizer)
from dml.kernel_approximation import Nystroem, RBFSampler
from dml.linear_model import (ElasticNet, Lasso, LinearRegression, LinearSVC, LogisticRegression,
                              Perceptron, Ridge, SGDClassifier, SGDRegressor)
from dml.mixture import GaussianMixture
from dml.model_selection import GridSearchCV, RandomizedSearchCV
from dml.naive_bayes import BernoulliNB, CategoricalNB, ComplementNB, GaussianNB, MultinomialNB
from dml.neighbors import KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors
from dml.neural_network import MLPClassifier, MLPRegressor
from dml.preprocessing import (MaxAbsScaler, MinMaxScaler, Normalizer, OneHotEncoder,
                               StandardScaler)
from dml.tree import DecisionTreeClassifier, DecisionTreeRegressor

N, D = 40, 3
CHUNK = 10

#: Public estimators (``dml.registry.ESTIMATORS``) that the matrix leaves to tests of their own.
OWN_TESTS = {"MatrixFactorization": "(user, item, rating) input, not an (X, y) matrix: its "
                                    "cases are the test_mf_* tests of test_bad_input.py",
             "NearestNeighbors": "answers kneighbors, no predict/transform: its cases are "
                                 "test_query_errors of test_neighbors.py",
             **{name: "documents (or dicts), not an (X, y) matrix: its cases (non-string "
                      "documents, a lone string, a many-column DataFrame, vocabulary errors) "
                      "are in tests/test_feature_extraction.py"
                for name in ("FeatureHasher", "HashingVectorizer", "CountVectorizer",
                             "TfidfTransformer", "TfidfVectorizer")}}

#: Small instances of the estimators of :data:`OWN_TESTS` that the parameter checks of
#: test_bad_input.py use.
OWN_SMALL = {"FeatureHasher": lambda: FeatureHasher(n_features=16),
             "HashingVectorizer": lambda: HashingVectorizer(n_features=16),
             "CountVectorizer": lambda: CountVectorizer(),
             "TfidfTransformer": lambda: TfidfTransformer(),
             "TfidfVectorizer": lambda: TfidfVectorizer(),
             "NearestNeighbors": lambda: NearestNeighbors()}

#: name -> (family, kind, factory). Families are the columns of docs/bad_input.md. Which
#: estimators run is decided by ``dml.registry.ESTIMATORS``: each needs an entry here or in
#: :data:`OWN_TESTS`.
ESTIMATORS = {
    "GaussianNB": ("naive Bayes", "clf", lambda: GaussianNB()),
    "MultinomialNB": ("naive Bayes", "clf", lambda: MultinomialNB()),
    "ComplementNB": ("naive Bayes", "clf", lambda: ComplementNB()),
    "BernoulliNB": ("naive Bayes", "clf", lambda: BernoulliNB()),
    "CategoricalNB": ("naive Bayes", "clf", lambda: CategoricalNB()),
    "StandardScaler": ("scalers", "trans", lambda: StandardScaler()),
    "MinMaxScaler": ("scalers", "trans", lambda: MinMaxScaler()),
    "MaxAbsScaler": ("scalers", "trans", lambda: MaxAbsScaler()),
    "Normalizer": ("scalers", "trans", lambda: Normalizer()),
    "OneHotEncoder": ("OneHotEncoder", "trans", lambda: OneHotEncoder(handle_unknown="ignore")),
    "ColumnTransformer": ("ColumnTransformer", "trans", lambda: ColumnTransformer(
        [("scale", StandardScaler(), [0, 1]),
         ("onehot", OneHotEncoder(handle_unknown="ignore"), [2])])),
    "LinearRegression": ("exact linear", "reg", lambda: LinearRegression()),
    "Ridge": ("exact linear", "reg", lambda: Ridge()),
    "Lasso": ("exact linear", "reg", lambda: Lasso(alpha=0.01, max_iter=50)),
    "ElasticNet": ("exact linear", "reg", lambda: ElasticNet(alpha=0.01, max_iter=50)),
    "LogisticRegression": ("SGD linear", "clf",
                           lambda: LogisticRegression(max_iter=5, random_state=0)),
    "LinearSVC": ("SGD linear", "clf", lambda: LinearSVC(max_iter=5, random_state=0)),
    "SGDClassifier": ("SGD linear", "clf",
                      lambda: SGDClassifier(max_iter=3, tol=None, random_state=0)),
    "SGDRegressor": ("SGD linear", "reg",
                     lambda: SGDRegressor(max_iter=3, tol=None, random_state=0)),
    "Perceptron": ("SGD linear", "clf", lambda: Perceptron(max_iter=3, tol=None, random_state=0)),
    "MLPClassifier": ("MLP", "clf", lambda: MLPClassifier((4,), max_iter=3, random_state=0)),
    "MLPRegressor": ("MLP", "reg", lambda: MLPRegressor((4,), max_iter=3, random_state=0)),
    "KMeans": ("KMeans", "clust", lambda: KMeans(2, n_init=1, max_iter=5, random_state=0)),
    "PCA": ("decomposition", "trans", lambda: PCA(2)),
    "TruncatedSVD": ("decomposition", "trans", lambda: TruncatedSVD(2, random_state=0)),
    "IncrementalPCA": ("decomposition", "trans", lambda: IncrementalPCA(2)),
    "GaussianMixture": ("GaussianMixture", "clust",
                        lambda: GaussianMixture(2, max_iter=5, random_state=0)),
    "RBFSampler": ("kernel features", "trans",
                   lambda: RBFSampler(n_components=8, random_state=0)),
    "Nystroem": ("kernel features", "trans", lambda: Nystroem(n_components=8, random_state=0)),
    "DecisionTreeClassifier": ("trees, forests", "clf",
                               lambda: DecisionTreeClassifier(max_depth=3, random_state=0)),
    "DecisionTreeRegressor": ("trees, forests", "reg",
                              lambda: DecisionTreeRegressor(max_depth=3, random_state=0)),
    "RandomForestClassifier": ("trees, forests", "clf", lambda: RandomForestClassifier(
        n_estimators=2, max_depth=3, random_state=0)),
    "RandomForestRegressor": ("trees, forests", "reg", lambda: RandomForestRegressor(
        n_estimators=2, max_depth=3, random_state=0)),
    "GradientBoostingClassifier": ("trees, forests", "clf", lambda: GradientBoostingClassifier(
        max_iter=3, min_samples_leaf=2, random_state=0)),
    "GradientBoostingRegressor": ("trees, forests", "reg", lambda: GradientBoostingRegressor(
        max_iter=3, min_samples_leaf=2, random_state=0)),
    "AdaBoostClassifier": ("trees, forests", "clf", lambda: AdaBoostClassifier(
        n_estimators=3, random_state=0)),
    "BaggingClassifier": ("bagging", "clf",
                          lambda: BaggingClassifier(n_estimators=2, random_state=0)),
    "BaggingRegressor": ("bagging", "reg",
                         lambda: BaggingRegressor(n_estimators=2, random_state=0)),
    "KNeighborsClassifier": ("k-neighbours", "clf", lambda: KNeighborsClassifier(n_neighbors=3)),
    "KNeighborsRegressor": ("k-neighbours", "reg", lambda: KNeighborsRegressor(n_neighbors=3)),
    "GridSearchCV": ("search CV", "reg",
                     lambda: GridSearchCV(Ridge(), {"alpha": [0.1, 1.0]}, cv=2)),
    "RandomizedSearchCV": ("search CV", "reg", lambda: RandomizedSearchCV(
        Ridge(), {"alpha": [0.1, 1.0]}, n_iter=2, cv=2, random_state=0)),
}


#: Estimators that train on sparse X (docs/sparse.md); StandardScaler only with with_mean=False.
SPARSE_OK = {"MultinomialNB", "ComplementNB", "BernoulliNB", "SGDClassifier", "SGDRegressor",
             "Perceptron", "MaxAbsScaler", "Normalizer", "LinearRegression", "Ridge",
             "LogisticRegression", "LinearSVC", "GridSearchCV", "RandomizedSearchCV",
             "MLPClassifier", "MLPRegressor", "TruncatedSVD", "KMeans"}


def to_sparse(X, dask):
    """X as a CSR matrix, or as a Dask array of CSR blocks (CHUNK rows each) when ``dask``."""
    from dml._blocks import sparse_blocks

    Xs = sp.csr_matrix(X)
    return sparse_blocks(Xs, CHUNK) if dask else Xs


def dense(out):
    """A computed output as a dense NumPy array (sparse transforms give CSR)."""
    out = out.compute() if hasattr(out, "compute") else out
    return out.toarray() if sp.issparse(out) else np.asarray(out)


def data(kind, seed=0):
    """Small integer-valued X (valid for every estimator, CategoricalNB included) and its y."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 4, size=(N, D)).astype(np.float64)
    if kind == "reg":
        y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=N)
    else:
        y = (X[:, 0] + X[:, 1] > 3).astype(np.int64)
    return X, y


def to_dask(a, chunks=CHUNK):
    """``a`` as a Dask array with ``chunks`` rows per block."""
    return da.from_array(a, chunks=(chunks,) + a.shape[1:])


def fit(est, kind, X, y):
    """Fit ``est`` as its kind requires (transformers and KMeans ignore y)."""
    return est.fit(X) if kind in ("trans", "clust") else est.fit(X, y)


def output(est, kind, X):
    """``transform`` or ``predict`` of X, computed, as a NumPy array."""
    out = est.transform(X) if kind == "trans" else est.predict(X)
    out = out.compute() if hasattr(out, "compute") else out
    return np.asarray(out)


def fit_output(make, kind, X, y, Xp=None):
    """Output of a fresh estimator fitted on (X, y), on ``Xp`` (default: X)."""
    est = fit(make(), kind, X, y)
    return output(est, kind, X if Xp is None else Xp)


def wrap(X, y, dask):
    """(X, y) as Dask arrays when ``dask``, else unchanged."""
    return (to_dask(X), to_dask(y)) if dask else (X, y)
