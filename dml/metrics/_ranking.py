"""Ranking metrics of top-k recommendations against held-out relevant items.

Inputs are per-user: ``recommended`` is a sequence (or 2-D array) of ranked item lists, best
first; ``relevant`` a sequence of collections of relevant items (binary relevance), aligned by
user. Each metric is averaged over the users that have at least one relevant item (users with
none have undefined recall/AP/NDCG and are skipped, as in Spark's RankingMetrics
``meanAveragePrecision``/``ndcgAt``); an empty result is 0.0.

* precision@k = |top-k ∩ rel| / k
* recall@k = |top-k ∩ rel| / |rel|
* AP@k = Σ_{i≤k} precision@i · rel_i / min(|rel|, k)
* NDCG@k = DCG@k / IDCG@k, DCG = Σ_{i≤k} rel_i / log₂(i + 1) (i is the 1-based rank)
* MRR = mean of 1 / (rank of the first relevant item), 0 when none is recommended (whole list,
  or the top k when k is given).

See docs/recommender.md.
"""
from __future__ import annotations

import numpy as np

__all__ = ["precision_at_k", "recall_at_k", "ndcg_at_k", "average_precision_at_k", "mrr"]


def _pairs(recommended, relevant, k):
    if k is not None and not (isinstance(k, (int, np.integer)) and k >= 1):
        raise ValueError(f"k must be a positive integer, got {k!r}")
    recommended = list(recommended)
    relevant = list(relevant)
    if len(recommended) != len(relevant):
        raise ValueError(f"recommended has {len(recommended)} users but relevant has "
                         f"{len(relevant)}; pass one ranked list and one relevant set per user")
    for rec, rel in zip(recommended, relevant):
        rel = set(np.atleast_1d(np.asarray(list(rel) if isinstance(rel, (set, frozenset))
                                           else rel)).tolist())
        if not rel:
            continue
        rec = list(np.atleast_1d(np.asarray(rec)).tolist())
        yield (rec if k is None else rec[:k]), rel


def _mean(values):
    values = list(values)
    return float(np.mean(values)) if values else 0.0


def precision_at_k(recommended, relevant, k=10):
    """Mean fraction of the top k that is relevant (the denominator is k).

    >>> precision_at_k([[1, 2, 3], [4, 5, 6]], [{1, 3}, {7}], k=2)
    0.25
    """
    return _mean(sum(r in rel for r in rec) / k for rec, rel in _pairs(recommended, relevant, k))


def recall_at_k(recommended, relevant, k=10):
    """Mean fraction of the relevant items found in the top k.

    >>> recall_at_k([[1, 2, 3]], [{1, 3, 9, 8}], k=2)
    0.25
    """
    return _mean(sum(r in rel for r in rec) / len(rel)
                 for rec, rel in _pairs(recommended, relevant, k))


def average_precision_at_k(recommended, relevant, k=10):
    """Mean of AP@k = Σ_{i≤k} P@i · rel_i / min(|rel|, k).

    >>> average_precision_at_k([[1, 2, 3]], [{1, 3}], k=3)  # (1/1 + 2/3) / 2
    0.8333333333333333
    """
    def ap(rec, rel):
        hits, total = 0, 0.0
        for i, r in enumerate(rec, start=1):
            if r in rel:
                hits += 1
                total += hits / i
        return total / min(len(rel), k)
    return _mean(ap(rec, rel) for rec, rel in _pairs(recommended, relevant, k))


def ndcg_at_k(recommended, relevant, k=10):
    """Mean NDCG@k with binary relevance, DCG = Σ rel_i / log₂(i + 1).

    >>> round(ndcg_at_k([[1, 2, 3]], [{2}], k=3), 6)  # (1/log2 3) / 1
    0.63093
    """
    def ndcg(rec, rel):
        dcg = sum(1.0 / np.log2(i + 1) for i, r in enumerate(rec, start=1) if r in rel)
        idcg = sum(1.0 / np.log2(i + 1) for i in range(1, min(len(rel), k) + 1))
        return dcg / idcg
    return _mean(ndcg(rec, rel) for rec, rel in _pairs(recommended, relevant, k))


def mrr(recommended, relevant, k=None):
    """Mean reciprocal rank of the first relevant item (0 when there is none).

    >>> mrr([[1, 2, 3], [4, 5, 6]], [{3}, {4}])  # (1/3 + 1) / 2
    0.6666666666666666
    """
    def rr(rec, rel):
        for i, r in enumerate(rec, start=1):
            if r in rel:
                return 1.0 / i
        return 0.0
    return _mean(rr(rec, rel) for rec, rel in _pairs(recommended, relevant, k))
