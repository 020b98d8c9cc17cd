"""Update rules on flat parameter vectors, with an explicit, averageable state.

An optimiser is a small frozen object (picklable, broadcast to the workers). Everything that
changes during training lives in an :class:`OptimizerState`: the step counter ``t`` and named
"slots" (velocity, Adam moments, the running iterate average), all flat arrays shaped like the
parameters. Because the state is plain arrays it can be broadcast to the blocks, averaged across
blocks with the parameters (local SGD), and written to a checkpoint.

* ``sgd``: w ← w − η g
* ``momentum``: v ← β v − η g; w ← w + v
* ``nesterov``: v ← β v − η g; w ← w + β v − η g
* ``adam``: m ← β₁m + (1−β₁)g; v ← β₂v + (1−β₂)g²; w ← w − η m̂ / (√v̂ + ε) with
  m̂ = m/(1−β₁ᵗ), v̂ = v/(1−β₂ᵗ)

Iterate averaging (ASGD) is optimiser-independent: :func:`update_average` keeps the running mean
of the iterates after step ``start`` in the ``"average"`` slot.

See docs/linear_models.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "OptimizerState", "make_optimizer",
           "update_average", "OPTIMIZERS"]


@dataclass
class OptimizerState:
    """Step counter and slot arrays of an optimiser (plus the iterate average when enabled)."""

    t: int = 0
    slots: dict = field(default_factory=dict)

    def copy(self) -> OptimizerState:
        return OptimizerState(self.t, {k: v.copy() for k, v in self.slots.items()})


@dataclass(frozen=True)
class Optimizer:
    name = "sgd"
    slot_names: ClassVar[tuple] = ()

    def init_state(self, params: np.ndarray, average: bool = False) -> OptimizerState:
        names = list(self.slot_names) + (["average"] if average else [])
        return OptimizerState(0, {n: np.zeros_like(params) for n in names})

    def step(self, params: np.ndarray, grad: np.ndarray, lr: float, slots: dict, t: int) -> None:
        """Update ``params`` in place; ``t`` is the 1-based number of this step."""
        raise NotImplementedError


@dataclass(frozen=True)
class SGD(Optimizer):
    name = "sgd"

    def step(self, params, grad, lr, slots, t):
        params -= lr * grad


@dataclass(frozen=True)
class Momentum(Optimizer):
    momentum: float = 0.9
    nesterov: bool = False
    slot_names: ClassVar[tuple] = ("velocity",)

    @property
    def name(self):
        return "nesterov" if self.nesterov else "momentum"

    def step(self, params, grad, lr, slots, t):
        v = slots["velocity"]
        v *= self.momentum
        v -= lr * grad
        if self.nesterov:
            params += self.momentum * v - lr * grad
        else:
            params += v


@dataclass(frozen=True)
class Adam(Optimizer):
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-8
    slot_names: ClassVar[tuple] = ("m", "v")
    name = "adam"

    def step(self, params, grad, lr, slots, t):
        m, v = slots["m"], slots["v"]
        m *= self.beta_1
        m += (1.0 - self.beta_1) * grad
        v *= self.beta_2
        v += (1.0 - self.beta_2) * (grad * grad)
        m_hat = m / (1.0 - self.beta_1 ** t)
        v_hat = v / (1.0 - self.beta_2 ** t)
        params -= lr * m_hat / (np.sqrt(v_hat) + self.epsilon)


OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam")


def make_optimizer(name="sgd", *, momentum: float = 0.9, beta_1: float = 0.9,
                   beta_2: float = 0.999, epsilon: float = 1e-8) -> Optimizer:
    """An optimiser by name (an :class:`Optimizer` instance is returned as it is).

    Examples
    --------
    >>> import numpy as np
    >>> opt = make_optimizer("momentum", momentum=0.5)
    >>> w = np.zeros(2); state = opt.init_state(w)
    >>> for t in (1, 2):
    ...     opt.step(w, np.ones(2), 0.1, state.slots, t)
    >>> w                                      # -0.1, then -0.1 + (0.5 * -0.1 - 0.1)
    array([-0.25, -0.25])
    """
    if isinstance(name, Optimizer):
        return name
    if name == "sgd":
        return SGD()
    if name in ("momentum", "nesterov"):
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        return Momentum(float(momentum), nesterov=name == "nesterov")
    if name == "adam":
        for label, b in (("beta_1", beta_1), ("beta_2", beta_2)):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"{label} must be in [0, 1), got {b}")
        if epsilon <= 0:
            raise ValueError(f"epsilon must be positive, got {epsilon}")
        return Adam(float(beta_1), float(beta_2), float(epsilon))
    raise ValueError(f"optimizer must be one of {list(OPTIMIZERS)}, got {name!r}")


def update_average(params: np.ndarray, slots: dict, t: int, start: int) -> None:
    """ASGD: running mean of the iterates after step ``start`` (slot ``"average"``)."""
    avg = slots.get("average")
    if avg is None:
        return
    count = t - start
    if count <= 0:
        avg[...] = params  # before averaging starts the "average" is the iterate itself
    else:
        avg += (params - avg) / count
