"""dml.save / dml.load of every dml estimator and of the scikit-learn steps of the allow-list.

Each model is fitted small (on Dask input, on the in-process cluster), saved, loaded, and must
give the same fitted state and the same outputs. What a model file cannot hold (functions) is
refused with a message that says why.
"""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from dml import _io_types, registry
from dml.io import ModelFileError, load, save

from _bad_input_cases import ESTIMATORS as CASES  # tests/ is on sys.path
from _bad_input_cases import data, fit, to_dask
from _io_helpers import assert_same, rewrite


def _outputs(est, X) -> dict:
    out = {}
    for method in ("predict", "predict_proba", "decision_function", "transform"):
        if not hasattr(est, method):
            continue
        try:
            res = getattr(est, method)(X)
        except (AttributeError, NotImplementedError):
            continue
        res = res.compute() if hasattr(res, "compute") else res
        out[method] = res.toarray() if hasattr(res, "toarray") else np.asarray(res)
    assert out, f"{type(est).__name__} has no output method"
    return out


def _check_round_trip(est, X, tmp_path, name="m", dropped=()):
    loaded = load(save(est, tmp_path / f"{name}.dml"))
    assert type(loaded) is type(est)
    assert_same(vars(loaded), {k: v for k, v in vars(est).items() if k not in dropped})
    before, after = _outputs(est, X), _outputs(loaded, X)
    assert list(after) == list(before)
    for method in before:
        np.testing.assert_array_equal(after[method], before[method], err_msg=method)
        assert after[method].dtype == before[method].dtype, method
    return loaded


# --------------------------------------------------------------------------------------------
# every dml estimator
# --------------------------------------------------------------------------------------------

#: Fitted on documents or counts, not on the (X, y) matrices of _bad_input_cases: their model
#: files are tested in tests/test_io.py (test_round_trip_every_registered_estimator).
ON_DOCUMENTS = {"FeatureHasher", "HashingVectorizer", "CountVectorizer", "TfidfTransformer",
                "TfidfVectorizer"}


@pytest.mark.parametrize("name", sorted(set(registry.ESTIMATORS) - ON_DOCUMENTS))
def test_every_dml_estimator_round_trips(name, tmp_path, inprocess_client):
    if name == "NearestNeighbors":  # no predict/transform: compared by its neighbours
        from dml.neighbors import NearestNeighbors

        X, _ = data("clf")
        est = NearestNeighbors(n_neighbors=3).fit(to_dask(X))
        loaded = load(save(est, tmp_path / "nn.dml"))
        assert_same(vars(loaded), vars(est))  # the training set included (as _fit_X)
        for got, want in zip(loaded.kneighbors(X), est.kneighbors(X)):
            np.testing.assert_array_equal(got, want)
        return
    if name == "MatrixFactorization":
        from dml.recommender import MatrixFactorization

        rng = np.random.default_rng(0)
        X = np.column_stack([rng.integers(0, 8, 60), rng.integers(0, 6, 60)])
        y = rng.integers(1, 6, 60).astype(np.float64)
        est = MatrixFactorization(n_factors=2, n_epochs=2).fit(to_dask(X), to_dask(y))
    else:
        _, kind, make = CASES[name]
        X, y = data(kind)
        est = fit(make(), kind, to_dask(X), to_dask(y))
    # KMeans' labels_ of Dask input are a Dask array persisted on the workers: not saved.
    lazy = [k for k, v in vars(est).items() if hasattr(v, "__dask_graph__")]
    assert lazy == (["labels_"] if name == "KMeans" else [])
    loaded = _check_round_trip(est, X, tmp_path, name, dropped=lazy)
    if name.endswith("SearchCV"):
        assert_same(loaded.best_estimator_, est.best_estimator_)
        assert isinstance(loaded.cv_results_["param_alpha"], np.ma.MaskedArray)
    if name.startswith("Bagging"):
        assert len(loaded.estimators_) == 2
        assert type(loaded.estimators_[0]).__module__.startswith("sklearn.tree")


def test_bagging_of_allowed_scikit_learn_members(tmp_path, inprocess_client):
    from sklearn.linear_model import LogisticRegression

    from dml.ensemble import BaggingClassifier

    X, y = data("clf")
    est = BaggingClassifier(LogisticRegression(), n_estimators=3, random_state=0)
    _check_round_trip(est.fit(to_dask(X), to_dask(y)), X, tmp_path)


def test_multimetric_search_with_a_splitter_and_random_state(tmp_path, inprocess_client):
    from dml.linear_model import LogisticRegression
    from dml.model_selection import GridSearchCV, KFold

    X, y = data("clf")
    search = GridSearchCV(LogisticRegression(max_iter=5, random_state=np.random.RandomState(3)),
                          {"C": [0.1, 1.0]}, scoring=["accuracy", "neg_log_loss"],
                          refit="accuracy", cv=KFold(2, shuffle=True, random_state=0))
    search.fit(to_dask(X), to_dask(y))
    loaded = _check_round_trip(search, X, tmp_path)
    assert set(loaded.scorer_) == {"accuracy", "neg_log_loss"}
    assert loaded.scorer_["accuracy"](loaded, X, y) == search.scorer_["accuracy"](search, X, y)


