"""Regression metrics as one reduction over row blocks.

Every block gives, per output: the total weight, the weighted sums of squared and absolute errors,
and the weighted mean and sum of squared deviations of y_true (merged with Chan et al.'s pairwise
update, so R²'s denominator is as accurate as a two-pass computation whatever the partitioning).
The results equal scikit-learn's (1.9) up to floating-point round-off.
"""
from __future__ import annotations

import warnings

import numpy as np

from dml.metrics import _base
from dml.metrics._base import float_block, stacked_input, weight_vector

__all__ = ["mean_squared_error", "root_mean_squared_error", "mean_absolute_error", "r2_score"]


class _RegressionStats:
    """Per-output sufficient statistics of some rows (arrays of shape (n_outputs,)).

    The weighted mean of y_true is ``shift + mean``: ``shift`` is one y_true value of the rows,
    so the differences between the means of two blocks are computed from small numbers and
    keep their precision even when y_true has a large offset (e.g. 1e6 ± 0.1).
    """

    __slots__ = ("n", "wsum", "sq", "abs", "shift", "mean", "m2", "tmin", "tmax")

    def __init__(self, n, wsum, sq, abs_, shift, mean, m2, tmin, tmax):
        self.n, self.wsum, self.sq, self.abs = n, wsum, sq, abs_
        self.shift, self.mean, self.m2, self.tmin, self.tmax = shift, mean, m2, tmin, tmax

    def __getstate__(self):
        return {s: getattr(self, s) for s in self.__slots__}

    def __setstate__(self, state):
        for s, v in state.items():
            setattr(self, s, v)


def _stats_kernel(index, xb, yb, wb, name, k):
    # X is [y_true | y_pred]: an array, or a DataFrame for Dask Series input.
    cut = xb.iloc if hasattr(xb, "iloc") else np.asarray(xb)
    t = float_block(cut[:, :k], "y_true", name, index)
    p = float_block(cut[:, k:], "y_pred", name, index)
    w = weight_vector(wb, name, index)
    n = len(t)
    err = t - p
    shift = t[0].copy() if n else np.zeros(k)
    d = t - shift
    if w is None:
        wsum = float(n)
        sq, ab = np.sum(err * err, axis=0), np.sum(np.abs(err), axis=0)
        mean = d.sum(axis=0) / n if n else np.zeros(k)
        m2 = np.sum((d - mean) ** 2, axis=0)
    else:
        w = w.astype(np.float64)[:, None]
        wsum = float(w.sum())
        sq, ab = np.sum(w * err * err, axis=0), np.sum(w * np.abs(err), axis=0)
        mean = np.sum(w * d, axis=0) / wsum if wsum != 0 else np.zeros(k)
        m2 = np.sum(w * (d - mean) ** 2, axis=0)
    tmin = t.min(axis=0) if n else np.full(k, np.inf)
    tmax = t.max(axis=0) if n else np.full(k, -np.inf)
    return _RegressionStats(n, wsum, sq, ab, shift, mean, m2, tmin, tmax)


def _merge_stats(parts):
    parts = [p for p in parts if p is not None]
    out = parts[0]
    for b in parts[1:]:
        a = out
        wsum = a.wsum + b.wsum
        if a.wsum == 0 or wsum == 0:
            shift, mean, m2 = b.shift, b.mean, a.m2 + b.m2
        elif b.wsum == 0:
            shift, mean, m2 = a.shift, a.mean, a.m2 + b.m2
        else:
            # Chan, Golub & LeVeque's pairwise update of the mean and squared deviations.
            delta = (b.shift - a.shift) + (b.mean - a.mean)
            shift, mean = a.shift, a.mean + delta * (b.wsum / wsum)
            m2 = a.m2 + b.m2 + delta * delta * (a.wsum * b.wsum / wsum)
        out = _RegressionStats(a.n + b.n, wsum, a.sq + b.sq, a.abs + b.abs, shift, mean, m2,
                               np.minimum(a.tmin, b.tmin), np.maximum(a.tmax, b.tmax))
    return out


