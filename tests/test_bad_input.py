"""Bad input, for every public estimator (issue 11, part 2; DESIGN.md principle 7).

A matrix of (estimator × case). Each case either *works* — and the test checks the result, e.g.
that it equals the result on clean or converted data — or raises a ``ValueError``/``TypeError``
whose message names the problem (checked with ``match=``). Dask input runs on the in-process
cluster; NumPy input on the same cluster's scheduler (the code path of local input is the same
whatever the scheduler). ``docs/bad_input.md`` publishes the table: keep both in step.

The data is tiny (40 rows × 3 integer-valued features, valid for every estimator) and the
iterative estimators run a few epochs only; each estimator's fit on the clean data, which many
cases compare with or predict from, is made once per module (the ``clean`` fixture). NumPy
variants of the heavier cases and RandomizedSearchCV are marked slow.
"""
from __future__ import annotations

import inspect
import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import sklearn.naive_bayes as sknb
from sklearn.metrics import r2_score
from sklearn.utils._param_validation import generate_invalid_param_val, make_constraint

from _bad_input_cases import (CHUNK, D, ESTIMATORS, N, OWN_SMALL, OWN_TESTS, SPARSE_OK, data,
                              dense, fit, fit_output, output, to_dask, to_sparse, wrap)
from dml import registry
from dml._param_validation import InvalidParameterError
from dml.naive_bayes import CategoricalNB
from dml.preprocessing import OneHotEncoder
from dml.recommender import MatrixFactorization
from dml.tree import DecisionTreeClassifier

#: RandomizedSearchCV shares GridSearchCV's code path (the same fit loop; only the candidates
#: differ) and is the slowest entry: run with the slow tests only, to keep the file fast.
SLOW_NAMES = {"RandomizedSearchCV"}


def _names(kinds=("clf", "reg", "trans", "clust")):
    """The public estimators (``dml.registry.ESTIMATORS``) of these kinds."""
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_NAMES else n
            for n in registry.ESTIMATORS if n not in OWN_TESTS and ESTIMATORS[n][1] in kinds]


def test_the_matrix_covers_every_public_estimator():
    assert set(ESTIMATORS) | set(OWN_TESTS) == set(registry.ESTIMATORS)
    assert not set(ESTIMATORS) & set(OWN_TESTS)


NAMES = _names()
SUPERVISED = _names(("clf", "reg"))
#: The quick tier (``-m "not slow"``) runs the matrix (errors and result comparisons) on one
#: estimator per family and code path; the full suite, which CI runs, on every estimator.
QUICK_VALUE_CHECKS = {"GaussianNB", "CategoricalNB", "LinearRegression", "Lasso",
                      "LogisticRegression", "SGDClassifier", "SGDRegressor",
                      "DecisionTreeClassifier", "RandomForestRegressor",
                      "GradientBoostingClassifier", "KMeans", "GaussianMixture", "MLPClassifier",
                      "MatrixFactorization", "KNeighborsClassifier", "StandardScaler",
                      "OneHotEncoder", "Nystroem", "PCA", "GridSearchCV"}


def _value_checks(names):
    """``names`` with those outside :data:`QUICK_VALUE_CHECKS` marked slow."""
    out = []
    for n in names:
        value = n.values[0] if hasattr(n, "values") else n
        out.append(n if value in QUICK_VALUE_CHECKS or hasattr(n, "values")
                   else pytest.param(n, marks=pytest.mark.slow))
    return out
CLASSIFIERS = _names(("clf",))
#: Estimators with a missing-value rule: NaN in X works (trees: learned default direction;
#: scalers: statistics ignore NaN and keep it; encoder and column transformer: NaN is a
#: category / passed to transformers that accept it).
NAN_OK = {"StandardScaler", "MinMaxScaler", "MaxAbsScaler", "OneHotEncoder", "ColumnTransformer",
          "DecisionTreeClassifier", "DecisionTreeRegressor", "RandomForestClassifier",
          "RandomForestRegressor", "GradientBoostingClassifier", "GradientBoostingRegressor",
          "AdaBoostClassifier"}
#: Estimators fitted with a single class that predict it (as scikit-learn's naive Bayes and
#: bagged trees); the other classifiers raise.
ONE_CLASS_OK = {"GaussianNB", "MultinomialNB", "ComplementNB", "BernoulliNB", "CategoricalNB",
                "BaggingClassifier", "KNeighborsClassifier"}
#: Mini-batch SGD estimators: their fit depends on the partitioning (DESIGN.md principle 4), so
#: an extra empty partition changes the result; checked for sanity, not equality.
STOCHASTIC = {"LogisticRegression", "LinearSVC", "SGDClassifier", "SGDRegressor", "Perceptron",
              "MLPClassifier", "MLPRegressor", "KMeans", "BaggingClassifier",
              "BaggingRegressor", "RandomForestClassifier", "RandomForestRegressor"}
