"""SGD on data that is not persisted: the blocks a round reads stay in worker memory until the
last round that needs them, so short rounds do not read every block again from its source once
per round. The model must not change."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from distributed import get_task_stream

from conftest import QUICK_ON_PROCESS_CLUSTER
from dml.linear_model import SGDRegressor
from dml.optim import engine

N_BLOCKS, ROWS, BATCH = 8, 160, 32  # 5 steps per block: one stream per block
EPOCHS = 2


def _fit(client, persist):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_BLOCKS * ROWS, 4))
    y = X @ rng.normal(size=4) + rng.normal(scale=0.3, size=X.shape[0])
    Xd, yd = da.from_array(X, chunks=(ROWS, -1)), da.from_array(y, chunks=ROWS)
    # One step per stream and round: five rounds per epoch touch each block.
    model = SGDRegressor(max_iter=EPOCHS, tol=None, batch_size=BATCH, stream_steps=4,
                         local_steps=1, persist=persist, random_state=0)
    with get_task_stream(client) as ts:
        model.fit(Xd, yd)
    prepared = sum("_prepare_part" in str(t["key"]) for t in ts.data)
    return model, prepared


# Quick tier: the process cluster (the blocks held by worker processes, read over TCP); the
# in-process cluster with the slow tests.
@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_rounds_read_each_block_once_per_epoch(client, monkeypatch):
    held, held_reads = _fit(client, False)
    with monkeypatch.context() as mp:
        mp.setattr(engine, "_hold_fits", lambda data, layout: False)
        plain, plain_reads = _fit(client, False)
    in_memory, _ = _fit(client, True)
    steps_per_block = -(-ROWS // BATCH)
    # Held: each block prepared once per epoch, plus at most one pass before training (the
    # data's curvature, cached by the data's keys across fits). Without holding every round
    # prepares the blocks it touches again.
    assert held_reads <= (EPOCHS + 1) * N_BLOCKS, held_reads
    assert plain_reads >= EPOCHS * steps_per_block * N_BLOCKS, plain_reads
    for other in (plain, in_memory):
        np.testing.assert_array_equal(held.coef_, other.coef_)
        np.testing.assert_array_equal(held.intercept_, other.intercept_)
    assert held.n_iter_ == plain.n_iter_ == in_memory.n_iter_ == EPOCHS
