"""Mini-batches run across block boundaries: a stream's epoch is its blocks' rows one block
after the other (each block in its own epoch order), cut into ``batch_size`` batches, so a stream
of n rows takes ceil(n / batch_size) steps however its rows are split into blocks
(docs/partition_parallel_sgd.md, "How batches are formed")."""
from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import QUICK_ON_PROCESS_CLUSTER

from dml._blocks import BlockSpec, as_blocks, block_rng
from dml.linear_model import SGDRegressor
from dml.linear_model._problem import LinearProblem
from dml.neural_network import MLPRegressor
from dml.optim.data import prepare
from dml.optim.engine import RoundPlan, SGDConfig, initial_state, local_sgd_steps, train
from dml.optim.losses import get_loss
from dml.optim.penalties import Penalty
from dml.optim.schedules import make_schedule
from dml.optim.streams import JOINED, RoundSpec, make_streams
from dml.optim.training import TrainConfig


@pytest.mark.parametrize("lengths,B", [([37, 50, 29, 0, 5, 3, 64], 16), ([7] * 40, 32),
                                       ([234] * 12, 200), ([100], 32)])
def test_a_stream_takes_ceil_rows_over_batch_steps(lengths, B):
    layout = make_streams(lengths, B, stream_steps=10**6)  # one stream of all the blocks
    rows = sum(lengths)
    assert layout.n_streams == 1 and layout.steps(0) == -(-rows // B)
    # Every step is B rows (the last the rest), and the steps cover each row once, in order.
    seen = []
    for k in range(layout.steps(0)):
        pieces = layout.segments(0, k, k + 1)
        size = sum(hi - lo for _, lo, hi in pieces)
        assert size == (B if k + 1 < layout.steps(0) else rows - k * B), (k, pieces)
        seen += [(b, r) for b, lo, hi in pieces for r in range(lo, hi)]
    assert seen == [(b, r) for b, n in enumerate(lengths) for r in range(n)]
    # Any cut into rounds gives the same rows.
    cut = [p for a in range(0, layout.steps(0), 3) for p in layout.segments(0, a, a + 3)]
    assert [(b, r) for b, lo, hi in cut for r in range(lo, hi)] == seen


def test_streams_hold_stream_steps_batches_and_are_cut_evenly():
    # 234-row blocks with batches of 200: a block alone would take 2 steps, but a stream of 64
    # of them takes 75, so 109 blocks make the 128 steps of a stream: 330 blocks hold three
    # streams' rows, cut into three equal streams of 110 blocks.
    layout = make_streams([234] * 330, 200, 128)
    assert [layout.steps(s) for s in range(layout.n_streams)] == [129, 129, 129]
    assert layout.starts == (0, 110, 220, 330)
    # 331 blocks cannot be cut evenly: the streams differ by one block.
    layout = make_streams([234] * 331, 200, 128)
    assert layout.starts == (0, 110, 221, 331)


def _problem(d):
    return LinearProblem(d, get_loss("squared_error"))


def _config(B=16, **kw):
    return SGDConfig(schedule=make_schedule("invscaling", eta0=0.02, power_t=0.25),
                     penalty=Penalty("l2", 1e-3, penalised=slice(0, 4)), batch_size=B,
                     stream_steps=10**6, **kw)


def _one_epoch(X, y, block_rows, cfg, spec=None):
    problem = _problem(X.shape[1])
    blocks = as_blocks(X, y, block_rows=block_rows, **({"spec": spec} if spec else {}))
    data = prepare(problem, blocks, seed=3)
    state = train(problem, data, cfg, TrainConfig(max_iter=1, tol=None),
                  initial_state(problem, cfg, 3))
    return state, blocks.lengths


def _reference(X, y, lengths, cfg):
    """One block holding every block's rows in its epoch order: plain sequential SGD."""
    order, start = [], 0
    for b, n in enumerate(lengths):
        perm = block_rng(3, "shuffle", 1, b).permutation(n) if cfg.shuffle else np.arange(n)
        order.append(start + perm)
        start += n
    order = np.concatenate(order)
    problem = _problem(X.shape[1])
    st = initial_state(problem, cfg, 3)
    plan = RoundPlan(epoch=0, spec=RoundSpec(0, 0, (1.0,), (0,)), seed=3, t0=0, lr_scale=1.0,
                     config=cfg)
    n_steps = -(-len(order) // cfg.batch_size)
    local_sgd_steps(problem, st.params, st.opt.slots, X[order], y[order], None, None, 0,
                    n_steps, 0, plan)
    return st.params, n_steps


@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_across_blocks_equal_one_block_of_the_same_rows(shuffle):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(203, 4))
    y = X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.1 * rng.normal(size=203)
    cfg = _config(shuffle=shuffle)
    state, lengths = _one_epoch(X, y, 23, cfg)  # 9 blocks, none a multiple of 16 rows
    assert len(lengths) == 9
    ref, n_steps = _reference(X, y, lengths, cfg)
    np.testing.assert_array_equal(state.params, ref)
    assert state.opt.t == n_steps == 13  # ceil(203 / 16), not 9 blocks × 2 steps
    if not shuffle:
        one, _ = _one_epoch(X, y, 10_000, cfg)
        np.testing.assert_array_equal(state.params, one.params)


def test_sparse_batches_across_blocks_equal_the_dense_fit():
    # CSR blocks take the O(nnz) steps, a batch joining two blocks is stacked from both.
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 4)) * (rng.random((150, 4)) < 0.5)
    y = X @ np.array([1.0, -1.0, 2.0, 0.0]) + 0.1 * rng.normal(size=150)
    cfg = _config(B=8)
    dense, lengths = _one_epoch(X, y, 13, cfg)
    sparse, _ = _one_epoch(sp.csr_matrix(X), y, 13, cfg, spec=BlockSpec(accept_sparse=True))
    np.testing.assert_allclose(sparse.params, dense.params, rtol=1e-10, atol=1e-12)
    ref, _ = _reference(X, y, lengths, cfg)
    np.testing.assert_allclose(dense.params, ref, rtol=0, atol=0)