def _stats(name, y_true, y_pred, sample_weight):
    inp, k = stacked_input(name, y_true, y_pred, sample_weight)
    stats = inp.reduce(_stats_kernel, name, k, combine=_merge_stats)
    if stats.n == 0:
        raise ValueError(f"{name}: Found empty input (y_true and y_pred have 0 samples) while "
                         "a minimum of 1 is required.")
    return stats, k


def _check_multioutput(multioutput, k, name, allowed):
    if isinstance(multioutput, str):
        if multioutput not in allowed:
            raise ValueError(f"{name}: Allowed 'multioutput' string values are {allowed}. You "
                             f"provided multioutput={multioutput!r}")
        return multioutput
    weights = np.asarray(multioutput, dtype=np.float64)
    if k == 1:
        raise ValueError(f"{name}: Custom weights are useful only in multi-output cases.")
    if weights.shape != (k,):
        raise ValueError(f"{name}: There must be equally many custom weights "
                         f"({weights.size}) as outputs ({k}).")
    return weights


def _mean_error(errors, wsum, multioutput, name):
    if wsum == 0:
        raise ValueError(f"{name}: the sample weights sum to zero, so the weighted mean is "
                         "undefined; pass weights with a non-zero sum")
    output_errors = errors / wsum
    if isinstance(multioutput, str):
        if multioutput == "raw_values":
            return output_errors
        multioutput = None
    return float(np.average(output_errors, weights=multioutput))


_PARAMS = """
    Parameters
    ----------
    y_true : array-like, pandas Series/DataFrame, Dask array, Dask Series/DataFrame of shape \
(n_samples,) or (n_samples, n_outputs)
        True targets.
    y_pred : same types and shape as y_true
        Predicted targets; realigned to y_true's partitions when they differ. NaN or infinity
        is an error.
    sample_weight : array-like or Dask array/Series of shape (n_samples,), default=None
        Sample weights.
"""

_MULTIOUTPUT = ("    multioutput : {'raw_values', 'uniform_average'} or array-like of shape "
                "(n_outputs,), default='uniform_average'")


def mean_squared_error(y_true, y_pred, *, sample_weight=None, multioutput="uniform_average"):
    name = "mean_squared_error"
    stats, k = _stats(name, y_true, y_pred, sample_weight)
    multioutput = _check_multioutput(multioutput, k, name, ("raw_values", "uniform_average"))
    return _mean_error(stats.sq, stats.wsum, multioutput, name)


mean_squared_error.__doc__ = """Mean squared error ``Σ w (y - ŷ)² / Σ w``, as
    :func:`sklearn.metrics.mean_squared_error`; one pass over the blocks.
    """ + _PARAMS + _MULTIOUTPUT + """
        Per-output errors ('raw_values'), their mean, or their weighted mean.

    Returns
    -------
    loss : float or ndarray of shape (n_outputs,)

    Examples
    --------
    >>> from dml.metrics import mean_squared_error
    >>> mean_squared_error([3, -0.5, 2, 7], [2.5, 0.0, 2, 8])
    0.375
    >>> mean_squared_error([[0.5, 1], [-1, 1], [7, -6]], [[0, 2], [-1, 2], [8, -5]],
    ...                    multioutput="raw_values")
    array([0.41666667, 1.        ])
    """


def root_mean_squared_error(y_true, y_pred, *, sample_weight=None,
                            multioutput="uniform_average"):
    name = "root_mean_squared_error"
    stats, k = _stats(name, y_true, y_pred, sample_weight)
    multioutput = _check_multioutput(multioutput, k, name, ("raw_values", "uniform_average"))
    rmse = np.sqrt(_mean_error(stats.sq, stats.wsum, "raw_values", name))
    if isinstance(multioutput, str):
        if multioutput == "raw_values":
            return rmse
        multioutput = None
    return float(np.average(rmse, weights=multioutput))


root_mean_squared_error.__doc__ = """Root mean squared error ``sqrt(Σ w (y - ŷ)² / Σ w)`` per
    output, as :func:`sklearn.metrics.root_mean_squared_error`.
    """ + _PARAMS + _MULTIOUTPUT + """
        Per-output errors, their mean, or their weighted mean.

    Returns
    -------
    loss : float or ndarray of shape (n_outputs,)

    Examples
    --------
    >>> from dml.metrics import root_mean_squared_error
    >>> root_mean_squared_error([3, -0.5, 2, 7], [2.5, 0.0, 2, 8])
    0.612...
    """


