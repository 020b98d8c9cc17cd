"""Persisted blocks held in groups (dml/_block_groups.py): one task per group of blocks, and the
same results bit for bit as one task per block, at 1 to 256 blocks."""
from __future__ import annotations

import dask
import numpy as np
import pytest
from dask.delayed import Delayed

from dml import _block_groups
from dml._block_groups import FANIN, group_size
from dml._graph import reduce_levels, tree_depth
from dml._blocks import as_blocks, tree_reduce
from dml.linear_model import SGDClassifier
from dml.optim.data import prepare

# 256 blocks (16 s here) runs in the full suite only; in the quick one, 64 blocks are checked by
# test_grouped_passes_on_a_multiprocess_cluster (the same checks at 64 blocks, on the process
# cluster), so the in-process 64 (7 s) runs with 65 and 256 in the full suite.
BLOCK_COUNTS = [1, 7, 8, 9, pytest.param(64, marks=pytest.mark.slow),
                pytest.param(65, marks=pytest.mark.slow), pytest.param(256, marks=pytest.mark.slow)]


def _data(n_blocks, rows=5, d=3, seed=0):
    rng = np.random.default_rng(seed)
    # Values over many magnitudes: a sum in another order differs in its last bits.
    n = n_blocks * rows
    X = rng.standard_normal((n, d)) * 10.0 ** rng.integers(-8, 8, (n, 1))
    y = rng.integers(0, 3, n_blocks * rows)
    return X, y


