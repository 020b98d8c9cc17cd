"""dml.metrics against scikit-learn 1.9, for local and Dask input cut into several partitionings."""
import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import sklearn.metrics as skm
from sklearn.exceptions import UndefinedMetricWarning

from conftest import QUICK_ON_PROCESS_CLUSTER
import dml.metrics as M

TOL = dict(rtol=1e-12, atol=1e-12)
N = 240
UNEVEN7 = (50, 13, 71, 37, 1, 40, 28)  # 7 uneven chunks, sum N


def close(a, b):
    if b is None:
        assert a is None
        return
    if isinstance(b, (np.ndarray, list)):
        assert isinstance(a, np.ndarray)
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                               equal_nan=True, **TOL)


def cut(v, how):
    """``v`` (NumPy, 1-D or 2-D) in one of the supported input types / partitionings."""
    v = np.asarray(v)
    if how == "numpy":
        return v
    if how == "list":
        return v.tolist()
    if how == "pandas":
        return pd.Series(v) if v.ndim == 1 else pd.DataFrame(v)
    if how.startswith("dask"):
        rows = {"dask1": len(v), "dask3": -(-len(v) // 3), "dask7": UNEVEN7}[how]
        return da.from_array(v, chunks=(rows,) + v.shape[1:])
    raise ValueError(how)


def frame(**columns):
    """Columns of one Dask dataframe (4 partitions): y as a Dask Series from a dataframe."""
    return dd.from_pandas(pd.DataFrame(columns), npartitions=4)


@pytest.fixture(scope="module")
def multiclass():
    rng = np.random.default_rng(0)
    classes = np.array(["ant", "bee", "cat", "dog"])
    yt = classes[rng.integers(0, 4, N)]
    yp = np.where(rng.random(N) < 0.5, yt, classes[rng.integers(0, 4, N)])
    yp[yp == "dog"] = "cat"  # a class never predicted: exercises zero_division
    return yt, yp, rng.random(N)


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(1)
    yt = (rng.random(N) < 0.4).astype(int)
    yp = np.where(rng.random(N) < 0.7, yt, 1 - yt)
    score = np.round(0.3 * yt + rng.random(N), 1)  # many ties
    return yt, yp, rng.integers(0, 4, N), score


# --------------------------------------------------------------------------------------------
# SPEC §11 worked example
# --------------------------------------------------------------------------------------------

SPEC_PRED = list("ABABCCCAB")
SPEC_TRUE = list("AAAACCCBB")


@pytest.mark.parametrize("how", ["list", "dask3", "frame"])
def test_spec_confusion_example(how):
    if how == "frame":
        df = frame(t=SPEC_TRUE, p=SPEC_PRED)
        yt, yp = df["t"], df["p"]
    else:
        yt, yp = cut(SPEC_TRUE, how), cut(SPEC_PRED, how)
    np.testing.assert_array_equal(M.confusion_matrix(yt, yp), [[2, 2, 0], [1, 1, 0], [0, 0, 3]])
    close(M.precision_score(yt, yp, average=None), [2 / 3, 1 / 3, 1])
    close(M.recall_score(yt, yp, average=None), [1 / 2, 1 / 2, 1])
    assert M.accuracy_score(yt, yp) == pytest.approx(6 / 9, abs=1e-15)
    assert M.zero_one_loss(yt, yp) == pytest.approx(3 / 9, abs=1e-15)


# --------------------------------------------------------------------------------------------
# Label metrics: equal to scikit-learn for every input type and partitioning
# --------------------------------------------------------------------------------------------

def label_metric_calls(binary_task):
    calls = [
        ("accuracy_score", {}), ("accuracy_score", {"normalize": False}),
        ("zero_one_loss", {}), ("confusion_matrix", {}),
        ("confusion_matrix", {"normalize": "true"}), ("confusion_matrix", {"normalize": "all"}),
        ("cohen_kappa_score", {}), ("cohen_kappa_score", {"weights": "quadratic"}),
    ]
    for avg in ([None, "micro", "macro", "weighted"] + (["binary"] if binary_task else [])):
        calls.append(("precision_recall_fscore_support", {"average": avg, "zero_division": 0}))
    if binary_task:
        calls += [("f1_score", {}), ("precision_score", {"pos_label": 0}),
                  ("fbeta_score", {"beta": 2.0})]
    else:
        calls += [("f1_score", {"average": "macro", "zero_division": 1.0}),
                  ("fbeta_score", {"beta": 0.5, "average": "weighted", "zero_division": 0}),
                  ("recall_score", {"average": None, "labels": ["dog", "ant", "cow"],
                                    "zero_division": 0}),
                  ("confusion_matrix", {"labels": ["dog", "ant", "cow"]})]
    return calls


def check_label_metrics(yt, yp, w, make, binary_task, weighted):
    a, b = make(yt), make(yp)
    sw = make(w) if weighted else None
    for fname, kw in label_metric_calls(binary_task):
        if fname == "cohen_kappa_score" and weighted:
            kw = dict(kw, sample_weight=sw)
            ref = getattr(skm, fname)(yt, yp, **dict(kw, sample_weight=w))
        else:
            kw = dict(kw, sample_weight=sw)
            ref = getattr(skm, fname)(yt, yp, **dict(kw, sample_weight=w if weighted else None))
        got = getattr(M, fname)(a, b, **kw)
        if isinstance(ref, tuple):
            for g, r in zip(got, ref):
                close(g, r)
        else:
            close(got, ref)
            if isinstance(ref, np.ndarray):
                assert got.dtype == ref.dtype, (fname, kw)


@pytest.mark.parametrize("how", ["numpy", "list", "pandas", "dask1", "dask3", "dask7"])
def test_multiclass_string_labels_match_sklearn(multiclass, how):
    yt, yp, w = multiclass
    check_label_metrics(yt, yp, w, lambda v: cut(v, how), False, weighted=how in ("numpy",
                                                                                  "dask7"))


@pytest.mark.parametrize("how", ["numpy", "dask3", "dask7"])
def test_binary_integer_labels_match_sklearn(binary, how):
    yt, yp, w, _ = binary
    check_label_metrics(yt, yp, w, lambda v: cut(v, how), True, weighted=how != "dask3")


def test_label_metrics_dask_series_from_dataframe(multiclass):
    yt, yp, w = multiclass
    df = frame(t=yt, p=yp, w=w)
    pieces = {id(yt): df["t"], id(yp): df["p"], id(w): df["w"]}
    check_label_metrics(yt, yp, w, lambda v: pieces[id(v)], False, weighted=True)


def test_realigns_differently_partitioned_inputs(multiclass):
    yt, yp, w = multiclass
    ref = skm.f1_score(yt, yp, average="macro", sample_weight=w)
    # Series of different partitionings, a Series against an array, unknown chunk sizes.
    t = dd.from_pandas(pd.Series(yt), npartitions=5)
    p = dd.from_pandas(pd.Series(yp), npartitions=2)
    close(M.f1_score(t, p, average="macro", sample_weight=w), ref)
    close(M.f1_score(t, cut(yp, "dask7"), average="macro", sample_weight=cut(w, "dask3")), ref)
    same_count = dd.from_pandas(pd.Series(yp), chunksize=70)  # 4 partitions, other lengths
    assert same_count.npartitions == dd.from_pandas(pd.Series(yt), npartitions=4).npartitions
    close(M.f1_score(dd.from_pandas(pd.Series(yt), npartitions=4), same_count, average="macro",
                     sample_weight=w), ref)
    df = frame(t=yt, p=yp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Dask: string → object in .values
        unknown = df["p"].values
    assert np.isnan(unknown.chunks[0][0])
    close(M.f1_score(df["t"], unknown, average="macro", sample_weight=w), ref)


def test_local_and_dask_give_identical_results(multiclass):
    yt, yp, w = multiclass
    local = M.precision_recall_fscore_support(yt, yp, sample_weight=w, zero_division=0)
    one_block = M.precision_recall_fscore_support(cut(yt, "dask1"), cut(yp, "dask1"),
                                                  sample_weight=cut(w, "dask1"),
                                                  zero_division=0)
    for a, b in zip(local, one_block):
        np.testing.assert_array_equal(a, b)
    assert isinstance(M.accuracy_score(cut(yt, "dask3"), cut(yp, "dask3")), float)


def test_integer_weights_keep_integer_confusion_matrix(binary):
    yt, yp, w, _ = binary
    got = M.confusion_matrix(cut(yt, "dask7"), cut(yp, "dask7"), sample_weight=cut(w, "dask3"))
    ref = skm.confusion_matrix(yt, yp, sample_weight=w)
    assert got.dtype == ref.dtype == np.int64
    np.testing.assert_array_equal(got, ref)


def test_zero_division_warnings_match_sklearn(multiclass):
    yt, yp, _ = multiclass
    with pytest.warns(UndefinedMetricWarning, match="Precision is ill-defined") as rec:
        got = M.precision_score(cut(yt, "dask3"), cut(yp, "dask3"), average="macro")
    assert all(r.category is UndefinedMetricWarning for r in rec)
    with pytest.warns(UndefinedMetricWarning):
        ref = skm.precision_score(yt, yp, average="macro")
    close(got, ref)
    close(M.precision_score(yt, yp, average=None, zero_division=np.nan),
          skm.precision_score(yt, yp, average=None, zero_division=np.nan))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        M.recall_score(yt, yp, average="macro")  # recall is defined for every class


def test_specificity(binary, multiclass):
    yt, yp, w, _ = binary
    # Binary specificity is the recall of the negative class.
    close(M.specificity_score(cut(yt, "dask7"), cut(yp, "dask7"), sample_weight=w),
          skm.recall_score(yt, yp, pos_label=0, sample_weight=w))
    yt, yp, w = multiclass
    mcm = skm.multilabel_confusion_matrix(yt, yp, sample_weight=w)
    tn, fp = mcm[:, 0, 0], mcm[:, 0, 1]
    support = mcm[:, 1, 0] + mcm[:, 1, 1]
    a, b, sw = cut(yt, "dask3"), cut(yp, "dask3"), cut(w, "dask3")
    close(M.specificity_score(a, b, average=None, sample_weight=sw), tn / (tn + fp))
    close(M.specificity_score(a, b, average="macro", sample_weight=sw), np.mean(tn / (tn + fp)))
    close(M.specificity_score(a, b, average="weighted", sample_weight=sw),
          np.average(tn / (tn + fp), weights=support))
    close(M.specificity_score(a, b, average="micro", sample_weight=sw), tn.sum() / (tn + fp).sum())


# --------------------------------------------------------------------------------------------
# log_loss
# --------------------------------------------------------------------------------------------

def test_log_loss_matches_sklearn(multiclass, binary):
    yt, _, w = multiclass
    rng = np.random.default_rng(2)
    proba = rng.dirichlet([0.3] * 4, N)
    proba[:5] = np.eye(4)[[0, 1, 2, 3, 0]]  # exact 0 and 1: clipping matters
    for how in ("numpy", "dask1", "dask7"):
        close(M.log_loss(cut(yt, how), cut(proba, how)), skm.log_loss(yt, proba))
        close(M.log_loss(cut(yt, how), cut(proba, how), sample_weight=cut(w, how),
                         normalize=False),
              skm.log_loss(yt, proba, sample_weight=w, normalize=False))
    df = frame(t=yt, w=w)
    close(M.log_loss(df["t"], cut(proba, "dask3"), sample_weight=df["w"]),
          skm.log_loss(yt, proba, sample_weight=w))
    # Labels missing from y_true, declared with `labels`.
    keep = yt != "dog"
    close(M.log_loss(cut(yt[keep], "dask3"), proba[keep], labels=["ant", "bee", "cat", "dog"]),
          skm.log_loss(yt[keep], proba[keep], labels=["ant", "bee", "cat", "dog"]))
    # Binary: the probability of the greater class, 1-D; float32 clips with float32's eps.
    yb = binary[0]
    p1 = np.clip(rng.random(N), 0, 1)
    p1[:3] = [0.0, 1.0, 1.0]
    close(M.log_loss(cut(yb, "dask7"), cut(p1, "dask7")), skm.log_loss(yb, p1))
    p32 = p1.astype(np.float32)
    np.testing.assert_allclose(M.log_loss(cut(yb, "dask3"), cut(p32, "dask3")),
                               skm.log_loss(yb, p32), rtol=1e-6)


def test_log_loss_errors(multiclass):
    yt, _, _ = multiclass
    proba3 = np.full((N, 3), 1 / 3)
    with pytest.raises(ValueError, match="different number of classes: 4 vs 3"):
        M.log_loss(cut(yt, "dask3"), cut(proba3, "dask3"))
    with pytest.raises(ValueError, match="number of classes in labels is different"):
        M.log_loss(yt, np.full((N, 5), 0.2), labels=["ant", "bee", "cat", "dog"])
    with pytest.raises(ValueError, match="only one label"):
        M.log_loss(cut(["a"] * 4, "dask3"), [0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="greater than 1"):
        M.log_loss([0, 1], [0.5, 1.5])
    with pytest.raises(ValueError, match="not belonging to the passed labels"):
        M.log_loss(["a", "b", "c"], np.full((3, 2), 0.5), labels=["a", "b"])
    with pytest.warns(UserWarning, match="do not sum to one"):
        M.log_loss([0, 1, 2], np.full((3, 3), 0.5))


# --------------------------------------------------------------------------------------------
# roc_auc_score
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["numpy", "dask1", "dask3", "dask7"])
def test_binary_roc_auc_exact_with_ties(binary, how):
    yt, _, w, score = binary
    assert len(np.unique(score)) < N / 5  # heavily tied
    fw = np.where(np.arange(N) % 9 == 0, 0.0, w / 3)  # float weights with zeros
    a, s = cut(yt, how), cut(score, how)
    close(M.roc_auc_score(a, s), skm.roc_auc_score(yt, score))
    close(M.roc_auc_score(a, s, sample_weight=cut(fw, how)),
          skm.roc_auc_score(yt, score, sample_weight=fw))
    close(M.roc_auc_score(a, s, sample_weight=cut(w, how)),
          skm.roc_auc_score(yt, score, sample_weight=w))
    close(M.roc_auc_score(a, s, max_fpr=0.3), skm.roc_auc_score(yt, score, max_fpr=0.3))


def test_roc_auc_string_labels_and_dataframe_series(binary):
    yt, _, w, score = binary
    labels = np.array(["neg", "pos"])[yt]
    rng = np.random.default_rng(3)
    cont = rng.normal(size=N) + yt  # all distinct
    df = frame(t=labels, s=cont, w=w)
    close(M.roc_auc_score(df["t"], df["s"], sample_weight=df["w"]),
          skm.roc_auc_score(labels, cont, sample_weight=w))


@pytest.mark.parametrize("how", ["numpy", "dask7"])
def test_multiclass_roc_auc(multiclass, how):
    yt, _, w = multiclass
    rng = np.random.default_rng(4)
    proba = np.round(rng.dirichlet([1] * 4, N), 2)
    proba[:, -1] = 1 - proba[:, :-1].sum(axis=1)
    a, p, sw = cut(yt, how), cut(proba, how), cut(w, how)
    for average in ("macro", "weighted", "micro", None):
        close(M.roc_auc_score(a, p, multi_class="ovr", average=average, sample_weight=sw),
              skm.roc_auc_score(yt, proba, multi_class="ovr", average=average, sample_weight=w))
    for average in ("macro", "weighted"):
        close(M.roc_auc_score(a, p, multi_class="ovo", average=average),
              skm.roc_auc_score(yt, proba, multi_class="ovo", average=average))
    # Explicit labels, one of them absent from y_true: NaN for that class, as scikit-learn.
    keep = yt != "bee"
    with pytest.warns(UndefinedMetricWarning, match="Only one class"):
        got = M.roc_auc_score(cut(yt[keep], "dask3"), proba[keep], multi_class="ovr",
                              labels=["ant", "bee", "cat", "dog"], average=None)
    with pytest.warns(UndefinedMetricWarning):
        ref = skm.roc_auc_score(yt[keep], proba[keep], multi_class="ovr",
                                labels=["ant", "bee", "cat", "dog"], average=None)
    close(got, ref)


def test_roc_auc_histogram_within_stated_bound(binary):
    yt, _, w, _ = binary
    rng = np.random.default_rng(5)
    score = rng.random(N) + 0.5 * yt
    exact = skm.roc_auc_score(yt, score, sample_weight=w)
    for n_bins in (10, 100):
        got = M.roc_auc_score(cut(yt, "dask7"), cut(score, "dask7"), sample_weight=w,
                              method="histogram", n_bins=n_bins)
        # Bound: half the positive-negative weight that shares a bin.
        edges = np.linspace(score.min(), score.max(), n_bins + 1)
        b = np.clip(np.searchsorted(edges, score, side="right") - 1, 0, n_bins - 1)
        pos = np.bincount(b, weights=w * yt, minlength=n_bins)
        neg = np.bincount(b, weights=w * (1 - yt), minlength=n_bins)
        bound = 0.5 * (pos * neg).sum() / (pos.sum() * neg.sum())
        assert abs(got - exact) <= bound + 1e-12
    # With few distinct scores every score has its own bin: exact.
    tied = np.round(score, 1)
    close(M.roc_auc_score(cut(yt, "dask3"), cut(tied, "dask3"), method="histogram",
                          n_bins=10_000, score_range=(tied.min(), tied.max())),
          skm.roc_auc_score(yt, tied))


def test_roc_auc_single_class_is_nan_with_warning():
    # scikit-learn 1.9 warns and returns NaN (it no longer raises).
    with pytest.warns(UndefinedMetricWarning, match="Only one class is present in y_true"):
        got = M.roc_auc_score(cut([1, 1, 1, 1], "dask3"), cut([0.1, 0.2, 0.3, 0.4], "dask3"))
    assert np.isnan(got)


def test_roc_auc_errors():
    with pytest.raises(ValueError, match=r"multi_class must be in \('ovo', 'ovr'\)"):
        M.roc_auc_score([0, 1, 2], np.full((3, 3), 1 / 3))
    with pytest.raises(ValueError, match="Number of classes in y_true not equal"):
        M.roc_auc_score([0, 1, 2], np.full((3, 4), 0.25), multi_class="ovr")
    with pytest.raises(ValueError, match="should sum up to 1.0"):
        M.roc_auc_score([0, 1, 2], np.full((3, 3), 0.5), multi_class="ovr")
    with pytest.raises(ValueError, match="y_score has 2 columns"):
        M.roc_auc_score([0, 1, 1], np.full((3, 2), 0.5))
    with pytest.raises(ValueError, match="y_score contains NaN"):
        M.roc_auc_score(cut([0, 1, 1], "dask3"), cut([0.1, np.nan, 0.2], "dask3"))
    with pytest.raises(ValueError, match="method must be"):
        M.roc_auc_score([0, 1], [0.1, 0.2], method="sort")


# --------------------------------------------------------------------------------------------
# Regression
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(6)
    # A large offset: R²'s denominator must not come from Σy² - (Σy)²/n.
    yt = 1e6 + rng.normal(size=(N, 3)) * [1, 10, 0.1]
    yp = yt + rng.normal(size=(N, 3))
    return yt, yp, rng.random(N)


@pytest.mark.parametrize("how", ["numpy", "pandas", "dask1", "dask3", "dask7"])
def test_regression_metrics_match_sklearn(regression, how):
    yt, yp, w = regression
    for y_true, y_pred in ((yt[:, 0], yp[:, 0]), (yt, yp)):
        a, b = cut(y_true, how), cut(y_pred, how)
        for weighted in (False, True):
            sw = cut(w, how) if weighted else None
            ref_w = w if weighted else None
            for fname in ("mean_squared_error", "root_mean_squared_error",
                          "mean_absolute_error", "r2_score"):
                got = getattr(M, fname)(a, b, sample_weight=sw)
                close(got, getattr(skm, fname)(y_true, y_pred, sample_weight=ref_w))
                assert isinstance(got, float)
            if y_true.ndim == 2:
                for mo in ("raw_values", [0.2, 0.3, 0.5]) + (("variance_weighted",)
                                                             if not weighted else ()):
                    close(M.r2_score(a, b, sample_weight=sw, multioutput=mo),
                          skm.r2_score(y_true, y_pred, sample_weight=ref_w, multioutput=mo))
                    close(M.mean_squared_error(a, b, multioutput="raw_values"),
                          skm.mean_squared_error(y_true, y_pred, multioutput="raw_values"))


def test_regression_dask_series_from_dataframe(regression):
    yt, yp, w = regression
    df = frame(t=yt[:, 1], p=yp[:, 1], w=w)
    for fname in ("mean_squared_error", "mean_absolute_error", "r2_score"):
        close(getattr(M, fname)(df["t"], df["p"], sample_weight=df["w"]),
              getattr(skm, fname)(yt[:, 1], yp[:, 1], sample_weight=w))
    # Mixed: a Series against an array with other chunks; a dataframe against a 2-D array.
    close(M.r2_score(df["t"], cut(yp[:, 1], "dask7")), skm.r2_score(yt[:, 1], yp[:, 1]))
    pdf = dd.from_pandas(pd.DataFrame(yt), npartitions=3)
    close(M.r2_score(pdf, cut(yp, "dask7"), multioutput="raw_values"),
          skm.r2_score(yt, yp, multioutput="raw_values"))


def test_r2_edge_cases():
    with pytest.warns(UndefinedMetricWarning, match="less than two samples"):
        assert np.isnan(M.r2_score([1.0], [2.0]))
    const = cut([2.0] * 10, "dask3")
    assert M.r2_score(const, [2.0] * 10) == 1.0
    assert M.r2_score(const, [2.0] * 9 + [3.0]) == 0.0
    assert M.r2_score(const, [2.0] * 9 + [3.0], force_finite=False) == -np.inf
    # A constant y_true is detected exactly even when its mean is not (0.1 + 0.1 + 0.1 != 0.3).
    assert M.r2_score([0.1] * 3, [0.2, 0.1, 0.1]) == 0.0


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

def test_length_mismatch_names_both_lengths():
    with pytest.raises(ValueError, match="y_true has 5 samples but y_pred has 4"):
        M.accuracy_score([0, 1, 0, 1, 1], [0, 1, 0, 1])
    with pytest.raises(ValueError, match="y_true has 5 samples but y_pred has 4"):
        M.f1_score(cut([0, 1, 0, 1, 1], "dask3"), cut([0, 1, 0, 1], "dask3"))
    t = dd.from_pandas(pd.Series([0, 1, 0, 1, 1]), npartitions=2)
    p = dd.from_pandas(pd.Series([0, 1, 0, 1]), npartitions=2)
    with pytest.raises(ValueError, match="y_true has 5 samples but y_pred has 4"):
        M.confusion_matrix(t, p)
    with pytest.raises(ValueError, match="y_true has 5 samples but y_pred has 4"):
        M.mean_squared_error(t.astype(float), p.astype(float))
    with pytest.raises(ValueError, match="y_true has 5 samples but y_pred has 4"):
        M.r2_score(cut(np.ones(5), "dask3"), np.ones(4))
    with pytest.raises(ValueError, match="sample_weight has 3"):
        M.accuracy_score(t, t, sample_weight=cut([1, 1, 1], "dask1"))


@pytest.mark.parametrize("how", ["numpy", "dask7"])
def test_nan_in_regression_predictions(regression, how):
    yt, yp, _ = regression
    bad = yp[:, 0].copy()
    bad[60] = np.nan
    with pytest.raises(ValueError, match="Input y_pred contains NaN"):
        M.mean_squared_error(cut(yt[:, 0], how), cut(bad, how))
    with pytest.raises(ValueError, match="Input y_true contains NaN"):
        M.r2_score(cut(bad, how), cut(yt[:, 0], how))
    with pytest.raises(ValueError, match="y_pred contains infinity"):
        M.mean_absolute_error(yt[:, 0], np.where(np.isnan(bad), np.inf, bad))


def test_classification_input_errors():
    with pytest.raises(ValueError, match="average has to be one of"):
        M.precision_score([0, 1], [0, 1], average="mean")
    with pytest.raises(ValueError, match="average='samples' is for multilabel"):
        M.recall_score([0, 1], [0, 1], average="samples")
    with pytest.raises(ValueError, match="Target is multiclass but average='binary'"):
        M.f1_score(cut([0, 1, 2], "dask1"), cut([0, 1, 2], "dask1"))
    with pytest.raises(ValueError, match="pos_label=1 is not a valid label"):
        M.precision_score(["a", "b"], ["a", "b"])
    with pytest.raises(ValueError, match="mix of binary and continuous"):
        M.accuracy_score([0, 1, 1], [0, 0.5, 1])
    with pytest.raises(ValueError, match="Mix of label input types"):
        M.accuracy_score(cut(np.array(["a", "b", "c"]), "dask3"), cut([0, 1, 1], "dask3"))
    with pytest.raises(ValueError, match="Input y_true contains NaN"):
        M.accuracy_score(cut([0.0, 1, np.nan, 1], "dask3"), cut([0, 1, 1, 1], "dask3"))
    with pytest.raises(ValueError, match="multilabel"):
        M.accuracy_score(np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match="At least one label specified must be in y_true"):
        M.confusion_matrix([0, 1], [0, 1], labels=[5])
    with pytest.raises(ValueError, match="zero_division must be"):
        M.f1_score([0, 1], [0, 1], zero_division=2)


# --------------------------------------------------------------------------------------------
# On real clusters (in-process and multi-process)
# --------------------------------------------------------------------------------------------

# Quick tier: the process cluster; the in-process cluster with the slow tests.
@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_metrics_on_cluster(client, multiclass, binary, regression):
    yt, yp, w = multiclass
    df = frame(t=yt, p=yp, w=w)
    close(M.accuracy_score(df["t"], df["p"], sample_weight=df["w"]),
          skm.accuracy_score(yt, yp, sample_weight=w))
    np.testing.assert_array_equal(M.confusion_matrix(cut(yt, "dask7"), cut(yp, "dask3")),
                                  skm.confusion_matrix(yt, yp))
    for g, r in zip(M.precision_recall_fscore_support(df["t"], df["p"], sample_weight=df["w"],
                                                      average="weighted", zero_division=0),
                    skm.precision_recall_fscore_support(yt, yp, sample_weight=w,
                                                        average="weighted", zero_division=0)):
        close(g, r)
    rng = np.random.default_rng(7)
    proba = rng.dirichlet([1] * 4, N)
    close(M.log_loss(df["t"], cut(proba, "dask7"), sample_weight=df["w"]),
          skm.log_loss(yt, proba, sample_weight=w))
    close(M.roc_auc_score(cut(yt, "dask7"), cut(proba, "dask7"), multi_class="ovr",
                          average="weighted", sample_weight=cut(w, "dask3")),
          skm.roc_auc_score(yt, proba, multi_class="ovr", average="weighted", sample_weight=w))
    byt, _, _, score = binary
    close(M.roc_auc_score(cut(byt, "dask7"), cut(score, "dask7")), skm.roc_auc_score(byt, score))
    ryt, ryp, rw = regression
    close(M.r2_score(cut(ryt, "dask7"), cut(ryp, "dask3"), sample_weight=cut(rw, "dask1"),
                     multioutput="raw_values"),
          skm.r2_score(ryt, ryp, sample_weight=rw, multioutput="raw_values"))
    with pytest.raises(ValueError, match="Input y_pred contains NaN"):
        M.mean_squared_error(cut(ryt[:, 0], "dask7"),
                             cut(np.where(np.arange(N) == 100, np.nan, ryp[:, 0]), "dask7"))
