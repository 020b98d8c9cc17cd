"""How many steps a round of summed stream updates may take: the rounds' length limits.

When the streams' updates are summed (docs/partition_parallel_sgd.md, "Rounds and
combination"), a round of ``S`` mini-batch steps in all is applied as ``S`` steps taken from the
round's starting parameters. That is the first-order equivalent of ``S`` sequential steps only
while the round moves the model little; past that it overshoots where sequential SGD, each step
starting where the last one ended, would not. Two limits keep rounds short enough:

* **Linear models with plain SGD or momentum, losses with unbounded gradients** (squared error,
  squared hinge, squared epsilon-insensitive): a round of ``S`` steps of size ``η`` is one step of
  length about ``S · η`` along the average gradient, which overshoots along the steepest
  direction of the objective as soon as ``S · η · λ > 1`` and runs away beyond 2; ``λ`` is the
  largest eigenvalue of ``κ · E[w x̃ x̃ᵀ]`` (``x̃ = [x, 1]``, ``κ`` the loss's largest second
  derivative), measured from the training rows in one pass (:func:`data_curvature`). The limit
  is ``S ≤ (1 − μ) / (η · λ)`` (momentum ``μ`` makes a step ``1 / (1 − μ)`` times longer).
  Without it, a constant step of 0.01 on standardised data diverged on 64 partitions, and the
  default decaying step ran away with a few thousand streams (data of some ten million rows).
* **Networks, and Adam on any model**: no such bound can be read off the data (an Adam step has a
  size of its own, about ``η`` per parameter); rounds take at most :data:`ADAPTIVE_ROUND_STEPS`
  steps in all. Measured on an MLP regressor (1,000,000 rows, 256 partitions, 5 streams): rounds
  of 256 summed steps ended at 6× the one-block test error, rounds of 30–40 steps at the
  one-block error.

Losses with bounded gradients (log-loss, hinge, Huber, ...) under plain SGD or momentum cannot
run away like this; their rounds are left as they are. A limited round takes
``⌊limit / W⌋`` steps per stream (:func:`capped_local_steps`), the step size being taken at the
start of *that round* (:func:`limited_rounds`: rounds lengthen as a decaying step size falls),
so it stays the first-order equivalent of that many sequential steps; with more streams ``W``
than the limit (every stream takes at least one step) the round's sum is scaled by
``limit / S`` instead (:func:`sum_scale`), like one large-batch step whose length is capped.
Because every round of a curvature-limited fit is bounded this way, its automatic rounds aim at
:data:`dml.optim.engine.LIMITED_SYNC_STEPS` steps rather than ``SYNC_STEPS``
(:func:`curvature_limited`). The limits depend only on the data, the configuration and the
step counter, never on the partitioning or on sparse vs dense storage.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["data_curvature", "round_curvature", "group_limits", "RoundLimit",
           "round_limit", "optimizer_traits", "capped_local_steps", "limited_rounds", "sum_scale",
           "curvature_limited",
           "ADAPTIVE_ROUND_STEPS",
           "EXACT_GRAM_FEATURES"]

#: Steps in all of a summed round of a network or of Adam (module docstring).
ADAPTIVE_ROUND_STEPS = 32
#: Up to this many columns (intercept included) the curvature is the Gram matrix's largest
#: eigenvalue; above it the mean squared row norm (the Gram matrix's trace), an upper bound that
#: costs one pass whatever the width (hashed text has 2^20 columns).
EXACT_GRAM_FEATURES = 2048


#: Curvatures of the most recent data sets (:func:`data_curvature`), oldest first.
_CURVATURES: dict = {}
_CACHED_CURVATURES = 16
_CURVATURES_LOCK = threading.Lock()


def _row_stats(X, w, intercept, exact):
    """This block's share of ``Σ w x̃ x̃ᵀ`` (or of its trace) and its row count."""
    n = X.shape[0]
    if n == 0:
        return None
    if exact:
        if sp.issparse(X):
            Xw = X if w is None else sp.diags(w) @ X
            G = np.asarray((X.T @ Xw).todense(), dtype=np.float64)
            s = np.asarray(Xw.sum(axis=0), dtype=np.float64).ravel()
        else:
            X = np.asarray(X, dtype=np.float64)
            Xw = X if w is None else X * w[:, None]
            G = X.T @ Xw
            s = Xw.sum(axis=0)
        tw = float(n if w is None else np.sum(w))
        if intercept:
            d = G.shape[0]
            full = np.empty((d + 1, d + 1))
            full[:d, :d], full[:d, d], full[d, :d], full[d, d] = G, s, s, tw
            G = full
        return {"gram": G, "n": np.array(float(n))}
    if sp.issparse(X):
        norms = np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
    else:
        X = np.asarray(X, dtype=np.float64)
        norms = np.einsum("ij,ij->i", X, X)
    if intercept:
        norms = norms + 1.0
    total = float(norms.sum() if w is None else norms @ w)
    return {"gram": np.array(total), "n": np.array(float(n))}