#: Linear projections: transform(X * s) = s * transform(X).
PROJECTIONS = {"PCA", "TruncatedSVD", "IncrementalPCA"}
#: Kernel feature maps: a kernel's value depends on the scale of X (gamma is not rescaled), so
#: at 1e150 the features are only required to be finite.
NOT_SCALE_FREE = {"RBFSampler", "Nystroem"}
#: Plain SGD at 1e150: the first step overflows; a DivergedError (a ValueError) says so.
DIVERGES = {"SGDClassifier", "SGDRegressor", "Perceptron"}

ON = [pytest.param(False, id="numpy"), pytest.param(True, id="dask")]
#: For the cases that fit and predict several times, NumPy input runs with the slow tests only:
#: it takes the same validation path as Dask input (as_blocks cuts it into blocks).
ON_HEAVY = [pytest.param(False, id="numpy", marks=pytest.mark.slow),
            pytest.param(True, id="dask")]


@pytest.fixture(autouse=True)
def _cluster(inprocess_client):
    with warnings.catch_warnings():
        # Convergence warnings of the deliberately short fits are not what is tested here.
        warnings.simplefilter("ignore")
        yield


#: A small instance of every public estimator, the one of the matrix when there is one.
SMALL_BY_NAME = {**{n: ESTIMATORS[n][2] for n in ESTIMATORS}, **OWN_SMALL,
                 "MatrixFactorization": lambda: MatrixFactorization(n_factors=2, n_epochs=2)}


def _get(name):
    """(factory, kind) of an estimator of the matrix."""
    return ESTIMATORS[name][2], ESTIMATORS[name][1]


@pytest.fixture(scope="module")
def clean():
    """``clean(name, dask)``: (fitted estimator, output on X) of the estimator fitted on the
    clean data of its kind (NumPy or Dask input), made once per module.

    Many cases compare with (or only predict from) this same fit; every fit here is
    deterministic (fixed ``random_state``), so computing it once gives each case the very
    reference it computed itself before, without the repeated fits (about a quarter of the
    file's time). The fitted models are dropped at the end of the module."""
    cache = {}

    def get(name, dask):
        if (name, dask) not in cache:
            make, kind = _get(name)
            X, y = data(kind)
            est = fit(make(), kind, *wrap(X, y, dask))
            cache[name, dask] = (est, output(est, kind, to_dask(X) if dask else X))
        return cache[name, dask]

    yield get
    cache.clear()


# --------------------------------------------------------------------------------------------
# Hyper-parameters: one contract (dml._param_validation), one error type, one wording
# --------------------------------------------------------------------------------------------

def _invalid_values(constraints):
    """Values that break every constraint of a parameter: a wrong type, and a value out of each
    interval / option set (scikit-learn's generator) that no other constraint accepts."""
    if constraints == "no_validation":
        return []
    made = [make_constraint(c) for c in constraints]
    candidates = [object()]
    for c in made:
        try:
            candidates.append(generate_invalid_param_val(c))
        except NotImplementedError:
            pass
    return [v for v in candidates if not any(c.is_satisfied_by(v) for c in made)]


@pytest.mark.parametrize("name", [n for n in registry.ESTIMATORS])
def test_invalid_hyper_parameters(name):
    """Every constrained parameter of every public estimator, given a value it does not
    accept, makes ``fit`` (and ``partial_fit``) raise InvalidParameterError (a ValueError and
    a TypeError) worded ``The 'p' parameter of Estimator must be ... Got ... instead.``, before
    reading any data."""
    make = SMALL_BY_NAME[name]
    est = make()
    checked = 0
    for param, constraints in est._parameter_constraints.items():
        if param not in est.get_params(deep=False):
            continue
        for value in _invalid_values(constraints):
            bad = make().set_params(**{param: value})
            pattern = rf"^The '{param}' parameter of {name} must be .*\. Got .* instead\.$"
            methods = ["fit"] + (["partial_fit"] if hasattr(bad, "partial_fit") else [])
            for method in methods:
                with pytest.raises(InvalidParameterError, match=pattern) as exc:
                    getattr(bad, method)(None, None)
                assert isinstance(exc.value, ValueError) and isinstance(exc.value, TypeError)
            checked += 1
    assert checked >= 1


