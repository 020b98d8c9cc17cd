"""Cross-validation splitters and ``train_test_split`` for local and Dask collections.

Folds are defined by **global row positions**, exactly as scikit-learn defines them: the splitters
below are scikit-learn's ``KFold``, ``StratifiedKFold`` and ``ShuffleSplit`` (same parameters, same
random draws), fed with the number of rows of a Dask collection instead of the collection itself.
The train/test indices are therefore identical to scikit-learn's on the same rows, whatever the
partitioning of the data or the number of workers (partition-independent and deterministic for an
integer ``random_state``).

What reaches the client: the row count (from known chunk sizes, else one ``len`` per partition)
and, for ``StratifiedKFold`` and ``train_test_split(stratify=...)``, the label vector ``y`` (one
value per row, as scikit-learn's algorithm needs every row's class); for the group splitters
(``GroupKFold``, ``LeaveOneGroupOut``, ...) the ``groups`` vector; X is never gathered. Any other
scikit-learn splitter works on Dask data through :func:`split_indices`, which hands it the row
count, ``y`` and ``groups`` (the vectors it may need) instead of the collections. The
index arrays themselves are O(n) integers on the client, as in scikit-learn. Selecting the rows
of a Dask collection (:func:`take_rows`) is lazy and keeps the source's partitions: each block
keeps the selected rows of the matching source block.

See docs/model_selection.md.
"""
from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
from dask import delayed
from sklearn import model_selection as _skms
from sklearn.utils import _safe_indexing

from dml._blocks import compute_lengths, with_known_rows, is_dask
from dml.model_selection._kernels import _iloc

__all__ = ["KFold", "StratifiedKFold", "ShuffleSplit", "GroupKFold", "StratifiedGroupKFold",
           "LeaveOneGroupOut", "GroupShuffleSplit", "train_test_split", "check_cv",
           "split_indices", "take_rows", "n_rows"]


def n_rows(X) -> int:
    """Number of rows of a local or Dask collection (no data gathered)."""
    if isinstance(X, da.Array):
        if not any(np.isnan(c) for c in X.chunks[0]):
            return int(X.shape[0])
        return int(compute_lengths(X)[0].sum())
    if isinstance(X, (dd.DataFrame, dd.Series)):
        return int(compute_lengths(X)[0].sum())
    if hasattr(X, "shape"):
        return int(X.shape[0])
    return len(X)


def _local_labels(y):
    """y as a NumPy vector: only the labels (one value per row) come to the client."""
    if y is None:
        return None
    if is_dask(y):
        y = y.compute()
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    return y


def _placeholder(X, y):
    """A zero-width stand-in of X with X's row count, for scikit-learn's split logic."""
    if X is None:
        return None
    return np.empty((n_rows(X), 0))


def _uses_groups(cv) -> bool:
    """Whether a splitter reads ``groups`` (scikit-learn marks those with GroupsConsumerMixin)."""
    return isinstance(cv, _skms._split.GroupsConsumerMixin)


def _local_split_args(cv, X, y, groups, needs_y: bool):
    """(X, y, groups) for scikit-learn's split logic when any of them is a Dask collection.

    X becomes a zero-width placeholder with its row count; y comes to the client only when the
    splitter may read it; the groups only when it reads them (a splitter that ignores them gets
    a placeholder, so scikit-learn still warns that they are ignored).
    """
    name = type(cv).__name__
    for what, v in (("y", y), ("groups", groups)):
        if isinstance(v, str):
            raise TypeError(f"{name}.split: pass {what} as an array, not a column name; select "
                            "the column first, e.g. df[name]")
    if not (is_dask(X) or is_dask(y) or is_dask(groups)):
        return X, y, groups
    X = _placeholder(X, y)
    y = _local_labels(y) if needs_y else None
    if groups is not None:
        groups = _local_labels(groups) if _uses_groups(cv) else np.zeros(n_rows(X), np.int8)
    return X, y, groups


class _DaskSplitMixin:
    """``split`` accepts Dask collections: scikit-learn's indices from the row count (and y)."""

    _needs_y = False

    def split(self, X, y=None, groups=None):
        """Generate (train, test) row indices; NumPy integer arrays equal to scikit-learn's."""
        X, y, groups = _local_split_args(self, X, y, groups, self._needs_y)
        return super().split(X, y, groups)


