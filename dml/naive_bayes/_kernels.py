"""Per-block naive Bayes kernels: fit statistics and their combines, and the joint log-likelihoods.

Plain NumPy/pandas functions of one block (testable without a cluster). The fit kernels return
statistics keyed by the labels that the block happens to contain (CategoricalNB's kernels, which
also key by category, are in :mod:`dml.naive_bayes._categorical`; prediction dispatch is in
:mod:`dml.naive_bayes._predict`); the combines merge them by label in the fixed order of
:func:`dml._blocks.tree_reduce`, which is what makes a fit equal to ``partial_fit`` over pieces.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from dml._block_checks import BlockSpec, _check_finite
from dml.naive_bayes._compiled import (class_moments, class_sums, nonzero_columns,
                                       sparse_class_sums)


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


# Sparse-block strategies, chosen by the number of classes (dense blocks take the compiled
# passes of dml.naive_bayes._compiled whatever their number):
#: Up to this many classes, a sparse block's per-class sums are a product with the dense
#: (weighted) one-hot labels (as scikit-learn does); above it, with a sparse one-hot matrix.
_ONEHOT_CLASSES = 16
#: A sparse block's per-class sums go through a dense (d, L) product when ``L * d`` is at most
#: this many times its stored values: then the product's O(L d) cost is below the O(nnz)
#: random-access passes of re-indexing the block onto its used columns (2^20 hashed columns,
#: 2 classes, 100k documents of ~40 words: 18 ms against 31 ms per block, one core).
_DENSE_SUMS_PER_VALUE = 4


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
    estimator allows it) leaves its feature out for that row and nothing else.
    """
    n_rows, d = X.shape
    if n_rows == 0:
        return None
    # One layout and one order of additions (compiled passes, row after row) whatever the
    # block's memory layout or the machine's BLAS threads: docs/naive_bayes.md, "Same model
    # whatever the blocks' layout and the BLAS threads".
    X = np.require(X, np.float64, ["C", "A"])
    classes, inverse, counts = _labels(y, est, index)
    inverse = np.ascontiguousarray(inverse, dtype=np.intp)
    skip_nan = missing == "ignore"
    L = len(classes)

    def moments(wf):
        totals = (counts.astype(np.float64) if wf is None else
                  np.bincount(inverse, weights=wf, minlength=L))
        n = np.zeros((L, d)) if skip_nan else np.repeat(totals[:, None], d, axis=1)
        mean, m2 = np.zeros((L, d)), np.zeros((L, d))
        class_moments(X, inverse, np.zeros(0) if wf is None else wf, wf is not None, skip_nan,
                      n, mean, m2)
        return totals, (n, mean, m2)

    wsum, (n, mean, m2) = moments(None if w is None else
                                  np.ascontiguousarray(w, dtype=np.float64))
    un, umean, um2 = (n, mean, m2) if w is None else moments(None)[1]
    gn = un.sum(axis=0)
    gmean = _safe_div((un * umean).sum(axis=0), gn)
    gm2 = um2.sum(axis=0) + (un * (umean - gmean) ** 2).sum(axis=0)
    return {"classes": classes, "wsum": wsum, "n": n, "mean": mean, "m2": m2,
            "gn": gn, "gmean": gmean, "gm2": gm2}


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


def _negative_count_error(estimator, index, value, column):
    return ValueError(
        f"{estimator} needs non-negative counts; X contains negative values (row block "
        f"{index}, e.g. {_show(value)} in column {column}). Negative values in data are not "
        "counts: use GaussianNB for real-valued features or BernoulliNB with a binarize "
        "threshold.")


