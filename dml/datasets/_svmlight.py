"""libsvm / svmlight files: read on the workers into CSR blocks, written one file per block.

A libsvm file has one sample per line: ``<label> [qid:<int>] <index>:<value> ...`` with
increasing feature indices and an optional ``# comment``. :func:`read_svmlight` cuts every file
into byte ranges of about ``blocksize`` bytes (whole files when compressed) and parses each range
on a worker with scikit-learn's parser, whose ``offset``/``length`` ranges are aligned to line
starts (a line cut by a range's end is read by that range and skipped by the next). Two
passes: a first one counts the rows and finds the smallest and largest feature index of every
range (so the row chunks, the number of features and whether the file counts from 0 or 1 are
known, and every line has been checked), the second one is the returned lazy arrays. A worker
holds one range at a time, so memory stays bounded by ``blocksize`` whatever the file size.
"""
from __future__ import annotations

import io
import operator
import os
from dataclasses import dataclass

import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask._task_spec import Task, TaskRef
from dask.highlevelgraph import HighLevelGraph

from dml._blocks import empty_csr
from dml._graph import compute, map_delayed, new_name
from dml._param_validation import Integral, Interval, StrOptions, validate

__all__ = ["read_svmlight", "dump_svmlight"]

#: Largest feature index scikit-learn's parser reads (a C int).
_MAX_INDEX = 2**31 - 1
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip")
_DEFAULT_BLOCKSIZE = 64 * 2**20


@dataclass(frozen=True)
class _Range:
    """Bytes [offset, offset + length) of one file (length -1: to the end)."""

    fs: object
    path: str
    offset: int
    length: int
    compression: str | None

    @property
    def name(self) -> str:
        try:
            return self.fs.unstrip_protocol(self.path)
        except Exception:  # noqa: BLE001 - only used in messages
            return self.path

    def open(self):
        f = self.fs.open(self.path, "rb")
        if self.compression is None:
            return f
        from fsspec.compression import compr
        return compr[self.compression](f, mode="rb")


# --------------------------------------------------------------------------------------------
# Parsing one range (on a worker)
# --------------------------------------------------------------------------------------------

def _line_start(f, pos: int) -> int:
    """Where the first line starting after byte ``pos - 1`` begins (0 for ``pos == 0``).

    Range ``[a, b)`` of the file holds the lines from ``_line_start(a)`` to ``_line_start(b)``:
    adjacent ranges meet at the same position, so every line is read exactly once, however
    long it is.
    """
    if pos <= 0:
        return 0
    f.seek(pos)
    f.readline()
    return f.tell()


def _range_bounds(r: _Range, f) -> tuple[int, int]:
    """(start, end) bytes of the lines of range ``r`` (end -1: to the end of the file)."""
    start = _line_start(f, r.offset)
    end = -1 if r.length < 0 else max(start, _line_start(f, r.offset + r.length))
    return start, end


def _parse(r: _Range, dtype, query_id: bool):
    """(X with the file's raw indices, y, qid) of the lines of range ``r``."""
    from sklearn.datasets import load_svmlight_file

    try:
        with r.open() as f:
            if r.offset == 0 and r.length < 0:
                # A whole file (compressed ones always): scikit-learn streams it.
                source = f
            else:
                # scikit-learn's own offset/length reading can read a line twice when a
                # comment or blank line crosses a range's end; the exact bytes of the
                # range's lines (bounded by the blocksize) are parsed instead.
                start, end = _range_bounds(r, f)
                f.seek(start)
                source = io.BytesIO(f.read() if end < 0 else f.read(end - start))
            out = load_svmlight_file(source, n_features=_MAX_INDEX + 1, dtype=dtype,
                                     zero_based=True, query_id=query_id)
    except (ValueError, OverflowError, UnicodeDecodeError, TypeError) as exc:
        raise _located_error(r, exc, one_based=False) from exc
    X, y = out[0], out[1]
    return sp.csr_matrix(X), np.asarray(y), (out[2] if query_id else None)