#: Parameter combinations the table cannot express, and their wording.
RELATIONS = [
    ("LogisticRegression", {"l1_ratio": 0.5}, "l1_ratio", "0 unless solver='sgd'"),
    ("LinearSVC", {"penalty": "l1"}, "penalty", "'l2' unless solver='sgd'"),
    ("SGDRegressor", {"learning_rate": "constant", "eta0": 0.0}, "eta0",
     "> 0 unless learning_rate='optimal'"),
    ("RandomForestClassifier", {"bootstrap": False, "oob_score": True}, "oob_score",
     "False unless bootstrap=True"),
    ("MLPClassifier", {"hidden_layer_sizes": (3, 0)}, "hidden_layer_sizes",
     "a positive int or a tuple"),
    ("MLPRegressor", {"dtype": "float16"}, "dtype", "'float32' or 'float64'"),
    ("MinMaxScaler", {"feature_range": (1, 0)}, "feature_range", "a tuple \\(min, max\\)"),
    ("OneHotEncoder", {"dtype": str}, "dtype", "a numeric dtype"),
    ("MultinomialNB", {"alpha": [[1.0]]}, "alpha", "a non-negative float or a 1-D array"),
    ("CategoricalNB", {"alpha": [1.0]}, "alpha", "a non-negative float\\. "),
    ("ColumnTransformer", {"remainder": "keep"}, "remainder", "a str among"),
    ("ColumnTransformer", {"transformers": [("a", "keep", [0])]}, "transformers",
     "a list whose transformer 'a' is a transformer, 'drop' or 'passthrough'"),
    ("MatrixFactorization", {"spill_dir": "/no/such/dir"}, "spill_dir", "an existing directory"),
]


@pytest.mark.parametrize("name, params, param, wording", RELATIONS)
def test_invalid_parameter_combinations(name, params, param, wording):
    bad = SMALL_BY_NAME[name]().set_params(**params)
    with pytest.raises(InvalidParameterError,
                       match=rf"^The '{param}' parameter of {name} must be {wording}.*Got "):
        bad.fit(None, None)


#: Dask input whose all-zero weights the fit does not check (only local weights are checked
#: up front; these fits make no pass that sums the weights).
ZERO_WEIGHTS_UNCHECKED_ON_DASK = {"StandardScaler", "MLPRegressor", "DecisionTreeClassifier",
                                  "DecisionTreeRegressor", "RandomForestClassifier",
                                  "RandomForestRegressor"}


@pytest.mark.parametrize("dask", ON)
@pytest.mark.parametrize("name", [n for n in NAMES if "sample_weight" in inspect.signature(
    ESTIMATORS[getattr(n, "values", [n])[0]][2]().fit).parameters])
def test_all_zero_sample_weights_one_message(name, dask):
    """Every check of all-zero weights (up front for local weights, in the fit's reduction for
    Dask weights) says the same thing (dml.base.ALL_ZERO_WEIGHTS)."""
    if dask and name in ZERO_WEIGHTS_UNCHECKED_ON_DASK:
        pytest.skip("no reduction of the weights in this fit")
    make, kind = _get(name)
    X, y = data(kind)
    w = np.zeros(N)
    if dask:
        X, y, w = to_dask(X), to_dask(y), to_dask(w)
    est = make()
    with pytest.raises(ValueError, match=rf"^{name}: Sample weights must contain at least one "
                                         r"non-zero number; every sample weight is zero, so no "
                                         r"sample counts towards the fit\.$"):
        est.fit(X, sample_weight=w) if kind in ("trans", "clust") else \
            est.fit(X, y, sample_weight=w)


# --------------------------------------------------------------------------------------------
# Values: NaN, inf, strings, very large numbers, dtypes
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dask", ON_HEAVY)
@pytest.mark.parametrize("name", _value_checks(NAMES))
def test_nan_in_X(name, dask):
    make, kind = _get(name)
    X, y = data(kind)
    X[3, 1] = np.nan
    if name not in NAN_OK:
        with pytest.raises(ValueError, match="contains (missing values )?.?NaN"):
            fit_output(make, kind, *wrap(X, y, dask))
        return
    out = fit_output(make, kind, *wrap(X, y, dask))
    assert len(out) == N
    if kind == "trans" and name != "OneHotEncoder":
        # NaN stays NaN where it was; every other value is transformed as without it.
        assert np.isnan(out[3, 1]) and np.isfinite(np.delete(out, 3, axis=0)).all()
    if kind == "clf":
        assert set(np.unique(out)) <= set(np.unique(y))


