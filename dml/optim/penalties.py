"""Regularisers R(w) of docs/linear_models.md on a flat parameter vector, with an unpenalised part.

``Penalty(kind, alpha, l1_ratio, penalised)`` describes ``α R(w)`` where R is

* ``"l2"``: ½‖w‖² (its gradient ``α w`` is added to the data gradient);
* ``"l1"``: ‖w‖₁, applied as a proximal step after the gradient step,
  ``w ← sign(w) · max(|w| − η α, 0)``;
* ``"elasticnet"``: ρ‖w‖₁ + (1 − ρ)/2 ‖w‖² (the l2 part in the gradient, the l1 part proximal);
* ``None``/``"none"``: no penalty.

Only the entries selected by ``penalised`` (a slice or a boolean mask; all entries when None) are
penalised; intercepts / biases are left out by the problem that builds the penalty.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Penalty", "StackedPenalty", "make_penalty"]

_KINDS = ("none", "l2", "l1", "elasticnet")


@dataclass(frozen=True)
class Penalty:
    kind: str = "l2"
    alpha: float = 0.0
    l1_ratio: float = 0.0
    #: The penalised entries: a slice, a boolean mask, or None for all.
    penalised: object = None

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"penalty must be one of {list(_KINDS)[1:]} or None, got "
                             f"{self.kind!r}")
        if not np.isfinite(self.alpha) or self.alpha < 0:
            raise ValueError(f"alpha must be a non-negative number, got {self.alpha}")
        if not 0.0 <= self.l1_ratio <= 1.0:
            raise ValueError(f"l1_ratio must be in [0, 1], got {self.l1_ratio}")

    # ρ for the l1 part and (1 − ρ) for the l2 part, by kind.
    @property
    def l1(self) -> float:
        """Weight of ‖w‖₁ (times alpha)."""
        return {"l1": 1.0, "elasticnet": self.l1_ratio}.get(self.kind, 0.0) * self.alpha

    @property
    def l2(self) -> float:
        """Weight of ½‖w‖² (times alpha)."""
        return {"l2": 1.0, "elasticnet": 1.0 - self.l1_ratio}.get(self.kind, 0.0) * self.alpha

    @property
    def smooth(self) -> bool:
        """True when the penalty is differentiable (no l1 part)."""
        return self.l1 == 0.0

    def _view(self, params):
        sel = self.penalised
        return params if sel is None else params[sel]

    def value(self, params: np.ndarray) -> float:
        """``α R(w)`` over the penalised entries."""
        w = self._view(params)
        out = 0.0
        if self.l2:
            out += 0.5 * self.l2 * float(np.dot(w, w))
        if self.l1:
            out += self.l1 * float(np.abs(w).sum())
        return out

    def add_grad(self, params: np.ndarray, grad: np.ndarray) -> None:
        """``grad += ∇(l2 part)`` in place (the l1 part is handled by :meth:`prox`)."""
        if not self.l2:
            return
        sel = self.penalised
        if sel is None:
            grad += self.l2 * params
        else:
            grad[sel] += self.l2 * params[sel]

    def hess_diag(self, n_params: int, dtype=np.float64) -> np.ndarray:
        """Diagonal of the l2 part's Hessian (for Newton solvers)."""
        d = np.zeros(n_params, dtype=dtype)
        if self.l2:
            sel = self.penalised
            if sel is None:
                d[:] = self.l2
            else:
                d[sel] = self.l2
        return d

    def prox(self, params: np.ndarray, lr: float) -> None:
        """Soft-threshold the penalised entries by ``lr · α ρ`` in place (no-op without l1)."""
        if not self.l1:
            return
        thr = lr * self.l1
        sel = self.penalised
        if sel is None or isinstance(sel, slice):
            w = params if sel is None else params[sel]  # a view: updated in place
            np.copyto(w, np.sign(w) * np.maximum(np.abs(w) - thr, 0.0))
        else:
            w = params[sel]
            params[sel] = np.sign(w) * np.maximum(np.abs(w) - thr, 0.0)

    def __dask_tokenize__(self):
        sel = self.penalised
        key = (sel.start, sel.stop, sel.step) if isinstance(sel, slice) else (
            None if sel is None else np.asarray(sel).tobytes())
        return ("Penalty", self.kind, self.alpha, self.l1_ratio, key)


