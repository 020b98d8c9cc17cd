"""Synthetic low-rank explicit ratings (user, item, rating) for the recommenders."""
from __future__ import annotations

import numpy as np

from dml._blocks import block_rng, seed_from
from dml._param_validation import check_scalar
from dml.datasets._generators import _model_rng

__all__ = ["make_ratings"]

def _ratings_factors(seed: int, n_users: int, n_items: int, rank: int):
    # Every chunk rebuilds the same factors from the model stream: nothing large is shipped.
    rng = _model_rng(seed, "make_ratings")
    scale = 1.0 / np.sqrt(np.sqrt(rank))
    return (rng.normal(0.0, scale, (n_users, rank)), rng.normal(0.0, scale, (n_items, rank)),
            rng.normal(0.0, 0.3, n_users), rng.normal(0.0, 0.3, n_items))


def _ratings_chunk(seed: int, index: int, n: int, n_users: int, n_items: int, rank: int,
                   noise: float, mean: float):
    import pandas as pd

    P, Q, bu, bi = _ratings_factors(seed, n_users, n_items, rank)
    rng = block_rng(seed, "make_ratings", index)
    u = rng.integers(0, n_users, n)
    i = rng.integers(0, n_items, n)
    r = mean + bu[u] + bi[i] + np.einsum("ij,ij->i", P[u], Q[i]) + noise * rng.standard_normal(n)
    return pd.DataFrame({"user": u.astype(np.int64), "item": i.astype(np.int64), "rating": r})


def make_ratings(n_users=1000, n_items=500, n_ratings=10000, *, rank=10, noise=0.1, mean=3.5,
                 random_state=None, npartitions=None):
    """Synthetic low-rank explicit ratings, generated on the workers.

    rating = mean + b_u + b_i + p_u·q_i + noise·ε with p_u, q_i ~ N(0, 1/√rank) (so p_u·q_i has
    unit variance), biases ~ N(0, 0.3²), ε ~ N(0, 1). (user, item) pairs are drawn uniformly
    with replacement, so a pair may occur more than once.

    Parameters
    ----------
    n_users, n_items, n_ratings : int
    rank : int, default=10
    noise : float, default=0.1
    mean : float, default=3.5
    random_state : int, RandomState or None
    npartitions : int, optional
        Number of partitions (default: one per 1,000,000 ratings).

    Returns
    -------
    ratings : dask.dataframe.DataFrame with columns user (int64), item (int64), rating (float64)

    Examples
    --------
    >>> from dml.datasets import make_ratings
    >>> df = make_ratings(50, 20, 300, rank=3, random_state=0, npartitions=2)
    >>> list(df.columns), len(df.compute())
    (['user', 'item', 'rating'], 300)
    """
    import dask
    import dask.dataframe as dd
    import pandas as pd

    n_users = check_scalar(n_users, "n_users", "make_ratings", minimum=1, integer=True)
    n_items = check_scalar(n_items, "n_items", "make_ratings", minimum=1, integer=True)
    n_ratings = check_scalar(n_ratings, "n_ratings", "make_ratings", minimum=1, integer=True)
    rank = check_scalar(rank, "rank", "make_ratings", minimum=1, integer=True)
    noise = check_scalar(noise, "noise", "make_ratings", minimum=0.0)
    mean = check_scalar(mean, "mean", "make_ratings", closed="neither")
    if npartitions is None:
        npartitions = max(1, -(-n_ratings // 1_000_000))
    npartitions = check_scalar(npartitions, "npartitions", "make_ratings", minimum=1, integer=True)
    seed = seed_from(random_state)
    sizes = np.diff(np.linspace(0, n_ratings, npartitions + 1).round().astype(np.int64))
    meta = pd.DataFrame({"user": pd.Series([], dtype=np.int64),
                         "item": pd.Series([], dtype=np.int64),
                         "rating": pd.Series([], dtype=np.float64)})
    parts = [dask.delayed(_ratings_chunk, pure=True)(seed, j, int(s), n_users, n_items, rank,
                                                     noise, mean)
             for j, s in enumerate(sizes)]
    # verify_meta stays on: without it Dask aliases the delayed keys, and converting the frame to
    # Dask arrays then fails on a distributed cluster ("lost dependencies").
    return dd.from_delayed(parts, meta=meta)
