"""Step-size schedules η_t of docs/linear_models.md, as small picklable objects.

A schedule is called with the 1-based step number ``t`` (mini-batch steps since training began)
and a multiplier ``scale`` that the training loop owns (the ``adaptive`` rule divides it by 5 when
the epoch objective stops improving; other schedules keep it at 1):

* ``constant``: η₀;
* ``invscaling``: η₀ / t^p;
* ``optimal``: 1 / (α (t₀ + t − 1)), with scikit-learn's heuristic for t₀ (:func:`optimal_t0`);
  with a mini-batch, ``t`` counts batches (the Pegasos step 1/(α t) of the notes);
* ``adaptive``: η₀ · scale.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Schedule", "Constant", "InvScaling", "Optimal", "Adaptive", "make_schedule",
           "optimal_t0", "StackedRate", "SCHEDULES"]


@dataclass(frozen=True)
class Schedule:
    #: Whether the training loop should lower ``scale`` on a plateau instead of stopping.
    adaptive = False

    def __call__(self, t: int, scale: float = 1.0) -> float:
        raise NotImplementedError

    def describe(self) -> str:
        """For messages: ``learning_rate='constant', eta0=0.1``."""
        raise NotImplementedError


@dataclass(frozen=True)
class Constant(Schedule):
    eta0: float = 0.01

    def __call__(self, t, scale=1.0):
        return self.eta0 * scale

    def describe(self):
        return f"learning_rate='constant', eta0={self.eta0:g}"


@dataclass(frozen=True)
class InvScaling(Schedule):
    eta0: float = 0.01
    power_t: float = 0.5

    def __call__(self, t, scale=1.0):
        return scale * self.eta0 / (t ** self.power_t)

    def describe(self):
        return f"learning_rate='invscaling', eta0={self.eta0:g}, power_t={self.power_t:g}"


@dataclass(frozen=True)
class Optimal(Schedule):
    alpha: float = 1e-4
    t0: float = 1.0

    def __call__(self, t, scale=1.0):
        return scale / (self.alpha * (self.t0 + t - 1))

    def describe(self):
        return (f"learning_rate='optimal' (1/(alpha (t0 + t)), alpha={self.alpha:g}; raise alpha "
                "or use learning_rate='constant' with a small eta0)")


@dataclass(frozen=True)
class Adaptive(Schedule):
    eta0: float = 0.01
    adaptive = True

    def __call__(self, t, scale=1.0):
        return self.eta0 * scale

    def describe(self):
        return f"learning_rate='adaptive', eta0={self.eta0:g}"


SCHEDULES = ("constant", "invscaling", "optimal", "adaptive")


def optimal_t0(alpha: float, loss=None) -> float:
    """scikit-learn's t₀ for ``optimal``: the first step is about 1/√α‑sized, not 1/α.

    ``typw = sqrt(1 / sqrt(alpha))``, ``eta_init = typw / max(1, dloss(−typw, 1))``,
    ``t0 = 1 / (eta_init · alpha)``.
    """
    if alpha <= 0:
        raise ValueError("learning_rate='optimal' needs alpha > 0 (the step is 1/(alpha t))")
    typw = math.sqrt(1.0 / math.sqrt(alpha))
    d = 1.0
    if loss is not None:
        d = float(np.asarray(loss.dloss(np.array([-typw]), np.array([1.0]))).ravel()[0])
    eta_init = typw / max(1.0, d)
    return 1.0 / (eta_init * alpha)


def make_schedule(learning_rate: str | Schedule = "constant", *, eta0: float = 0.01,
                  power_t: float = 0.5, alpha: float = 1e-4, loss=None) -> Schedule:
    """A schedule from scikit-learn style arguments.

    Examples
    --------
    >>> s = make_schedule("invscaling", eta0=0.1, power_t=0.5)
    >>> s(1), s(4)
    (0.1, 0.05)
    """
    if isinstance(learning_rate, Schedule):
        return learning_rate
    if learning_rate not in SCHEDULES:
        raise ValueError(f"learning_rate must be one of {list(SCHEDULES)}, got {learning_rate!r}")
    if learning_rate == "optimal":
        return Optimal(float(alpha), optimal_t0(alpha, loss))
    if not (eta0 > 0 and math.isfinite(eta0)):
        raise ValueError(f"eta0 must be > 0 for learning_rate={learning_rate!r}, got {eta0}")
    if learning_rate == "constant":
        return Constant(float(eta0))
    if learning_rate == "invscaling":
        return InvScaling(float(eta0), float(power_t))
    return Adaptive(float(eta0))


class StackedRate:
    """Step sizes of a grid of schedules of one kind: ``rate.many(t, scale) -> (W, G, m, 1)``.

    For the stacked trainer (:mod:`dml.optim.stacked`): ``schedules[g][j]`` is model j of group
    g's schedule; the models of a group share the step counter ``t[g]`` and each model has its
    own ``scale[g, j]``. The arithmetic is the scalar schedules', element by element, so every
    model gets the step size its own fit would.

    Examples
    --------
    >>> import numpy as np
    >>> rate = StackedRate([[Constant(0.1), Constant(0.2)]])
    >>> rate.many(np.array([[5]]), np.ones((1, 2))).ravel().tolist()
    [0.1, 0.2]
    """

    def __init__(self, schedules):
        self.schedules = [list(row) for row in schedules]
        kinds = {type(s) for row in self.schedules for s in row}
        self.kind = ("optimal" if kinds == {Optimal} else
                     "constant" if kinds <= {Constant, Adaptive} else
                     "invscaling" if kinds == {InvScaling} else "other")
        names = {"optimal": ("alpha", "t0"), "constant": ("eta0",),
                 "invscaling": ("eta0", "power_t")}.get(self.kind, ())
        self.cols = {n: np.array([[float(getattr(s, n)) for s in row]
                                  for row in self.schedules])[..., None] for n in names}

    def subset(self, groups) -> StackedRate:
        """The schedules of the given groups only."""
        return StackedRate([self.schedules[g] for g in groups])

    def many(self, t, scale):
        """Step sizes at steps ``t[i, g]`` (W steps × G groups) at once: shape (W, G, m, 1)."""
        c = self.cols
        t = np.asarray(t)[:, :, None, None]
        scale = scale[None, :, :, None]
        if self.kind == "optimal":
            return scale / (c["alpha"] * (c["t0"] + t - 1))
        if self.kind == "constant":
            return np.broadcast_to(c["eta0"] * scale, (t.shape[0],) + c["eta0"].shape)
        if self.kind == "invscaling":
            return scale * c["eta0"] / (t ** c["power_t"])
        return np.array([[[s(int(tg), float(v)) for s, v in zip(row, sc)]
                          for row, tg, sc in zip(self.schedules, ti[:, 0, 0], scale[0, ..., 0])]
                         for ti in t])[..., None]