def split_indices(cv, X, y=None, groups=None) -> list:
    """The ``(train, test)`` row indices of splitter ``cv`` on local or Dask collections.

    dml's splitters take Dask collections themselves; any other splitter (scikit-learn's
    ``TimeSeriesSplit``, ``PredefinedSplit``, ...) is given X's row count and, as NumPy, ``y``
    and the ``groups`` it reads, so its indices equal those it gives on the same local rows.

    Examples
    --------
    >>> import dask.array as da
    >>> from sklearn.model_selection import LeaveOneGroupOut as SkLeaveOneGroupOut
    >>> X = da.zeros((6, 2), chunks=3)
    >>> groups = da.from_array([0, 0, 1, 1, 2, 2], chunks=3)
    >>> [test.tolist() for _, test in split_indices(SkLeaveOneGroupOut(), X, None, groups)]
    [[0, 1], [2, 3], [4, 5]]
    """
    if isinstance(cv, _DaskSplitMixin):
        return list(cv.split(X, y, groups))
    X, y, groups = _local_split_args(cv, X, y, groups, needs_y=True)
    return list(cv.split(X, y, groups))


class KFold(_DaskSplitMixin, _skms.KFold):
    """K-fold splitter: scikit-learn's ``KFold`` on local and Dask collections.

    Fold ``i`` is a contiguous range of global row positions (after one permutation of all rows
    when ``shuffle=True``); fold sizes differ by at most one. The indices equal scikit-learn's
    for the same ``n_splits``, ``shuffle`` and ``random_state``, whatever the partitioning.

    Examples
    --------
    >>> import numpy as np
    >>> [test.tolist() for _, test in KFold(3).split(np.zeros((7, 2)))]
    [[0, 1, 2], [3, 4], [5, 6]]
    """


class StratifiedKFold(_DaskSplitMixin, _skms.StratifiedKFold):
    """Stratified k-fold: scikit-learn's ``StratifiedKFold`` on local and Dask collections.

    Each class is dealt over the folds as scikit-learn does, so per-fold class counts differ by at
    most one. For Dask input the label vector y is brought to the client (X never is).

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0, 0, 0, 1, 1, 1])
    >>> [y[test].tolist() for _, test in StratifiedKFold(3).split(np.zeros((6, 1)), y)]
    [[0, 1], [0, 1], [0, 1]]
    """

    _needs_y = True


class ShuffleSplit(_DaskSplitMixin, _skms.ShuffleSplit):
    """Random permutation splits: scikit-learn's ``ShuffleSplit`` on local and Dask collections.

    Examples
    --------
    >>> import numpy as np
    >>> train, test = next(ShuffleSplit(1, test_size=2, random_state=0).split(np.zeros((6, 1))))
    >>> len(train), len(test)
    (4, 2)
    """


class GroupKFold(_DaskSplitMixin, _skms.GroupKFold):
    """K-fold with non-overlapping groups: scikit-learn's ``GroupKFold`` on local and Dask data.

    Every group falls in exactly one test fold. For Dask input the ``groups`` vector (one value
    per row) is brought to the client, X never is; the indices equal scikit-learn's.

    Examples
    --------
    >>> import numpy as np
    >>> groups = np.array([0, 0, 1, 1, 1, 2])
    >>> [groups[test].tolist() for _, test in GroupKFold(3).split(np.zeros((6, 1)), None, groups)]
    [[1, 1, 1], [0, 0], [2]]
    """


class StratifiedGroupKFold(_DaskSplitMixin, _skms.StratifiedGroupKFold):
    """Stratified k-fold with non-overlapping groups: scikit-learn's ``StratifiedGroupKFold``.

    For Dask input the labels y and the groups come to the client (X never does).

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0, 0, 1, 1, 0, 1]); groups = np.array([0, 0, 1, 1, 2, 2])
    >>> len(list(StratifiedGroupKFold(3).split(np.zeros((6, 1)), y, groups)))
    3
    """

    _needs_y = True


class LeaveOneGroupOut(_DaskSplitMixin, _skms.LeaveOneGroupOut):
    """One test fold per group: scikit-learn's ``LeaveOneGroupOut`` on local and Dask data.

    Examples
    --------
    >>> import numpy as np
    >>> groups = np.array(["a", "b", "a", "c"])
    >>> [test.tolist() for _, test in LeaveOneGroupOut().split(np.zeros((4, 1)), None, groups)]
    [[0, 2], [1], [3]]
    """


class GroupShuffleSplit(_DaskSplitMixin, _skms.GroupShuffleSplit):
    """Random splits of whole groups: scikit-learn's ``GroupShuffleSplit`` on local and Dask data.

    Examples
    --------
    >>> import numpy as np
    >>> groups = np.array([0, 0, 1, 1, 2, 2])
    >>> splitter = GroupShuffleSplit(n_splits=1, test_size=1, random_state=0)
    >>> len(next(splitter.split(np.zeros((6, 1)), None, groups))[1])
    2
    """


