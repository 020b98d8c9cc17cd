"""Naive Bayes classifiers fitted by one pass of per-block count reductions (SPEC §7).

Every parameter of a naive Bayes model is a sum over rows, so a fit is one map-reduce: each block
returns its statistics keyed by the labels (and, for :class:`CategoricalNB`, the categories) that
it happens to contain, and an associative ``combine`` merges them by label. Neither the classes
nor the categories need to be known before the pass, and all classes are counted together (one
pass over the data, where dask-ml's GaussianNB makes one per class).

The four estimators follow scikit-learn 1.9 (same constructor parameters and fitted attributes)
and add a ``missing`` parameter implementing the missing-value rule of SPEC §7: with
``missing="ignore"`` a missing attribute is not counted for that attribute at fit time and is
skipped in the product at predict time.
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import unique_labels

from dml._blocks import BlockSpec, as_blocks, is_dask
from dml._param_validation import Integral, Interval, Real, StrOptions, invalid_parameter
from dml.base import DaskEstimatorMixin, check_is_fitted, check_weights_not_all_zero, fit_context

__all__ = ["GaussianNB", "MultinomialNB", "BernoulliNB", "CategoricalNB"]


# --------------------------------------------------------------------------------------------
# Label bookkeeping shared by the kernels and the combines
# --------------------------------------------------------------------------------------------

def _check_labels(y, est, index):
    """Class labels must be discrete (as scikit-learn's check_classification_targets)."""
    if y.dtype.kind != "f":
        return
    if not np.isfinite(y).all():
        raise ValueError(f"{est}: Input y contains infinity (row block {index}); every row "
                         "needs a class label.")
    frac = y != np.floor(y)
    if frac.any():
        raise ValueError(f"{est}: Unknown label type: continuous (y holds "
                         f"{_show(y[frac][0])} in row block {index}). Naive Bayes needs class "
                         "labels; use a regressor for continuous targets or encode the labels.")


# Kernel strategies, chosen by the number of classes in a block (timings: 100k-row blocks,
# one core; see benchmarks/micro_naive_bayes.py):
#: Up to this many classes, per-class sums are one BLAS product ``onehot @ X`` (as scikit-learn
#: does) and no full-size temporary is made. Its cost grows with the number of classes; above
#: it the rows are grouped by class in one copy of the block instead.
_ONEHOT_CLASSES = 16
#: Up to this many classes, reductions over rows grouped by class are one contiguous NumPy call
#: per class; above it the Python loop costs more than np.add.reduceat (slower per element).
_LOOP_CLASSES = 64
#: Elements per row chunk of GaussianNB's centred pass (a 2 MiB, cache-sized buffer).
_CHUNK_ELEMENTS = 1 << 18


def _labels(y, est="estimator", index=0):
    """Sorted local labels of one block, the label index of every row and the row counts.

    Gives ``np.unique(y, return_inverse=True)`` (plus counts) faster: integer labels of a
    small range (and integral floats, booleans) are indexed with a bincount, strings and objects
    by hashing the rows and sorting only the distinct values.
    """
    _check_labels(y, est, index)
    if y.dtype.kind in "iufb" and len(y):
        fast = _small_int_labels(y)
        if fast is not None:
            return fast
    codes = None
    if y.dtype.kind in "OU":
        try:
            codes, uniques = pd.factorize(y, use_na_sentinel=False)
        except TypeError:  # unhashable labels: let np.unique decide
            codes = None
    try:
        if codes is not None:
            # pd.factorize(sort=True) would order mixed types silently; np.unique refuses.
            classes, rank = np.unique(uniques, return_inverse=True)
            inverse = rank.reshape(-1)[codes]
        else:
            classes, inverse = np.unique(y, return_inverse=True)
    except TypeError as exc:
        raise TypeError(f"{est}: y mixes labels of different types that cannot be sorted "
                        f"({exc}); use one type for all labels (e.g. all strings)") from None
    inverse = inverse.reshape(-1).astype(np.intp, copy=False)
    return classes, inverse, np.bincount(inverse, minlength=len(classes))


def _small_int_labels(y):
    """``_labels`` by one bincount when y holds integers of a small range, else None."""
    dtype = y.dtype
    if dtype.kind == "b":
        y = y.view(np.uint8)
    lo, hi = y.min(), y.max()
    if dtype.kind == "f" and not (abs(lo) < 2.0 ** 53 and abs(hi) < 2.0 ** 53):
        return None
    span = int(hi) - int(lo)
    if span > 2 * len(y) + 1024:
        return None
    # Exact: the differences are in [0, span] (signed ints wrap back into that range in int64).
    shifted = y.astype(np.int64) - np.int64(lo) if dtype.kind == "i" else y - lo
    idx = shifted.astype(np.intp, copy=False)
    cnt = np.bincount(idx, minlength=span + 1)
    present = np.flatnonzero(cnt)
    if len(present) == span + 1:
        inverse = idx
    else:
        lut = np.zeros(span + 1, dtype=np.intp)
        lut[present] = np.arange(len(present))
        inverse = lut[idx]
    if dtype.kind == "i":
        classes = (present.astype(np.int64) + np.int64(lo)).astype(dtype)
    else:
        classes = (present.astype(y.dtype) + lo).astype(dtype)
    return classes, inverse, cnt[present]


def _class_order(inverse, n_classes):
    """Stable row order grouping the rows by label (a radix sort for up to 65536 labels)."""
    key = inverse.astype(np.uint8 if n_classes <= 256 else
                         np.uint16 if n_classes <= 65536 else np.intp, copy=False)
    return np.argsort(key, kind="stable")


class _Segments:
    """Per-class reductions over a block whose rows are grouped by class.

    Class c owns rows ``bounds[c]:bounds[c + 1]``. With few classes each reduction is one
    contiguous NumPy call per class (no temporaries); with many, one np.add.reduceat.
    """

    def __init__(self, counts):
        self.counts = counts
        self.bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
        self.loop = len(counts) <= _LOOP_CLASSES

    def _ranges(self):
        return zip(self.bounds[:-1], self.bounds[1:])

    def sum(self, A, w=None):
        """(L, d) per-class column sums of A, weighted by w if given."""
        if self.loop:
            return np.stack([A[a:b].sum(axis=0) if w is None else w[a:b] @ A[a:b]
                             for a, b in self._ranges()])
        return np.add.reduceat(A if w is None else A * w[:, None], self.bounds[:-1], axis=0)

    def sumsq(self, A, w=None):
        """(L, d) per-class column sums of A², weighted by w if given."""
        if self.loop:
            return np.stack([np.einsum("ij,ij->j", A[a:b], A[a:b]) if w is None else
                             np.einsum("i,ij,ij->j", w[a:b], A[a:b], A[a:b])
                             for a, b in self._ranges()])
        sq = A * A
        if w is not None:
            sq *= w[:, None]
        return np.add.reduceat(sq, self.bounds[:-1], axis=0)

    def center(self, A, M, out):
        """``out = A - M[class of each row]``; out may be A itself."""
        if self.loop:
            for c, (a, b) in enumerate(self._ranges()):
                np.subtract(A[a:b], M[c], out=out[a:b])
        else:
            np.subtract(A, np.repeat(M, self.counts, axis=0), out=out)
        return out


def _missing_mask(X, missing):
    """Where X is NaN, or None when nothing is missing.

    Block validation has already refused NaN unless ``missing="ignore"``; even then one sum
    (finite means no NaN) spares the full isnan pass in the common case.
    """
    if missing != "ignore" or np.isfinite(np.sum(X)):
        return None
    nan = np.isnan(X)
    return nan if nan.any() else None


def _union(arrays, what: str):
    """Sorted union of sorted unique key arrays (labels or categories) from several blocks."""
    arrays = [np.asarray(a) for a in arrays]
    if len(arrays) == 1:
        return arrays[0]
    try:
        return np.unique(np.concatenate(arrays))
    except TypeError:
        kinds = sorted({type(v).__name__ for a in arrays for v in a.tolist()})
        raise TypeError(f"{what} mixes values of different types ({', '.join(kinds)}) across "
                        "row blocks; they cannot be sorted. Use one type per column / for "
                        "the labels.") from None


def _positions(union, keys):
    """Index of every key in the sorted ``union`` (every key is present)."""
    return np.searchsorted(union, keys) if len(keys) else np.zeros(0, dtype=np.intp)


def _show(v):
    """repr of a value for an error message, without NumPy's scalar wrapper."""
    return repr(v.item() if isinstance(v, np.generic) else v)


def _safe_div(a, b):
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape), where=b != 0)