def _count_block(index, X, y, w, binarize, non_negative, estimator, missing="error"):
    """Per-class weighted feature sums, class weights and weights of missing entries.

    A dense block is summed in one compiled row pass
    (:func:`~dml.naive_bayes._compiled.class_sums`), which also gives the column minima for the
    non-negativity check and, through the sums, the block's finiteness: the estimators skip the
    separate finiteness pass of block validation when they do not binarise
    (``BlockSpec(check_finite=False)``), and a non-finite sum sends the block to the exact check
    here (which raises for what is not allowed; finite values whose sum overflows float64 are
    summed to infinity, as scikit-learn does).
    """
    if X.shape[0] == 0:
        return None
    if sp.issparse(X):
        return _sparse_count_block(index, X, y, w, binarize, non_negative, estimator, missing)
    # One layout and one order of additions (a compiled pass, row after row) whatever the
    # block's memory layout or the machine's BLAS threads: docs/naive_bayes.md, "Same model
    # whatever the blocks' layout and the BLAS threads".
    X = np.require(X, np.float64, ["C", "A"])
    classes, inverse, counts = _labels(y, estimator, index)
    L, d = len(classes), X.shape[1]
    wf = None if w is None else np.ascontiguousarray(w, dtype=np.float64)
    class_count = (counts.astype(np.float64) if wf is None else
                   np.bincount(inverse, weights=wf, minlength=L))
    # Binarised values hide NaN and infinity from the sums: validation has refused them (a
    # NaN is skipped and counted as missing when allowed).
    fc, colmin, miss = np.zeros((L, d)), np.full(d, np.inf), np.zeros((L, d))
    class_sums(X, np.ascontiguousarray(inverse, dtype=np.intp),
               np.zeros(0) if wf is None else wf, wf is not None, binarize is not None,
               0.0 if binarize is None else float(binarize), missing == "ignore", fc, colmin,
               miss)
    if binarize is None and not np.isfinite(fc).all():
        _check_finite(X, "X", BlockSpec(allow_nan=missing == "ignore", estimator=estimator),
                      index)
    if non_negative and d and colmin.min() < 0:
        r, c = np.argwhere(X < 0)[0]
        raise _negative_count_error(estimator, index, X[r, c], c)
    return {"classes": classes, "class_count": class_count, "feature_count": fc,
            "missing_count": miss}


def _sparse_values(X, binarize, missing):
    """A CSR block's values ready for counting, and the CSR mask of its NaN entries (or None).

    Only the stored values are touched: an implicit zero is a count of 0 (and, with the
    non-negative ``binarize`` thresholds allowed, a 0 after binarising too).
    """
    data = X.data
    nan = np.isnan(data) if missing == "ignore" and data.dtype.kind == "f" else None
    if nan is not None and not nan.any():
        nan = None
    if binarize is None and nan is None:
        return X, None
    values = X.copy()
    if binarize is not None:
        values.data = (data > binarize).astype(np.float64)
    mask = None
    if nan is not None:
        values.data[nan] = 0.0
        mask = X.copy()
        mask.data = nan.astype(np.float64)
    return values, mask


def _sparse_count_block(index, X, y, w, binarize, non_negative, estimator, missing):
    """:func:`_count_block` of a CSR block: nothing densified but the (d, L) sums.

    Unbinarised counts take one compiled pass (:func:`_fused_sparse_sums`) that also checks
    them; binarised or missing values, and blocks whose sums are not finite, take the
    one-hot product below after the exact finiteness check.
    """
    classes, inverse, counts = _labels(y, estimator, index)
    L, n = len(classes), X.shape[0]
    wf = None if w is None else np.asarray(w, dtype=np.float64)
    class_count = (counts.astype(np.float64) if wf is None else
                   np.bincount(inverse, weights=wf, minlength=L))
    if binarize is None and X.dtype == np.float64 and L * X.shape[1] <= (
            _DENSE_SUMS_PER_VALUE * X.nnz):
        fc = _fused_sparse_sums(index, X, inverse, wf, L, non_negative, estimator)
        if fc is not None:
            return {"classes": classes, "class_count": class_count, "feature_count": fc,
                    "missing_count": None}
    # Block validation leaves the finiteness of unbinarised sparse counts to this kernel
    # (``check_finite=False``): the exact check raises for what is not allowed.
    if binarize is None and X.dtype.kind == "f":
        _check_finite(X.data, "X", BlockSpec(allow_nan=missing == "ignore", estimator=estimator),
                      index)
    X, nan = _sparse_values(X, binarize, missing)
    if non_negative and X.nnz and X.data.min() < 0:
        pos = int(np.flatnonzero(X.data < 0)[0])
        raise _negative_count_error(estimator, index, X.data[pos], int(X.indices[pos]))
    if wf is None:
        wf = np.ones(n)
    # The sums stay sparse (L × d CSR): with hashed text d is 2^20 and a dense L × d result per
    # block would cost more to build, send and add than counting itself; the client densifies
    # the reduced sums once (:func:`dense_counts`).
    fc = _class_sums(X, inverse, wf, L)
    miss = None if nan is None else _class_sums(nan, inverse, wf, L)
    return {"classes": classes, "class_count": class_count, "feature_count": fc,
            "missing_count": miss}


