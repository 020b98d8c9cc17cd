"""Metric inputs as aligned row blocks, and the label tables that classification metrics reduce to.

Every metric here is a reduction: a per-block kernel turns one block of (y_true, y_pred,
sample_weight) into a small table, the tables are merged in :mod:`dml._blocks`' fixed tree order,
and the metric is computed from the merged table on the client. This module owns the two steps
that all metric families share:

* turning (y_true, y_pred, sample_weight) of any supported type into row-aligned blocks
  (:func:`label_input` for one label/score vector next to y_true, :func:`stacked_input` for
  numeric targets that may have several outputs), with a direct path for local input;
* checking one block of class labels (:func:`block_labels`) and counting (true, predicted) label
  pairs (:class:`LabelPairs`), merged by label value, so labels are discovered in the same pass as
  the counts.
"""
from __future__ import annotations

import numbers
import re

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dml._blocks import BlockSpec, compute_lengths, extract_block, as_blocks, is_dask

__all__ = ["MetricInput", "label_input", "stacked_input", "block_labels", "union_labels",
           "first_column", "float_block", "weight_vector", "weighted_bincount", "LabelPairs",
           "pair_counts", "merge_pairs", "check_classification_targets", "label_index"]


def __getattr__(name):
    # scikit-learn's class (the one its users already filter), imported when a warning is
    # raised: workers import this module for its block functions, and importing scikit-learn
    # costs a fresh worker about half a second of CPU (docs/cold_start.md).
    if name == "UndefinedMetricWarning":
        from sklearn.exceptions import UndefinedMetricWarning

        return UndefinedMetricWarning
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class MetricInput:
    """Either the whole (X, y, w) of local input, or :class:`dml._blocks.Blocks` for Dask input.

    ``X`` is the prediction side (a 2-D array or DataFrame), ``y`` the true labels (1-D) or None.
    :meth:`reduce` runs a kernel and a combine over it; local input is one block, so it gives
    the same answer as Dask input in a single block.
    """

    def __init__(self, n_columns: int, *, local=None, blocks=None, y_name: str = "y",
                 realign=None, pred_name: str = "y_pred"):
        self.n_columns = n_columns
        self.pred_name = pred_name
        self.local = local
        self.blocks = blocks
        self.y_name = y_name
        # Builds realigned blocks when partition-wise pairing finds partitions of different
        # lengths (see _zip_series).
        self._realign = realign

    def reduce(self, kernel, *args, combine):
        """``combine`` over ``kernel(block_index, X, y, w, *args)`` of every block."""
        if self.local is not None:
            xb, yb, wb = self.local
            return combine([kernel(0, xb, yb, wb, *args)])
        try:
            with _y_named(self.y_name):
                return self.blocks.map_reduce(kernel, *args, combine=combine, with_index=True)
        except ValueError as exc:
            # as_blocks pairs partitions optimistically and reports different totals only when
            # it computes: name the metric's arguments instead of X / y.
            m = _X_VS_Y.search(str(exc))
            if m is not None:
                other = self.y_name if m.group(2) == "y" else "sample_weight"
                raise _length_error(_metric_name(exc), other, m.group(3), self.pred_name,
                                    m.group(1)) from None
            if self._realign is None or _MISMATCH not in str(exc):
                raise
        self.blocks, self._realign = self._realign().blocks, None
        return self.reduce(kernel, *args, combine=combine)


def _metric_name(exc) -> str:
    return str(exc).partition(":")[0]


_WORD_Y = re.compile(r"(?<![\w.])y(?![\w.])")


class _y_named:
    """Re-raise the block checks' "Input y contains ..." errors with the metric's name for y.

    The y slot of :func:`dml._blocks.as_blocks` checks y for missing values on the workers and
    calls it "y"; here y is y_true (or y1).
    """

    def __init__(self, y_name: str):
        self.y_name = y_name

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and issubclass(exc_type, ValueError) and self.y_name != "y":
            msg = str(exc)
            if "Input y contains" in msg:
                prefix, _, rest = msg.partition(": ")
                raise ValueError(prefix + ": " + _WORD_Y.sub(self.y_name, rest)) from None
        return False