def _drop_none(parts):
    return [p for p in parts if p is not None]


# --------------------------------------------------------------------------------------------
# GaussianNB: per-class weighted (count, mean, M2) and global unweighted (count, mean, M2)
# --------------------------------------------------------------------------------------------

def _gaussian_block(index, X, y, w, est, missing="error"):
    """Per-class statistics of one block, two-pass within each class (numerically stable).

    The unweighted statistics of all of X (for epsilon_; scikit-learn uses
    ``np.var(X, axis=0)``) are Chan merges of the unweighted per-class ones, which are the
    weighted ones when there are no sample weights (otherwise both are computed).

    Counts are per (class, feature) so that a missing value (NaN, only present when the
    estimator allows it) leaves its feature out for that row and nothing else. That path makes
    two more full-size temporaries (the zero-filled block and the mask) and is slower.
    """
    n_rows, d = X.shape
    if n_rows == 0:
        return None
    classes, inverse, counts = _labels(y, est, index)
    nan = _missing_mask(X, missing)
    obs = None
    if nan is not None:
        X = np.where(nan, 0.0, X)
        obs = (~nan).astype(np.float64)
    unweighted = (None, counts.astype(np.float64))
    if w is None:
        weightings = [unweighted]
    else:
        w = np.asarray(w, dtype=np.float64)
        weightings = [(w, np.bincount(inverse, weights=w, minlength=len(classes))), unweighted]
    moments = (_moments_onehot if len(classes) <= _ONEHOT_CLASSES else _moments_grouped)
    (n, mean, m2), *rest = moments(X, inverse, counts, weightings, obs)
    un, umean, um2 = rest[0] if rest else (n, mean, m2)
    gn = un.sum(axis=0)
    gmean = _safe_div((un * umean).sum(axis=0), gn)
    gm2 = um2.sum(axis=0) + (un * (umean - gmean) ** 2).sum(axis=0)
    return {"classes": classes, "wsum": weightings[0][1], "n": n, "mean": mean, "m2": m2,
            "gn": gn, "gmean": gmean, "gm2": gm2}