@pytest.mark.parametrize("dask", ON)
@pytest.mark.parametrize("name", _value_checks(NAMES))
def test_inf_in_X(name, dask):
    make, kind = _get(name)
    X, y = data(kind)
    X[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        fit_output(make, kind, *wrap(X, y, dask))


@pytest.mark.parametrize("dask", ON)
@pytest.mark.parametrize("name", _value_checks(SUPERVISED))
def test_nan_in_y(name, dask):
    make, kind = _get(name)
    X, y = data(kind)
    y = y.astype(np.float64)
    y[3] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        fit(make(), kind, *wrap(X, y, dask))


@pytest.mark.parametrize("dask", ON_HEAVY)
@pytest.mark.parametrize("name", _value_checks(NAMES))
def test_string_in_numeric_X(name, dask):
    make, kind = _get(name)
    X, y = data(kind)
    X = X.astype(object)
    X[2, 1] = "abc"
    if dask:
        X, y = da.from_array(X, chunks=(CHUNK, D)), to_dask(y)
    if name in ("OneHotEncoder", "CategoricalNB"):
        # Categorical estimators take strings as categories, but not mixed with numbers.
        with pytest.raises(TypeError, match="mix"):
            fit_output(make, kind, X, y)
    elif name == "ColumnTransformer":
        with pytest.raises(TypeError, match="non-numeric"):
            fit_output(make, kind, X, y)
    else:
        with pytest.raises(TypeError, match="non-numeric values .*'abc'"):
            fit_output(make, kind, X, y)


@pytest.mark.parametrize("dask", ON_HEAVY)
@pytest.mark.parametrize("name", _value_checks(NAMES))
def test_int_float32_float64_give_the_same_result(name, dask, clean):
    make, kind = _get(name)
    X, y = data(kind)
    ref = clean(name, dask)[1].astype(np.float64)
    for dtype in (np.int64, np.float32):
        got = fit_output(make, kind, *wrap(X.astype(dtype), y, dask)).astype(np.float64)
        # float32 computes in float32 where the estimator keeps it (scalers, linear models).
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=str(dtype))


@pytest.mark.parametrize("name", _value_checks(NAMES))
def test_very_large_values(name, clean):
    """X (and a regression y) times 1e150: the right answer, or a clear error — never garbage."""
    make, kind = _get(name)
    X, y = data(kind)
    s = 1e150
    Xs, ys = X * s, (y * s if kind == "reg" else y)
    if name in DIVERGES:
        with pytest.raises(ValueError, match="diverged.* scale the features"):
            fit_output(make, kind, to_dask(Xs), to_dask(ys))
        return
    if name == "CategoricalNB":
        with pytest.raises(ValueError, match="too large for an integer category code"):
            fit_output(make, kind, to_dask(Xs), to_dask(ys))
        return
    if name.startswith("Bagging"):
        # scikit-learn's trees (the default members) compute in float32 (max 3.4e38).
        with pytest.raises(ValueError, match="DecisionTree.* bootstrap sample.*float32"):
            fit_output(make, kind, to_dask(Xs), to_dask(ys))
        return
    scaled_fit = fit(make(), kind, to_dask(Xs), to_dask(ys))
    got = output(scaled_fit, kind, to_dask(Xs))
    assert np.isfinite(got.astype(np.float64)).all()
    if name.startswith("KNeighbors"):
        # The small integer data has many exactly equal distances; at 1e150 rounding splits
        # those ties, so other equally distant rows may be chosen, but at the same distances.
        scaled = scaled_fit.kneighbors(Xs)[0]
        unscaled = clean(name, True)[0].kneighbors(X)[0]
        np.testing.assert_allclose(scaled / s, unscaled, rtol=1e-7, atol=1e-7)
        return
    if name in NOT_SCALE_FREE:
        return
    ref = clean(name, True)[1]
    if name in ("MultinomialNB", "ComplementNB"):
        # Not scale invariant (alpha is negligible next to 1e150 counts): scikit-learn's answer.
        np.testing.assert_array_equal(got, getattr(sknb, name)().fit(Xs, ys).predict(Xs))
    elif name in ("LogisticRegression", "LinearSVC"):
        # Regularised: the fit in rescaled units is the one at 1e10 (where it matches sklearn).
        b = make().fit(to_dask(X * 1e10), to_dask(ys))
        np.testing.assert_allclose(scaled_fit.coef_ * s, b.coef_ * 1e10, rtol=1e-6)
    elif name in ("Ridge", "Lasso", "ElasticNet", "GridSearchCV", "RandomizedSearchCV",
                  "MLPRegressor"):
        # Penalties / learning rates are not scale free: close to the clean fit, not equal.
        # The MLP's clean fit on this small data is itself poor (R² < 0): its scaled fit is
        # held to a looser band around it.
        slack = 0.1 if name == "MLPRegressor" else 0.05
        assert r2_score(ys / s, got / s) >= r2_score(y, ref) - slack
    elif kind == "reg" or name in PROJECTIONS:
        # Regressions, and projections (PCA & co.), whose outputs scale with X.
        np.testing.assert_allclose(got / s, ref, rtol=1e-8, atol=1e-8)
    else:
        # Scale-invariant estimators (NB, scalers, encoders, KMeans, trees, MLP classes).
        np.testing.assert_allclose(got.astype(float), ref.astype(float), atol=1e-9)


