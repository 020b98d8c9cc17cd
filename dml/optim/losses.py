"""Vectorised losses and their derivatives with respect to the decision function.

A loss maps decision values ``f`` and targets ``y`` to per-sample losses and to ``dL/df``. All
work on whole arrays (a mini-batch, or an ``(n, K)`` array of one-vs-rest columns at once):

* regression losses (``squared``, ``huber``, ``epsilon_insensitive``,
  ``squared_epsilon_insensitive``) take real targets;
* binary margin losses (``log_loss``, ``hinge``, ``squared_hinge``, ``perceptron``,
  ``modified_huber``, ``smoothed_hinge``) take ``y`` in {-1, +1};
* ``softmax`` takes ``f`` of shape ``(n, K)`` and integer class indices ``y`` of shape ``(n,)``.

Losses that are twice differentiable almost everywhere also give ``d2L/df2`` (``hess``): the
Newton solver (:mod:`dml.optim.newton`) uses it. ``smoothed_hinge`` is the hinge with its kink
replaced by a quadratic of width ``mu`` (``hinge - mu/2 <= smoothed_hinge <= hinge``), which lets
a Newton solver reach the hinge optimum to within ``mu/2`` per sample.

See docs/linear_models.md.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit, logsumexp

__all__ = ["Loss", "get_loss", "LOSSES", "Squared", "Huber", "EpsilonInsensitive",
           "SquaredEpsilonInsensitive", "Log", "Hinge", "SquaredHinge", "Perceptron",
           "ModifiedHuber", "SmoothedHinge", "Softmax"]


class Loss:
    """Base class. ``kind`` is ``"regression"``, ``"binary"`` or ``"multiclass"``."""

    name = "loss"
    kind = "regression"
    #: True when predict_proba is meaningful for a classifier trained with this loss.
    has_proba = False
    #: True when :meth:`hess` is available (Newton solver).
    twice_differentiable = False
    #: Largest second derivative of a loss whose gradient grows without bound (the squared
    #: losses); 0 when the gradient is bounded. Summed SGD rounds are scaled by it
    #: (:mod:`dml.optim.summed_rounds`).
    summed_curvature = 0.0

    def loss(self, f, y):
        return self.loss_grad(f, y)[0]

    def dloss(self, f, y):
        return self.loss_grad(f, y)[1]

    def loss_grad(self, f, y):
        """Per-sample loss and ``dL/df``, both of f's shape (softmax: loss of shape (n,))."""
        raise NotImplementedError

    def hess(self, f, y):
        """``d2L/df2`` per sample (a generalised second derivative at kinks)."""
        raise NotImplementedError(f"the {self.name} loss has no second derivative")

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({params})"

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted(vars(self).items()))))

    def __dask_tokenize__(self):
        return (type(self).__name__, tuple(sorted(vars(self).items())))


# ---- regression ----------------------------------------------------------------------------

class Squared(Loss):
    """``½ (f − y)²``."""

    name = "squared_error"
    twice_differentiable = True
    summed_curvature = 1.0

    def loss_grad(self, f, y):
        r = f - y
        return 0.5 * r * r, r

    def hess(self, f, y):
        return np.ones_like(f)


class Huber(Loss):
    """``½ r²`` if ``|r| ≤ ε`` else ``ε(|r| − ½ε)``, with ``r = f − y``."""

    name = "huber"
    twice_differentiable = True

    def __init__(self, epsilon: float = 0.1):
        self.epsilon = float(epsilon)

    def loss_grad(self, f, y):
        eps = self.epsilon
        r = f - y
        a = np.abs(r)
        small = a <= eps
        loss = np.where(small, 0.5 * r * r, eps * (a - 0.5 * eps))
        grad = np.where(small, r, eps * np.sign(r))
        return loss, grad

    def hess(self, f, y):
        return (np.abs(f - y) <= self.epsilon).astype(f.dtype)


class EpsilonInsensitive(Loss):
    """``max(0, |y − f| − ε)`` (linear support-vector regression)."""

    name = "epsilon_insensitive"

    def __init__(self, epsilon: float = 0.1):
        self.epsilon = float(epsilon)

    def loss_grad(self, f, y):
        r = y - f
        excess = np.abs(r) - self.epsilon
        active = excess > 0
        return np.where(active, excess, 0.0), np.where(active, -np.sign(r), 0.0)


class SquaredEpsilonInsensitive(Loss):
    """``max(0, |y − f| − ε)²``."""

    name = "squared_epsilon_insensitive"
    twice_differentiable = True
    summed_curvature = 2.0

    def __init__(self, epsilon: float = 0.1):
        self.epsilon = float(epsilon)

    def loss_grad(self, f, y):
        r = y - f
        excess = np.maximum(np.abs(r) - self.epsilon, 0.0)
        return excess * excess, -2.0 * np.sign(r) * excess

    def hess(self, f, y):
        return 2.0 * (np.abs(y - f) > self.epsilon).astype(f.dtype)


# ---- binary margin losses, y in {-1, +1} -----------------------------------------------------

class Log(Loss):
    """``log(1 + exp(−y f))``; ``dL/df = −y σ(−y f)``."""

    name = "log_loss"
    kind = "binary"
    has_proba = True
    twice_differentiable = True

    def loss_grad(self, f, y):
        # One exp for both: with e = exp(−|z|), loss = log1p(e) + max(−z, 0) and
        # σ(−z) = e/(1+e) for z ≥ 0, 1/(1+e) otherwise (no overflow either way).
        z = y * f
        e = np.exp(-np.abs(z))
        loss = np.log1p(e) + np.maximum(-z, 0.0)
        inv = 1.0 / (1.0 + e)
        sig = np.where(z >= 0, e * inv, inv)
        return loss, -y * sig

    def loss(self, f, y):
        return np.logaddexp(0.0, -(y * f))

    def hess(self, f, y):
        p = expit(f)
        return p * (1.0 - p)


