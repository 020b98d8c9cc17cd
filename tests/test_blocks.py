"""The shared block primitives: input handling, alignment, reductions, random streams."""
import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from dml._blocks import (BlockSpec, as_blocks, block_rng, default_block_rows, seed_from,
                         tree_add, tree_reduce)
from dask import delayed


def stats(x, y, w):
    """Module-level kernel (picklable by reference for process workers)."""
    wsum = len(x) if w is None else w.sum()
    return {"sum": x.sum(axis=0), "n": len(x), "y": 0 if y is None else y.astype(float).sum(),
            "w": wsum}


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(103, 4))
    y = rng.integers(0, 3, size=103)
    w = rng.random(103)
    return X, y, w


def expected(X, y, w=None):
    return X.sum(0), len(X), y.astype(float).sum()


@pytest.mark.parametrize("make", [
    lambda X, y, w: (X, y, w),
    lambda X, y, w: (pd.DataFrame(X, columns=list("abcd")), pd.Series(y), w),
    lambda X, y, w: (da.from_array(X, chunks=(17, 2)), da.from_array(y, chunks=50),
                     da.from_array(w, chunks=103)),
    lambda X, y, w: (dd.from_pandas(pd.DataFrame(X, columns=list("abcd")), npartitions=5),
                     dd.from_pandas(pd.Series(y), npartitions=2), w),
], ids=["numpy", "pandas", "dask-array-misaligned", "dask-frame-misaligned"])
def test_every_input_type_gives_aligned_blocks(make, data):
    X, y, w = data
    b = as_blocks(*make(X, y, w))
    out = b.map_reduce(stats)
    np.testing.assert_allclose(out["sum"], X.sum(0), rtol=1e-12)
    assert out["n"] == 103 and out["y"] == y.sum()
    np.testing.assert_allclose(out["w"], w.sum(), rtol=1e-12)
    assert b.n_samples == 103 and b.n_features == 4


def test_column_names_for_target_and_weight(data):
    X, y, w = data
    df = pd.DataFrame(X, columns=list("abcd")).assign(target=y, weight=w)
    ddf = dd.from_pandas(df, npartitions=4)
    b = as_blocks(ddf, "target", "weight")
    assert list(b.feature_names) == list("abcd")
    out = b.map_reduce(stats)
    np.testing.assert_allclose(out["sum"], X.sum(0), rtol=1e-12)
    np.testing.assert_allclose(out["w"], w.sum(), rtol=1e-12)
    assert out["y"] == y.sum()
    # A pandas-backed frame states its partition lengths: no pass computes them.
    expected = list(ddf.map_partitions(len).compute())
    assert list(b.known_lengths) == expected
    # Otherwise lengths are only computed when asked for.
    b = as_blocks(ddf.map_partitions(lambda part: part.copy()), "target", "weight")
    assert b.known_lengths is None
    assert list(b.lengths) == expected and b.n_samples == 103


def test_results_reproducible_and_tree_order_fixed(data):
    X, y, _ = data
    Xd = da.from_array(X * 1e3, chunks=5)  # 21 blocks: several tree levels
    b = as_blocks(Xd)
    sums = [b.map_reduce(stats, split_every=s)["sum"] for s in (2, 3, 8, 2)]
    assert np.array_equal(sums[0], sums[3])  # bitwise repeatable
    for s in sums[1:]:
        np.testing.assert_allclose(s, sums[0], rtol=1e-12)


def test_map_reduce_on_both_clusters_equals_threaded(client, data):
    X, y, w = data
    args = (da.from_array(X, chunks=13), da.from_array(y, chunks=13), da.from_array(w, chunks=7))
    out = as_blocks(*args).map_reduce(stats)
    with dask.config.set(scheduler="threads"):
        ref = as_blocks(*args).map_reduce(stats)
    assert np.array_equal(out["sum"], ref["sum"]) and out["w"] == ref["w"]


def test_with_index_and_broadcast_parameters(data):
    X, _, _ = data
    b = as_blocks(X, block_rows=30)

    def kernel(i, x, y, w, scale):
        return np.array([i * 1.0]), x.sum() * scale

    idx, total = b.map_reduce(kernel, 2.0, with_index=True)
    assert idx[0] == sum(range(b.npartitions)) and b.npartitions == 4
    np.testing.assert_allclose(total, X.sum() * 2.0)