# --------------------------------------------------------------------------------------------
# Shapes and lengths
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dask", ON_HEAVY)
@pytest.mark.parametrize("name", _value_checks(NAMES))
def test_1d_and_3d_X(name, dask, clean):
    make, kind = _get(name)
    X, y = data(kind)
    with pytest.raises(ValueError, match="expected a 2-D X, got a 1-D array.*reshape"):
        fit(make(), kind, *wrap(X[:, 0], y, dask))
    with pytest.raises(ValueError, match="expected a 2-D X, got a 3-D array"):
        fit(make(), kind, *wrap(X.reshape(N, D, 1), y, dask))
    est = clean(name, dask)[0]
    with pytest.raises(ValueError, match="expected a 2-D X, got a 1-D array"):
        output(est, kind, to_dask(X[0]) if dask else X[0])


@pytest.mark.parametrize("dask", ON)
@pytest.mark.parametrize("name", _value_checks(SUPERVISED))
def test_X_y_length_mismatch(name, dask):
    make, kind = _get(name)
    X, y = data(kind)
    # Search CV on local data checks lengths before splitting, with scikit-learn's message.
    with pytest.raises(ValueError, match=r"X has 40 rows but y has 39|inconsistent numbers of "
                                         r"samples: \[40, 39\]"):
        fit(make(), kind, *wrap(X, y[:-1], dask))


@pytest.mark.parametrize("name", _value_checks(NAMES))
def test_empty_X(name):
    make, kind = _get(name)
    X, y = data(kind)
    # Search CV: the splitter refuses first (n_splits greater than n_samples=0).
    with pytest.raises(ValueError, match="0 sample|n_samples=0"):
        fit(make(), kind, X[:0], y[:0])


@pytest.mark.parametrize("name", _value_checks(SUPERVISED))
def test_y_chunked_differently_from_X(name, clean):
    """y partitions not aligned with X's are realigned: the same model as with aligned y."""
    make, kind = _get(name)
    X, y = data(kind)
    ref = clean(name, True)[1]
    got = fit_output(make, kind, to_dask(X), da.from_array(y, chunks=15))
    np.testing.assert_allclose(got.astype(float), ref.astype(float))


@pytest.mark.parametrize("name", _value_checks(NAMES))
def test_empty_partition(name, clean):
    """A zero-length chunk in X (and y) is skipped: same result as without it (for the exact
    estimators; a sane fit for the partition-dependent stochastic ones)."""
    make, kind = _get(name)
    X, y = data(kind)
    chunks = (CHUNK, 0, CHUNK, CHUNK, CHUNK)
    Xd = da.from_array(X, chunks=(chunks, D))
    yd = da.from_array(y, chunks=(chunks,))
    got = fit_output(make, kind, Xd, yd, to_dask(X)).astype(float)
    assert got.shape[0] == N and np.isfinite(got).all()
    if name not in STOCHASTIC:
        ref = clean(name, True)[1].astype(float)
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)
    # An all-empty Dask array with known chunks is refused like empty NumPy input.
    with pytest.raises(ValueError, match="0 sample|n_samples=0"):
        fit(make(), kind, da.zeros((0, D), chunks=(0, D)), da.zeros(0, chunks=0))


# --------------------------------------------------------------------------------------------
# Labels and categories
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dask", ON)
@pytest.mark.parametrize("name", _value_checks(CLASSIFIERS))
def test_single_class(name, dask):
    make, kind = _get(name)
    X, y = data(kind)
    y = np.full_like(y, 7)
    if name in ONE_CLASS_OK:
        out = fit_output(make, kind, *wrap(X, y, dask))
        assert (out == 7).all()
    else:
        with pytest.raises(ValueError, match="(one|1|single) class"):
            fit(make(), kind, *wrap(X, y, dask))


@pytest.mark.parametrize("dask", ON_HEAVY)
@pytest.mark.parametrize("name", _value_checks(CLASSIFIERS))
def test_unseen_label_in_score(name, dask, clean):
    """A label never seen in fit counts as an error in score (as scikit-learn), not a crash."""
    make, kind = _get(name)
    X, y = data(kind)
    est, pred = clean(name, dask)
    y2 = y.copy()
    y2[:5] = 9
    expected = np.mean(pred == y2)
    Xs, ys = wrap(X, y2, dask)
    assert est.score(Xs, ys) == pytest.approx(expected)