def check_cv(cv=5, y=None, *, classifier: bool = False):
    """Turn ``cv`` (int, splitter, iterable of splits) into a splitter, as scikit-learn does.

    An int gives :class:`StratifiedKFold` for classifiers with a binary/multiclass y, else
    :class:`KFold` (scikit-learn's rule). Other splitters and iterables are used as given.
    """
    if cv is None:
        cv = 5
    if isinstance(cv, (int, np.integer)):
        if classifier and y is not None:
            from sklearn.utils.multiclass import type_of_target

            labels = _local_labels(y)
            if type_of_target(labels) in ("binary", "multiclass"):
                return StratifiedKFold(int(cv))
        return KFold(int(cv))
    if hasattr(cv, "split") and hasattr(cv, "get_n_splits"):
        return cv
    return _skms.check_cv(cv, None, classifier=classifier)


# --------------------------------------------------------------------------------------------
# Row selection
# --------------------------------------------------------------------------------------------

def take_rows(X, indices):
    """Rows ``indices`` of X: NumPy/pandas as scikit-learn's ``_safe_indexing``; Dask lazily.

    For Dask input the indices are sorted (rows keep their original order) and every output
    block holds the selected rows of one source block, so the partitioning follows the source.
    """
    if X is None or isinstance(X, str):
        return X
    if not is_dask(X):
        return _safe_indexing(X, indices)
    idx = np.sort(np.asarray(indices, dtype=np.int64))
    if isinstance(X, da.Array):
        if any(np.isnan(c) for c in X.chunks[0]):
            X = with_known_rows(X, compute_lengths(X)[0])
        lengths = np.asarray(X.chunks[0], dtype=np.int64)
    else:
        lengths = compute_lengths(X)[0]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    cuts = np.searchsorted(idx, bounds)
    local = [idx[cuts[i]:cuts[i + 1]] - bounds[i] for i in range(len(lengths))]
    if isinstance(X, da.Array):
        parts = X.to_delayed(optimize_graph=False)
        parts = parts[(slice(None),) + (0,) * (X.ndim - 1)] if X.ndim > 1 else parts
        tail = X.shape[1:]
        if X.ndim > 1 and len(X.chunks[1]) > 1:
            X = X.rechunk({i: -1 for i in range(1, X.ndim)})
            parts = X.to_delayed(optimize_graph=False)[(slice(None),) + (0,) * (X.ndim - 1)]
        pieces = [da.from_delayed(delayed(_iloc, pure=True)(p, li), shape=(len(li), *tail),
                                  dtype=X.dtype, meta=X._meta)
                  for p, li in zip(parts, local)]
        return da.concatenate(pieces, axis=0) if len(pieces) > 1 else pieces[0]
    parts = X.to_delayed(optimize_graph=False)
    # verify_meta must stay on: without it Dask (2026.8) aliases the delayed keys, and on a
    # distributed cluster any later .to_dask_array()/.values of the result fails with
    # FutureCancelledError "lost dependencies". The check itself is one dtype comparison per part.
    return dd.from_delayed([delayed(_iloc, pure=True)(p, li) for p, li in zip(parts, local)],
                           meta=X._meta)