class StackedPenalty:
    """The penalties of a grid of stacked models (an (G, m, n_params) array) applied at once.

    ``penalties[g][j]`` is model j of group g's :class:`Penalty`; its l1 and l2 weights become
    arrays of shape (G, m, 1) and the penalised entries are shared. The arithmetic is
    :class:`Penalty`'s, element by element, so each model gets the update its own penalty would
    give it.

    Examples
    --------
    >>> import numpy as np
    >>> sp = StackedPenalty([[Penalty("l2", 1.0), Penalty("l2", 0.5)]])
    >>> sp.value(np.full((1, 2, 1), 2.0)).tolist()
    [[2.0, 1.0]]
    """

    def __init__(self, penalties):
        penalties = [list(row) for row in penalties]
        self.penalised = penalties[0][0].penalised
        self.l2 = np.array([[p.l2 for p in row] for row in penalties], dtype=np.float64)[..., None]
        self.l1 = np.array([[p.l1 for p in row] for row in penalties], dtype=np.float64)[..., None]
        self.any_l2, self.any_l1 = bool(self.l2.any()), bool(self.l1.any())

    def subset(self, groups) -> StackedPenalty:
        """The penalties of the given groups only."""
        out = object.__new__(StackedPenalty)
        out.penalised, out.l2, out.l1 = self.penalised, self.l2[groups], self.l1[groups]
        out.any_l2, out.any_l1 = bool(out.l2.any()), bool(out.l1.any())
        return out

    def _cols(self):
        sel = self.penalised
        return slice(None) if sel is None else sel

    def value(self, P: np.ndarray) -> np.ndarray:
        """``α R(w)`` of every model, shape (G, m)."""
        # Model by model with Penalty.value's operations: the objective decides when a model
        # stops, so it must be the number its own fit would compute.
        W = P[..., self._cols()]
        out = np.zeros(P.shape[:2])
        for g, j in np.ndindex(*out.shape):
            w = W[g, j]
            if self.l2[g, j, 0]:
                out[g, j] += 0.5 * self.l2[g, j, 0] * float(np.dot(w, w))
            if self.l1[g, j, 0]:
                out[g, j] += self.l1[g, j, 0] * float(np.abs(w).sum())
        return out

    def add_grad(self, P: np.ndarray, G: np.ndarray) -> None:
        if self.any_l2:
            cols = self._cols()
            G[..., cols] += self.l2 * P[..., cols]

    def prox(self, P: np.ndarray, lr: np.ndarray) -> None:
        """Soft-threshold model (g, j) by ``lr[g, j] · l1[g, j]`` (lr of shape (G, m, 1))."""
        if not self.any_l1:
            return
        cols = self._cols()
        W = P[..., cols]
        P[..., cols] = np.sign(W) * np.maximum(np.abs(W) - lr * self.l1, 0.0)


def make_penalty(penalty, alpha: float, l1_ratio: float = 0.15, penalised=None) -> Penalty:
    """A :class:`Penalty` from scikit-learn style arguments (``penalty=None`` means none).

    Examples
    --------
    >>> import numpy as np
    >>> p = make_penalty("elasticnet", alpha=0.1, l1_ratio=0.5, penalised=slice(0, 2))
    >>> w = np.array([1.0, -2.0, 5.0])          # the last entry is an intercept
    >>> round(p.value(w), 6)                    # 0.1 * (0.5 * 3 + 0.25 * 5)
    0.275
    >>> p.prox(w, lr=1.0); w
    array([ 0.95, -1.95,  5.  ])
    """
    kind = "none" if penalty is None else str(penalty)
    if kind == "none":
        alpha = 0.0
    return Penalty(kind, float(alpha), float(l1_ratio) if kind == "elasticnet" else 0.0,
                   penalised)