@pytest.mark.parametrize("dask", ON)
def test_unseen_categories_at_predict(dask):
    X = np.array([[0, 1], [1, 0], [2, 1], [0, 0], [1, 1], [2, 0]] * 4, dtype=np.int64)
    y = np.array([0, 1, 1, 0, 1, 0] * 4)
    new = np.array([[5, 1], [0, 0]])
    Xd, yd, newd = (to_dask(X, 6), to_dask(y, 6), to_dask(new)) if dask else (X, y, new)
    with pytest.raises(ValueError, match="unknown categor.*handle_unknown='ignore'"):
        output(OneHotEncoder().fit(Xd), "trans", newd)
    out = output(OneHotEncoder(handle_unknown="ignore").fit(Xd), "trans", newd)
    np.testing.assert_array_equal(out[0], [0, 0, 0, 0, 1])  # unknown → all zeros for feature 0
    # CategoricalNB: a code never seen in fit has no learned probability.
    with pytest.raises(ValueError, match="value 5, which is not one of the 3 categories seen "
                                         "during fit.*min_categories"):
        output(CategoricalNB().fit(Xd, yd), "clf", newd)
    pred = output(CategoricalNB(min_categories=6).fit(Xd, yd), "clf", newd)
    assert set(pred) <= {0, 1}


@pytest.mark.parametrize("dask", ON)
def test_unseen_category_tree(dask):
    frame = pd.DataFrame({"colour": pd.Categorical(["red", "blue"] * 10),
                          "num": np.arange(20.0)})
    y = (frame["colour"] == "red").to_numpy().astype(int)
    new = pd.DataFrame({"colour": pd.Categorical(["green", "red"]), "num": [0.0, 1.0]})
    if dask:
        frame, y, new = (dd.from_pandas(frame, npartitions=2), to_dask(y),
                         dd.from_pandas(new, npartitions=1))
    est = DecisionTreeClassifier(random_state=0).fit(frame, y)
    pred = output(est, "clf", new)
    assert pred[1] == 1 and pred[0] in (0, 1)  # unseen category: treated as missing


@pytest.mark.parametrize("dask", ON)
def test_gradient_boosting_categorical_codes(dask):
    """Gradient boosting's numerically coded categorical features: codes must be non-negative
    integers, at most max_bins of them; a code unseen in fit is treated as missing."""
    from dml.ensemble import GradientBoostingClassifier

    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 4, 40), rng.normal(size=40)]).astype(float)
    y = (X[:, 0] % 2).astype(int)
    wrapped = (lambda Z: to_dask(Z)) if dask else (lambda Z: Z)
    est = GradientBoostingClassifier(max_iter=3, min_samples_leaf=2, categorical_features=[0])
    for bad, match in ((-1.0, "negative values"), (1.5, "non-integer values")):
        Xb = X.copy()
        Xb[0, 0] = bad
        with pytest.raises(ValueError, match=match):
            est.fit(wrapped(Xb), wrapped(y))
    with pytest.raises(ValueError, match="4 distinct values, more than max_bins=3"):
        GradientBoostingClassifier(max_bins=3, categorical_features=[0]).fit(wrapped(X),
                                                                             wrapped(y))
    est.fit(wrapped(X), wrapped(y))
    new = np.array([[9.0, 0.0], [np.nan, 0.0]])  # unseen code and missing: the same leaf
    pred = np.asarray(est.predict_proba(new))
    np.testing.assert_array_equal(pred[0], pred[1])


@pytest.mark.parametrize("dask", ON_HEAVY)
@pytest.mark.parametrize("name", _value_checks(NAMES))
def test_dataframe_with_other_columns_at_predict(name, dask):
    make, kind = _get(name)
    X, y = data(kind)
    fitted = pd.DataFrame(X, columns=["a", "b", "c"])
    other = pd.DataFrame(X, columns=["a", "b", "d"])
    swapped = fitted[["b", "a", "c"]]
    if dask:
        fitted, other, swapped = (dd.from_pandas(f, npartitions=2)
                                  for f in (fitted, other, swapped))
        y = to_dask(y, N // 2)
    est = fit(make(), kind, fitted, y)
    missing = (r"columns are missing: \['c'\]" if name == "ColumnTransformer" else
               r"feature names .* Missing: \['c'\]. Unexpected: \['d'\]")
    with pytest.raises(ValueError, match=missing):
        output(est, kind, other)
    if name == "ColumnTransformer":
        # Fitted on a dataframe it selects columns by name (as scikit-learn): order is free.
        np.testing.assert_array_equal(output(est, kind, swapped), output(est, kind, fitted))
        return
    with pytest.raises(ValueError, match="same but in a different order"):
        output(est, kind, swapped)


# --------------------------------------------------------------------------------------------
# MatrixFactorization: (user, item, rating) rows
# --------------------------------------------------------------------------------------------

def _ratings():
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(8), 5)
    items = rng.integers(0, 6, users.size)
    return pd.DataFrame({"user": users, "item": items,
                         "rating": rng.integers(1, 6, users.size).astype(float)})