def train_test_split(*arrays, test_size=None, train_size=None, random_state=None,
                     shuffle=True, stratify=None, blockwise=False):
    """Split arrays into random train and test subsets: scikit-learn's rule, Dask-aware.

    The row indices are scikit-learn's (``ShuffleSplit``/``StratifiedShuffleSplit`` with the
    same ``test_size``, ``train_size`` and ``random_state``; default test size 0.25), so the
    split equals ``sklearn.model_selection.train_test_split`` and does not depend on the
    partitioning. Dask inputs give lazy Dask outputs that keep the source's partitions (rows in
    their original order; scikit-learn returns them in shuffled order). ``stratify`` (labels) is
    brought to the client when it is a Dask collection; X never is.

    ``blockwise=True`` (Dask arrays and dataframes only) splits each partition where it lives:
    every row goes to the test part with probability ``test_size``, drawn from its partition's
    own random stream (seeded by ``random_state`` and the partition number). Nothing reaches the
    client, not even the row count; the test part holds about ``test_size`` of the rows; the
    split depends only on the data, its partitioning and ``random_state``. The inputs must have
    the same row partitions (the same rows fall out of X and y); array outputs have unknown
    chunk sizes. ``train_size``, ``stratify`` and ``shuffle=False`` do not apply.

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.arange(20).reshape(10, 2), np.arange(10)
    >>> X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    >>> y_test.tolist()
    [2, 8, 4]

    Blockwise on Dask data (aligned X and y stay aligned):

    >>> import dask.array as da
    >>> Xd, yd = da.from_array(X, chunks=(4, 2)), da.from_array(y, chunks=4)
    >>> parts = train_test_split(Xd, yd, test_size=0.3, random_state=0, blockwise=True)
    >>> X_test, y_test = parts[1].compute(), parts[3].compute()
    >>> bool((X_test[:, 0] // 2 == y_test).all())
    True
    """
    if not arrays:
        raise ValueError("At least one array required as input")
    if blockwise:
        return _blockwise_split(arrays, test_size, train_size, random_state, shuffle, stratify)
    n = n_rows(arrays[0])
    for a in arrays[1:]:
        if a is not None and n_rows(a) != n:
            raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                             f"[{n}, {n_rows(a)}]")
    if not shuffle:
        if stratify is not None:
            raise ValueError("Stratified train/test split is not implemented for shuffle=False")
        from sklearn.model_selection._split import _validate_shuffle_split

        n_train, n_test = _validate_shuffle_split(n, test_size, train_size, default_test_size=0.25)
        train, test = np.arange(n_train), np.arange(n_train, n_train + n_test)
    else:
        if test_size is None and train_size is None:
            test_size = 0.25
        if stratify is not None:
            labels = _local_labels(stratify)
            splitter = _skms.StratifiedShuffleSplit(test_size=test_size, train_size=train_size,
                                                    random_state=random_state)
            train, test = next(splitter.split(np.empty((n, 0)), labels))
        else:
            splitter = _skms.ShuffleSplit(test_size=test_size, train_size=train_size,
                                          random_state=random_state)
            train, test = next(splitter.split(np.empty((n, 0))))
    out = []
    for a in arrays:
        out.extend([take_rows(a, train), take_rows(a, test)])
    return out


# --------------------------------------------------------------------------------------------
# Blockwise split: each partition decides its own rows
# --------------------------------------------------------------------------------------------

# The stream the ``dml train`` command has always split with, kept so that its held-out rows
# (and so its models and metrics) stay as they were.
_BLOCKWISE_PURPOSE = "dml.cli.split"


def _test_mask(n: int, seed: int, index: int, test_size: float) -> np.ndarray:
    from dml._blocks import block_rng

    return block_rng(seed, _BLOCKWISE_PURPOSE, index).random(n) < test_size


def _split_partition(part, seed, test_size, test, partition_info=None):
    index = partition_info["number"] if partition_info else 0
    mask = _test_mask(len(part), seed, index, test_size)
    return part[mask if test else ~mask]


def _split_block(block, seed, test_size, test, block_id=None):
    # shape[0], not len(): a CSR block (sparse X) has no len.
    mask = _test_mask(block.shape[0], seed, block_id[0], test_size)
    return block[mask if test else ~mask]


def _blockwise_split(arrays, test_size, train_size, random_state, shuffle, stratify):
    from dml._blocks import seed_from

    if train_size is not None or stratify is not None or not shuffle:
        raise ValueError("train_test_split(blockwise=True) draws each row's side independently "
                         "with probability test_size; train_size, stratify and shuffle=False "
                         "do not apply. Use blockwise=False for scikit-learn's exact split")
    test_size = 0.25 if test_size is None else test_size
    if isinstance(test_size, (bool, np.bool_)) or not isinstance(test_size, (float, np.floating)) \
            or not 0 < test_size < 1:
        raise ValueError(f"train_test_split(blockwise=True) needs test_size as a fraction "
                         f"between 0 and 1 (exclusive), got {test_size!r}")
    nblocks = set()
    for a in arrays:
        if not isinstance(a, (da.Array, dd.DataFrame, dd.Series)):
            raise TypeError(f"train_test_split(blockwise=True) splits Dask arrays and dataframes "
                            f"partition by partition; got {type(a).__name__}. Convert it with "
                            "dask.array.from_array or dask.dataframe.from_pandas first")
        nblocks.add(a.numblocks[0] if isinstance(a, da.Array) else a.npartitions)
    if len(nblocks) > 1:
        raise ValueError(f"train_test_split(blockwise=True) needs inputs with the same row "
                         f"partitions; got {sorted(nblocks)} partitions. Rechunk them alike")
    seed = seed_from(random_state)
    out = []
    for a in arrays:
        for test in (False, True):
            if isinstance(a, da.Array):
                chunks = ((np.nan,) * a.numblocks[0],) + a.chunks[1:]
                out.append(a.map_blocks(_split_block, seed, float(test_size), test,
                                        chunks=chunks, dtype=a.dtype, meta=a._meta))
            else:
                out.append(a.map_partitions(_split_partition, seed, float(test_size), test,
                                            meta=a._meta))
    return out
