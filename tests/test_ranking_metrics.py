"""Ranking metrics of SPEC §4 against hand computations."""
import numpy as np
import pytest

from dml.metrics import (average_precision_at_k, mae, mrr, ndcg_at_k, precision_at_k,
                         recall_at_k, rmse)

REC = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
REL = [{1, 3, 20}, {8}, set()]  # the third user has nothing relevant: skipped


def test_precision_recall():
    assert precision_at_k(REC, REL, k=3) == pytest.approx((2 / 3 + 0) / 2)
    assert precision_at_k(REC, REL, k=4) == pytest.approx((2 / 4 + 1 / 4) / 2)
    assert recall_at_k(REC, REL, k=3) == pytest.approx((2 / 3 + 0) / 2)
    assert recall_at_k(REC, REL, k=4) == pytest.approx((2 / 3 + 1) / 2)


def test_ap_ndcg_mrr():
    ap1 = (1 / 1 + 2 / 3) / 3
    ap2 = (1 / 4) / 1
    assert average_precision_at_k(REC, REL, k=4) == pytest.approx((ap1 + ap2) / 2)
    d1 = (1 + 1 / np.log2(4)) / (1 + 1 / np.log2(3) + 1 / np.log2(4))
    d2 = (1 / np.log2(5)) / 1
    assert ndcg_at_k(REC, REL, k=4) == pytest.approx((d1 + d2) / 2)
    assert ndcg_at_k([[1, 2]], [{1, 2}], k=2) == pytest.approx(1.0)
    assert mrr(REC, REL) == pytest.approx((1 + 1 / 4) / 2)
    assert mrr(REC, REL, k=3) == pytest.approx(0.5)


def test_arrays_and_errors():
    assert precision_at_k(np.array(REC), [np.array([1, 3]), [8], []], k=1) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="one ranked list"):
        precision_at_k(REC, REL[:2])
    with pytest.raises(ValueError, match="k must be"):
        ndcg_at_k(REC, REL, k=0)
    assert rmse([1.0, 3.0], [1.0, 1.0]) == pytest.approx(np.sqrt(2))
    assert mae([1.0, 3.0], [1.0, 1.0]) == pytest.approx(1.0)