MF = dict(n_factors=2, n_epochs=3, n_blocks=2, random_state=0)


@pytest.mark.parametrize("dask", ON)
def test_mf_unknown_ids_get_cold_start_prediction(dask):
    df = _ratings()
    train = dd.from_pandas(df, npartitions=2) if dask else df
    mf = MatrixFactorization(**MF).fit(train)
    new = pd.DataFrame({"user": [0, 99, 99], "item": [1, 1, 77]})
    pred = output(mf, "reg", dd.from_pandas(new, npartitions=1) if dask else new)
    assert np.isfinite(pred).all()
    # Unknown user and unknown item: the global mean; unknown user only: mean + item bias.
    assert pred[2] == pytest.approx(mf.global_mean_)
    j = int(np.searchsorted(mf.item_ids_, 1))
    assert pred[1] == pytest.approx(mf.global_mean_ + mf.item_bias_[j])


@pytest.mark.parametrize("dask", ON)
def test_mf_nan_or_inf_rating(dask):
    for bad in (np.nan, np.inf):
        df = _ratings()
        df.loc[3, "rating"] = bad
        train = dd.from_pandas(df, npartitions=2) if dask else df
        with pytest.raises(ValueError, match="ratings contain NaN or infinity"):
            MatrixFactorization(**MF).fit(train)


@pytest.mark.parametrize("dask", ON)
def test_mf_wrong_columns(dask):
    df = _ratings().rename(columns={"item": "movie"})
    train = dd.from_pandas(df, npartitions=2) if dask else df
    with pytest.raises(ValueError, match=r"no column\(s\) \['item'\]"):
        MatrixFactorization(**MF).fit(train)
    mf = MatrixFactorization(**MF).fit(_ratings())
    with pytest.raises(ValueError, match=r"no column\(s\) \['item'\]"):
        mf.predict(df[["user", "movie"]])


def test_mf_float_ids_and_missing_ratings_column():
    df = _ratings()
    with pytest.raises(ValueError, match="ids must be integers or strings"):
        MatrixFactorization(**MF).fit(df.assign(user=df["user"] + 0.5))
    with pytest.raises(ValueError, match=r"no column\(s\) \['rating'\]"):
        MatrixFactorization(**MF).fit(df[["user", "item"]])


def test_mf_recommend_without_seen_pairs_and_out_of_core_options(tmp_path):
    df = _ratings()
    mf = MatrixFactorization(**MF, remember_seen=False).fit(df)
    assert mf.seen_items_ is None
    with pytest.raises(ValueError, match=r"did not keep .* Pass exclude_seen=False, or refit "
                                         r"with remember_seen=True"):
        mf.recommend([0], k=2)
    items, _ = mf.recommend([0], k=2, exclude_seen=False)
    assert items.shape == (1, 2)
    with pytest.raises(ValueError, match=r"The 'persist' parameter of MatrixFactorization must "
                                         r"be a str among \{'auto'\} or an instance of 'bool'"):
        MatrixFactorization(**MF, persist="yes").fit(df)
    with pytest.raises(ValueError, match=r"The 'remember_seen' parameter of MatrixFactorization "
                                         r"must be a str among \{'auto'\} or an instance of "
                                         r"'bool'"):
        MatrixFactorization(**MF, remember_seen=None).fit(df)
    with pytest.raises(ValueError, match=r"The 'spill_dir' parameter of MatrixFactorization must "
                                         r"be an existing directory .* Got .*missing'\) "
                                         r"instead"):
        MatrixFactorization(**MF, spill_dir=tmp_path / "missing").fit(df)


# --------------------------------------------------------------------------------------------
# Sparse X (docs/sparse.md)
# --------------------------------------------------------------------------------------------

def _fit_dense_output(make, kind, X, y):
    """The fitted model's output on X, dense: decision values or probabilities where the
    estimator has them (a class at a tie of the decision value would follow its rounding)."""
    return _dense_output(fit(make(), kind, X, y), kind, X)


def _dense_output(est, kind, X):
    """:func:`_fit_dense_output` of an estimator already fitted."""
    if kind == "trans":
        return dense(est.transform(X))
    for method in ("decision_function", "predict_proba"):
        if hasattr(est, method):
            return dense(getattr(est, method)(X))
    return dense(est.predict(X))