def _moments_onehot(X, inverse, counts, weightings, obs):
    """Per-class (n, mean, M2) for each ``(weights, class totals)`` in weightings, few classes.

    Sums are one BLAS product with the (weighted) one-hot label matrix; the centred second pass
    runs over cache-sized row chunks with one reused buffer, so no full-size temporary is made.
    """
    L, (n_rows, d) = len(counts), X.shape
    onehot = inverse == np.arange(L)[:, None]
    Ys = [onehot.astype(np.float64) if w is None else np.where(onehot, w, 0.0)
          for w, _ in weightings]
    out = []
    for Y, (_, totals) in zip(Ys, weightings):
        nc = np.repeat(totals[:, None], d, axis=1) if obs is None else Y @ obs
        out.append([nc, _safe_div(Y @ X, nc), np.zeros((L, d))])
    rows = min(n_rows, max(64, _CHUNK_ELEMENTS // d))
    buf = np.empty((rows, d))
    for r0 in range(0, n_rows, rows):
        rs = slice(r0, r0 + rows)
        idx = inverse[rs]
        dev = buf[:len(idx)]
        for Y, (_, mean, m2) in zip(Ys, out):
            np.take(mean, idx, axis=0, out=dev, mode="clip")
            np.subtract(X[rs], dev, out=dev)
            if obs is not None:
                dev *= obs[rs]
            dev *= dev
            m2 += Y[:, rs] @ dev
    return out


def _moments_grouped(X, inverse, counts, weightings, obs):
    """As :func:`_moments_onehot` for many classes: rows grouped by class in one copy.

    The copy then holds the deviations (a second buffer when there are two weightings, which
    both need the grouped values).
    """
    order = _class_order(inverse, len(counts))
    seg = _Segments(counts)
    Xs = X.take(order, axis=0)
    obs_s = None if obs is None else obs[order]
    buf = Xs if len(weightings) == 1 else np.empty_like(Xs)
    out = []
    for w, totals in weightings:
        ws = None if w is None else w[order]
        nc = (np.repeat(totals[:, None], X.shape[1], axis=1) if obs is None else
              seg.sum(obs_s, ws))
        mean = _safe_div(seg.sum(Xs, ws), nc)
        dev = seg.center(Xs, mean, out=buf)
        if obs_s is not None:
            dev *= obs_s
        out.append([nc, mean, seg.sumsq(dev, ws)])
    return out


def _chan(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """Chan, Golub & LeVeque's parallel merge of (count, mean, sum of squared deviations).

    Exact when either side is empty, so merging into a zero state reproduces the other side.
    """
    n = n_a + n_b
    frac = _safe_div(n_b, n)
    delta = mean_b - mean_a
    mean = mean_a + delta * frac
    m2 = m2_a + m2_b + delta * delta * n_a * frac
    return n, mean, m2


def _gaussian_combine(parts):
    parts = _drop_none(parts)
    if not parts:
        return None
    classes = _union([p["classes"] for p in parts], "y")
    L, d = len(classes), parts[0]["n"].shape[1]
    out = {"classes": classes, "wsum": np.zeros(L), "n": np.zeros((L, d)),
           "mean": np.zeros((L, d)), "m2": np.zeros((L, d)),
           "gn": np.zeros(d), "gmean": np.zeros(d), "gm2": np.zeros(d)}
    for p in parts:
        idx = _positions(classes, p["classes"])
        out["wsum"][idx] += p["wsum"]
        n, mean, m2 = _chan(out["n"][idx], out["mean"][idx], out["m2"][idx],
                            p["n"], p["mean"], p["m2"])
        out["n"][idx], out["mean"][idx], out["m2"][idx] = n, mean, m2
        out["gn"], out["gmean"], out["gm2"] = _chan(out["gn"], out["gmean"], out["gm2"],
                                                    p["gn"], p["gmean"], p["gm2"])
    return out


def _gaussian_jll(X, theta, var, class_prior):
    # Same arithmetic as scikit-learn's GaussianNB._joint_log_likelihood when nothing is missing.
    nan = np.isnan(X)
    has_nan = bool(nan.any())
    cols = []
    with np.errstate(divide="ignore"):
        log_prior = np.log(class_prior)
    for i in range(len(class_prior)):
        if not has_nan:
            n_ij = -0.5 * np.sum(np.log(2.0 * np.pi * var[i, :]))
            n_ij = n_ij - 0.5 * np.sum(((X - theta[i, :]) ** 2) / var[i, :], axis=1)
        else:
            term = np.log(2.0 * np.pi * var[i, :]) + ((X - theta[i, :]) ** 2) / var[i, :]
            n_ij = -0.5 * np.where(nan, 0.0, term).sum(axis=1)
        cols.append(log_prior[i] + n_ij)
    return np.stack(cols).T.reshape(X.shape[0], len(class_prior))


# --------------------------------------------------------------------------------------------
# MultinomialNB / BernoulliNB: per-class feature sums and missing counts
# --------------------------------------------------------------------------------------------

def _binarize(X, threshold):
    out = (X > threshold).astype(np.float64)
    nan = np.isnan(X)
    if nan.any():
        out[nan] = np.nan
    return out


def _count_block(index, X, y, w, binarize, non_negative, estimator, missing="error"):
    """Per-class weighted feature sums, class weights and weights of missing entries."""
    if X.shape[0] == 0:
        return None
    nan = _missing_mask(X, missing)
    if binarize is not None:
        X = (X > binarize).astype(np.float64)  # NaN > t is False; `nan` remembers them
    elif nan is not None:
        X = np.where(nan, 0.0, X)
    if non_negative and X.min() < 0:
        r, c = np.argwhere(X < 0)[0]
        raise ValueError(
            f"{estimator} needs non-negative counts; X contains negative values (row block "
            f"{index}, e.g. {_show(X[r, c])} in column {c}). Negative values in data are not "
            "counts: use GaussianNB for real-valued features or BernoulliNB with a binarize "
            "threshold.")
    classes, inverse, counts = _labels(y, estimator, index)
    L = len(classes)
    wf = None if w is None else np.asarray(w, dtype=np.float64)
    class_count = (counts.astype(np.float64) if wf is None else
                   np.bincount(inverse, weights=wf, minlength=L))
    if L <= _ONEHOT_CLASSES:
        # scikit-learn's Y.T @ X with Y the (weighted) one-hot labels: one BLAS pass over X.
        onehot = inverse == np.arange(L)[:, None]
        Y = onehot.astype(np.float64) if wf is None else np.where(onehot, wf, 0.0)
        fc = Y @ X
        miss = None if nan is None else Y @ nan.astype(np.float64)
    else:
        order = _class_order(inverse, L)
        seg = _Segments(counts)
        ws = None if wf is None else wf[order]
        fc = seg.sum(X.take(order, axis=0), ws)
        miss = None if nan is None else seg.sum(nan[order].astype(np.float64), ws)
    if miss is None:
        miss = np.zeros((L, X.shape[1]))
    return {"classes": classes, "class_count": class_count, "feature_count": fc,
            "missing_count": miss}


def _count_combine(parts):
    parts = _drop_none(parts)
    if not parts:
        return None
    classes = _union([p["classes"] for p in parts], "y")
    L, d = len(classes), parts[0]["feature_count"].shape[1]
    out = {"classes": classes, "class_count": np.zeros(L), "feature_count": np.zeros((L, d)),
           "missing_count": np.zeros((L, d))}
    for p in parts:
        idx = _positions(classes, p["classes"])
        for k in ("class_count", "feature_count", "missing_count"):
            out[k][idx] += p[k]
    return out


def _multinomial_jll(X, feature_log_prob, class_log_prior):
    nan = np.isnan(X)
    if nan.any():
        X = np.where(nan, 0.0, X)  # a missing count contributes nothing
    return X @ feature_log_prob.T + class_log_prior


def _bernoulli_jll(X, feature_log_prob, class_log_prior, binarize):
    if binarize is not None:
        X = _binarize(X, binarize)
    neg_prob = np.log(1 - np.exp(feature_log_prob))
    nan = np.isnan(X)
    if not nan.any():
        # scikit-learn's BernoulliNB._joint_log_likelihood
        jll = X @ (feature_log_prob - neg_prob).T
        jll += class_log_prior + neg_prob.sum(axis=1)
        return jll
    observed = (~nan).astype(np.float64)
    jll = np.where(nan, 0.0, X) @ (feature_log_prob - neg_prob).T
    jll += observed @ neg_prob.T + class_log_prior
    return jll


# --------------------------------------------------------------------------------------------
# CategoricalNB: per-feature (categories, class × category counts)
# --------------------------------------------------------------------------------------------

def _feature_label(names, j):
    return f"{names[j]!r}" if names is not None else f"{j}"


def _column(X, j):
    return X.iloc[:, j] if isinstance(X, pd.DataFrame) else X[:, j]


def _numeric_values(col, est, feat):
    """A column of integer codes as int or float NumPy values (NaN = missing)."""
    if isinstance(col, pd.Series):
        if isinstance(col.dtype, np.dtype) and col.dtype.kind in "iu":
            return col.to_numpy()
        if isinstance(col.dtype, np.dtype) and col.dtype.kind == "b":
            return col.to_numpy().astype(np.int64)
        try:
            return col.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            pass
    else:
        a = np.asarray(col)
        if a.dtype.kind in "iu":
            return a
        if a.dtype.kind == "b":
            return a.astype(np.int64)
        try:
            return a.astype(np.float64)
        except (TypeError, ValueError):
            pass
    raise ValueError(f"{est}: feature {feat} was fitted as integer category codes but now holds "
                     "non-numeric values; pass the same kind of column as during fit.")


def _codes_from_numbers(v, est, feat, missing, index=None):
    """Validated integer codes (-1 = missing) from numeric values."""
    where = f" (row block {index})" if index is not None else ""
    if v.dtype.kind == "f":
        if np.isinf(v).any():
            raise ValueError(f"{est}: Input X contains infinity in feature {feat}{where}. "
                             "Replace or drop infinite values.")
        nan = np.isnan(v)
        if nan.any() and missing == "error":
            raise ValueError(f"{est}: Input X contains missing values (NaN) in feature "
                             f"{feat}{where}. Impute or drop them, or use missing='ignore'.")
        obs = v[~nan]
        if (obs != np.floor(obs)).any():
            bad = obs[obs != np.floor(obs)][0]
            raise ValueError(f"{est}: feature {feat} must hold integer category codes "
                             f"0, 1, 2, ...; got {_show(bad)}.")
        # Beyond 2**63 the cast to int64 wraps to a negative number, which would silently mark
        # the value as missing.
        huge = obs >= 2.0**63
        if huge.any():
            raise ValueError(f"{est}: feature {feat} holds {_show(obs[huge][0])}, too large for "
                             "an integer category code (codes must be 0, 1, 2, ...); encode the "
                             "column, e.g. with an OrdinalEncoder, or pass it as a "
                             "string/categorical column.")
        codes = np.full(v.shape, -1, dtype=np.int64)
        codes[~nan] = obs.astype(np.int64)
        if (obs < 0).any():
            bad = obs[obs < 0][0]
        else:
            return codes
    else:
        if v.dtype.kind == "u" and v.size and v.max() >= 2**63:
            raise ValueError(f"{est}: feature {feat} holds {_show(v.max())}, too large for an "
                             "integer category code (codes must be 0, 1, 2, ...); encode the "
                             "column, e.g. with an OrdinalEncoder.")
        codes = v.astype(np.int64)
        if not (codes < 0).any():
            return codes
        bad = codes[codes < 0][0]
    raise ValueError(f"{est}: feature {feat} has the negative value {_show(bad)}. Negative "
                     "values in data are not category codes, which must be 0, 1, 2, ... "
                     "(encode the column, e.g. with an OrdinalEncoder, or pass it as a "
                     "string/categorical column).")


def _object_values(col):
    if isinstance(col, pd.Series):
        return col.to_numpy(dtype=object)
    return np.asarray(col, dtype=object)


def _type_group(v):
    if isinstance(v, (str, np.str_)):
        return "str"
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, numbers.Number):
        return "number"
    return type(v).__name__


def _check_label_keys(keys, est, feat, index):
    groups = {_type_group(v) for v in keys.tolist()}
    if len(groups) > 1:
        raise TypeError(f"{est}: feature {feat} mixes values of different types "
                        f"({', '.join(sorted(groups))}) in row block {index}; categories must "
                        "be of one type to be sorted.")
    if groups == {"number"} and np.isinf(np.asarray(keys, dtype=np.float64)).any():
        raise ValueError(f"{est}: Input X contains infinity in feature {feat} (row block "
                         f"{index}). Replace or drop infinite values.")


def _encode_fit(col, kind, est, feat, missing, index):
    """(codes with -1 for missing, sorted keys) of one feature in one block."""
    if kind == "code":
        codes = _codes_from_numbers(_numeric_values(col, est, feat), est, feat, missing, index)
        obs = codes >= 0
        keys, inv = np.unique(codes[obs], return_inverse=True)
        out = np.full(codes.shape, -1, dtype=np.int64)
        out[obs] = inv.reshape(-1)
        return out, keys.astype(np.int64)
    if isinstance(col, pd.Series) and isinstance(col.dtype, pd.CategoricalDtype):
        # Keep every declared category (zero counts too): a Dask dataframe whose categories are
        # unknown on the client still learns them from the partitions.
        cats = np.asarray(col.cat.categories, dtype=object)
        _check_label_keys(cats, est, feat, index)
        perm = np.argsort(cats, kind="stable")
        rank = np.empty(len(cats), dtype=np.int64)
        rank[perm] = np.arange(len(cats))
        raw = col.cat.codes.to_numpy().astype(np.int64)
        codes = np.where(raw >= 0, rank[np.maximum(raw, 0)], -1)
        keys = cats[perm]
    else:
        values = _object_values(col)
        codes, keys = pd.factorize(values, sort=True, use_na_sentinel=True)
        keys = np.asarray(keys, dtype=object)
        _check_label_keys(keys, est, feat, index)
        codes = codes.astype(np.int64)
    if missing == "error" and (codes < 0).any():
        raise ValueError(f"{est}: Input X contains missing values (None/NaN/NA) in feature "
                         f"{feat} (row block {index}). Impute or drop them, or use "
                         "missing='ignore'.")
    return codes, keys


def _categorical_block(index, X, y, w, kinds, missing, names, est):
    n = X.shape[0]
    if n == 0:
        return None
    classes, inverse, _ = _labels(y, est, index)
    L = len(classes)
    wf = None if w is None else np.asarray(w, dtype=np.float64)
    class_count = np.bincount(inverse, weights=wf, minlength=L).astype(np.float64)
    features = []
    for j, kind in enumerate(kinds):
        codes, keys = _encode_fit(_column(X, j), kind, est, _feature_label(names, j), missing,
                                  index)
        K = len(keys)
        obs = codes >= 0
        flat = inverse[obs] * K + codes[obs]
        cnt = np.bincount(flat, weights=None if wf is None else wf[obs], minlength=L * K)
        features.append((keys, cnt.reshape(L, K).astype(np.float64)))
    return {"classes": classes, "class_count": class_count, "features": features}


def _categorical_combine(parts):
    parts = _drop_none(parts)
    if not parts:
        return None
    classes = _union([p["classes"] for p in parts], "y")
    L = len(classes)
    cidx = [_positions(classes, p["classes"]) for p in parts]
    class_count = np.zeros(L)
    for p, idx in zip(parts, cidx):
        class_count[idx] += p["class_count"]
    features = []
    for j in range(len(parts[0]["features"])):
        keys = _union([p["features"][j][0] for p in parts], f"feature {j}")
        counts = np.zeros((L, len(keys)))
        for p, idx in zip(parts, cidx):
            pk, pc = p["features"][j]
            counts[np.ix_(idx, _positions(keys, pk))] += pc
        features.append((keys, counts))
    return {"classes": classes, "class_count": class_count, "features": features}


def _encode_predict(col, kind, categories, est, feat, missing):
    """Column index into ``feature_log_prob_[j]`` per row; -1 where the value is missing."""
    if kind == "code":
        codes = _codes_from_numbers(_numeric_values(col, est, feat), est, feat, missing)
        unknown = codes >= len(categories)
        if unknown.any():
            raise ValueError(
                f"{est}: feature {feat} has the value {int(codes[unknown][0])!r}, which is not "
                f"one of the {len(categories)} categories seen during fit (codes 0 to "
                f"{len(categories) - 1}). Refit with these data or set min_categories.")
        return codes
    values = _object_values(col)
    na = pd.isna(values)
    if na.any() and missing == "error":
        raise ValueError(f"{est}: Input X contains missing values (None/NaN/NA) in feature "
                         f"{feat}. Impute or drop them, or use missing='ignore'.")
    idx = pd.Index(categories).get_indexer(values) if len(categories) else \
        np.full(len(values), -1)
    unknown = (idx < 0) & ~na
    if unknown.any():
        shown = list(categories[:10]) + (["..."] if len(categories) > 10 else [])
        raise ValueError(f"{est}: feature {feat} has the value {_show(values[unknown][0])}, which "
                         f"was not seen during fit (known categories: {shown}).")
    return np.where(na, -1, idx).astype(np.int64)


def _categorical_jll(X, feature_log_prob, class_log_prior, kinds, categories, missing, names,
                     est):
    n = X.shape[0]
    jll = np.zeros((n, len(class_log_prior)))
    for j, kind in enumerate(kinds):
        idx = _encode_predict(_column(X, j), kind, categories[j], est, _feature_label(names, j),
                              missing)
        miss = idx < 0
        if miss.any():
            contrib = feature_log_prob[j][:, np.maximum(idx, 0)].T
            contrib[miss] = 0.0  # a missing attribute is skipped in the product
            jll += contrib
        else:
            jll += feature_log_prob[j][:, idx].T
    return jll + class_log_prior


# --------------------------------------------------------------------------------------------
# Prediction kernels (NumPy block in, NumPy block out)
# --------------------------------------------------------------------------------------------

_JLL = {"gaussian": _gaussian_jll, "multinomial": _multinomial_jll,
        "bernoulli": _bernoulli_jll, "categorical": _categorical_jll}


def _nb_output(X, kind, params, classes, output):
    jll = _JLL[kind](X, *params)
    if output == "joint":
        return jll
    if output == "predict":
        return classes[np.argmax(jll, axis=1)]
    log_prob = jll - logsumexp(jll, axis=1).reshape(-1, 1)
    return log_prob if output == "log_proba" else np.exp(log_prob)


def _nb_score(X, y, w, kind, params, classes):
    """(weighted number of correct predictions, total weight) of one block."""
    if X.shape[0] == 0:
        return np.zeros(2)
    hit = (classes[np.argmax(_JLL[kind](X, *params), axis=1)] == y).astype(np.float64)
    if w is None:
        return np.array([hit.sum(), float(len(hit))])
    w = np.asarray(w, dtype=np.float64)
    return np.array([np.dot(w, hit), w.sum()])


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------

_MISSING_OPTIONS = ("error", "ignore")


class _BaseNB(DaskEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Fit / partial_fit / predict machinery shared by the naive Bayes estimators.

    Subclasses provide the block kernel and its combine, the zero state for ``partial_fit`` and
    ``_finalise`` (raw statistics → scikit-learn's attributes). The raw statistics of everything
    seen so far are kept in ``_stats``; ``partial_fit`` merges a new pass into them with the same
    combine that the fit's reduction tree uses, which is why it equals one ``fit``.
    """

    _block_spec = BlockSpec(dtype=(np.float64,))
    _kind = ""  # key of the joint-log-likelihood kernel in _JLL
    _positive_only = False
    _poor_score = True

    _parameter_constraints = {"missing": [StrOptions(set(_MISSING_OPTIONS))]}

    # ---- hooks ----
    def _spec_overrides(self) -> dict:
        return {"allow_nan": self.missing == "ignore"}

    def _prepare(self, X, blocks, first: bool):
        """Client-side set-up before the pass (CategoricalNB decides each feature's kind)."""

    def _reduce(self, blocks):
        raise NotImplementedError

    def _combine(self, parts):
        raise NotImplementedError

    def _empty_stats(self, classes, n_features):
        raise NotImplementedError

    def _finalise(self, stats):
        raise NotImplementedError

    def _jll_params(self) -> tuple:
        raise NotImplementedError

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = getattr(self, "missing", "error") == "ignore"
        tags.input_tags.positive_only = self._positive_only
        tags.classifier_tags.poor_score = self._poor_score
        return tags

    # ---- fitting ----
    def _pass(self, X, y, sample_weight, first: bool):
        name = type(self).__name__
        blocks = self._fit_blocks(X, y, sample_weight, reset=first, **self._spec_overrides())
        self._prepare(X, blocks, first)
        stats = self._reduce(blocks)
        if stats is None:
            raise ValueError(f"{name}: X has 0 rows (found array with 0 sample(s)); at least "
                             "one sample is required.")
        weights = stats["wsum" if "wsum" in stats else "class_count"]
        if sample_weight is not None:
            check_weights_not_all_zero(float(np.sum(np.abs(weights))), name)
        return stats

    @fit_context
    def fit(self, X, y, sample_weight=None):
        """Fit the model in one pass over the data.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : array-like, Dask array/Series or str of shape (n_samples,)
            Class labels (numbers or strings); a string names a column of X's dataframe.
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each sample (a column name of X's dataframe is accepted).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        stats = self._pass(X, y, sample_weight, first=True)
        self._set_stats(stats)
        return self

    @fit_context
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Update the model with one more batch (itself one pass over its blocks).

        Calling ``partial_fit`` on the pieces of a dataset gives the same model as one ``fit``
        on all of it (up to floating-point round-off).

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            Training data.
        y : array-like, Dask array/Series or str of shape (n_samples,)
            Class labels; every label must be one of ``classes``.
        classes : array-like of shape (n_classes,), default=None
            All the classes that can appear in y. Required on the first call, optional (and
            then checked) afterwards.
        sample_weight : array-like, Dask array/Series or str, default=None
            Weight of each sample.

        Returns
        -------
        self : object
            Updated estimator.
        """
        name = type(self).__name__
        first = getattr(self, "_stats", None) is None
        if first:
            if classes is None:
                raise ValueError(f"{name}: classes must be passed on the first call to "
                                 "partial_fit (all labels that can appear in y).")
            known = unique_labels(classes)
        else:
            known = self.classes_
            if classes is not None and not np.array_equal(known, unique_labels(classes)):
                raise ValueError(f"{name}: classes={classes!r} is not the same as on the first "
                                 f"call to partial_fit, which was {known!r}.")
        stats = self._pass(X, y, sample_weight, first=first)
        unknown = stats["classes"][~np.isin(stats["classes"], known)]
        if len(unknown):
            raise ValueError(f"{name}: y contains the label(s) {unknown.tolist()} that are not "
                             f"in classes={np.asarray(known).tolist()} given to the first "
                             "partial_fit call.")
        base = self._empty_stats(known, self.n_features_in_) if first else self._stats
        merged = self._combine([base, stats])
        merged["classes"] = known
        self._set_stats(merged)
        return self

    def _set_stats(self, stats):
        self._finalise(stats)
        self.classes_ = stats["classes"]
        self._stats = stats

    # ---- prediction ----
    def _output(self, X, output):
        check_is_fitted(self, "classes_")
        kind_params = (self._kind, self._jll_params(), self.classes_, output)
        if output == "predict":
            return self._blockwise(X, _nb_output, *kind_params, dtype=self.classes_.dtype,
                                   **self._spec_overrides())
        return self._blockwise(X, _nb_output, *kind_params, dtype=np.float64,
                               tail_shape=(len(self.classes_),), **self._spec_overrides())

    def predict(self, X):
        """Predict the class of each sample.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples,)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.
        """
        return self._output(X, "predict")

    def predict_joint_log_proba(self, X):
        """Joint log probability ``log P(c) + log P(x | c)`` of each sample and class.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        return self._output(X, "joint")

    def predict_log_proba(self, X):
        """Log of the posterior class probabilities.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        return self._output(X, "log_proba")

    def predict_proba(self, X):
        """Posterior class probabilities.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        return self._output(X, "proba")

    def score(self, X, y, sample_weight=None):
        """Mean (weighted) accuracy of ``predict(X)`` against y.

        For Dask input (or y / sample_weight given as column names) the accuracy is a reduction
        over the blocks: only two numbers per block come back to the client.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : array-like, Dask array/Series or str of shape (n_samples,)
            True labels.
        sample_weight : array-like, Dask array/Series or str, default=None

        Returns
        -------
        float
        """
        check_is_fitted(self, "classes_")
        distributed = (is_dask(X) or is_dask(y) or is_dask(sample_weight)
                       or isinstance(y, str) or isinstance(sample_weight, str))
        if not distributed:
            return super().score(X, y, sample_weight=sample_weight)
        blocks = as_blocks(X, y, sample_weight, spec=self._spec(**self._spec_overrides()),
                           require_y=True)
        self._check_features(blocks.n_features, blocks.feature_names)
        correct, total = blocks.map_reduce(_nb_score, self._kind, self._jll_params(),
                                           self.classes_)
        return float(correct / total)


def _validate_priors(priors, n_classes, name):
    priors = np.asarray(priors, dtype=np.float64)
    if priors.ndim != 1 or priors.shape[0] != n_classes:
        raise ValueError(f"{name}: number of priors ({priors.size}) must match the number of "
                         f"classes ({n_classes}).")
    if not np.isclose(priors.sum(), 1.0):
        raise ValueError(f"{name}: the sum of the priors should be 1, got {priors.sum()}.")
    if (priors < 0).any():
        raise ValueError(f"{name}: priors must be non-negative.")
    return priors


class GaussianNB(_BaseNB):
    """Gaussian naive Bayes, fitted in one pass over Dask blocks.

    Per class and feature the weighted count, mean and variance (ddof=0) are reduced over the
    blocks with Chan's parallel formula (two-pass within each block), all classes together. As in
    scikit-learn, ``epsilon_ = var_smoothing * max_j Var(X[:, j])`` (unweighted variance of all of
    X) is added to every variance; that variance is merged from the per-class statistics, not
    computed in another pass.

    Parameters
    ----------
    priors : array-like of shape (n_classes,), default=None
        Prior probabilities of the classes. If given they are not adjusted to the data.
    var_smoothing : float, default=1e-9
        Portion of the largest feature variance added to the variances for stability.
    missing : {"error", "ignore"}, default="error"
        What a NaN in X means. ``"error"`` raises a ValueError. ``"ignore"`` applies the
        missing-value rule of SPEC §7: at fit time the mean and variance of feature j for class c
        use only the class-c rows where j is observed (and ``epsilon_`` uses the observed values
        of each feature); at predict time the factor of a missing feature is left out of the
        product (its log term is 0). If a class never has feature j observed, its theta_ is 0
        and its var_ is epsilon_, as for a class without samples in scikit-learn. Infinity is
        always an error. Fitting a block that does contain NaN is slower (about three times
        the time of a block without, and two more block-sized temporaries: the zero-filled
        values and the mask).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels, sorted.
    class_count_ : ndarray of shape (n_classes,)
        Weighted number of training samples per class.
    class_prior_ : ndarray of shape (n_classes,)
        Probability of each class.
    theta_ : ndarray of shape (n_classes, n_features)
        Mean of each feature per class.
    var_ : ndarray of shape (n_classes, n_features)
        Variance of each feature per class, plus ``epsilon_``.
    epsilon_ : float
        Absolute additive value to variances.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X was a dataframe with string column names.

    Notes
    -----
    ``partial_fit`` keeps running statistics of all data seen, so ``epsilon_`` is always
    ``var_smoothing`` times the largest variance of *all* data seen so far and a sequence of
    ``partial_fit`` calls equals one ``fit``. This deliberately differs from scikit-learn's
    ``partial_fit``, which uses the variance of the latest batch only.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.naive_bayes import GaussianNB
    >>> X = np.array([[-1, -1], [-2, -1], [-3, -2], [1, 1], [2, 1], [3, 2]])
    >>> y = np.array([1, 1, 1, 2, 2, 2])
    >>> clf = GaussianNB().fit(X, y)
    >>> clf.predict([[-0.8, -1]])
    array([1])
    >>> clf.theta_
    array([[-2.  , -1.33...],
           [ 2.  ,  1.33...]])
    >>> X_missing = np.array([[np.nan, -1.0], [0.9, np.nan]])
    >>> GaussianNB(missing="ignore").fit(X, y).predict(X_missing)
    array([1, 2])
    """

    _kind = "gaussian"
    _poor_score = False

    def __init__(self, *, priors=None, var_smoothing=1e-9, missing="error"):
        self.priors = priors
        self.var_smoothing = var_smoothing
        self.missing = missing

    _parameter_constraints = {**_BaseNB._parameter_constraints,
                              "priors": ["array-like", None],
                              "var_smoothing": [Interval(Real, 0, None, closed="left")]}

    def _reduce(self, blocks):
        return blocks.map_reduce(_gaussian_block, type(self).__name__, self.missing,
                                 combine=_gaussian_combine, with_index=True)

    def _combine(self, parts):
        return _gaussian_combine(parts)

    def _empty_stats(self, classes, d):
        L = len(classes)
        return {"classes": classes, "wsum": np.zeros(L), "n": np.zeros((L, d)),
                "mean": np.zeros((L, d)), "m2": np.zeros((L, d)),
                "gn": np.zeros(d), "gmean": np.zeros(d), "gm2": np.zeros(d)}

    def _finalise(self, stats):
        L = len(stats["classes"])
        if self.priors is not None:
            prior = _validate_priors(self.priors, L, "GaussianNB")
        gn = stats["gn"]
        gvar = _safe_div(stats["gm2"], gn)
        eps = self.var_smoothing * float(gvar[gn > 0].max()) if (gn > 0).any() else 0.0
        self.epsilon_ = eps
        self.theta_ = stats["mean"].copy()
        self.var_ = _safe_div(stats["m2"], stats["n"]) + eps
        self.class_count_ = stats["wsum"].copy()
        if self.priors is None:
            self.class_prior_ = self.class_count_ / self.class_count_.sum()
        else:
            self.class_prior_ = prior

    def _jll_params(self):
        return (self.theta_, self.var_, self.class_prior_)


class _BaseDiscreteNB(_BaseNB):
    """Shared parameters and prior handling of the count-based estimators."""

    _parameter_constraints = {**_BaseNB._parameter_constraints,
                              "alpha": [Interval(Real, 0, None, closed="left"), "array-like"],
                              "force_alpha": ["boolean"], "fit_prior": ["boolean"],
                              "class_prior": ["array-like", None]}

    def _validate_param_relations(self):
        if isinstance(self.alpha, Real):
            return
        arr = np.asarray(self.alpha)
        if not self._array_alpha or arr.ndim != 1 or arr.dtype.kind not in "iuf":
            raise invalid_parameter(self, "alpha", "a non-negative float" + (
                " or a 1-D array of floats" if self._array_alpha else ""))

    _array_alpha = True

    def _check_alpha(self):
        # scikit-learn's _BaseDiscreteNB._check_alpha
        alpha = np.asarray(self.alpha) if not isinstance(self.alpha, numbers.Real) else \
            self.alpha
        alpha_min = np.min(alpha)
        if isinstance(alpha, np.ndarray):
            if not alpha.shape[0] == self.n_features_in_:
                raise ValueError(
                    f"{type(self).__name__}: when alpha is an array, it should contain "
                    f"n_features ({self.n_features_in_}) elements; got {alpha.shape[0]}.")
            if alpha_min < 0:
                raise ValueError(f"{type(self).__name__}: all values in alpha must be "
                                 "greater than 0.")
        alpha_lower_bound = 1e-10
        if alpha_min < alpha_lower_bound and not self.force_alpha:
            warnings.warn(
                "alpha too small will result in numeric errors, setting alpha ="
                f" {alpha_lower_bound:.1e}. Use `force_alpha=True` to keep alpha"
                " unchanged.")
            return np.maximum(alpha, alpha_lower_bound)
        return alpha

    def _class_log_prior(self, class_count):
        n_classes = len(class_count)
        if self.class_prior is not None:
            if len(self.class_prior) != n_classes:
                raise ValueError(f"{type(self).__name__}: number of priors "
                                 f"({len(self.class_prior)}) must match number of classes "
                                 f"({n_classes}).")
            return np.log(self.class_prior)
        if self.fit_prior:
            with np.errstate(divide="ignore"):
                return np.log(class_count) - np.log(class_count.sum())
        return np.full(n_classes, -np.log(n_classes))


class _CountNB(_BaseDiscreteNB):
    _binarize_at = None
    _non_negative = False

    def _reduce(self, blocks):
        return blocks.map_reduce(_count_block, self._binarize_at, self._non_negative,
                                 type(self).__name__, self.missing, combine=_count_combine,
                                 with_index=True)

    def _combine(self, parts):
        return _count_combine(parts)

    def _empty_stats(self, classes, d):
        L = len(classes)
        return {"classes": classes, "class_count": np.zeros(L),
                "feature_count": np.zeros((L, d)), "missing_count": np.zeros((L, d))}


class MultinomialNB(_CountNB):
    """Multinomial naive Bayes (e.g. word counts), fitted in one pass over Dask blocks.

    ``feature_count_`` and ``class_count_`` are weighted sums over the blocks, all classes at
    once; ``P(x_j | c) = (N_cj + alpha_j) / (N_c + sum_j alpha_j)`` as in scikit-learn.

    Parameters
    ----------
    alpha : float or array-like of shape (n_features,), default=1.0
        Additive (Laplace/Lidstone) smoothing parameter (0 for no smoothing).
    force_alpha : bool, default=True
        If False and alpha is less than 1e-10, it is set to 1e-10 with a warning, as in
        scikit-learn; if True, alpha is used as given.
    fit_prior : bool, default=True
        Learn class prior probabilities; if False a uniform prior is used.
    class_prior : array-like of shape (n_classes,), default=None
        Prior probabilities of the classes; not adjusted to the data when given.
    missing : {"error", "ignore"}, default="error"
        What a NaN in X means. ``"error"`` raises a ValueError. ``"ignore"`` (SPEC §7): a missing
        count contributes 0 to ``feature_count_`` at fit time and its factor is skipped in the
        product at predict time (which for this model is the same as a count of 0). Infinity is
        always an error.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of shape (n_classes,)
        Weighted number of samples per class.
    class_log_prior_ : ndarray of shape (n_classes,)
        Smoothed empirical log probability of each class.
    feature_count_ : ndarray of shape (n_classes, n_features)
        Weighted sum of each feature per class.
    feature_log_prob_ : ndarray of shape (n_classes, n_features)
        Empirical log probability of features given a class.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        When X was a dataframe with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.naive_bayes import MultinomialNB
    >>> X = np.array([[2, 1, 0], [3, 0, 1], [0, 2, 4], [1, 0, 3]])
    >>> y = np.array(["ham", "ham", "spam", "spam"])
    >>> clf = MultinomialNB().fit(X, y)
    >>> clf.feature_count_
    array([[5., 1., 1.],
           [1., 2., 7.]])
    >>> clf.predict(np.array([[0, 1, 3]]))
    array(['spam'], dtype='<U4')
    """

    _kind = "multinomial"
    _non_negative = True
    _positive_only = True

    def __init__(self, *, alpha=1.0, force_alpha=True, fit_prior=True, class_prior=None,
                 missing="error"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.missing = missing

    def _finalise(self, stats):
        alpha = self._check_alpha()
        fc, cc = stats["feature_count"], stats["class_count"]
        smoothed_fc = fc + alpha
        smoothed_cc = smoothed_fc.sum(axis=1)
        self.feature_log_prob_ = np.log(smoothed_fc) - np.log(smoothed_cc.reshape(-1, 1))
        self.class_log_prior_ = self._class_log_prior(cc)
        self.feature_count_ = fc.copy()
        self.class_count_ = cc.copy()

    def _jll_params(self):
        return (self.feature_log_prob_, self.class_log_prior_)


class BernoulliNB(_CountNB):
    """Bernoulli naive Bayes for binary features, fitted in one pass over Dask blocks.

    ``P(x_j = 1 | c) = (N_cj + alpha_j) / (N_c + 2 alpha_j)`` with counts reduced over the blocks,
    all classes at once, as in scikit-learn.

    Parameters
    ----------
    alpha : float or array-like of shape (n_features,), default=1.0
        Additive smoothing parameter. An array gives each feature its own alpha (scikit-learn
        1.9's BernoulliNB fails on array alphas; here they apply per feature).
    force_alpha : bool, default=True
        If False and alpha is less than 1e-10, it is set to 1e-10 with a warning.
    binarize : float or None, default=0.0
        Threshold for binarizing X (``x > binarize`` is 1). None: X is taken as already binary.
    fit_prior : bool, default=True
        Learn class prior probabilities; if False a uniform prior is used.
    class_prior : array-like of shape (n_classes,), default=None
        Prior probabilities of the classes.
    missing : {"error", "ignore"}, default="error"
        What a NaN in X means. ``"error"`` raises a ValueError. ``"ignore"`` (SPEC §7): a missing
        attribute is not counted for that attribute, so
        ``P(x_j = 1 | c) = (N_cj + alpha) / (M_cj + 2 alpha)`` where ``M_cj`` is the weighted
        number of class-c rows in which feature j is observed; at predict time a missing
        feature's factor is skipped in the product. Infinity is always an error.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of shape (n_classes,)
        Weighted number of samples per class.
    class_log_prior_ : ndarray of shape (n_classes,)
    feature_count_ : ndarray of shape (n_classes, n_features)
        Weighted number of samples with feature j equal to 1, per class.
    feature_log_prob_ : ndarray of shape (n_classes, n_features)
        Empirical log probability of features given a class, ``log P(x_j = 1 | c)``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        When X was a dataframe with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.naive_bayes import BernoulliNB
    >>> X = np.array([[1, 0, 1], [1, 1, 1], [0, 0, 1], [0, 1, 0]])
    >>> y = np.array([0, 0, 1, 1])
    >>> clf = BernoulliNB().fit(X, y)
    >>> np.exp(clf.feature_log_prob_)
    array([[0.75, 0.5 , 0.75],
           [0.25, 0.5 , 0.5 ]])
    >>> clf.predict(np.array([[1, 0, 0]]))
    array([0])
    """

    _kind = "bernoulli"

    def __init__(self, *, alpha=1.0, force_alpha=True, binarize=0.0, fit_prior=True,
                 class_prior=None, missing="error"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.binarize = binarize
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.missing = missing

    _parameter_constraints = {**_BaseDiscreteNB._parameter_constraints,
                              "binarize": [Interval(Real, 0, None, closed="left"), None]}

    @property
    def _binarize_at(self):
        return self.binarize

    def _finalise(self, stats):
        alpha = self._check_alpha()
        fc, cc = stats["feature_count"], stats["class_count"]
        # Rows where feature j is missing are not counted for j; without missing values
        # observed == class_count_ exactly and this is scikit-learn's formula.
        observed = cc.reshape(-1, 1) - stats["missing_count"]
        self.feature_log_prob_ = np.log(fc + alpha) - np.log(observed + alpha * 2)
        self.class_log_prior_ = self._class_log_prior(cc)
        self.feature_count_ = fc.copy()
        self.class_count_ = cc.copy()

    def _jll_params(self):
        return (self.feature_log_prob_, self.class_log_prior_, self.binarize)


class CategoricalNB(_BaseDiscreteNB):
    """Naive Bayes for categorical features, with categories discovered in the same pass.

    ``P(x_j = v | c) = (N_cjv + alpha) / (N_cj + alpha V_j)`` as in scikit-learn, with counts and
    categories reduced over the blocks in one pass.

    Each feature is one of two kinds, decided from X's dtype at fit time:

    * **integer codes** (numeric or boolean columns, as scikit-learn expects): the categories of
      feature j are ``0 .. n_categories_[j] - 1`` with ``n_categories_[j] = max(X[:, j]) + 1``
      (at least ``min_categories``). Negative or non-integer values raise a ValueError
      (scikit-learn silently truncates non-integer floats);
    * **labels** (string, object or pandas categorical columns of a DataFrame or an object/string
      array): the categories are the distinct values over all partitions, sorted, or the
      declared categories of a pandas categorical dtype, in their declared order.

    ``categories_[j]`` holds the values; column k of ``category_count_[j]`` and
    ``feature_log_prob_[j]`` belongs to ``categories_[j][k]``. A value at predict time that is
    not a known category raises a ValueError naming the feature and the value (scikit-learn
    raises an IndexError).

    Parameters
    ----------
    alpha : float, default=1.0
        Additive (Laplace/Lidstone) smoothing parameter (0 for no smoothing).
    force_alpha : bool, default=True
        If False and alpha is less than 1e-10, it is set to 1e-10 with a warning.
    fit_prior : bool, default=True
        Learn class prior probabilities; if False a uniform prior is used.
    class_prior : array-like of shape (n_classes,), default=None
        Prior probabilities of the classes.
    min_categories : int or array-like of shape (n_features,), default=None
        Minimum number of categories per integer-coded feature (as scikit-learn). Label features
        have exactly their known categories: it does not apply to them.
    missing : {"error", "ignore"}, default="error"
        What a missing value (None, NaN, pd.NA) in X means. ``"error"`` raises a ValueError.
        ``"ignore"`` (SPEC §7): a missing attribute is not counted, so ``N_cj`` counts only the
        class-c rows where feature j is observed, and its factor is skipped in the product at
        predict time. Infinity is always an error.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of shape (n_classes,)
        Weighted number of samples per class.
    class_log_prior_ : ndarray of shape (n_classes,)
    category_count_ : list of n_features arrays of shape (n_classes, n_categories_[j])
        Weighted number of samples per class and category of each feature.
    feature_log_prob_ : list of n_features arrays of shape (n_classes, n_categories_[j])
        Empirical log probability of the categories given a class.
    n_categories_ : ndarray of shape (n_features,), dtype int64
        Number of categories of each feature.
    categories_ : list of n_features arrays
        The category values of each feature (``arange(n_categories_[j])`` for integer codes).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        When X was a dataframe with string column names.

    Notes
    -----
    ``partial_fit`` may grow the categories; ``n_categories_`` is then computed over all data
    seen (scikit-learn recomputes it from the latest batch only).

    Examples
    --------
    >>> import pandas as pd
    >>> from dml.naive_bayes import CategoricalNB
    >>> X = pd.DataFrame({"sky": ["sun", "rain", "sun", "cloud"], "wind": [0, 1, 1, 0]})
    >>> y = ["yes", "no", "yes", "no"]
    >>> clf = CategoricalNB().fit(X, y)
    >>> clf.categories_
    [array(['cloud', 'rain', 'sun'], dtype=object), array([0, 1])]
    >>> clf.category_count_[0]
    array([[1., 1., 0.],
           [0., 0., 2.]])
    >>> clf.predict(pd.DataFrame({"sky": ["sun"], "wind": [0]}))
    array(['yes'], dtype='<U3')
    """

    _kind = "categorical"
    _block_spec = BlockSpec(numeric=False)
    _parameter_constraints = {
        **_BaseDiscreteNB._parameter_constraints,
        "min_categories": [Interval(Integral, 1, None, closed="left"), "array-like", None]}
    _array_alpha = False
    _positive_only = True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags

    def __init__(self, *, alpha=1.0, force_alpha=True, fit_prior=True, class_prior=None,
                 min_categories=None, missing="error"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.min_categories = min_categories
        self.missing = missing

    def _spec_overrides(self) -> dict:
        return {}  # non-numeric blocks: missing values are handled by the kernels

    def _prepare(self, X, blocks, first):
        name = type(self).__name__
        kinds, declared = _feature_kinds(X, blocks)
        if first:
            self._kinds, self._declared = kinds, declared
            return
        if kinds != self._kinds:
            raise ValueError(f"{name}: the feature kinds {kinds} (integer codes vs labels) "
                             f"differ from those of the first partial_fit call {self._kinds}.")
        for j, dec in enumerate(declared):
            old = self._declared[j]
            if dec is not None and old is not None:
                extra = [c for c in dec if c not in set(old)]
                self._declared[j] = np.asarray(list(old) + extra, dtype=object)

    def _min_categories(self):
        mc = self.min_categories
        if mc is None:
            return None
        arr = np.array(mc)
        if not np.issubdtype(arr.dtype, np.signedinteger):
            raise ValueError(f"CategoricalNB: 'min_categories' should have integral type. Got "
                             f"{arr.dtype} instead.")
        if arr.ndim == 0:
            if arr < 1:
                raise ValueError("CategoricalNB: min_categories must be >= 1.")
            return np.full(self.n_features_in_, int(arr), dtype=np.int64)
        if arr.shape != (self.n_features_in_,):
            raise ValueError(f"CategoricalNB: 'min_categories' should have shape "
                             f"({self.n_features_in_},) when an array-like is provided. Got "
                             f"{arr.shape} instead.")
        return arr.astype(np.int64)

    def _reduce(self, blocks):
        names = getattr(self, "feature_names_in_", None)
        return blocks.map_reduce(_categorical_block, self._kinds, self.missing, names,
                                 type(self).__name__, combine=_categorical_combine,
                                 with_index=True)

    def _combine(self, parts):
        return _categorical_combine(parts)

    def _empty_stats(self, classes, d):
        L = len(classes)
        feats = [(np.zeros(0, dtype=np.int64 if k == "code" else object), np.zeros((L, 0)))
                 for k in self._kinds]
        return {"classes": classes, "class_count": np.zeros(L), "features": feats}

    def _finalise(self, stats):
        alpha = self._check_alpha()
        min_cat = self._min_categories()
        L = len(stats["classes"])
        counts, categories, n_cats = [], [], []
        for j, (keys, cnt) in enumerate(stats["features"]):
            if self._kinds[j] == "code":
                n = int(keys.max()) + 1 if len(keys) else 0
                if min_cat is not None:
                    n = max(n, int(min_cat[j]))
                full = np.zeros((L, n))
                full[:, keys] = cnt
                cats = np.arange(n)
            elif self._declared[j] is None:
                full, cats = cnt.copy(), keys
            else:
                cats = self._declared[j]
                pos = pd.Index(cats).get_indexer(keys) if len(keys) else np.zeros(0, int)
                if (pos < 0).any():
                    raise ValueError(f"CategoricalNB: feature {_feature_label(self._names(), j)}"
                                     f" has values {list(keys[pos < 0])} that are not among "
                                     "its declared categories.")
                full = np.zeros((L, len(cats)))
                full[:, pos] = cnt
            counts.append(full)
            categories.append(cats)
            n_cats.append(full.shape[1])
        self.category_count_ = counts
        self.categories_ = categories
        self.n_categories_ = np.asarray(n_cats, dtype=np.int64)
        self.class_count_ = stats["class_count"].copy()
        flp = []
        for cc in counts:
            smoothed = cc + alpha
            flp.append(np.log(smoothed) - np.log(smoothed.sum(axis=1).reshape(-1, 1)))
        self.feature_log_prob_ = flp
        self.class_log_prior_ = self._class_log_prior(self.class_count_)

    def _names(self):
        return getattr(self, "feature_names_in_", None)

    def _jll_params(self):
        return (self.feature_log_prob_, self.class_log_prior_, self._kinds, self.categories_,
                self.missing, self._names(), type(self).__name__)


def _feature_kinds(X, blocks):
    """Per feature: "code" (integer codes) or "label"; and the declared categories or None."""
    if blocks.dtypes is not None:
        dtypes = list(blocks.dtypes)
    else:
        dtype = X.dtype if hasattr(X, "dtype") else np.asarray(X).dtype
        dtypes = [dtype] * blocks.n_features
    kinds, declared = [], []
    for t in dtypes:
        if isinstance(t, pd.CategoricalDtype):
            kinds.append("label")
            cats = t.categories
            known = cats is not None and not (len(cats) == 1 and
                                              cats[0] == "__UNKNOWN_CATEGORIES__")
            declared.append(np.asarray(cats, dtype=object) if known else None)
        elif pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t):
            kinds.append("code")
            declared.append(None)
        else:
            kinds.append("label")
            declared.append(None)
    return kinds, declared