# --------------------------------------------------------------------------------------------
# Building the input
# --------------------------------------------------------------------------------------------

def _spec(name: str) -> BlockSpec:
    # Values are checked by the metric kernels themselves, which know the argument names.
    return BlockSpec(numeric=False, dtype=None, allow_nan=True, estimator=name)


def _normalise(v, what: str, name: str):
    """Lists and other array-likes become NumPy; pandas and Dask objects are kept."""
    if v is None or isinstance(v, (np.ndarray, pd.Series, pd.DataFrame)) or is_dask(v):
        return v
    if hasattr(v, "toarray") or hasattr(v, "tocsr"):
        raise TypeError(f"{name}: {what} is a sparse matrix; sparse inputs are not supported, "
                        "pass a dense array")
    if isinstance(v, pd.Index):
        return v.to_numpy()
    return np.asarray(v)


def _check_given(name, y_true, y_pred, true_name, pred_name):
    if y_true is None or y_pred is None:
        raise ValueError(f"{name}: {true_name} and {pred_name} are required")
    if getattr(y_true, "ndim", 1) == 0 or getattr(y_pred, "ndim", 1) == 0:
        raise ValueError(f"{name}: expected array-like inputs with one entry per sample, got "
                         "a scalar")


def _known_length(v):
    if isinstance(v, (np.ndarray, pd.Series, pd.DataFrame)):
        return len(v)
    if isinstance(v, da.Array) and not np.isnan(v.shape[0]):
        return int(v.shape[0])
    return None


def _check_lengths(name: str, named: list) -> None:
    known = [(what, _known_length(v)) for what, v in named if v is not None]
    known = [(what, n) for what, n in known if n is not None]
    for what, n in known[1:]:
        if n != known[0][1]:
            raise _length_error(name, known[0][0], known[0][1], what, n)


def _length_error(name, what_a, n_a, what_b, n_b) -> ValueError:
    return ValueError(f"{name}: {what_a} has {n_a} samples but {what_b} has {n_b}; they need "
                      f"the same number of samples (one entry per sample).")


def _with_known_chunks(arrays: list) -> list:
    """Dask arrays with unknown row chunk sizes (e.g. ``series.values``) get them, in one pass.

    ``as_blocks`` cannot realign arrays whose chunk sizes are unknown, and the sizes are needed
    anyway to check the lengths.
    """
    arrays = [a.rechunk({1: -1}) if isinstance(a, da.Array) and a.ndim == 2 and
              len(a.chunks[1]) > 1 else a for a in arrays]
    unknown = [i for i, a in enumerate(arrays)
               if isinstance(a, da.Array) and any(np.isnan(c) for c in a.chunks[0])]
    if not unknown:
        return arrays
    lengths = compute_lengths(*[arrays[i] for i in unknown])
    out = list(arrays)
    for i, lens in zip(unknown, lengths):
        out[i] = _with_lengths(arrays[i], lens)
    return out


def _with_lengths(v, lengths):
    """A Dask array (from an array or dataframe) whose row chunks are the given lengths."""
    lengths = [int(r) for r in lengths]
    if isinstance(v, dd.DataFrame):
        return v.to_dask_array(lengths=lengths)
    return da.Array(v.dask, v.name, (tuple(lengths),) + tuple(v.chunks[1:]), meta=v._meta)


_MISMATCH = "dml.metrics: paired partitions of different lengths"


def _zip_partitions(*parts, names):
    lengths = [len(p) for p in parts]
    if len(set(lengths)) > 1:
        raise ValueError(f"{_MISMATCH}: {lengths}")
    return pd.DataFrame({n: p.reset_index(drop=True) for n, p in zip(names, parts)})