def _blocks(X, y, n_blocks):
    return as_blocks(X, y, block_rows=len(X) // n_blocks)


def _stats(xb, yb, wb):
    return {"sum": xb.sum(axis=0), "sq": (xb * xb).sum(), "n": xb.shape[0]}


def _indexed(i, xb, yb, wb, scale):
    return xb[:1] * (i + 1) * scale


def test_group_size_is_an_aligned_power_of_the_fanin():
    for n in (1, 5, 8, 63, 64, 1000, 5000):
        for want in (1, 2, 4, 16, 2048):
            g = group_size(n, want)
            assert g in (1, FANIN, FANIN ** 2, FANIN ** 3, FANIN ** 4) and g <= max(n, 1)
            assert g == 1 or -(-n // g) >= want


def test_reduce_levels_is_tree_reduce_without_a_cluster():
    """The in-task subtree followed by the tree over the group results is tree_reduce's tree:
    checked with a combine that records the shape of the tree."""
    def shape(parts):
        return "(" + ",".join(map(str, parts)) + ")"

    for n in (1, 2, 8, 9, 64, 65, 100, 513):
        want = dask.compute(tree_reduce([dask.delayed(int)(i) for i in range(n)], shape),
                            scheduler="sync")[0]
        depth = tree_depth(n)
        for size in (FANIN, FANIN ** 2):
            if size > n:
                continue
            levels = min(round(np.log(size) / np.log(FANIN)), depth)
            groups = [reduce_levels(list(range(a, min(a + size, n))), shape, levels)[0]
                      for a in range(0, n, size)]
            got = groups[0] if levels == depth else reduce_levels(
                groups, shape, depth - levels)[0]
            assert got == want, (n, size)


@pytest.mark.parametrize("n_blocks", BLOCK_COUNTS)
def test_grouped_passes_equal_per_block_passes(inprocess_client, n_blocks):
    _check_grouped_passes(n_blocks)


@pytest.mark.multiprocess
def test_grouped_passes_on_a_multiprocess_cluster(process_client):
    """Groups built and read by separate worker processes over TCP; consecutive groups placed
    on one worker (a run per worker), so a pass reading a run of them moves no block."""
    _check_grouped_passes(64)
    X, y = _data(64)
    held = _blocks(X, y, 64).persist(8)
    keys = [o.key for o in held.groups.objects]
    from distributed import futures_of, wait

    wait([futures_of(o)[0] for o in held.groups.objects])

    # The placement asked for (the scheduler may still move a task: it is a preference).
    def restrictions(dask_scheduler):
        return [sorted(dask_scheduler.tasks[k].worker_restrictions or ()) for k in keys]

    where = [tuple(w) for w in process_client.run_on_scheduler(restrictions)]
    assert all(len(w) == 1 for w in where), where
    runs = 1 + sum(a != b for a, b in zip(where, where[1:]))
    assert runs == len(set(where)) == len(process_client.nthreads()), where


def _check_grouped_passes(n_blocks):
    X, y = _data(n_blocks)
    plain = _blocks(X, y, n_blocks)
    want = plain.map_reduce(_stats)
    want_index = plain.map_reduce(_indexed, 0.5, with_index=True)
    # Groups of the default sizes, then groups of any consecutive blocks (SGD's stream groups:
    # reduced through range_reduce's pieces of the same tree).
    any_bounds = sorted({0, min(3, n_blocks), max(n_blocks // 3, 1), n_blocks})
    for n_groups in (1, 4, 64, any_bounds):
        if isinstance(n_groups, list):
            held = _blocks(X, y, n_blocks).persist(bounds=n_groups)
            assert held.groups.bounds == tuple(n_groups)
            assert held.groups.aligned == (n_blocks == 1)
        else:
            held = _blocks(X, y, n_blocks).persist(n_groups)
            expected_size = group_size(n_blocks, n_groups)
            if expected_size == 1:
                assert held.groups is None
            else:
                assert held.groups.size == expected_size and held.groups.aligned
                assert len(held.groups.objects) == -(-n_blocks // expected_size)
        got = held.map_reduce(_stats)
        np.testing.assert_array_equal(got["sum"], want["sum"])
        assert got["sq"] == want["sq"] and got["n"] == want["n"]
        np.testing.assert_array_equal(held.map_reduce(_indexed, 0.5, with_index=True),
                                      want_index)
        np.testing.assert_array_equal(held.lengths, np.full(n_blocks, len(X) // n_blocks))
    # Per-block results (one task per block, reading its group), for the last grouping.
    per_block = dask.compute(*held.map_parts(_indexed, 2.0, with_index=True))
    for i, b in enumerate(per_block):
        np.testing.assert_array_equal(b, X[i * 5:i * 5 + 1] * (i + 1) * 2.0)
    # Ranges of blocks gathered out of the groups, cut across group bounds (a group read in
    # part goes through a slice of it): every block once, the right one.
    for grouped in (_blocks(X, y, n_blocks).persist(4).groups, held.groups):
        if grouped is None:
            continue
        cuts = sorted({0, 1, min(grouped.size + 1, n_blocks), n_blocks - 1, n_blocks})
        ranges = [(a, b) for a, b in zip(cuts, cuts[1:]) if a < b]
        for (lo, hi), got in zip(ranges, dask.compute(*grouped.gather(ranges))):
            assert sorted(got) == list(range(lo, hi))
            for i in range(lo, hi):
                np.testing.assert_array_equal(got[i][0], X[i * 5:(i + 1) * 5])


# The process cluster's case with the slow tests: this file's quick run already builds and reads
# groups over TCP (test_grouped_passes_on_a_multiprocess_cluster); the graph checked here is
# made on the client, the same for both clusters.
@pytest.mark.parametrize("client", ["inprocess", pytest.param(
    "multiprocess", marks=[pytest.mark.multiprocess, pytest.mark.slow])], indirect=True)
def test_a_pass_over_grouped_blocks_runs_one_task_per_group(client):
    """256 persisted blocks in groups of 64: the pass's graph has one kernel task per group
    plus the small tree over their results, not 256 tasks."""
    X, y = _data(256)
    held = _blocks(X, y, 256).persist(4)
    assert held.groups.size == 64 and len(held.groups.objects) == 4
    out = held.map_reduce(_stats, compute_now=False)
    assert isinstance(out, Delayed)
    new = [k for k in out.__dask_graph__().keys()
           if k not in {o.key for o in held.groups.objects}]
    assert len(new) == 4 + 1, new
    assert out.compute()["n"] == len(X)


@pytest.mark.parametrize("n_blocks", [8, 64, pytest.param(256, marks=pytest.mark.slow)])
def test_prepare_on_grouped_blocks_equals_per_block(inprocess_client, n_blocks):
    """The training/validation split and label encoding of grouped blocks are the per-block
    ones, block by block."""
    X, y = _data(n_blocks)
    model = SGDClassifier(random_state=0)
    problem = model._problem(X.shape[1], np.unique(y), None)
    plain = prepare(problem, _blocks(X, y, n_blocks), seed=3, validation_fraction=0.4,
                    persist=False)
    held = prepare(problem, _blocks(X, y, n_blocks), seed=3, validation_fraction=0.4,
                   persist=True)
    assert plain.train.groups is None
    grouped = group_size(n_blocks, _block_groups.default_n_groups()) > 1
    assert (held.train.groups is not None) == grouped
    np.testing.assert_array_equal(held.lengths, plain.lengths)
    for a, b in ((plain.train, held.train), (plain.validation, held.validation)):
        for pa, pb in zip(dask.compute(*a.parts), dask.compute(*b.parts)):
            for ua, ub in zip(pa, pb):
                if ua is None:
                    assert ub is None
                else:
                    np.testing.assert_array_equal(ua, ub)


@pytest.mark.slow  # about 12 s: runs in the full suite only
def test_sgd_fit_is_the_same_with_blocks_held_in_groups_or_not(inprocess_client, monkeypatch):
    """SGDClassifier on 256 blocks: persisted in groups of 64 blocks or one object per block,
    the same model bit for bit (and the same as not persisting at all)."""
    X, y = _data(256, rows=20, d=4)
    y = (X[:, 0] > 0).astype(int)
    X = X / np.abs(X).max(axis=0)
    fits = []
    for n_groups, persist in ((4, True), (10_000, True), (4, False)):
        monkeypatch.setattr(_block_groups, "default_n_groups", lambda n=n_groups: n)
        m = SGDClassifier(max_iter=2, tol=None, random_state=0, persist=persist)
        fits.append(m.fit(*_dask(X, y, 256)))
    for m in fits[1:]:
        np.testing.assert_array_equal(m.coef_, fits[0].coef_)
        np.testing.assert_array_equal(m.intercept_, fits[0].intercept_)


def _dask(X, y, n_blocks):
    import dask.array as da

    rows = len(X) // n_blocks
    return da.from_array(X, chunks=(rows, X.shape[1])), da.from_array(y, chunks=rows)


@pytest.mark.parametrize("n_blocks,aligned", [(1, False), (9, False), (64, False), (64, True)])
def test_a_reduction_made_while_holding_reads_no_block_again(inprocess_client, n_blocks,
                                                             aligned):
    """Blocks held with ``reduce=(kernel, combine)``: the groups' tasks make the reduction's
    pieces on the way, so the pass of that kernel is one small task per group (reading the
    pieces, never the kernel again) plus one that finishes the tree, and it gives the result
    of the pass over blocks held without it, bit for bit (any consecutive groups, or the
    default aligned ones). Another kernel still reads the blocks."""
    from dml._block_groups import held_pieces
    from dml.linear_model._base import LABELS, discover_classes

    X, y = _data(n_blocks)
    bounds = (None if aligned else
              sorted({0, n_blocks, *range(0, n_blocks, 7), *range(0, n_blocks, 5)}))
    plain = _blocks(X, y, n_blocks).persist(4 if aligned else None, bounds=bounds)
    held = _blocks(X, y, n_blocks).persist(4 if aligned else None, bounds=bounds,
                                           reduce=LABELS)
    assert held.groups.aligned == plain.groups.aligned and (held.groups.aligned or not aligned)
    n_groups = len(held.groups.objects)
    out = held.map_reduce(*LABELS[:1], combine=LABELS[1], compute_now=False)
    graph = out.__dask_graph__()
    new = [k for k in graph.keys() if k not in {o.key for o in held.groups.objects}]
    # Task objects (dask >= 2025) or, from older dask's delayed, (func, *args) tuples.
    funcs = [graph[k].func if hasattr(graph[k], "func") else graph[k][0] for k in new]
    assert funcs.count(held_pieces) == n_groups and len(new) == n_groups + 1, funcs
    a, b = discover_classes(plain), discover_classes(held)
    for f in ("classes", "counts", "wsum"):
        assert getattr(a, f).tobytes() == getattr(b, f).tobytes()
    assert held.map_reduce(_stats)["n"] == len(X)  # another kernel: the blocks, as before


def test_stream_rows_joined_when_held_are_not_copied_again(inprocess_client):
    """An SGD classifier's blocks held with each stream's rows X joined (``hold(...,
    join_rows=True)``): preparing them for training (labels encoded, streams joined in
    place) keeps those very rows, no second copy, and gives the blocks and joined streams of
    blocks held without it."""
    from dml.linear_model._base import LABELS
    from dml.optim.data import hold, stream_groups

    X, y = _data(64, rows=20, d=4)
    model = SGDClassifier(random_state=0, stream_steps=8)
    problem = model._problem(X.shape[1], np.unique(y), None)
    cfg = model._sgd_config(problem, problem.loss)
    shape = model._stream_shape()
    starts = stream_groups(np.full(64, 20), X.shape[1], *shape, join=True)[1]
    assert starts is not None and np.diff(starts).max() > 1  # streams of several blocks
    out = []
    for join in (False, True):
        held = hold(_blocks(X, y, 64), True, shape, reduce=LABELS, join_rows=join)
        data = prepare(problem, held, seed=0, persist=True, config=cfg)
        out.append((dask.compute(*held.groups.objects), dask.compute(*data.train.groups.objects)))
    (_, before), (held_groups, after) = out
    for hg, pa, pb in zip(held_groups, before, after):
        assert len(pa) == len(pb) == len(hg)
        for h, a, b in zip(hg, pa, pb):
            assert b[0].base is not None and b[0].base is h[0].base  # the rows held, not a copy
            for u, v in zip(a, b):
                assert (u is None) == (v is None)
                if u is not None:
                    assert u.dtype == v.dtype and u.tobytes() == v.tobytes()