class Hinge(Loss):
    """``max(0, threshold − y f)``: hinge (threshold 1) and perceptron (threshold 0)."""

    name = "hinge"
    kind = "binary"

    def __init__(self, threshold: float = 1.0):
        self.threshold = float(threshold)

    def loss_grad(self, f, y):
        z = y * f
        active = z < self.threshold
        return np.where(active, self.threshold - z, 0.0), np.where(active, -y, 0.0)


class Perceptron(Hinge):
    """``max(0, −y f)``; the gradient is ``−y`` also at ``y f = 0`` (a zero start still moves)."""

    name = "perceptron"

    def __init__(self):
        super().__init__(threshold=0.0)

    def loss_grad(self, f, y):
        z = y * f
        return np.maximum(-z, 0.0), np.where(z <= 0.0, -y, 0.0)


class SquaredHinge(Loss):
    """``max(0, 1 − y f)²``; ``dL/df = −2 y max(0, 1 − y f)``."""

    name = "squared_hinge"
    kind = "binary"
    twice_differentiable = True
    summed_curvature = 2.0

    def loss_grad(self, f, y):
        m = np.maximum(1.0 - y * f, 0.0)
        return m * m, -2.0 * y * m

    def hess(self, f, y):
        return 2.0 * (y * f < 1.0).astype(f.dtype)


class ModifiedHuber(Loss):
    """``max(0, 1 − y f)²`` for ``y f ≥ −1``, else ``−4 y f`` (smooth hinge with probabilities)."""

    name = "modified_huber"
    kind = "binary"
    has_proba = True

    def loss_grad(self, f, y):
        z = y * f
        quad = z >= -1.0
        m = np.maximum(1.0 - z, 0.0)
        loss = np.where(quad, m * m, -4.0 * z)
        grad = np.where(quad, -2.0 * y * m, -4.0 * y)
        return loss, grad


class SmoothedHinge(Loss):
    """The hinge with a quadratic corner of width ``mu`` (Huberised hinge).

    ``0`` for ``z = y f ≥ 1``, ``(1 − z)² / (2 mu)`` for ``1 − mu ≤ z < 1``, ``1 − z − mu/2``
    below; hinge − mu/2 ≤ this ≤ hinge. Used by the Newton solver of hinge-loss SVMs. The
    quadratic piece includes its lower end, so that at w = 0 with mu = 1 every sample has
    curvature (a Newton step from zero is then a least-squares step, not a blind one).
    """

    name = "smoothed_hinge"
    kind = "binary"
    twice_differentiable = True

    def __init__(self, mu: float = 0.1):
        if mu <= 0:
            raise ValueError(f"mu must be positive, got {mu}")
        self.mu = float(mu)

    def loss_grad(self, f, y):
        mu = self.mu
        m = 1.0 - y * f
        q = np.clip(m, 0.0, mu)  # the margin violation inside the quadratic piece
        loss = q * q / (2 * mu) + np.maximum(m - mu, 0.0)
        return loss, -y * (q / mu)

    def hess(self, f, y):
        m = 1.0 - y * f
        return ((m > 0) & (m <= self.mu)).astype(f.dtype) / self.mu


# ---- multinomial ---------------------------------------------------------------------------

class Softmax(Loss):
    """Categorical cross-entropy of ``softmax(f)``: ``logsumexp(f) − f_y``; ``dL/df = p − 1_y``.

    ``f`` has shape ``(n, K)``, ``y`` holds class indices ``0..K−1``.
    """

    name = "softmax"
    kind = "multiclass"
    has_proba = True
    twice_differentiable = True

    def loss_grad(self, f, y):
        y = np.asarray(y, dtype=np.intp)
        lse = logsumexp(f, axis=1)
        rows = np.arange(f.shape[0])
        loss = lse - f[rows, y]
        p = np.exp(f - lse[:, None])
        grad = p
        grad[rows, y] -= 1.0
        return loss, grad

    @staticmethod
    def proba(f):
        lse = logsumexp(f, axis=1)
        return np.exp(f - lse[:, None])


LOSSES = {
    "squared_error": Squared, "squared": Squared, "huber": Huber,
    "epsilon_insensitive": EpsilonInsensitive,
    "squared_epsilon_insensitive": SquaredEpsilonInsensitive,
    "log_loss": Log, "log": Log, "hinge": Hinge, "squared_hinge": SquaredHinge,
    "perceptron": Perceptron, "modified_huber": ModifiedHuber, "smoothed_hinge": SmoothedHinge,
    "softmax": Softmax,
}

_EPSILON_LOSSES = ("huber", "epsilon_insensitive", "squared_epsilon_insensitive")


def get_loss(name, *, epsilon: float = 0.1) -> Loss:
    """A loss instance by name (``epsilon`` for huber / epsilon-insensitive losses).

    Examples
    --------
    >>> import numpy as np
    >>> get_loss("huber", epsilon=1.0).loss(np.array([0.5, 3.0]), np.zeros(2))
    array([0.125, 2.5  ])
    """
    if isinstance(name, Loss):
        return name
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of {sorted(LOSSES)}")
    cls = LOSSES[name]
    if name in _EPSILON_LOSSES:
        return cls(epsilon)
    return cls()