def test_broadcast_embeds_small_objects_and_gives_large_ones_a_fresh_key():
    from dask.delayed import Delayed

    from dml._blocks import INLINE_BYTES, broadcast

    # Small, common parameters (a dtype, a class, a function) are embedded in the tasks: as
    # content-hashed keys they recurred across consecutive fits and intermittently tripped the
    # scheduler ("assert ts.priority" in `dml demo`).
    for small in (np.dtype("float64"), np.float32, np.sum, slice(0, 3), 2.0, "gini", None):
        assert broadcast(small) is small
    big = np.zeros(INLINE_BYTES // 8 + 1)
    a, b = broadcast(big), broadcast(big)
    assert isinstance(a, Delayed) and isinstance(b, Delayed)
    assert a.key != b.key, "each call's large parameter needs its own key"


def test_persist_and_lazy_map_blocks(data):
    X, _, _ = data
    b = as_blocks(da.from_array(X, chunks=20)).persist()
    out = b.map_blocks(lambda x, k: x[:, 0] * k, 3.0, dtype=float)
    assert isinstance(out, da.Array) and out.chunks[0] == (20, 20, 20, 20, 20, 3)
    np.testing.assert_allclose(out.compute(), X[:, 0] * 3.0)
    two = b.map_blocks(lambda x: x[:, :2], dtype=float, tail_shape=(2,))
    assert two.shape == (103, 2)


def test_unknown_lengths_and_empty_partitions():
    df = pd.DataFrame({"a": np.arange(10.0), "t": np.arange(10) % 2})
    ddf = dd.from_pandas(df, npartitions=3)
    ddf = ddf[ddf.a > 3]  # first partition becomes empty
    b = as_blocks(ddf, "t")
    assert 0 in list(b.lengths)
    out = b.map_reduce(stats)
    assert out["n"] == 6 and out["sum"][0] == sum(range(4, 10))
    lazy = b.map_blocks(lambda x: x[:, 0], dtype=float)
    np.testing.assert_allclose(lazy.compute(), np.arange(4.0, 10.0))


def test_tree_add_nested_and_none():
    parts = [None, {"a": (np.ones(2), 1)}, {"a": (np.ones(2), 2)}]
    out = tree_add(parts)
    assert out["a"][1] == 3 and list(out["a"][0]) == [2, 2]
    assert tree_add([None, None]) is None
    assert tree_reduce([delayed(1), delayed(2), delayed(3)], split_every=2).compute() == 6
    with pytest.raises(ValueError, match="no blocks"):
        tree_reduce([])


def test_random_streams():
    assert seed_from(7) == 7
    assert seed_from(np.random.RandomState(0)) == seed_from(np.random.RandomState(0))
    with pytest.raises(TypeError, match="random_state"):
        seed_from("seven")
    with pytest.raises(ValueError, match="non-negative"):
        seed_from(-1)
    a = block_rng(1, "init", 0, 5).random(3)
    assert np.array_equal(a, block_rng(1, "init", 0, 5).random(3))
    assert not np.array_equal(a, block_rng(1, "init", 0, 6).random(3))
    assert not np.array_equal(a, block_rng(1, "shuffle", 0, 5).random(3))
    assert default_block_rows(16) == 128 * 2**20 // 128


# ---- bad input: every error names the problem ----

@pytest.mark.parametrize("X, y, match", [
    (np.arange(5.0), None, "1-D array.*reshape"),
    (np.zeros((2, 2, 2)), None, "3-D"),
    (np.zeros((5, 2)), np.zeros(4), "X has 5 rows but y has 4"),
    (pd.Series([1.0, 2.0]), None, "Series"),
    (np.zeros((3, 2)), "t", "not a DataFrame"),
    (pd.DataFrame({"a": [1.0]}), "t", r"column\(s\) \['t'\] not found"),
    ({"a": 1}, None, "must be a NumPy array"),
])
def test_bad_input_on_the_client(X, y, match):
    with pytest.raises((ValueError, TypeError), match=match):
        as_blocks(X, y)


def test_length_mismatch_of_dask_inputs():
    X = da.zeros((10, 2), chunks=3)
    with pytest.raises(ValueError, match="X has 10 rows but sample_weight has 9"):
        as_blocks(X, da.zeros(10, chunks=4), da.ones(9, chunks=9))
    ddf = dd.from_pandas(pd.DataFrame({"a": np.arange(10.0)}), npartitions=2)
    with pytest.raises(ValueError, match="X has 10 rows but y has 8"):
        as_blocks(ddf, dd.from_pandas(pd.Series(np.arange(8)), npartitions=3))


@pytest.mark.parametrize("value, match", [(np.nan, "NaN"), (np.inf, "infinity")])
def test_non_finite_values_are_found_on_the_worker(value, match):
    X = np.ones((40, 3))
    X[33, 1] = value
    b = as_blocks(da.from_array(X, chunks=10), spec=BlockSpec(estimator="Thing"))
    with pytest.raises(ValueError, match=f"Thing: Input X contains {match} \\(row block 3\\)"):
        b.map_reduce(stats)


def test_nan_allowed_when_the_spec_says_so():
    X = np.ones((4, 2))
    X[1, 1] = np.nan
    out = as_blocks(X, spec=BlockSpec(allow_nan=True)).map_reduce(
        lambda x, y, w: np.isnan(x).sum())
    assert out == 1


def test_strings_in_numeric_features():
    df = pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]})
    with pytest.raises(TypeError, match=r"non-numeric columns \['b'\].*OneHotEncoder"):
        as_blocks(df)
    with pytest.raises(TypeError, match="non-numeric values"):
        as_blocks(np.array([["1", "x"]], dtype=object)).map_reduce(stats)