# --------------------------------------------------------------------------------------------
# scikit-learn steps
# --------------------------------------------------------------------------------------------

RNG = np.random.default_rng(1)
X_NUM = RNG.normal(size=(40, 3))
X_NUM[::7, 1] = np.nan
Y_CLS = (RNG.normal(size=40) > 0).astype(int)
FRAME = pd.DataFrame({"colour": np.array(["red", "green", "blue", None], dtype=object)
                      [RNG.integers(0, 4, 40)],
                      "size": RNG.integers(0, 4, 40).astype(float),
                      "weight": RNG.normal(size=40)})


def _sklearn_case(target):
    """A small fitted instance of allow-listed scikit-learn class ``target`` and its input."""
    cls = registry.resolve_target(target)
    name = cls.__name__
    X = np.nan_to_num(X_NUM)
    if name == "Pipeline":
        from sklearn.impute import SimpleImputer
        from sklearn.preprocessing import StandardScaler

        from dml.naive_bayes import GaussianNB

        est = cls([("impute", SimpleImputer()), ("scale", StandardScaler()), ("nb", GaussianNB())])
        return est.fit(X_NUM, Y_CLS), X_NUM
    if name == "ColumnTransformer":
        from sklearn.impute import SimpleImputer
        from sklearn.preprocessing import OneHotEncoder

        est = cls([("oh", Pipeline([("fill", SimpleImputer(strategy="constant",
                                                           fill_value="none")),
                                    ("enc", OneHotEncoder(handle_unknown="ignore"))]),
                    ["colour"]),
                   ("num", "passthrough", ["size"])], remainder="drop")
        return est.fit(FRAME), FRAME
    if name == "FunctionTransformer":
        return cls(feature_names_out="one-to-one").fit(X), X
    if name in ("SimpleImputer", "MissingIndicator"):
        return cls().fit(X_NUM), X_NUM
    if name in ("OneHotEncoder", "OrdinalEncoder"):
        Xc = FRAME[["colour"]].fillna("none")
        return cls(handle_unknown="ignore" if name == "OneHotEncoder" else "error").fit(Xc), Xc
    if name in ("KFold", "StratifiedKFold", "GroupKFold"):
        return cls(n_splits=3, shuffle=True, random_state=np.random.RandomState(0)), None
    if name in ("ShuffleSplit", "StratifiedShuffleSplit"):
        return cls(n_splits=3, random_state=0), None
    if name in ("PCA", "TruncatedSVD"):
        return cls(n_components=2, random_state=0).fit(X), X
    if name == "KBinsDiscretizer":
        return cls(n_bins=3, quantile_method="averaged_inverted_cdf").fit(X), X
    if name in ("DecisionTreeRegressor", "ExtraTreeRegressor", "LinearRegression", "Ridge"):
        return cls().fit(X, X @ np.arange(1.0, 4.0)), X
    if name.endswith("Classifier") or name == "LogisticRegression":
        return cls().fit(X, Y_CLS), X
    return cls().fit(X), X


class _Holder(BaseEstimator):
    """An estimator whose only parameter is a splitter (registered by the fixture below)."""

    def __init__(self, cv=None):
        self.cv = cv


@pytest.fixture
def holder_registered():
    registry.register("io_types_test_holder", f"{__name__}:_Holder", kind="component",
                      replace=True)
    yield
    registry.unregister("io_types_test_holder")


@pytest.mark.parametrize("target", _io_types.SKLEARN_CLASSES)
def test_allowed_scikit_learn_classes_round_trip(target, tmp_path, holder_registered):
    est, X = _sklearn_case(target)
    if X is None:  # a splitter: the same splits
        loaded = load(save(_Holder(est), tmp_path / "cv.dml")).cv
        assert_same(vars(loaded), vars(est))
        y = np.arange(12) % 2
        for (a, b), (c, d) in zip(est.split(np.zeros((12, 1)), y, groups=np.arange(12) % 4),
                                  loaded.split(np.zeros((12, 1)), y, groups=np.arange(12) % 4)):
            np.testing.assert_array_equal(a, c)
            np.testing.assert_array_equal(b, d)
        return
    _check_round_trip(est, X, tmp_path)


def test_sklearn_pipeline_of_steps_on_a_frame(tmp_path):
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from dml.linear_model import LogisticRegression

    pre = ColumnTransformer([("cat", Pipeline([("fill", SimpleImputer(strategy="most_frequent")),
                                               ("oh", OneHotEncoder(handle_unknown="ignore"))]),
                              ["colour"]),
                             ("num", Pipeline([("fill", SimpleImputer()),
                                               ("scale", StandardScaler())]),
                              ["size", "weight"])], remainder="passthrough")
    model = Pipeline([("pre", pre), ("clf", LogisticRegression(max_iter=5, random_state=0))])
    model.fit(FRAME, Y_CLS)
    _check_round_trip(model, FRAME, tmp_path)