def _scan(r: _Range, dtype, query_id: bool):
    """(rows, entries, smallest index, largest index) of range ``r``."""
    X, _, _ = _parse(r, dtype, query_id)
    if X.nnz == 0:
        return X.shape[0], 0, _MAX_INDEX, -1
    return X.shape[0], X.nnz, int(X.indices.min()), int(X.indices.max())


def _load(r: _Range, dtype, query_id: bool, shift: int, n_features: int):
    X, y, q = _parse(r, dtype, query_id)
    indices = X.indices.astype(np.int32 if n_features <= _MAX_INDEX else np.int64) - shift
    X = sp.csr_matrix((X.data, indices, X.indptr), shape=(X.shape[0], n_features))
    return X, y, q


# --------------------------------------------------------------------------------------------
# Malformed lines: file and line number
# --------------------------------------------------------------------------------------------

def _line_problem(line: bytes, one_based: bool) -> str | None:
    """What is wrong with one line (None when scikit-learn's parser accepts it)."""
    hash_at = line.find(b"#")
    if hash_at >= 0:
        line = line[:hash_at]
    parts = line.split()
    if not parts:
        return None
    try:
        float(parts[0])
    except ValueError:
        return f"the label {parts[0].decode(errors='replace')!r} is not a number"
    features = parts[1:]
    if features and features[0].startswith(b"qid"):
        key, _, value = features[0].partition(b":")
        try:
            int(value)
        except ValueError:
            return f"the query id {features[0].decode(errors='replace')!r} is not qid:<int>"
        features = features[1:]
    prev = -1
    for item in features:
        text = item.decode(errors="replace")
        idx_s, colon, value = item.partition(b":")
        if not colon:
            return f"{text!r} is not <index>:<value>"
        try:
            idx = int(idx_s)
        except ValueError:
            return f"the feature index in {text!r} is not an integer"
        if idx < 0:
            return f"negative feature index in {text!r}"
        if idx > _MAX_INDEX:
            return f"feature index in {text!r} is larger than {_MAX_INDEX}"
        if one_based and idx == 0:
            return (f"feature index 0 in {text!r}, but zero_based=False says indices start "
                    "at 1")
        if idx <= prev:
            return (f"feature indices must be increasing and unique; {text!r} follows index "
                    f"{prev}")
        try:
            float(value)
        except ValueError:
            return f"the value in {text!r} is not a number"
        prev = idx
    return None


def _newlines_before(f, pos: int) -> int:
    """Newlines in the first ``pos`` bytes of ``f``, counted in bounded pieces."""
    f.seek(0)
    count, read = 0, 0
    while read < pos:
        piece = f.read(min(2**20, pos - read))
        if not piece:
            break
        count += piece.count(b"\n")
        read += len(piece)
    return count


def _locate(r: _Range, one_based: bool):
    """(line number, problem, line) of the first bad line of range ``r``, or None."""
    with r.open() as f:
        start, end = (0, -1) if r.offset == 0 and r.length < 0 else _range_bounds(r, f)
        number = _newlines_before(f, start) + 1
        f.seek(start)
        while end < 0 or f.tell() < end:
            line = f.readline()
            if not line:
                return None
            problem = _line_problem(line, one_based)
            if problem is not None:
                return number, problem, line
            number += 1
        return None


def _located_error(r: _Range, exc: Exception, one_based: bool) -> ValueError:
    try:
        found = _locate(r, one_based)
    except Exception:  # noqa: BLE001 - the original error is the one to report then
        found = None
    if found is None:
        return ValueError(f"{r.name}: not a valid svmlight/libsvm file ({exc})")
    number, problem, line = found
    shown = line.decode(errors="replace").rstrip("\n")
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return ValueError(f"{r.name}, line {number}: {problem} (line: {shown!r}). Every line must "
                      "be '<label> [qid:<int>] <index>:<value> ...' with increasing indices.")