def test_nullable_and_bool_columns_become_floats():
    df = pd.DataFrame({"a": pd.array([1, None, 3], dtype="Int64"), "b": [True, False, True]})
    out = as_blocks(df, spec=BlockSpec(allow_nan=True)).map_reduce(
        lambda x, y, w: (np.isnan(x).sum(), np.nansum(x), x.dtype.kind))
    assert out[0] == 1 and out[1] == 6.0


def test_y_with_missing_labels_is_refused():
    y = np.array(["a", None, "b"], dtype=object)
    with pytest.raises(ValueError, match="y contains missing values"):
        as_blocks(np.zeros((3, 1)), y).map_reduce(stats)


def test_require_y():
    with pytest.raises(ValueError, match="requires y"):
        as_blocks(np.zeros((3, 1)), None, require_y=True,
                  spec=BlockSpec(estimator="GaussianNB"))


PRODUCED = []


def _counted_part(i, rows=5):
    PRODUCED.append(i)
    return pd.DataFrame({"a": np.arange(rows, dtype=float) + i * rows,
                         "t": (np.arange(rows) + i) % 2})


def counted_frame(n_parts=3):
    """A Dask dataframe whose partitions record in PRODUCED each time they are produced."""
    PRODUCED.clear()
    meta = pd.DataFrame({"a": np.array([], dtype=float), "t": np.array([], dtype=np.int64)})
    return dd.from_map(_counted_part, list(range(n_parts)), meta=meta)


def test_same_partitions_with_unknown_lengths_cost_no_extra_pass():
    # X and y as separate collections of one frame (unknown lengths, same partitions). Note:
    # X = ddf[["a"]].to_dask_array() would not share reads with y, because dask-expr fuses the
    # graph at conversion; pass y as a column name (or both as dataframe/Series) for one read.
    ddf = counted_frame()
    seen = PRODUCED
    X = ddf[["a"]]
    y = ddf["t"]
    with dask.config.set(scheduler="sync"):
        b = as_blocks(X, y)
        assert seen == []                    # nothing computed to build the blocks
        out = b.map_reduce(stats)
    assert sorted(seen) == [0, 1, 2]         # one production per partition: one pass
    assert out["n"] == 15 and out["sum"][0] == sum(range(15))
    assert b.known_lengths is None


