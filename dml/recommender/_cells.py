"""The ratings of a matrix factorisation as B×B (user block, item block) cells.

A fit first reads every partition once for its ids (:func:`id_stats`, merged in partition order
by :func:`merge_stats` into sorted id tables), then :func:`build_cells` splits each partition's
ratings into the B×B cells and sorts every cell by (user, item), so a cell's content does not
depend on how the input was partitioned. The cells stay on the workers when they fit; otherwise
they are written as files under a shared spill directory and tasks receive their paths. Ids
(integers or strings) map to dense indices by :func:`lookup`.
"""
from __future__ import annotations

import contextlib
import math
import os
import socket
import threading

import dask
import numpy as np
import pandas as pd

from dml.recommender import _kernels
from dml.recommender._solvers import cell_data, predict_dense, write_cell_file

__all__ = ["as_ids", "lookup", "id_stats", "merge_stats", "build_cells", "val_partition",
           "predict_frame", "bounds"]


def as_ids(values) -> np.ndarray:
    a = np.asarray(values)
    if a.dtype.kind in "OUS":
        a = a.astype(str)
    elif a.dtype.kind not in "iub":
        if a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        else:
            raise ValueError("user and item ids must be integers or strings; got values of "
                             f"dtype {a.dtype}")
    return a


def lookup(table: np.ndarray, values) -> np.ndarray:
    """Dense index of each value in the sorted ``table``; -1 for unknown ids."""
    v = np.asarray(values)
    if table.dtype.kind == "U":
        v = v.astype(str)
    elif v.dtype.kind in "OUS":
        return np.full(len(v), -1, dtype=np.int64)
    if len(table) == 0:
        return np.full(len(v), -1, dtype=np.int64)
    lo, hi = (int(table[0]), int(table[-1])) if table.dtype.kind == "i" else (0, -1)
    if v.dtype.kind == "i" and hi - lo < 8 * len(table) + 1024:
        # Integer ids over a compact range (the usual 0..n-1 or 1..n): a dense map is one gather
        # per value instead of a binary search, and gives the same indices.
        dense = np.full(hi - lo + 1, -1, dtype=np.int64)
        dense[table.astype(np.int64) - lo] = np.arange(len(table))
        v = v.astype(np.int64, copy=False)
        known = (v >= lo) & (v <= hi)
        out = np.full(len(v), -1, dtype=np.int64)
        out[known] = dense[v[known] - lo]
        return out
    pos = np.searchsorted(table, v)
    pos = np.minimum(pos, len(table) - 1)
    return np.where(table[pos] == v, pos, -1).astype(np.int64)


def id_stats(df: pd.DataFrame, with_rating: bool = True):
    r = df["r"].to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(r)):
        raise ValueError("ratings contain NaN or infinity; drop or impute those rows before "
                         "fitting MatrixFactorization")
    return (_unique(as_ids(df["u"].to_numpy())), _unique(as_ids(df["i"].to_numpy())),
            float(r.sum()), int(len(r)))


def _unique(a):
    """``np.unique(a)``; by counting for integers over a compact range (the usual ids)."""
    if a.dtype.kind == "i" and len(a):
        lo, hi = int(a.min()), int(a.max())
        if hi - lo < 4 * len(a) + 1024:
            return (np.flatnonzero(np.bincount(a.astype(np.int64) - lo)) + lo).astype(a.dtype)
    return np.unique(a)


def merge_stats(parts):
    users = parts[0][0]
    items = parts[0][1]
    for p in parts[1:]:
        if (users.dtype.kind == "U") != (p[0].dtype.kind == "U") or \
                (items.dtype.kind == "U") != (p[1].dtype.kind == "U"):
            raise TypeError("user (or item) ids mix strings and numbers across partitions; "
                            "cast the id column to one type")
        users = np.union1d(users, p[0])
        items = np.union1d(items, p[1])
    return users, items, math.fsum(p[2] for p in parts), sum(p[3] for p in parts)


def _split_partition(df, user_ids, item_ids, ub, ib, B):
    u = lookup(user_ids, as_ids(df["u"].to_numpy()))
    i = lookup(item_ids, as_ids(df["i"].to_numpy()))
    r = df["r"].to_numpy(dtype=np.float64)
    cell = (np.searchsorted(ub, u, side="right") - 1) * B + np.searchsorted(ib, i, side="right") - 1
    # The same stable order, by radix sort (NumPy's stable sort of 16-bit integers).
    order = np.argsort(cell.astype(np.uint16) if B * B <= 2**16 else cell, kind="stable")
    cuts = np.searchsorted(cell[order], np.arange(B * B + 1))
    return tuple((u[order[a:b]], i[order[a:b]], r[order[a:b]])
                 for a, b in zip(cuts[:-1], cuts[1:]))


def _gather_cell(pieces):
    """One cell from its piece of every partition (only those pieces travel to the task)."""
    return _sorted_cell([np.concatenate([p[k] for p in pieces]) for k in range(3)])