# --------------------------------------------------------------------------------------------
# read_svmlight
# --------------------------------------------------------------------------------------------

def _files(path_or_glob) -> list[tuple]:
    """(filesystem, path) of every file named (a file, a glob, a directory or a list)."""
    import fsspec

    items = path_or_glob if isinstance(path_or_glob, (list, tuple)) else [path_or_glob]
    if not items:
        raise FileNotFoundError("read_svmlight: no path given")
    out = []
    for item in items:
        p = os.fspath(item)
        fs, _, paths = fsspec.core.get_fs_token_paths(p, mode="rb")
        if len(paths) == 1 and fs.isdir(paths[0]):
            paths = sorted(f for f in fs.find(paths[0]) if not os.path.basename(f).startswith("."))
        elif any(c in p for c in "*?["):
            paths = sorted(paths)
        if not paths or not all(fs.exists(q) for q in paths):
            what = ("no file matches the pattern" if any(c in p for c in "*?[") else
                    "no such file or directory")
            raise FileNotFoundError(f"read_svmlight: {what}: {p!r}")
        out.extend((fs, q) for q in paths)
    return out


def _ranges(files, blocksize: int) -> list[list[_Range]]:
    out = []
    for fs, path in files:
        compression = next((c for c in ("gzip", "bz2", "xz", "zstd", "zip")
                            if path.endswith({"gzip": ".gz", "bz2": ".bz2", "xz": ".xz",
                                              "zstd": ".zst", "zip": ".zip"}[c])), None)
        size = fs.size(path)
        if compression is not None or size <= blocksize:
            out.append([_Range(fs, path, 0, -1, compression)])
            continue
        starts = list(range(0, size, blocksize))
        out.append([_Range(fs, path, s, blocksize if k < len(starts) - 1 else -1, None)
                    for k, s in enumerate(starts)])
    return out