def test_same_partition_count_but_different_rows_is_realigned():
    X = da.from_array(np.arange(20.0).reshape(10, 2), chunks=5)
    X = X[da.from_array(np.arange(10) != 3, chunks=5)]   # 9 rows, unknown chunks (4, 5)
    y = da.from_array(np.arange(9), chunks=((5, 4),))    # paired first, misaligned
    b = as_blocks(X, y)
    assert b.known_lengths is None
    out = b.map_reduce(stats)                            # realigned on the fly, then exact
    assert out["n"] == 9 and out["y"] == sum(range(9)) and list(b.lengths) == [4, 5]
    short = da.from_array(np.arange(8), chunks=((4, 4),))
    with pytest.raises(ValueError, match="X has 9 rows but y has 8"):
        as_blocks(X, short).map_reduce(stats)


def test_unknown_lengths_without_y_stay_lazy():
    X = counted_frame()[["a"]].to_dask_array()
    seen = PRODUCED
    with dask.config.set(scheduler="sync"):
        b = as_blocks(X)
        assert seen == [] and b.known_lengths is None
        assert b.map_reduce(stats)["n"] == 15
    assert sorted(seen) == [0, 1, 2]


def test_multi_column_chunks_and_different_partition_counts_realign():
    X = da.from_array(np.ones((12, 4)), chunks=(5, 2))
    X = X[da.from_array(np.arange(12) < 11, chunks=5)]   # unknown row chunks, 2 column chunks
    y = da.from_array(np.arange(11), chunks=4)           # 3 partitions, other lengths than X's
    y = y.rechunk(6)                                     # 2 partitions: realigned by lengths
    out = as_blocks(X, y).map_reduce(stats)
    assert out["n"] == 11 and out["y"] == sum(range(11)) and out["sum"][0] == 11


def _nest(parts):
    """A combine that records the grouping (not associative: any other tree would show)."""
    return "(" + ",".join(map(str, parts)) + ")"


@pytest.mark.parametrize("n, split_every, tree", [
    (1, 8, "(0)"),
    (8, 8, "(0,1,2,3,4,5,6,7)"),
    (10, 4, "((0,1,2,3),(4,5,6,7),(8,9))"),
    (9, 2, "((((0,1),(2,3)),((4,5),(6,7))),(((8))))"),
])
def test_tree_reduce_groups_consecutive_parts_level_by_level(n, split_every, tree):
    # The float results of every reduction depend on this exact tree.
    assert tree_reduce([delayed(i) for i in range(n)], _nest, split_every).compute() == tree


def test_tree_reduce_keeps_every_delayed_leaf_while_the_collector_runs():
    # A delayed leaf builds a new graph on every __dask_graph__() call; when a garbage
    # collection freed one mid-merge, the next could get its id and be skipped as "already
    # merged", leaving its layer out (a KeyError at compute, about one graph in five here).
    import gc

    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        for _ in range(50):
            out = tree_reduce([delayed(i) for i in range(50)], sum).compute(scheduler="sync")
            assert out == sum(range(50))
    finally:
        gc.set_threshold(*thresholds)


def _graph_size(obj):
    return len(obj.__dask_graph__().cull({obj.key}))