def _zip_series(named: list):
    """Dask Series with the same number of partitions as ONE dataframe, paired partition-wise.

    Series taken from one dataframe (``df["y"]``, ``df["pred"]``) have partitions of equal
    lengths. Pairing them by position avoids the pass over the data that realigning needs to
    learn the partition lengths; each pair's lengths are checked where it is computed, and on a
    mismatch :class:`MetricInput` falls back to realigning. Returns None when the inputs are
    not all Dask Series with the same number of partitions.
    """
    named = [(n, s) for n, s in named if s is not None]
    series = [s for _, s in named]
    if not all(isinstance(s, dd.Series) for s in series) or \
            len({s.npartitions for s in series}) != 1:
        return None
    names = [n for n, _ in named]
    meta = _zip_partitions(*[s._meta for s in series], names=names)
    return dd.map_partitions(_zip_partitions, *series, names=names, meta=meta,
                             align_dataframes=False, enforce_metadata=False)


_X_VS_Y = re.compile(r"X has (\d+) rows but (y|sample_weight) has (\d+)")


def label_input(name: str, y_true, y_pred, sample_weight=None, *, pred_name: str = "y_pred",
                true_name: str = "y_true", max_columns: int | None = 1) -> MetricInput:
    """(y_true, y_pred/y_score, sample_weight) as row-aligned blocks.

    ``y_pred`` (or a 2-D score/probability array) takes the X slot of :func:`as_blocks` and
    y_true the y slot, so y_true and sample_weight are realigned to y_pred's row blocks.

    Parameters
    ----------
    max_columns : int or None
        Most columns y_pred may have (1 for labels, None for any number of score columns).
    """
    y_true = _normalise(y_true, true_name, name)
    y_pred = _normalise(y_pred, pred_name, name)
    sample_weight = _normalise(sample_weight, "sample_weight", name)
    _check_given(name, y_true, y_pred, true_name, pred_name)
    for v, what in ((y_true, true_name), (sample_weight, "sample_weight")):
        if v is not None and getattr(v, "ndim", 1) == 2 and v.shape[1] != 1:
            raise ValueError(f"{name}: {what} must be 1-D (one entry per sample), got shape "
                             f"{tuple(v.shape)}; multilabel/multioutput targets are not "
                             "supported")
    if getattr(y_pred, "ndim", 1) > 2 or getattr(y_true, "ndim", 1) > 2:
        raise ValueError(f"{name}: expected 1-D or 2-D inputs")
    n_columns = 1 if getattr(y_pred, "ndim", 1) == 1 else \
        (len(y_pred.columns) if isinstance(y_pred, (pd.DataFrame, dd.DataFrame))
         else int(y_pred.shape[1]))
    if max_columns is not None and n_columns > max_columns:
        raise ValueError(f"{name}: {pred_name} must be 1-D (one label per sample), got "
                         f"{n_columns} columns; multilabel targets are not supported")
    spec = _spec(name)

    def realigned():
        return _label_blocks(name, y_true, y_pred, sample_weight, true_name, pred_name,
                             n_columns)

    zipped = _zip_series([("y_pred", y_pred), ("y_true", y_true),
                          ("sample_weight", sample_weight)])
    if zipped is not None:
        blocks = as_blocks(zipped, "y_true", "sample_weight" if sample_weight is not None
                           else None, spec=spec)
        return MetricInput(1, blocks=blocks, y_name=true_name, realign=realigned)
    return realigned()