def read_svmlight(path_or_glob, n_features=None, *, dtype=np.float64, zero_based="auto",
                  query_id=False, blocksize=_DEFAULT_BLOCKSIZE):
    """Read libsvm/svmlight files into a Dask array of CSR blocks and a label array.

    Each file (or byte range of about ``blocksize`` bytes of an uncompressed file, cut at line
    starts) is parsed on a worker by scikit-learn's parser, so the matrix equals
    ``sklearn.datasets.load_svmlight_files`` on the same files, stacked. A first pass counts
    the rows, finds the feature indices' range and checks every line (a malformed line raises a
    ``ValueError`` naming the file and the line number); the arrays returned are lazy and parse
    again when computed, one range per task, so memory stays bounded whatever the files' size.
    The files must be readable at the same path from the client and the workers (a shared
    filesystem, or a remote URL such as ``s3://`` with its fsspec package installed).

    Parameters
    ----------
    path_or_glob : str, path-like or list of them
        A file, a glob such as ``"data/part-*.svm"``, a directory (every file in it, sorted) or
        a list of those. ``.gz``/``.bz2``/``.xz`` files are read whole, decompressing on the fly.
    n_features : int, default=None
        Number of columns. Default: the largest index found, plus one (after the shift of
        one-based files). Give it to read several data sets into the same columns.
    dtype : numpy dtype, default=np.float64
        Dtype of X's values.
    zero_based : bool or 'auto', default='auto'
        Whether indices start at 0. 'auto' decides as scikit-learn does: one-based when every
        file has an entry and no file has index 0.
    query_id : bool, default=False
        Also return the ``qid:`` of every row.
    blocksize : int, default=64 MiB
        Bytes per range of an uncompressed file (one task and one block per range).

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features), CSR blocks
    y : dask.array.Array of shape (n_samples,)
    qid : dask.array.Array of shape (n_samples,)
        Only with ``query_id=True``.

    Examples
    --------
    >>> import tempfile, os
    >>> from dml.datasets import read_svmlight
    >>> path = os.path.join(tempfile.mkdtemp(), "train.svm")
    >>> with open(path, "w") as f:
    ...     _ = f.write("1 1:0.5 3:2\\n0 2:1\\n1 1:1 # comment\\n")
    >>> X, y = read_svmlight(path)
    >>> X.shape, X.chunks
    ((3, 3), ((3,), (3,)))
    >>> X.compute().toarray()
    array([[0.5, 0. , 2. ],
           [0. , 1. , 0. ],
           [1. , 0. , 0. ]])
    >>> y.compute()
    array([1., 0., 1.])
    """
    validate({"n_features": [Interval(Integral, 1, None, closed="left"), None],
              "zero_based": ["boolean", StrOptions({"auto"})], "query_id": ["boolean"],
              "blocksize": [Interval(Integral, 1, None, closed="left")]},
             {"n_features": n_features, "zero_based": zero_based, "query_id": query_id,
              "blocksize": blocksize}, "read_svmlight")
    dtype = np.dtype(dtype)
    per_file = _ranges(_files(path_or_glob), int(blocksize))
    ranges = [r for rs in per_file for r in rs]
    stats = compute(*map_delayed(_scan, _embedded(ranges), dtype, query_id))
    # Stats per file: scikit-learn's 'auto' looks at each file's smallest index.
    k = 0
    file_min, file_entries = [], []
    for rs in per_file:
        part = stats[k:k + len(rs)]
        k += len(rs)
        file_entries.append(sum(s[1] for s in part))
        file_min.append(min(s[2] for s in part))
    if zero_based is False:
        for rs, lo, n in zip(per_file, file_min, file_entries):
            if n and lo == 0:
                bad = next(r for r in rs if _locate(r, one_based=True) is not None)
                raise _located_error(bad, ValueError("Invalid index 0"), one_based=True)
    one_based = zero_based is False or (zero_based == "auto" and
                                        all(n > 0 and lo > 0
                                            for lo, n in zip(file_min, file_entries)))
    shift = int(one_based)
    largest = max((s[3] for s in stats), default=-1)
    n_found = (largest - shift if largest >= 0 else 0) + 1
    if n_features is None:
        n_features = n_found
    elif n_features < n_found:
        raise ValueError(f"n_features was set to {n_features}, but input file contains "
                         f"{n_found} features")
    lengths = tuple(int(s[0]) for s in stats)
    return _arrays(ranges, lengths, dtype, query_id, shift, int(n_features))


def _embedded(values):
    """Plain values as one-task 'parts' for :func:`map_delayed`."""
    from dask import delayed
    return [delayed(v, pure=False, traverse=False) for v in values]


def _arrays(ranges, lengths, dtype, query_id, shift, n_features):
    parse = new_name("load-svmlight")
    layer = {(parse, i): Task((parse, i), _load, r, dtype, query_id, shift, n_features)
             for i, r in enumerate(ranges)}

    def piece(name, item, key2d):
        keys = {}
        for i in range(len(ranges)):
            key = (name, i, 0) if key2d else (name, i)
            keys[key] = Task(key, operator.getitem, TaskRef((parse, i)), item)
        return HighLevelGraph({parse: layer, name: keys}, {parse: set(), name: {parse}})

    xname, yname, qname = new_name("svmlight-X"), new_name("svmlight-y"), new_name("svmlight-qid")
    # X and y come out of one parse task per range, so X is built here beside y rather than by
    # sparse_blocks' kernel map (which would parse every range twice); same form, same meta.
    X = da.Array(piece(xname, 0, True), xname, (lengths, (n_features,)),
                 meta=empty_csr(n_features, dtype))
    y = da.Array(piece(yname, 1, False), yname, (lengths,), dtype=np.float64)
    if not query_id:
        return X, y
    q = da.Array(piece(qname, 2, False), qname, (lengths,), dtype=np.int64)
    return X, y, q