def _many_blocks(n_blocks, n=2048, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
    rows = -(-n // n_blocks)
    return da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows), X, y


# Quick tier: the process cluster; the in-process cluster with the slow tests.
@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_many_blocks_are_deterministic(client):
    # 64 blocks of 32 rows, batches of 20: most batches join two blocks; summed rounds.
    Xd, yd, _, _ = _many_blocks(64)
    make = lambda: SGDRegressor(batch_size=20, stream_steps=8, max_iter=3, tol=None,  # noqa: E731
                                random_state=0)
    a, b = make().fit(Xd, yd), make().fit(Xd, yd)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.t_ == b.t_


@pytest.mark.slow
@pytest.mark.parametrize("n_blocks", [64, 256])
def test_many_block_networks_are_deterministic_and_train(client, n_blocks):
    Xd, yd, X, y = _many_blocks(n_blocks, n=4096)
    make = lambda: MLPRegressor(hidden_layer_sizes=(8,), batch_size=50,  # noqa: E731
                                max_iter=3, random_state=0)
    a, b = make().fit(Xd, yd), make().fit(Xd, yd)
    for wa, wb in zip(a.coefs_, b.coefs_):
        np.testing.assert_array_equal(wa, wb)
    assert a.score(X, y) > 0.5


@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
@pytest.mark.parametrize("model", ["summed", pytest.param("averaged", marks=pytest.mark.slow)])
def test_joined_streams_equal_the_walk_over_blocks(client, model, monkeypatch):
    # Persisted blocks are joined into one array per stream for the fit; data read from
    # storage (and persisted data without the memory to join) is walked block by block. 64
    # blocks of 32 rows, batches of 20 that cross the blocks' boundaries, streams of 7 blocks:
    # the same model and the same objective bit for bit. Two epochs (the second reshuffles
    # each block's order) are enough: equality at any epoch count is the claim.
    from dml.linear_model import SGDClassifier
    from dml.optim import engine

    Xd, yd, _, y = _many_blocks(64)
    if model == "averaged":
        yd = (yd > float(np.median(y))).astype(int)

    def fit(persist):
        kw = dict(batch_size=20, stream_steps=12, max_iter=2, tol=None, random_state=0,
                  persist=persist)
        est = (SGDRegressor(**kw) if model == "summed" else
               SGDClassifier(loss="log_loss", **kw))
        return est.fit(Xd, yd)

    runners = []
    init = engine.StreamRunner.__init__

    def keep(self, *args, **kw):
        init(self, *args, **kw)
        runners.append(self)

    monkeypatch.setattr(engine.StreamRunner, "__init__", keep)
    joined = fit(True)
    # The runner of the persisted fit holds every stream as one array, not its blocks.
    held = dask.compute(*runners[-1].gathered)
    assert all(isinstance(k, tuple) and k[0] == JOINED for h in held for k in h)
    walked = fit(False)
    with monkeypatch.context() as mp:
        mp.setattr(engine, "_join_fits", lambda problem, data: False)
        unjoined = fit(True)
    for other in (walked, unjoined):
        np.testing.assert_array_equal(joined.coef_, other.coef_)
        np.testing.assert_array_equal(joined.intercept_, other.intercept_)
        assert [h["objective"] for h in joined.history_] == \
               [h["objective"] for h in other.history_]
        assert joined.t_ == other.t_


def test_a_streams_targets_are_made_once_per_array():
    """The compiled steps take a stream's targets from :func:`stream_targets`: made once for
    a held ``Y`` (every round of the stream passes the same array), the same values as the
    problem makes, and made again for another array."""
    from dml.linear_model import SGDClassifier
    from dml.optim.dense_steps import stream_targets

    problem = SGDClassifier()._problem(3, np.array([0, 1]), None)
    calls = []
    make = problem.sparse_kernel_terms
    problem.sparse_kernel_terms = lambda Y: calls.append(1) or make(Y)
    Y = np.arange(40) % 2
    first = stream_targets(problem, Y)
    assert stream_targets(problem, Y) is first and len(calls) == 1
    np.testing.assert_array_equal(first, make(Y)[2][:, 0])
    other = Y.copy()
    assert stream_targets(problem, other) is not first and len(calls) == 2