def _gram_kernel(X, Y, w, intercept, exact):
    return _row_stats(X, w, intercept, exact)


def _masked_gram_kernel(X, Y, w_mask, intercept, exact, n_groups):
    # The stacked trainer's blocks carry (w, mask): one statistic per group of rows.
    w, mask = w_mask
    out = []
    for g in range(n_groups):
        rows = None if mask is None else np.flatnonzero(mask[:, g])
        Xg = X if rows is None else X[rows]
        wg = w if (w is None or rows is None) else w[rows]
        out.append(_row_stats(Xg, wg, intercept, exact))
    return out


def _exact(n_features: int, fit_intercept: bool) -> bool:
    return n_features + int(bool(fit_intercept)) <= EXACT_GRAM_FEATURES


def _largest(stats, exact: bool) -> float:
    if stats is None or float(stats["n"]) == 0.0:
        return 0.0
    G = np.asarray(stats["gram"], dtype=np.float64) / float(stats["n"])
    if not exact:
        return float(G)
    if not np.isfinite(G).all():
        return float("inf")
    return float(max(np.linalg.eigvalsh(G)[-1], 0.0))


def data_curvature(blocks, n_features: int, fit_intercept: bool) -> float:
    """The largest eigenvalue of ``E[w x̃ x̃ᵀ]`` over the rows of ``blocks`` (one pass), or
    the mean of ``w ‖x̃‖²`` — its upper bound — above :data:`EXACT_GRAM_FEATURES` columns.

    Examples
    --------
    >>> import numpy as np
    >>> from dml._blocks import as_blocks
    >>> X = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, -2.0], [1.0, 0.0]])
    >>> round(data_curvature(as_blocks(X, block_rows=2), 2, fit_intercept=False), 6)
    2.0
    """
    exact = _exact(n_features, fit_intercept)
    # partial_fit prepares the same blocks on every call: their (content-derived) task keys
    # name the data, so the pass is made once per data set, not once per call. Blocks held in
    # groups have fresh keys on every persist: their groups' token names the data instead.
    # Parts without a key are not cached (an object's id can be reused by other data once it
    # is freed).
    token = getattr(blocks.groups, "token", None)
    keys = [token] if token is not None else [getattr(p, "key", None) for p in blocks.parts]
    key = None if any(k is None for k in keys) else (
        tuple(map(str, keys)), int(n_features), bool(fit_intercept))
    with _CURVATURES_LOCK:
        if key is not None and key in _CURVATURES:
            return _CURVATURES[key]
    value = _largest(blocks.map_reduce(_gram_kernel, bool(fit_intercept), exact), exact)
    if key is not None:
        with _CURVATURES_LOCK:
            while len(_CURVATURES) >= _CACHED_CURVATURES:
                del _CURVATURES[next(iter(_CURVATURES))]
            _CURVATURES[key] = value
    return value


def _linear(problem) -> bool:
    """Whether ``problem`` is a linear model on its raw features (not a network): the only
    kind whose round limit can be read off the data."""
    return all(hasattr(problem, a) for a in ("loss", "d", "fit_intercept"))


def _loss_kappa(problem) -> float:
    return float(getattr(problem.loss, "summed_curvature", 0.0) or 0.0)


def group_limits(problem, blocks, n_groups: int, config) -> list:
    """:func:`round_limit` of every row group of the stacked trainer's ``blocks`` (whose
    weights come with a row mask per group, or None for all rows), in one pass."""
    traits = optimizer_traits(config)
    if traits["adaptive"] or not _linear(problem):
        return [RoundLimit(None, **traits)] * n_groups
    kappa = _loss_kappa(problem)
    if kappa == 0.0:
        return [None] * n_groups
    exact = _exact(int(problem.d), bool(problem.fit_intercept))
    stats = blocks.map_reduce(_masked_gram_kernel, bool(problem.fit_intercept), exact,
                              int(n_groups))
    stats = [None] * n_groups if stats is None else stats
    return [RoundLimit(kappa * _largest(st, exact), **traits) for st in stats]


def round_curvature(problem, blocks) -> float | None:
    """``κ · λ`` of ``problem`` on ``blocks`` (0 when its loss's gradient is bounded: no pass);
    None when the problem is not a linear model on its raw features (a network)."""
    if not _linear(problem):
        return None
    kappa = _loss_kappa(problem)
    if kappa == 0.0:
        return 0.0
    return kappa * data_curvature(blocks, int(problem.d), bool(problem.fit_intercept))


@dataclass(frozen=True)
class RoundLimit:
    """The most steps a summed round may take in all, as a function of the step size."""

    #: ``κ · λ`` of a linear model's data (0: a bounded-gradient loss); None: not known.
    curvature: float | None
    #: Adam: its steps have a size of their own, whatever the gradient.
    adaptive: bool = False
    #: Momentum of the optimiser (a step is ``1 / (1 − μ)`` times longer).
    momentum: float = 0.0

    def steps(self, lr: float) -> float:
        """The limit for rounds whose steps are at most ``lr`` (``inf``: none)."""
        if self.adaptive or self.curvature is None:
            return float(ADAPTIVE_ROUND_STEPS)
        if not self.curvature or not lr > 0:
            return math.inf
        return (1.0 - self.momentum) / (float(self.curvature) * float(lr))