# --------------------------------------------------------------------------------------------
# dump_svmlight
# --------------------------------------------------------------------------------------------

def _dump_block(X, y, path, zero_based, comment):
    from sklearn.datasets import dump_svmlight_file

    if X.shape[0] == 0:
        open(path, "wb").close()
    else:
        dump_svmlight_file(X, np.asarray(y).ravel(), path, zero_based=zero_based,
                           comment=comment)
    return path


def dump_svmlight(X, y, path, *, zero_based=True, comment=None):
    """Write (X, y) as libsvm/svmlight text: one file, or one file per block of a Dask array.

    In-memory X (NumPy or ``scipy.sparse``) is written to the file ``path`` by scikit-learn's
    ``dump_svmlight_file``. A Dask X (dense or CSR blocks) is written by the workers, block
    ``i`` to ``path`` with its ``*`` replaced by ``i`` (zero-padded), or to
    ``path/part-<i>.svm`` when ``path`` has no ``*`` (the directory is created). The workers
    must see ``path`` at the same place as the client. :func:`read_svmlight` reads the files
    back in order.

    Parameters
    ----------
    X : array-like, sparse matrix or dask.array.Array of shape (n_samples, n_features)
        The features.
    y : array-like or dask.array.Array of shape (n_samples,)
        The labels, one per row of X.
    path : str or path-like
        File (in-memory X), or directory or ``*`` pattern (Dask X).
    zero_based : bool, default=True
        Write indices starting at 0 (False: at 1, as many libsvm tools expect).
    comment : str, default=None
        Comment written at the top of each file.

    Returns
    -------
    list of str
        The files written.

    Examples
    --------
    >>> import os, tempfile
    >>> import dask.array as da
    >>> import numpy as np
    >>> from dml.datasets import dump_svmlight, read_svmlight
    >>> X = da.from_array(np.array([[0.0, 1.5], [2.0, 0.0], [0.0, 0.0]]), chunks=(2, 2))
    >>> files = dump_svmlight(X, np.array([1, 0, 1]), os.path.join(tempfile.mkdtemp(), "out"))
    >>> [os.path.basename(f) for f in files]
    ['part-0.svm', 'part-1.svm']
    >>> X2, y2 = read_svmlight(files, n_features=2)
    >>> X2.compute().toarray()
    array([[0. , 1.5],
           [2. , 0. ],
           [0. , 0. ]])
    """
    path = os.fspath(path)
    if not isinstance(X, da.Array):
        from sklearn.datasets import dump_svmlight_file

        if isinstance(y, da.Array):
            y = y.compute()
        dump_svmlight_file(X, np.asarray(y), path, zero_based=zero_based, comment=comment)
        return [path]
    if X.ndim != 2:
        raise ValueError(f"dump_svmlight: expected a 2-D X, got shape {X.shape}")
    if any(np.isnan(c) for c in X.chunks[0]):
        from dml._blocks import compute_lengths, with_known_rows
        X = with_known_rows(X, compute_lengths(X)[0])
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    n = int(sum(X.chunks[0]))
    y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y), chunks=-1)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"dump_svmlight: X has {n} rows but y has shape {y.shape}; y needs "
                         "one label per row of X")
    y = y.rechunk((X.chunks[0],))
    nblocks = len(X.chunks[0])
    width = len(str(nblocks - 1))
    if "*" in path:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        paths = [path.replace("*", str(i).zfill(width)) for i in range(nblocks)]
    else:
        os.makedirs(path, exist_ok=True)
        paths = [os.path.join(path, f"part-{str(i).zfill(width)}.svm") for i in range(nblocks)]
    from dask import delayed
    xs = X.to_delayed(optimize_graph=False)[:, 0]
    ys = y.to_delayed(optimize_graph=False)
    tasks = [delayed(_dump_block, pure=False)(xb, yb, p, zero_based, comment)
             for xb, yb, p in zip(xs, ys, paths)]
    return list(compute(*tasks))