# --------------------------------------------------------------------------------------------
# what a model file cannot hold
# --------------------------------------------------------------------------------------------

def test_function_transformer_with_a_function_is_refused(tmp_path):
    from sklearn.preprocessing import FunctionTransformer

    step = FunctionTransformer(np.log1p).fit(np.ones((3, 2)))
    with pytest.raises(TypeError, match=r"FunctionTransformer with func set holds Python code, "
                                        r"and a model file never contains code"):
        save(Pipeline([("log", step)]), tmp_path / "m.dml")
    inverse = FunctionTransformer(inverse_func=np.expm1)
    with pytest.raises(TypeError, match="with inverse_func set holds Python code"):
        save(inverse, tmp_path / "m.dml")
    assert not (tmp_path / "m.dml").exists()


def test_function_transformer_smuggled_into_a_file_is_refused(tmp_path):
    from sklearn.preprocessing import FunctionTransformer

    path = save(FunctionTransformer(), tmp_path / "m.dml")

    def give_func(tree):  # the only callables a file can name are plain types like float
        tree["root"]["params"]["func"] = {"$": "type", "name": "float"}

    rewrite(path, tree=give_func)
    with pytest.raises(ModelFileError, match="FunctionTransformer with func set holds Python "
                                             "code"):
        load(path)


def test_callables_and_scipy_distributions_are_refused_with_the_way_out(tmp_path,
                                                                         inprocess_client):
    from scipy.stats import loguniform

    from dml.linear_model import Ridge
    from dml.model_selection import RandomizedSearchCV

    X, y = data("reg")
    search = RandomizedSearchCV(Ridge(), {"alpha": loguniform(1e-3, 1.0)}, n_iter=2, cv=2,
                                random_state=0).fit(to_dask(X), to_dask(y))
    with pytest.raises(TypeError, match=r"param_distributions.*scipy.stats distributions "
                                        r"cannot be saved; save the fitted search's "
                                        r"best_estimator_ instead"):
        save(search, tmp_path / "s.dml")
    loaded = load(save(search.best_estimator_, tmp_path / "best.dml"))
    np.testing.assert_array_equal(loaded.predict(X), search.predict(X))


def test_unlisted_scikit_learn_class_is_refused(tmp_path):
    from sklearn.neighbors import KNeighborsClassifier

    from dml.ensemble import BaggingClassifier

    X, y = data("clf")
    est = BaggingClassifier(KNeighborsClassifier(3), n_estimators=2, random_state=0).fit(X, y)
    with pytest.raises(TypeError, match=r"BaggingClassifier.estimator: class "
                                        r"sklearn.neighbors.*KNeighborsClassifier is not one of "
                                        r"the types a dml model file can hold"):
        save(est, tmp_path / "m.dml")


def test_inconsistent_scikit_learn_tree_is_refused(tmp_path):
    from sklearn.tree import DecisionTreeClassifier

    X, y = data("clf")
    path = save(DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y),
                tmp_path / "m.dml")

    # A child pointing back at the root would make prediction loop or read out of bounds.
    with zipfile.ZipFile(path) as zf:
        npz = np.load(io.BytesIO(zf.read("payload.npz")), allow_pickle=False)
        tree = json.loads(bytes(npz["__tree__"]).decode())
    key = tree["root"]["state"]["tree_"]["nodes"]["left_child"]["key"]

    def point_back(data):
        arrays = dict(np.load(io.BytesIO(data), allow_pickle=False))
        left = arrays[key].copy()
        left[np.argmax(left > 0)] = 0
        arrays[key] = left
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

    rewrite(path, payload=point_back)
    with pytest.raises(ModelFileError, match="tree's nodes are inconsistent"):
        load(path)


def test_inconsistent_dml_tree_is_refused(tmp_path):
    from dml.ensemble import RandomForestClassifier

    X, y = data("clf")
    path = save(RandomForestClassifier(n_estimators=2, max_depth=3, random_state=0).fit(X, y),
                tmp_path / "m.dml")
    with zipfile.ZipFile(path) as zf:
        npz = np.load(io.BytesIO(zf.read("payload.npz")), allow_pickle=False)
        tree = json.loads(bytes(npz["__tree__"]).decode())
    items = dict((k, v) for k, v in tree["root"]["state"]["nodes_"]["items"])
    key = items["children_right"]["key"]

    def into_the_next_tree(data):  # a child outside its own tree: walking could loop
        arrays = dict(np.load(io.BytesIO(data), allow_pickle=False))
        right = arrays[key].copy()
        right[0] = len(right) - 1
        arrays[key] = right
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

    rewrite(path, payload=into_the_next_tree)
    with pytest.raises(ModelFileError, match="tree's nodes are inconsistent"):
        load(path)


def test_text_estimators_are_round_tripped_in_test_io():
    import test_io

    names = {registry.ESTIMATORS[n][1] for n in ON_DOCUMENTS}
    assert names <= set(test_io.ESTIMATORS)  # test_round_trip_every_registered_estimator