@pytest.mark.parametrize("dask", ON_HEAVY)
@pytest.mark.parametrize("name", _value_checks(NAMES))
def test_sparse_X(name, dask, clean):
    """Sparse X works (same output as the densified X) or gives a TypeError saying what to do."""
    make, kind = _get(name)
    X, y = data(kind)
    Xs, ys = to_sparse(X, dask), (to_dask(y) if dask else y)
    if name == "StandardScaler":
        with pytest.raises(ValueError, match="Cannot center sparse matrices: pass "
                                             "`with_mean=False`"):
            fit(make(), kind, Xs, ys)
        return
    if name not in SPARSE_OK:
        with pytest.raises(TypeError, match=r"(\w+) does not accept sparse X .*densify it"):
            _fit_dense_output(make, kind, Xs, ys)
        return
    got = _fit_dense_output(make, kind, Xs, ys)
    want = _dense_output(clean(name, dask)[0], kind, wrap(X, y, dask)[0])
    np.testing.assert_allclose(got.astype(float), want.astype(float), rtol=1e-8, atol=1e-10)


SPARSE_NAMES = sorted(SPARSE_OK)
#: The sparse estimators whose stored-value and shape checks run in the quick tier: those of
#: :data:`QUICK_VALUE_CHECKS`, and for the families that have another estimator there (naive
#: Bayes, scalers, decomposition) their sparse code path's: MultinomialNB, MaxAbsScaler (NaN
#: kept, its own case), TruncatedSVD. The others, RandomizedSearchCV (:data:`SLOW_NAMES`)
#: included, run with the slow tests, as in the value checks.
QUICK_SPARSE = (QUICK_VALUE_CHECKS - SLOW_NAMES) | {"MultinomialNB", "MaxAbsScaler",
                                                    "TruncatedSVD"}
SPARSE_CASES = [n if n in QUICK_SPARSE else pytest.param(n, marks=pytest.mark.slow)
                for n in SPARSE_NAMES]


@pytest.mark.parametrize("dask", ON_HEAVY)
@pytest.mark.parametrize("name", SPARSE_CASES)
def test_sparse_nan_and_inf_in_the_stored_values(name, dask):
    make, kind = _get(name)
    X, y = data(kind)
    X[X == 0] = 1.0  # every value stored
    ys = to_dask(y) if dask else y
    for bad, message in ((np.nan, "contains NaN"), (np.inf, "contains infinity")):
        Xb = X.copy()
        Xb[3, 1] = bad
        if bad is np.nan and name in NAN_OK:  # MaxAbsScaler: NaN ignored, kept in the output
            out = _fit_dense_output(make, kind, to_sparse(Xb, dask), ys)
            assert np.isnan(out[3, 1]) and np.isfinite(np.delete(out, 3, axis=0)).all()
            continue
        with pytest.raises(ValueError, match=message):
            _fit_dense_output(make, kind, to_sparse(Xb, dask), ys)


@pytest.mark.parametrize("dask", ON)
@pytest.mark.parametrize("name", ["MultinomialNB", "ComplementNB"])
def test_sparse_negative_counts(name, dask):
    make, kind = _get(name)
    X, y = data(kind)
    X[5, 2] = -1.0
    with pytest.raises(ValueError, match=rf"{name} needs non-negative counts; X contains "
                                         r"negative values \(row block 0, e.g. -1.0 in column 2"):
        fit(make(), kind, to_sparse(X, dask), to_dask(y) if dask else y)


@pytest.mark.parametrize("dask", ON_HEAVY)
@pytest.mark.parametrize("name", SPARSE_CASES)
def test_sparse_wrong_shape(name, dask):
    """Another number of columns at predict time, or a y of another length, named clearly."""
    make, kind = _get(name)
    X, y = data(kind)
    est = fit(make(), kind, to_sparse(X, dask), to_dask(y) if dask else y)
    wider = to_sparse(np.hstack([X, X[:, :1]]), dask)
    inner = "Ridge" if name.endswith("SearchCV") else name  # a search predicts with its refit
    with pytest.raises(ValueError, match=rf"X has {D + 1} features, but {inner} is expecting "
                                         rf"{D} features"):
        dense(est.transform(wider) if kind == "trans" else est.predict(wider))
    if kind in ("clf", "reg"):
        # (A search on local data reports scikit-learn's wording, as for dense X.)
        with pytest.raises(ValueError, match=f"X has {N} rows but y has {N - 1}|inconsistent "
                                             rf"numbers of samples: \[{N}, {N - 1}\]"):
            fit(make(), kind, to_sparse(X, dask), to_dask(y[:-1]) if dask else y[:-1])