def _label_blocks(name, y_true, y_pred, sample_weight, true_name, pred_name, n_columns):
    y_true, y_pred, sample_weight = _with_known_chunks([y_true, y_pred, sample_weight])
    _check_lengths(name, [(true_name, y_true), (pred_name, y_pred),
                          ("sample_weight", sample_weight)])
    if isinstance(y_true, dd.Series) and \
            isinstance(y_true.dtype, pd.api.extensions.ExtensionDtype):
        # as_blocks makes a separate y a Dask array; Dask warns when it converts pandas
        # extension dtypes (strings, categoricals, nullable) itself, so convert first.
        y_true = y_true.astype(object)
    # y_pred as a 2-D collection.
    if isinstance(y_pred, (pd.Series, dd.Series)):
        X = y_pred.to_frame()
    elif y_pred.ndim == 1:
        X = y_pred[:, None] if isinstance(y_pred, da.Array) else y_pred.reshape(-1, 1)
    else:
        X = y_pred
    spec = _spec(name)
    if not any(is_dask(v) for v in (y_true, y_pred, sample_weight)):
        if isinstance(X, pd.DataFrame):
            X = X.to_numpy()
        with _y_named(true_name):
            local = extract_block(X, y_true, sample_weight, spec, 0)
        return MetricInput(n_columns, local=local)
    try:
        blocks = as_blocks(X, y_true, sample_weight, spec=spec)
    except ValueError as exc:
        m = _X_VS_Y.search(str(exc))
        if m is None:
            raise
        other = true_name if m.group(2) == "y" else "sample_weight"
        raise _length_error(name, other, m.group(3), pred_name, m.group(1)) from None
    return MetricInput(n_columns, blocks=blocks, y_name=true_name, pred_name=pred_name)


def _as_2d(v, what: str, name: str):
    if isinstance(v, (pd.Series, dd.Series)):
        v = v.to_frame()
    if isinstance(v, pd.DataFrame):
        return v.to_numpy()
    if isinstance(v, dd.DataFrame):
        return v  # made an array once its partition lengths are known
    if v.ndim == 1:
        return v[:, None] if isinstance(v, da.Array) else v.reshape(-1, 1)
    if v.ndim != 2:
        raise ValueError(f"{name}: {what} must be 1-D or 2-D, got {v.ndim}-D")
    if isinstance(v, da.Array) and len(v.chunks[1]) > 1:
        v = v.rechunk({1: -1})
    return v


def stacked_input(name: str, y_true, y_pred, sample_weight=None):
    """Numeric targets: blocks whose X is ``[y_true | y_pred]`` (n × 2k), for k outputs.

    Both sides go into the X slot so that multi-output targets work and every value check can
    name the argument it is about. Returns ``(MetricInput, n_outputs)``.
    """
    y_true = _normalise(y_true, "y_true", name)
    y_pred = _normalise(y_pred, "y_pred", name)
    sample_weight = _normalise(sample_weight, "sample_weight", name)
    _check_given(name, y_true, y_pred, "y_true", "y_pred")

    def realigned():
        return _stacked_blocks(name, y_true, y_pred, sample_weight)

    zipped = _zip_series([("y_true", y_true), ("y_pred", y_pred),
                          ("sample_weight", sample_weight)])
    if zipped is not None:
        blocks = as_blocks(zipped, None, "sample_weight" if sample_weight is not None else None,
                           spec=_spec(name))
        return MetricInput(2, blocks=blocks, realign=lambda: realigned()[0]), 1
    return realigned()