def mean_absolute_error(y_true, y_pred, *, sample_weight=None, multioutput="uniform_average"):
    name = "mean_absolute_error"
    stats, k = _stats(name, y_true, y_pred, sample_weight)
    multioutput = _check_multioutput(multioutput, k, name, ("raw_values", "uniform_average"))
    return _mean_error(stats.abs, stats.wsum, multioutput, name)


mean_absolute_error.__doc__ = """Mean absolute error ``Σ w |y - ŷ| / Σ w``, as
    :func:`sklearn.metrics.mean_absolute_error`; one pass over the blocks.
    """ + _PARAMS + _MULTIOUTPUT + """
        Per-output errors ('raw_values'), their mean, or their weighted mean.

    Returns
    -------
    loss : float or ndarray of shape (n_outputs,)

    Examples
    --------
    >>> from dml.metrics import mean_absolute_error
    >>> mean_absolute_error([3, -0.5, 2, 7], [2.5, 0.0, 2, 8])
    0.5
    """


def r2_score(y_true, y_pred, *, sample_weight=None, multioutput="uniform_average",
             force_finite=True):
    name = "r2_score"
    stats, k = _stats(name, y_true, y_pred, sample_weight)
    multioutput = _check_multioutput(multioutput, k, name,
                                     ("raw_values", "uniform_average", "variance_weighted"))
    if stats.n < 2:
        warnings.warn("R^2 score is not well-defined with less than two samples.",
                      _base.UndefinedMetricWarning, stacklevel=2)
        return float("nan")
    numerator = stats.sq.astype(np.float64)
    # A constant y_true has exactly zero variance, whatever the round-off of its mean.
    denominator = np.where(stats.tmin == stats.tmax, 0.0, stats.m2)
    nonzero_denominator = denominator != 0
    if not force_finite:
        with np.errstate(divide="ignore", invalid="ignore"):
            scores = 1 - numerator / denominator
    else:
        nonzero_numerator = numerator != 0
        scores = np.ones(k)
        valid = nonzero_denominator & nonzero_numerator
        scores[valid] = 1 - numerator[valid] / denominator[valid]
        scores[nonzero_numerator & ~nonzero_denominator] = 0.0
    if isinstance(multioutput, str):
        if multioutput == "raw_values":
            return scores
        if multioutput == "uniform_average":
            weights = None
        else:
            weights = denominator if nonzero_denominator.any() else None
    else:
        weights = multioutput
    return float(np.average(scores, weights=weights))


r2_score.__doc__ = r""":math:`R^2`, the coefficient of determination ``1 - SS_res / SS_tot``.

    ``SS_res = Σ w (y - ŷ)²`` and ``SS_tot = Σ w (y - ȳ)²`` with ȳ the weighted mean, as
    :func:`sklearn.metrics.r2_score`. ``SS_tot`` is merged across blocks with the pairwise
    (Chan et al.) update, so it is as accurate as a two-pass computation. A constant y_true
    (min = max) has ``SS_tot = 0`` exactly, so ``force_finite`` applies even where scikit-learn's
    rounded mean leaves a tiny non-zero ``SS_tot``. Fewer than two samples give NaN with an
    ``UndefinedMetricWarning``.
    """ + _PARAMS + """    multioutput : {'raw_values', 'uniform_average', 'variance_weighted'} or \
array-like of shape (n_outputs,), default='uniform_average'
        Per-output scores, their mean, their mean weighted by the variance of each output of
        y_true, or their weighted mean.
    force_finite : bool, default=True
        Replace the NaN / -inf of a constant y_true by 1.0 (perfect predictions) or 0.0.

    Returns
    -------
    score : float or ndarray of shape (n_outputs,)

    Examples
    --------
    >>> from dml.metrics import r2_score
    >>> r2_score([3, -0.5, 2, 7], [2.5, 0.0, 2, 8])
    0.948...
    >>> r2_score([[0.5, 1], [-1, 1], [7, -6]], [[0, 2], [-1, 2], [8, -5]],
    ...          multioutput="raw_values")
    array([0.96543779, 0.90816327])
    """