def test_standalone_reduction_validates_each_block_inside_its_kernel_task(data):
    X, y, w = data
    b = as_blocks(da.from_array(X, chunks=10), da.from_array(y, chunks=10),
                  da.from_array(w, chunks=10))
    fused = tree_reduce(b.map_parts(stats, fuse=True))
    separate = tree_reduce(b.map_parts(stats))
    # 11 blocks: X, y and w chunks (33 keys, the from_array sources 3 more), 11 block tasks and
    # 2 + 1 combines; without fusion 11 more validation tasks.
    assert _graph_size(separate) - _graph_size(fused) == b.npartitions
    out, ref = dask.compute(fused, separate)
    assert np.array_equal(out["sum"], ref["sum"]) and out["w"] == ref["w"]
    # Validation still runs (and fails clearly) inside a fused task.
    Xbad = X.copy()
    Xbad[57, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        as_blocks(da.from_array(Xbad, chunks=10)).map_reduce(stats)


def test_persisted_blocks_are_referenced_not_recomputed(data):
    X, y, _ = data
    b = as_blocks(da.from_array(X, chunks=10), da.from_array(y, chunks=10)).persist()
    parts = b.map_parts(stats, fuse=True)
    graph = parts[0].__dask_graph__()
    deps = {k for p in parts for k in graph.layers[p.__dask_layers__()[0]][p.key].dependencies}
    assert deps == {p.key for p in b.parts}


def test_public_block_core_names_and_former_lengths_name(data):
    from dataclasses import replace

    from dml._blocks import Blocks, compute_lengths, extract_block, map_delayed

    X, y, _ = data
    b = as_blocks(X, y, block_rows=40)
    assert list(b.known_lengths) == [40, 40, 23]
    # dataclasses.replace with the former field name still works (callers being migrated).
    c = replace(b, parts=b.parts[:2], _lengths=np.array([40, 40]))
    assert isinstance(c, Blocks) and list(c.known_lengths) == [40, 40] and c._lengths is not None
    assert [a.tolist() for a in compute_lengths(da.from_array(X, chunks=50))] == [[50, 50, 3]]
    xb, yb, wb = extract_block(X[:3], y[:3], None, BlockSpec(), 0)
    assert xb.shape == (3, 4) and wb is None
    assert dask.compute(*map_delayed(len, b.parts)) == (3, 3, 3)


def _scaled(x, factor):
    """Module-level map_blocks kernel."""
    return x[:, 0] * factor


def test_tasks_are_named_after_the_kernel_and_the_combine(data):
    """Dask groups tasks by the first word of their keys (dashboard, progress, task groups):
    that word names the kernel a task runs, not the block core's helper around it."""
    from functools import partial

    from dask.utils import key_split

    X, y, w = data
    b = as_blocks(da.from_array(X, chunks=30), da.from_array(y, chunks=30))
    assert key_split(b.map_reduce(stats, compute_now=False).key) == "tree-add-reduce"
    assert key_split(b.map_reduce(stats, combine=partial(tree_add), compute_now=False).key) \
        == "tree-add-reduce"
    assert {key_split(p.key) for p in b.map_parts(partial(stats))} == {"stats-block"}
    out = b.map_blocks(_scaled, 2.0, dtype=np.float64)
    assert "scaled-block" in {key_split(k) for k in out.__dask_graph__()}
    np.testing.assert_array_equal(out.compute(), X[:, 0] * 2.0)
    # Still fresh keys: a repeated computation never re-submits a key still being released.
    assert b.map_reduce(stats, compute_now=False).key != b.map_reduce(stats, compute_now=False).key


def test_a_fit_runs_tasks_named_after_its_kernels(inprocess_client, data):
    from dask.utils import key_split
    from distributed import get_task_stream

    from dml.naive_bayes import GaussianNB

    X, y, _ = data
    # Keys of their own (name=False), not the content's token shared with earlier tests' blocks
    # of the same data, which may still be in the cluster's memory (released asynchronously).
    # Seen once in CI: only 'concatenate' tasks in the stream; the cause is not confirmed.
    Xd, yd = da.from_array(X, chunks=30, name=False), da.from_array(y, chunks=30, name=False)
    with get_task_stream(inprocess_client) as ts:
        model = GaussianNB().fit(Xd, yd)
    assert {key_split(t["key"]) for t in ts.data} >= {"gaussian-block-block",
                                                       "gaussian-combine-reduce"}
    # Prediction: Dask fuses each input chunk, its check and the kernel into one task whose
    # name joins theirs; the kernel's name must survive the join.
    with get_task_stream(inprocess_client) as ts:
        pred = model.predict(Xd).compute()
    names = [key_split(t["key"]) for t in ts.data]
    assert sum("-nb-output-block-" in n for n in names) == Xd.numblocks[0], names
    np.testing.assert_array_equal(pred, GaussianNB().fit(X, y).predict(X))


def _unreachable(obj) -> list:
    """Keys in the graph that computing ``obj`` submits (after dask's own culling) that its key
    does not need, walking task dependencies as the distributed scheduler does."""
    from dask._task_spec import convert_legacy_graph

    dsk = convert_legacy_graph(dict(obj.__dask_optimize__(obj.__dask_graph__(), [obj.key])))
    seen, todo = set(), [obj.key]
    while todo:
        k = todo.pop()
        if k in seen or k not in dsk:
            continue
        seen.add(k)
        todo.extend(dsk[k].dependencies)
    return [k for k in dsk if k not in seen]


@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("held_out", [[3], [0, 2, 3, 5]])
@pytest.mark.parametrize("with_y", [False, True])
def test_block_graphs_carry_only_the_tasks_they_need(fuse, held_out, with_y):
    # Some of the blocks of a larger array (a held-out split), with the block tasks fused into
    # the kernel's tasks or not. A task left in a graph that nothing reads is not harmless:
    # distributed does not cull such graphs, and when that task is still on the scheduler
    # while its inputs are gone, the submission fails half-way and a later computation trips
    # the scheduler's "assert ts.priority" (seen in `dml demo`).
    from dml._graph import tree_reduce

    X = da.random.default_rng(0).random((60, 3), chunks=(10, 3))
    y = da.arange(60, chunks=10).astype(float)
    blocks = as_blocks(X.blocks[held_out], y.blocks[held_out] if with_y else None)
    parts = blocks.map_parts(lambda X, y, w: float(X.sum() + (y.sum() if with_y else 0.0)),
                             fuse=fuse)
    assert len(parts) == len(held_out)
    for p in parts:
        assert _unreachable(p) == []
    total = tree_reduce(parts, split_every=2)
    assert _unreachable(total) == []
    expected = float(X.blocks[held_out].sum() + (y.blocks[held_out].sum() if with_y else 0.0))
    assert total.compute(scheduler="sync") == pytest.approx(expected)


def test_frozen_heap_nests_and_leaves_a_callers_freeze_alone():
    # SGD fits freeze the objects that exist on entry (no full collection walks them while the
    # fit builds its graphs) and unfreeze at the outermost exit; a process that froze objects
    # itself keeps its freeze.
    import gc

    from dml._graph import frozen_heap

    if gc.get_freeze_count():
        pytest.skip("this process froze objects already")
    # (Counts only as > 0: frozen objects freed by reference counting leave the count.)
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        with frozen_heap():
            assert gc.get_freeze_count() > 0
        assert gc.get_freeze_count() > 0  # the inner exit does not unfreeze
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        with frozen_heap():
            pass
        assert gc.get_freeze_count() > 0  # the caller's freeze is kept
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("n_blocks", [1, 8, 64, 256])
def test_reduce_in_groups_is_map_reduce_with_one_task_per_group(inprocess_client, monkeypatch,
                                                                n_blocks):
    """A first pass over blocks not held yet, one task per aligned group of consecutive blocks
    (each validating its blocks and reducing them over its own subtree): the result of one task
    per block bit for bit, on values spread over 16 orders of magnitude (any other summation
    order would show), and a bad value still fails clearly inside a group's task."""
    from dml import _block_groups

    monkeypatch.setattr(_block_groups, "default_n_groups", lambda: 4)
    rng = np.random.default_rng(n_blocks)
    X = rng.normal(size=(7 * n_blocks, 3)) * 10.0 ** rng.integers(-8, 8, size=(7 * n_blocks, 1))
    y = rng.integers(0, 3, size=len(X))
    w = rng.random(len(X))
    b = as_blocks(da.from_array(X, chunks=(7, 3)), da.from_array(y, chunks=7),
                  da.from_array(w, chunks=7))
    want = b.map_reduce(stats)
    lazy = b.reduce_in_groups(stats, compute_now=False)
    size = _block_groups.group_size(n_blocks, 4)
    group_tasks = [k for k in lazy.__dask_graph__()
                   if isinstance(k, tuple) and k[0].startswith("group-reduce-group")]
    assert len(group_tasks) == (0 if size == 1 else n_blocks // size)
    got = lazy.compute()
    np.testing.assert_array_equal(got["sum"], want["sum"])
    assert (got["n"], got["y"], got["w"]) == (want["n"], want["y"], want["w"])
    X[7 * n_blocks - 3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        as_blocks(da.from_array(X, chunks=(7, 3))).reduce_in_groups(stats)