def _stacked_blocks(name, y_true, y_pred, sample_weight):
    _check_lengths(name, [("y_true", y_true), ("y_pred", y_pred),
                          ("sample_weight", sample_weight)])
    a, b = _as_2d(y_true, "y_true", name), _as_2d(y_pred, "y_pred", name)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"{name}: y_true and y_pred have different number of output "
                         f"({a.shape[1]}!={b.shape[1]})")
    k = int(a.shape[1])
    if not any(is_dask(v) for v in (a, b, sample_weight)):
        X = np.concatenate([_object_or_float(a), _object_or_float(b)], axis=1)
        local = extract_block(X, None, sample_weight, _spec(name), 0)
        return MetricInput(2 * k, local=local), k

    # Dask sides whose row counts are unknown: all their lengths in one pass.
    unknown = [v for v in (a, b) if isinstance(v, dd.DataFrame) or
               (isinstance(v, da.Array) and any(np.isnan(c) for c in v.chunks[0]))]
    if unknown:
        lengths = dict(zip(map(id, unknown), compute_lengths(*unknown)))
        a, b = [_with_lengths(v, lengths[id(v)]) if id(v) in lengths else v for v in (a, b)]
    na, nb = [int(sum(v.chunks[0])) if is_dask(v) else len(v) for v in (a, b)]
    if na != nb:
        raise _length_error(name, "y_true", na, "y_pred", nb)
    rows = a.chunks[0] if is_dask(a) else b.chunks[0]
    a, b = [da.from_array(_object_or_float(v), chunks=(rows, -1)) if isinstance(v, np.ndarray)
            else v for v in (a, b)]
    if b.chunks[0] != a.chunks[0]:
        b = b.rechunk({0: a.chunks[0]})
    X = da.concatenate([a, b], axis=1)
    try:
        blocks = as_blocks(X, None, sample_weight, spec=_spec(name))
    except ValueError as exc:
        m = _X_VS_Y.search(str(exc))
        if m is None:
            raise
        raise _length_error(name, "y_true", m.group(1), "sample_weight", m.group(3)) from None
    return MetricInput(2 * k, blocks=blocks), k


def _object_or_float(a: np.ndarray) -> np.ndarray:
    return a if a.dtype.kind in "biuf" else a.astype(object)


# --------------------------------------------------------------------------------------------
# Per-block helpers (run on the workers)
# --------------------------------------------------------------------------------------------

def first_column(xb) -> np.ndarray:
    """The single column of a prediction block as a 1-D NumPy array."""
    if isinstance(xb, pd.DataFrame):
        return xb.iloc[:, 0].to_numpy()
    return np.asarray(xb)[:, 0]


def float_block(v, what: str, name: str, index: int, keep=(np.float64,)) -> np.ndarray:
    """A block of numbers as a float array: NaN and infinity are errors naming ``what``.

    Float dtypes listed in ``keep`` are kept (e.g. float32 probabilities, whose clipping
    threshold depends on the dtype, as in scikit-learn); anything else becomes float64.
    """
    if isinstance(v, (pd.DataFrame, pd.Series)):
        dtypes = v.dtypes if isinstance(v, pd.DataFrame) else [v.dtype]
        if any(isinstance(t, pd.api.extensions.ExtensionDtype) for t in dtypes):
            try:  # nullable numbers: pd.NA becomes NaN, reported below
                v = v.to_numpy(dtype=np.float64, na_value=np.nan)
            except (TypeError, ValueError):
                raise TypeError(f"{name}: {what} must contain numbers, got dtype(s) "
                                f"{list(map(str, dtypes))}") from None
        else:
            v = v.to_numpy()
    v = np.asarray(v)
    if v.dtype not in keep:
        try:
            v = v.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name}: {what} must contain numbers, got values of dtype "
                            f"{v.dtype} that are not numbers (or missing values)") from None
    if v.size and not np.isfinite(np.sum(v, dtype=np.float64)):
        if np.isnan(v).any():
            raise ValueError(f"{name}: Input {what} contains NaN (row block {index}); every "
                             f"sample needs a {what} value.")
        if np.isinf(v).any():
            raise ValueError(f"{name}: Input {what} contains infinity (row block {index}).")
    return v