def _fused_sparse_sums(index, X, inverse, wf, L, non_negative, estimator):
    """Per-class sums of an unbinarised CSR block as an (L, d) CSR, or None when a sum is not
    finite (NaN, infinity or overflow: the caller's exact check decides).

    One compiled pass over the stored values adds each to its column and class in a dense
    (d, L) array (as scikit-learn's one-hot product, with one add per value instead of one per
    class) and keeps the smallest value, so neither the finiteness nor the non-negativity check
    needs a pass of its own; a second pass keeps the columns with a nonzero sum. Only used when
    the dense sums cost no more than the values (``L * d`` at most
    :data:`_DENSE_SUMS_PER_VALUE` times the stored values).
    """
    d = X.shape[1]
    sums = np.zeros((d, L))
    indices, indptr = X.indices, X.indptr
    if indices.dtype != indptr.dtype or indices.dtype not in (np.int32, np.int64):
        indices, indptr = indices.astype(np.int64), indptr.astype(np.int64)
    lo = sparse_class_sums(np.ascontiguousarray(X.data), indices, indptr,
                           np.ascontiguousarray(inverse, np.intp),
                           np.zeros(0) if wf is None else np.ascontiguousarray(wf),
                           wf is not None, sums)
    if non_negative and lo < 0:
        pos = int(np.flatnonzero(X.data < 0)[0])
        raise _negative_count_error(estimator, index, X.data[pos], int(X.indices[pos]))
    cols = np.empty(d, dtype=np.intp)
    k, finite = nonzero_columns(sums, cols)
    if not finite:
        return None
    cols = cols[:k].astype(X.indices.dtype)
    return _dense_rows_on_columns(np.ascontiguousarray(sums[cols].T), cols, d)


def _dense_rows_on_columns(values, cols, d):
    """An (L, d) CSR whose every row stores ``values[r]`` at the sorted columns ``cols``
    (``values`` is a C-contiguous (L, len(cols)) array): per-class sums kept only on the
    columns some class uses."""
    L, k = values.shape
    return sp.csr_matrix((values.ravel(), np.tile(cols, L), np.arange(L + 1) * k),
                         shape=(L, d))


def _class_sums(X, inverse, wf, L):
    """Per-class weighted column sums of a CSR block as an (L, d) CSR with sorted indices.

    A block with many stored values per column (``L * d`` at most :data:`_DENSE_SUMS_PER_VALUE`
    times its nnz: large blocks of hashed text) is summed as scikit-learn does, into a dense
    (d, L) product, and only its nonzero columns are kept: the product is one pass over the
    values. A block with few values per column would spend more on the O(L d) product than on
    counting, so only the k columns it uses are summed (X re-indexed onto them): every step is
    O(nnz) or O(k), except one O(d) boolean scan. Either way the result is the same sums.
    """
    n, d = X.shape
    if L <= _ONEHOT_CLASSES and L * d <= _DENSE_SUMS_PER_VALUE * X.nnz:
        Y = np.where(inverse[:, None] == np.arange(L), wf[:, None], 0.0)
        values = np.asarray(X.T @ Y)  # (d, L)
        # Re-indexing X onto its used columns costs two random-access passes over its
        # indices, more than the dense product itself; the columns whose sums are all zero
        # are found in the product instead (dropping them changes no sum).
        kept = values[:, 0] != 0
        for c in range(1, L):
            kept |= values[:, c] != 0
        cols = np.flatnonzero(kept).astype(X.indices.dtype)
        return _dense_rows_on_columns(np.ascontiguousarray(values[cols].T), cols, d)
    used = np.zeros(d, dtype=bool)
    used[X.indices] = True
    cols = np.flatnonzero(used).astype(X.indices.dtype)
    k = len(cols)
    remap = np.empty(d, dtype=X.indices.dtype)
    remap[cols] = np.arange(k, dtype=X.indices.dtype)
    Xc = sp.csr_matrix((X.data, remap[X.indices], X.indptr), shape=(n, k))
    if L <= _ONEHOT_CLASSES:
        # The (weighted) one-hot labels as a dense (n, L) matrix: Xc.T @ Y is one pass over
        # the stored entries per class (scikit-learn's product), with an (L, k) dense result.
        Y = np.where(inverse[:, None] == np.arange(L), wf[:, None], 0.0)
        return _dense_rows_on_columns(np.ascontiguousarray(np.asarray(Xc.T @ Y).T), cols, d)
    # Many classes: Y as a sparse (L, n) one-hot matrix, Y @ Xc costs O(nnz).
    Y = sp.csr_matrix((wf, (inverse, np.arange(n))), shape=(L, n))
    out = (Y @ Xc).tocsr()
    out = sp.csr_matrix((out.data, cols[out.indices], out.indptr), shape=(L, d))
    out.sort_indices()  # sorted rows add in O(nnz) (scipy's merge of canonical CSR)
    return out


