"""How far a round of summed stream updates may move a model whose loss gradient is unbounded.

When the streams' updates are summed (docs/partition_parallel_sgd.md, "Rounds and
combination"), a round of ``S`` mini-batch steps in all is applied as ``S`` steps taken from the
round's starting parameters. For a loss whose gradient grows with the residual (squared error,
squared hinge, squared epsilon-insensitive) that delayed sum is a step of length about
``S · η`` along the average gradient, and along the steepest direction of the objective —
curvature ``λ``, the largest eigenvalue of ``κ · E[w x̃ x̃ᵀ]`` with ``x̃ = [x, 1]`` and ``κ`` the
loss's largest second derivative — it overshoots the minimum as soon as ``S · η · λ > 1`` and
grows without bound beyond 2. Sequential SGD never does: each of its ``S`` steps starts where the
last one ended. With a constant step size of 0.01 on standardised data that happens from about
100 steps per round, i.e. 64 partitions; with the default decaying step size, from a few hundred
streams, i.e. data of some ten million rows in thousands of partitions.

So summed rounds are kept to at most ``1 / (η · λ)`` steps of all streams together, with ``η``
the step size at the start of the epoch (:func:`capped_local_steps`): a shorter round is still
the first-order equivalent of that many sequential steps, so the model learns per epoch what a
sequential pass would. When there are more streams than that — every stream takes at least one
step per round — the round is scaled by ``1 / (S · η · λ)`` instead (:func:`sum_scale`): it then
moves at most as far as a full step to the minimum along the steepest direction. Where the cap
does not bind (the usual case once a decaying step size has decayed), nothing changes. ``λ`` is
measured from the training rows in one pass (:func:`data_curvature`); it depends only on the
data, never on the partitioning or the storage, so sparse blocks and their dense copy still
train the same model. Losses with bounded gradients (log-loss, hinge, Huber, ...) cannot run
away like this; their rounds are left as they are. See docs/partition_parallel_sgd.md.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["data_curvature", "round_curvature", "group_curvatures", "capped_local_steps",
           "sum_scale",
           "EXACT_GRAM_FEATURES"]

#: Up to this many columns (intercept included) the curvature is the Gram matrix's largest
#: eigenvalue; above it the mean squared row norm (the Gram matrix's trace), an upper bound that
#: costs one pass whatever the width (hashed text has 2^20 columns).
EXACT_GRAM_FEATURES = 2048


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
    return _largest(blocks.map_reduce(_gram_kernel, bool(fit_intercept), exact), exact)


def _loss_kappa(problem) -> float:
    loss = getattr(problem, "loss", None)
    kappa = float(getattr(loss, "summed_curvature", 0.0) or 0.0)
    if kappa == 0.0 or not hasattr(problem, "fit_intercept") or not hasattr(problem, "d"):
        return 0.0
    return kappa


def group_curvatures(problem, blocks, n_groups: int) -> list:
    """:func:`round_curvature` of every row group of the stacked trainer's ``blocks`` (whose
    weights come with a row mask per group, or None for all rows), in one pass."""
    kappa = _loss_kappa(problem)
    if kappa == 0.0:
        return [0.0] * n_groups
    exact = _exact(int(problem.d), bool(problem.fit_intercept))
    stats = blocks.map_reduce(_masked_gram_kernel, bool(problem.fit_intercept), exact,
                              int(n_groups))
    if stats is None:
        return [0.0] * n_groups
    return [kappa * _largest(s, exact) for s in stats]


def round_curvature(problem, blocks) -> float:
    """``κ · λ`` for ``problem`` on ``blocks`` (0 when its loss's gradient is bounded, or the
    problem is not a linear model on its raw features)."""
    kappa = _loss_kappa(problem)
    if kappa == 0.0:
        return 0.0
    return kappa * data_curvature(blocks, int(problem.d), bool(problem.fit_intercept))


def capped_local_steps(local_steps, layout, curvature: float, lr: float):
    """Stream steps per round for an epoch whose step size starts at ``lr``: ``local_steps``
    (None: the whole epoch), lowered so that a round of all streams together takes at most
    ``1 / (curvature · lr)`` steps — a summed round then stays the first-order equivalent of
    that many sequential steps. At least one step per stream: with more streams than that the
    round is scaled instead (:func:`sum_scale`).

    Examples
    --------
    >>> from dml.optim.streams import make_streams
    >>> layout = make_streams([3200] * 8, batch_size=32, stream_steps=None)  # 8 streams, 100 steps
    >>> capped_local_steps(None, layout, 0.0, 0.01), capped_local_steps(None, layout, 2.0, 0.01)
    (None, 6)
    >>> capped_local_steps(32, layout, 2.0, 0.001), capped_local_steps(32, layout, 200.0, 0.01)
    (32, 1)
    """
    if not curvature or not lr > 0 or layout.n_streams <= 1:
        return local_steps
    cap = 1.0 / (float(curvature) * float(lr))
    if not cap < float("inf"):
        return local_steps
    longest = max(layout.steps(s) for s in range(layout.n_streams))
    current = longest if local_steps is None else int(local_steps)
    capped = min(current, max(1, int(cap // layout.n_streams)))
    return local_steps if capped >= current else capped


def sum_scale(curvature: float, lr: float, total_steps: int) -> float:
    """The factor of a summed round of ``total_steps`` steps of size at most ``lr``.

    Examples
    --------
    >>> sum_scale(1.0, 0.01, 50), sum_scale(1.0, 0.01, 400), sum_scale(0.0, 0.01, 400)
    (1.0, 0.25, 1.0)
    """
    move = float(curvature) * float(lr) * int(total_steps)
    if not move > 1.0:  # also for a nan curvature: nothing to scale by
        return 1.0
    return 1.0 / move