def block_labels(v, what: str, name: str, index: int):
    """Check one block of class labels; return ``(labels, codes, kind, continuous)``.

    ``labels`` are the block's sorted distinct labels (object dtype for strings), ``codes`` the
    index of each sample's label in it, ``kind`` is ``"str"``, ``"num"`` or ``"none"`` (empty
    block) and ``continuous`` tells whether a float label is not a whole number (scikit-learn's
    "continuous" target type).
    """
    v = np.asarray(v)
    if v.ndim != 1:
        v = v.ravel()
    kind_char = v.dtype.kind
    if kind_char == "f":
        if v.size and not np.isfinite(v).all():
            problem = "NaN" if np.isnan(v).any() else "infinity"
            raise ValueError(f"{name}: Input {what} contains {problem} (row block {index}); "
                             f"every sample needs a {what} label.")
    elif kind_char not in "biuUSO":
        raise TypeError(f"{name}: {what} has dtype {v.dtype}; expected class labels (integers, "
                        "strings or booleans)")
    try:
        # Hash-based (far faster than np.unique on strings); sort=True gives sorted labels.
        codes, labels = pd.factorize(v, sort=True)
    except TypeError:
        raise ValueError(f"{name}: Mix of label input types (string and number) in {what}") \
            from None
    if kind_char == "O" and codes.size and codes.min() < 0:  # None, NaN, pd.NA, NaT
        raise ValueError(f"{name}: Input {what} contains missing values (row block "
                         f"{index}); every sample needs a {what} label.")
    labels = np.asarray(labels)
    if labels.size == 0:
        return labels, codes, "none", False
    if kind_char in "US":
        return labels.astype(object), codes, "str", False
    if kind_char == "O":
        is_str = [isinstance(x, str) for x in labels]
        if all(is_str):
            return labels, codes, "str", False
        if any(is_str):
            raise ValueError(f"{name}: Mix of label input types (string and number) in {what}")
        if not all(isinstance(x, (numbers.Number, np.bool_)) for x in labels):
            raise TypeError(f"{name}: {what} contains values that are neither strings nor "
                            "numbers; expected class labels")
        labels = np.array(labels.tolist())
    continuous = labels.dtype.kind == "f" and bool(np.any(labels != np.trunc(labels)))
    return labels, codes, "num", continuous


def union_labels(kinds, arrays, name: str):
    """Sorted union of label arrays of one kind; mixing strings and numbers is an error."""
    kinds = {k for k in kinds if k != "none"}
    if len(kinds) > 1:
        raise ValueError(f"{name}: Mix of label input types (string and number)")
    arrays = [a for a in arrays if a.size]
    if not arrays:
        return np.empty(0), "none"
    return np.unique(np.concatenate(arrays)), kinds.pop()


# --------------------------------------------------------------------------------------------
# (true, predicted) label pair counts
# --------------------------------------------------------------------------------------------

class LabelPairs:
    """Weighted counts of (true label, predicted label) pairs over some rows.

    Attributes
    ----------
    labels : ndarray
        Sorted distinct labels seen in y_true or y_pred.
    in_true, in_pred : ndarray of bool
        Whether each label occurs in y_true / y_pred (whatever its weight).
    counts : ndarray of shape (k, k)
        Rows are true labels, columns predicted labels. int64 without weights or with integer
        weights, float64 with float weights (as scikit-learn's confusion matrix).
    n : int
        Number of rows.
    weighted : bool
        Whether sample weights were given.
    kind : {"str", "num", "none"}
    continuous_true, continuous_pred : bool
        A float label that is not a whole number was seen.
    """

    __slots__ = ("labels", "in_true", "in_pred", "counts", "n", "weighted", "kind",
                 "continuous_true", "continuous_pred")

    def __init__(self, labels, in_true, in_pred, counts, n, weighted, kind, continuous_true,
                 continuous_pred):
        self.labels, self.in_true, self.in_pred, self.counts = labels, in_true, in_pred, counts
        self.n, self.weighted, self.kind = n, weighted, kind
        self.continuous_true, self.continuous_pred = continuous_true, continuous_pred

    def __getstate__(self):
        return {s: getattr(self, s) for s in self.__slots__}

    def __setstate__(self, state):
        for s, v in state.items():
            setattr(self, s, v)


def weight_vector(wb, name: str, index: int):
    if wb is None:
        return None
    w = np.asarray(wb)
    if w.dtype.kind == "b":
        w = w.astype(np.int64)
    if w.dtype.kind not in "iuf":
        w = float_block(w, "sample_weight", name, index)
    return w


