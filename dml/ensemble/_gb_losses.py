"""Losses of the gradient-boosted trees: gradients, hessians, baselines and loss values.

Each loss follows scikit-learn's ``sklearn._loss`` definitions (the "half" losses, so that the
hessian of the squared error is 1): per row, for raw prediction ``r`` and target ``y``,

==================  =============================  ========================  =============
loss                value                          gradient                  hessian
==================  =============================  ========================  =============
squared_error       (y - r)² / 2                   r - y                     1
absolute_error      |y - r|                        ±1 (+1 when r > y)        1
quantile            pinball loss of level q        -q if y >= r else 1 - q   1
poisson             exp(r) - y·r                   exp(r) - y                exp(r)
log_loss (binary)   log(1 + exp(r)) - y·r          expit(r) - y              p(1 - p)
log_loss (K > 2)    logsumexp(r) - r_y             p_k - [y = k]             p_k(1 - p_k)
==================  =============================  ========================  =============

Gradients and hessians are multiplied by the sample weight and stored as float32 (as
scikit-learn's); the histograms sum them in float64. The baseline (the raw prediction before
the first tree) is the link of the weighted mean target (log-odds, log of class frequencies
centred, log of the mean), or the weighted median / quantile for the absolute and quantile
losses, whose leaves are also re-fitted to the median / quantile of the residuals.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit, logsumexp

_EPS = np.finfo(np.float64).eps


class GBLoss:
    """One loss: per-block arrays in, per-block arrays out (all methods are pure)."""

    #: Raw prediction columns (1, or the number of classes for the multinomial loss).
    n_outputs = 1
    #: Leaves re-fitted to a quantile of the residuals (absolute error, quantile).
    leaf_quantile: float | None = None
    constant_hessian = True

    def __init__(self, n_classes: int = 1, quantile: float = 0.5):
        self.n_classes = n_classes
        self.quantile = quantile

    # ---- baseline ----
    def baseline_stats(self, y, w):
        """What a block contributes to the baseline (sums; combined by addition)."""
        return np.array([float(np.dot(w, y)), float(w.sum())])

    def baseline(self, stats) -> np.ndarray:
        return np.array([stats[0] / stats[1]])

    # ---- per row ----
    def pointwise(self, y, raw):
        """Per-row loss values (n,)."""
        raise NotImplementedError

    def grad_hess(self, y, raw):
        """Unweighted per-row gradient and hessian, shape (n, n_outputs) each, float64."""
        raise NotImplementedError

    def inverse_link(self, raw):
        return raw[:, 0]


class SquaredError(GBLoss):
    def pointwise(self, y, raw):
        return 0.5 * (y - raw[:, 0]) ** 2

    def grad_hess(self, y, raw):
        return (raw[:, 0] - y)[:, None], np.ones((len(y), 1))


class _QuantileBase(GBLoss):
    def baseline_stats(self, y, w):
        from dml.tree._binning import _compress

        return _compress(np.asarray(y, dtype=np.float64), np.asarray(w, dtype=np.float64))

    def baseline(self, stats) -> np.ndarray:
        return np.array([weighted_quantile(stats[0], stats[1], self.leaf_quantile)])


class AbsoluteError(_QuantileBase):
    leaf_quantile = 0.5

    def pointwise(self, y, raw):
        return np.abs(y - raw[:, 0])

    def grad_hess(self, y, raw):
        return np.where(raw[:, 0] > y, 1.0, -1.0)[:, None], np.ones((len(y), 1))


class PinballLoss(_QuantileBase):
    def __init__(self, n_classes: int = 1, quantile: float = 0.5):
        super().__init__(n_classes, quantile)
        self.leaf_quantile = quantile

    def pointwise(self, y, raw):
        d = y - raw[:, 0]
        q = self.quantile
        return np.where(d >= 0, q * d, (q - 1.0) * d)

    def grad_hess(self, y, raw):
        q = self.quantile
        return np.where(y >= raw[:, 0], -q, 1.0 - q)[:, None], np.ones((len(y), 1))


class Poisson(GBLoss):
    constant_hessian = False

    def baseline(self, stats) -> np.ndarray:
        return np.array([np.log(max(stats[0] / stats[1], 10 * _EPS))])

    def pointwise(self, y, raw):
        return np.exp(raw[:, 0]) - y * raw[:, 0]

    def grad_hess(self, y, raw):
        e = np.exp(raw[:, 0])
        return (e - y)[:, None], e[:, None]

    def inverse_link(self, raw):
        return np.exp(raw[:, 0])


class BinomialLogLoss(GBLoss):
    constant_hessian = False

    def baseline(self, stats) -> np.ndarray:
        p = np.clip(stats[0] / stats[1], 10 * _EPS, 1 - 10 * _EPS)
        return np.array([np.log(p / (1 - p))])

    def pointwise(self, y, raw):
        r = raw[:, 0]
        # log(1 + e^r), written as np.logaddexp(0, r) computes it but from NumPy's vectorised
        # exp and log1p: about 4 times as fast (the loss sums of every round).
        return np.maximum(r, 0.0) + np.log1p(np.exp(-np.abs(r))) - y * r

    def grad_hess(self, y, raw):
        p = expit(raw[:, 0])
        return (p - y)[:, None], (p * (1 - p))[:, None]

    def inverse_link(self, raw):
        p = expit(raw[:, 0])
        return np.column_stack([1 - p, p])


class MultinomialLogLoss(GBLoss):
    constant_hessian = False

    def __init__(self, n_classes: int = 3, quantile: float = 0.5):
        super().__init__(n_classes, quantile)
        self.n_outputs = n_classes

    def baseline_stats(self, y, w):
        return np.bincount(np.asarray(y, dtype=np.intp), weights=w, minlength=self.n_classes)

    def baseline(self, stats) -> np.ndarray:
        p = np.clip(stats / stats.sum(), _EPS, 1 - _EPS)
        lp = np.log(p)
        return lp - lp.mean()

    def pointwise(self, y, raw):
        yi = np.asarray(y, dtype=np.intp)
        return logsumexp(raw, axis=1) - raw[np.arange(len(yi)), yi]

    def grad_hess(self, y, raw):
        p = self.inverse_link(raw)
        g = p.copy()
        g[np.arange(len(y)), np.asarray(y, dtype=np.intp)] -= 1.0
        return g, p * (1 - p)

    def inverse_link(self, raw):
        e = np.exp(raw - raw.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


def make_loss(name: str, n_classes: int = 1, quantile: float = 0.5) -> GBLoss:
    if name == "log_loss":
        return BinomialLogLoss(2) if n_classes <= 2 else MultinomialLogLoss(n_classes)
    return {"squared_error": SquaredError, "absolute_error": AbsoluteError,
            "quantile": PinballLoss, "poisson": Poisson}[name](1, quantile)


def weighted_quantile(values, weights, q: float) -> float:
    """Quantile ``q`` of sorted distinct ``values`` with total ``weights`` per value.

    With integer weights (row counts) it is NumPy's default (linear) percentile of the rows,
    scikit-learn's unweighted choice; with other weights the smallest value whose cumulative
    weight reaches ``q`` of the total (scikit-learn's weighted percentile).
    """
    values = np.asarray(values, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if values.size == 0:
        return 0.0
    cum = np.cumsum(weights)
    if np.all(weights == np.round(weights)):
        pos = q * (cum[-1] - 1)
        lo = np.floor(pos)
        i = np.searchsorted(cum, lo + 1, side="left")
        j = np.searchsorted(cum, lo + 2, side="left")
        j = min(j, values.size - 1)
        return float(values[i] + (pos - lo) * (values[j] - values[i]))
    i = np.searchsorted(cum, q * cum[-1], side="left")
    return float(values[min(i, values.size - 1)])