def _sorted_cell(cols):
    """The list [u, i, r] sorted by (u, i, r), column by column: only one column exists twice
    at any time."""
    order = _order_by_pair_then_rating(*cols)
    for k in range(3):
        cols[k] = cols[k][order]
    return tuple(cols)


def _order_by_pair_then_rating(u, i, r):
    """``np.lexsort((r, i, u))``, by a counting sort on (u, i) when their range is compact."""
    if len(u) == 0:
        return np.zeros(0, dtype=np.int64)
    u0, i0 = int(u.min()), int(i.min())
    n_i = int(i.max()) - i0 + 1
    n_keys = (int(u.max()) - u0 + 1) * n_i
    if n_keys > 4 * len(u) + 2**16:
        return np.lexsort((r, i, u))
    return _kernels.sort_by_key_then_value((u - u0) * n_i + (i - i0), r, n_keys)


def _write_cell(path, u, i, r):
    """u, i and r one after the other in the spill-file layout (no zip: .npz spent more time
    in its checksums than in reading)."""
    # Under a temporary name, then renamed: a task that runs twice (a retry after a lost worker)
    # never leaves a half-written file under the final name.
    tmp = f"{path}.{os.getpid()}-{threading.get_ident()}.tmp"
    with open(tmp, "wb") as f:
        write_cell_file(f, (u, i, r))
    os.replace(tmp, path)


def _not_shared(path):
    return (f"{path!r} does not exist on worker host {socket.gethostname()!r}. "
            "MatrixFactorization writes its (user block, item block) cells to spill_dir when the "
            "ratings do not fit in the cluster's memory, and every worker reads cells written by "
            "the others: spill_dir must be a directory that the client and all workers see at "
            "the same path (a local directory on one machine, a shared filesystem such as NFS on "
            "several). Pass spill_dir='/shared/path', or persist=True if the ratings fit in the "
            "workers' memory.")


def _piece_path(root, c, index):
    return os.path.join(root, f"piece-{c:05d}-{index:06d}.cell")


def _spill_partition(df, user_ids, item_ids, ub, ib, B, root, index):
    """Split one partition into its B×B cell pieces and write each non-empty one to ``root``;
    returns which pieces exist, one bit per cell (``np.packbits``: B²/8 bytes).

    One small result per partition, not one per piece: the cell tasks derive the pieces' paths
    from it (:func:`_piece_path`), so the graph has P + B² tasks instead of P × B² (182,000 at
    P = 290 partitions and B = 25, tens of minutes of scheduling).
    """
    if not os.path.isdir(root):
        raise FileNotFoundError(f"spill directory {_not_shared(root)}")
    written = np.zeros(B * B, dtype=bool)
    for c, (u, i, r) in enumerate(_split_partition(df, user_ids, item_ids, ub, ib, B)):
        if len(r):
            _write_cell(_piece_path(root, c, index), u, i, r)
            written[c] = True
    return np.packbits(written)


def _piece_table(*written):
    """The partitions' :func:`_spill_partition` bits stacked (partition × packed cells): every
    cell task reads this one small table instead of depending on all P partition tasks."""
    return np.stack(written)