def _add_rows(out, idx, part):
    """``out[idx] += part`` for a dense or CSR ``part`` (None: zeros); ``out`` is an array, a
    CSR matrix or a shape tuple standing for zeros (so may ``part`` be, from a lower level of
    the reduction tree)."""
    if part is None or isinstance(part, tuple):
        return out
    if sp.issparse(part):
        # Row i of part becomes row idx[i] (idx increases: both label sets are sorted), so the
        # stored entries keep their order and only the row pointers change: O(nnz), no O(d)
        # work (a selection product would allocate O(d) accumulators).
        L = out[0] if isinstance(out, tuple) else out.shape[0]
        lengths = np.zeros(L, dtype=part.indptr.dtype)
        lengths[idx] = np.diff(part.indptr)
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(part.indptr.dtype)
        moved = sp.csr_matrix((part.data, part.indices, indptr), shape=(L, part.shape[1]))
        if isinstance(out, tuple):
            return moved
        return (out + moved) if sp.issparse(out) else np.add(out, moved.toarray(), out=out)
    if isinstance(out, tuple):
        out = np.zeros(out)
    elif sp.issparse(out):
        out = out.toarray()
    out[idx] += part
    return out


def _count_combine(parts):
    parts = _drop_none(parts)
    if not parts:
        return None
    classes = _union([p["classes"] for p in parts], "y")
    L, d = len(classes), parts[0]["feature_count"].shape[1]
    # The (L, d) tuples stand for zeros not yet allocated: sums of sparse parts stay sparse.
    out = {"classes": classes, "class_count": np.zeros(L), "feature_count": (L, d),
           "missing_count": (L, d)}
    for p in parts:
        idx = _positions(classes, p["classes"])
        out["class_count"][idx] += p["class_count"]
        for k in ("feature_count", "missing_count"):
            out[k] = _add_rows(out[k], idx, p[k])
    return out


def dense_counts(stats):
    """The reduced statistics of :func:`_count_combine` with dense (L, d) count arrays."""
    if stats is None:
        return None
    out = dict(stats)
    for k in ("feature_count", "missing_count"):
        v = out[k]
        out[k] = np.zeros(v) if isinstance(v, tuple) else v.toarray() if sp.issparse(v) else v
    return out


def _sparse_missing(X):
    """A CSR block with its NaN values as 0 (a copy only when there are any) and their mask."""
    nan = np.isnan(X.data) if X.dtype.kind == "f" else np.zeros(0, bool)
    if not nan.any():
        return X, None
    values, mask = X.copy(), X.copy()
    values.data[nan] = 0.0
    mask.data = nan.astype(np.float64)
    return values, mask


def _multinomial_jll(X, feature_log_prob, class_log_prior):
    if sp.issparse(X):
        X, _ = _sparse_missing(X)
        return np.asarray(X @ feature_log_prob.T) + class_log_prior
    nan = np.isnan(X)
    if nan.any():
        X = np.where(nan, 0.0, X)  # a missing count contributes nothing
    return X @ feature_log_prob.T + class_log_prior


def _complement_jll(X, feature_log_prob, class_log_prior):
    # scikit-learn's ComplementNB: the prior only counts when there is a single class.
    jll = _multinomial_jll(X, feature_log_prob, np.zeros_like(class_log_prior))
    if len(class_log_prior) == 1:
        jll += class_log_prior
    return jll


def _sparse_bernoulli_jll(X, feature_log_prob, class_log_prior, binarize):
    neg_prob = np.log(1 - np.exp(feature_log_prob))
    X, nan = _sparse_values(X, binarize, "ignore")
    jll = np.asarray(X @ (feature_log_prob - neg_prob).T)
    jll += class_log_prior + neg_prob.sum(axis=1)
    if nan is not None:
        jll -= np.asarray(nan @ neg_prob.T)  # a missing feature's factor is skipped
    return jll


def _bernoulli_jll(X, feature_log_prob, class_log_prior, binarize):
    if sp.issparse(X):
        return _sparse_bernoulli_jll(X, feature_log_prob, class_log_prior, binarize)
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