def curvature_limited(limit) -> bool:
    """Whether ``limit`` bounds rounds by a measured curvature (so automatic rounds may target
    :data:`dml.optim.engine.LIMITED_SYNC_STEPS` steps): a linear model with an
    unbounded-gradient loss under plain SGD or momentum, on data that is not all zeros.

    Examples
    --------
    >>> curvature_limited(RoundLimit(2.0)), curvature_limited(RoundLimit(None, adaptive=True))
    (True, False)
    >>> curvature_limited(None), curvature_limited(RoundLimit(0.0))
    (False, False)
    """
    return (limit is not None and not limit.adaptive and limit.curvature is not None
            and limit.curvature > 0)


def optimizer_traits(config) -> dict:
    """The :class:`RoundLimit` fields that come from ``config``'s optimiser."""
    from dml.optim.optimizers import Adam, Momentum

    opt = config.optimizer
    return {"adaptive": isinstance(opt, Adam),
            "momentum": float(opt.momentum) if isinstance(opt, Momentum) else 0.0}


def round_limit(problem, blocks, config) -> RoundLimit | None:
    """The limit of ``problem``'s summed rounds under ``config`` (None: no limit); makes the
    curvature pass only when the limit needs it."""
    traits = optimizer_traits(config)
    if traits["adaptive"]:
        return RoundLimit(None, **traits)
    curvature = round_curvature(problem, blocks)
    if curvature == 0.0:
        return None
    return RoundLimit(curvature, **traits)


def capped_local_steps(local_steps, layout, limit: float):
    """Stream steps per round: ``local_steps`` (None: the whole epoch) lowered so that a round
    of all ``layout``'s streams together takes at most ``limit`` steps, but at least one per
    stream (with more streams than that the round is scaled instead: :func:`sum_scale`).

    Examples
    --------
    >>> from dml.optim.streams import make_streams
    >>> layout = make_streams([3200] * 8, batch_size=32, stream_steps=None)  # 8 streams, 100 steps
    >>> capped_local_steps(None, layout, math.inf), capped_local_steps(None, layout, 50.0)
    (None, 6)
    >>> capped_local_steps(32, layout, 500.0), capped_local_steps(32, layout, 0.5)
    (32, 1)
    """
    if layout.n_streams <= 1 or not limit < math.inf:
        return local_steps
    longest = int(layout.all_steps.max())
    current = longest if local_steps is None else int(local_steps)
    capped = min(current, max(1, int(limit // layout.n_streams)))
    return local_steps if capped >= current else capped


def limited_rounds(local_steps, layout, limit, lr_at, t: int):
    """Stream steps of every round of an epoch that starts after ``t`` steps, each round
    sized by :func:`capped_local_steps` for the step size ``lr_at(t' + 1)`` at *its own*
    start ``t'``: rounds lengthen as a decaying step size falls. ``local_steps`` itself when
    ``limit`` is None or never binds, an int when every round has the same length, else a
    tuple for :func:`~dml.optim.streams.round_plans`. Depends only on the layout, the schedule and
    ``t``, so a resumed or stacked fit plans the same rounds.

    Examples
    --------
    >>> from dml.optim.streams import make_streams
    >>> layout = make_streams([3200] * 8, batch_size=32, stream_steps=None)  # 8 streams, 100 steps
    >>> limit = RoundLimit(1.0)
    >>> limited_rounds(32, layout, limit, lambda t: 0.02 / t ** 0.25, 0)  # limit 50, 132, ...
    (6, 16, 22, 27, 30)
    >>> limited_rounds(32, layout, limit, lambda t: 0.001, 0)
    32
    """
    if limit is None or layout.n_streams <= 1:
        return local_steps
    steps = layout.all_steps
    longest = int(steps.max())
    lengths, first, t = [], 0, int(t)
    while first < longest:
        L = capped_local_steps(local_steps, layout, limit.steps(lr_at(t + 1)))
        L = longest if L is None else int(L)
        lengths.append(L)
        t += int(np.clip(steps - first, 0, L).sum())
        first += L
    plain = longest if local_steps is None else int(local_steps)
    if len(set(lengths)) > 1:
        return tuple(lengths)
    return local_steps if lengths[0] == plain else lengths[0]


def sum_scale(limit: float, total_steps: int) -> float:
    """The factor of a summed round of ``total_steps`` steps under ``limit``.

    Examples
    --------
    >>> sum_scale(50.0, 25), sum_scale(50.0, 200), sum_scale(math.inf, 10 ** 6)
    (1.0, 0.25, 1.0)
    """
    if not total_steps > limit:  # also for a nan limit: nothing to scale by
        return 1.0
    return float(limit) / int(total_steps)