def _spill_cell(table, c, root, path, u0, i0, n_users, n_items):
    """Merge cell ``c``'s pieces (the partitions whose bit ``c`` is set in ``table``, in
    partition order) into its sorted cell file (as :func:`_gather_cell`), remove the pieces;
    returns the cell's path and its counts."""
    if os.path.exists(path):
        # A retry after the pieces were removed: the renamed cell file is complete.
        cell = cell_data(path)
    else:
        has = (table[:, c // 8] >> (7 - c % 8)) & 1  # bit c of every row (packbits' order)
        found = [_piece_path(root, c, k) for k in np.flatnonzero(has)]
        for p in found:
            if not os.path.exists(p):
                raise FileNotFoundError(f"cell piece {_not_shared(p)}")
        if found:
            pieces = [cell_data(p) for p in found]
            cols = [np.concatenate([p[k] for p in pieces]) for k in range(3)]
            del pieces  # before the sort: the cell exists once, not twice
            cell = _sorted_cell(cols)
        else:
            cell = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
        _write_cell(path, *cell)
        for p in found:
            os.remove(p)
    return path, _cell_counts(cell, u0, i0, n_users, n_items)


def _cell_counts(cell, u0, i0, n_users, n_items):
    """Ratings per user and per item of one cell (block-local: users u0.., items i0..)."""
    return (np.bincount(cell[0] - u0, minlength=n_users).astype(np.float64),
            np.bincount(cell[1] - i0, minlength=n_items).astype(np.float64))


def _seen_block(cells, lo, hi):
    pairs = [cell_data(c, 2) for c in cells]
    u = np.concatenate([p[0] for p in pairs])
    i = np.concatenate([p[1] for p in pairs])
    # np.lexsort((i, u)), by a counting sort on the block's users.
    order = _kernels.sort_by_key_then_value(u - lo, i, hi - lo)
    counts = np.bincount(u - lo, minlength=hi - lo) if hi > lo else np.zeros(0, dtype=np.int64)
    return counts, i[order]


def _row_workers(B: int) -> list[str] | None:
    """The worker each user block's cells are made on: block b on worker b mod W of the
    current distributed cluster (addresses sorted), or None without one.

    A DSGD sub-epoch trains the B cells (b, b + s): one per user block, so they run on
    different workers instead of waiting for each other on one, and a user block's factors
    stay on its worker from task to task (only item blocks travel). Placement only decides
    where tasks run, never what they compute.
    """
    from dml._block_groups import ask_scheduler_workers
    from dml.runtime import active_client

    client = active_client()
    if client is None or dask.base.get_scheduler() != client.get:
        return None
    try:
        workers = ask_scheduler_workers(client)
    except Exception:  # noqa: BLE001 - an optimisation only: let the scheduler place them
        return None
    workers = sorted(workers)
    return [workers[b % len(workers)] for b in range(B)] if workers else None


def build_cells(parts, val, users, items, ub, ib, spill, remember):
    """The B² cells of the ratings, persisted on the workers (``spill`` None) or written as
    files under ``spill``; returns (cells, val, n_u, n_i, seen) with the ratings per user and
    per item and, with ``remember``, each user block's seen pairs."""
    B = len(ub) - 1
    d_users, d_items = dask.delayed(users, pure=True), dask.delayed(items, pure=True)

    def counts_of(cell, c):
        b, j = divmod(c, B)
        return dask.delayed(_cell_counts, pure=True)(cell, ub[b], ib[j], ub[b + 1] - ub[b],
                                                     ib[j + 1] - ib[j])

    def seen_of(cells):
        return [dask.delayed(_seen_block, pure=True)(cells[b * B:(b + 1) * B], ub[b], ub[b + 1])
                for b in range(B)] if remember else []

    if spill is None:
        # nout=B*B: one key per (partition, cell) piece, so a cell task fetches its own pieces
        # only. Passing the whole list of split partitions made every cell task pull the entire
        # data set to its worker (nothing gathers the full data to one process).
        split = [dask.delayed(_split_partition, pure=True, nout=B * B)(p, d_users, d_items, ub,
                                                                       ib, B)
                 for p in parts]
        rows = _row_workers(B)
        cells = []
        for c in range(B * B):
            where = (dask.annotate(workers=[rows[c // B]], allow_other_workers=True)
                     if rows else contextlib.nullcontext())
            with where:
                cells.append(dask.delayed(_gather_cell, pure=True)([sp[c] for sp in split]))
        counts = [counts_of(cells[c], c) for c in range(B * B)]
        seen = seen_of(cells)
        cells, val, counts, seen = dask.persist(cells, val, counts, seen)
        counts, seen = dask.compute(counts, seen)
    else:
        # Out of core: the cells live in files and every task receives a path, so no worker
        # holds more than the cells of its running tasks, and the validation rows are re-read
        # from their source on every pass instead of being persisted.
        written = [dask.delayed(_spill_partition, pure=True)(
            p, d_users, d_items, ub, ib, B, spill, k) for k, p in enumerate(parts)]
        table = dask.delayed(_piece_table, pure=True)(*written)
        done = []
        for c in range(B * B):
            b, j = divmod(c, B)
            done.append(dask.delayed(_spill_cell, pure=True)(
                table, c, spill, os.path.join(spill, f"cell-{c:05d}.cell"), ub[b], ib[j],
                ub[b + 1] - ub[b], ib[j + 1] - ib[j]))
        done = dask.compute(done)[0]
        cells = [d[0] for d in done]
        counts = [d[1] for d in done]
        seen = dask.compute(seen_of(cells))[0]
    n_u, n_i = np.zeros(ub[-1]), np.zeros(ib[-1])
    for c, (cu, ci) in enumerate(counts):
        b, j = divmod(c, B)
        n_u[ub[b]:ub[b + 1]] += cu
        n_i[ib[j]:ib[j + 1]] += ci
    return cells, val, n_u, n_i, seen


def val_partition(df, user_ids, item_ids):
    return (lookup(user_ids, as_ids(df["u"].to_numpy())),
            lookup(item_ids, as_ids(df["i"].to_numpy())), df["r"].to_numpy(dtype=np.float64))


def predict_frame(df, user_col, item_col, user_ids, item_ids, P, Q, bu, bi, mu):
    u = lookup(user_ids, as_ids(df[user_col].to_numpy()))
    i = lookup(item_ids, as_ids(df[item_col].to_numpy()))
    return predict_dense(u, i, P, Q, bu, bi, mu)


def bounds(n: int, B: int) -> np.ndarray:
    return np.linspace(0, n, B + 1).round().astype(np.int64)