def weighted_bincount(codes: np.ndarray, w, size: int) -> np.ndarray:
    """Per-code totals: counts without weights, exact int64 sums for integer weights."""
    if w is None:
        return np.bincount(codes, minlength=size).astype(np.int64)
    if w.dtype.kind in "iu":
        out = np.zeros(size, dtype=np.int64)
        np.add.at(out, codes, w.astype(np.int64))
        return out
    return np.bincount(codes, weights=w.astype(np.float64), minlength=size)


def pair_counts(index, xb, yb, wb, name: str, true_name: str = "y_true",
                pred_name: str = "y_pred") -> LabelPairs:
    """Kernel: the :class:`LabelPairs` of one block (X = y_pred column, y = y_true)."""
    lt, ct, kt, cont_t = block_labels(yb, true_name, name, index)
    lp, cp, kp, cont_p = block_labels(first_column(xb), pred_name, name, index)
    labels, kind = union_labels((kt, kp), (lt, lp), name)
    k = len(labels)
    mt = np.searchsorted(labels, lt) if lt.size else np.empty(0, dtype=np.intp)
    mp = np.searchsorted(labels, lp) if lp.size else np.empty(0, dtype=np.intp)
    w = weight_vector(wb, name, index)
    flat = mt[ct] * k + mp[cp] if len(ct) else np.empty(0, dtype=np.intp)
    counts = weighted_bincount(flat, w, k * k).reshape(k, k)
    in_true = np.zeros(k, dtype=bool)
    in_true[mt] = True
    in_pred = np.zeros(k, dtype=bool)
    in_pred[mp] = True
    return LabelPairs(labels, in_true, in_pred, counts, int(len(ct)), w is not None, kind,
                      cont_t, cont_p)


def merge_pairs(parts: list, name: str = "metric") -> LabelPairs:
    """Combine: add the counts of several :class:`LabelPairs`, matching labels by value."""
    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    labels, kind = union_labels([p.kind for p in parts], [p.labels for p in parts], name)
    k = len(labels)
    dtype = np.result_type(*[p.counts.dtype for p in parts])
    counts = np.zeros((k, k), dtype=dtype)
    in_true = np.zeros(k, dtype=bool)
    in_pred = np.zeros(k, dtype=bool)
    for p in parts:
        if not p.labels.size:
            continue
        idx = np.searchsorted(labels, p.labels)
        counts[np.ix_(idx, idx)] += p.counts
        in_true[idx] |= p.in_true
        in_pred[idx] |= p.in_pred
    return LabelPairs(labels, in_true, in_pred, counts, sum(p.n for p in parts),
                      any(p.weighted for p in parts), kind,
                      any(p.continuous_true for p in parts),
                      any(p.continuous_pred for p in parts))


def check_classification_targets(t: LabelPairs, name: str) -> str:
    """scikit-learn's target-type rules on merged counts: ``"binary"`` or ``"multiclass"``."""
    if t.n == 0:
        raise ValueError(f"{name}: Found empty input array (e.g., `y_true` or `y_pred`) while "
                         "a minimum of 1 sample is required.")

    def kind(continuous, present):
        if continuous:
            return "continuous"
        return "binary" if int(present.sum()) <= 2 else "multiclass"

    types = {kind(t.continuous_true, t.in_true), kind(t.continuous_pred, t.in_pred)}
    if types == {"binary", "multiclass"}:
        types = {"multiclass"}
    if len(types) > 1:
        a, b = kind(t.continuous_true, t.in_true), kind(t.continuous_pred, t.in_pred)
        raise ValueError(f"{name}: Classification metrics can't handle a mix of {a} and {b} "
                         "targets")
    y_type = types.pop()
    if y_type == "continuous":
        raise ValueError(f"{name}: continuous is not supported; y_true and y_pred must be "
                         "class labels")
    if y_type == "binary" and len(t.labels) > 2:
        y_type = "multiclass"
    return y_type


def label_index(labels: np.ndarray) -> dict:
    """Label value → position; Python equality, so 1, 1.0 and True find the same label."""
    return {v: i for i, v in enumerate(labels.tolist())}
