"""File readers: thin wrappers over ``dask.dataframe`` that fail early, naming the path."""
from __future__ import annotations

import os

import dask.dataframe as dd
import numpy as np

__all__ = ["read_csv", "read_parquet", "read_table"]

# ============================================================================================
# Readers
# ============================================================================================

_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zip", ".zst")


def _has_magic(path: str) -> bool:
    return any(c in path for c in "*?[")


def _check_exists(path_or_glob, reader: str) -> list[str]:
    """Fail early, naming the path, when a path or glob matches nothing."""
    import fsspec

    items = path_or_glob if isinstance(path_or_glob, (list, tuple)) else [path_or_glob]
    if not items:
        raise FileNotFoundError(f"{reader}: no path given")
    found = []
    for item in items:
        p = os.fspath(item)
        fs, _, paths = fsspec.core.get_fs_token_paths(p, mode="rb")
        if not paths or (not _has_magic(p) and not fs.exists(paths[0])):
            what = "no file matches the pattern" if _has_magic(p) else "no such file or directory"
            raise FileNotFoundError(f"{reader}: {what}: {p!r}")
        found.extend(paths)
    return found


def _normalise_path(path_or_glob):
    if isinstance(path_or_glob, (list, tuple)):
        return [os.fspath(p) for p in path_or_glob]
    return os.fspath(path_or_glob)


def read_csv(path_or_glob, **kwargs):
    """Read CSV file(s) into a Dask DataFrame (``dask.dataframe.read_csv``).

    Parameters
    ----------
    path_or_glob : str, path-like or list of them
        A file, a glob pattern such as ``"data/part-*.csv"``, or a list of those. Remote URLs
        (``s3://...``) work as in Dask when the filesystem package is installed.
    **kwargs
        Passed to ``dask.dataframe.read_csv`` (and on to ``pandas.read_csv``), e.g. ``sep``,
        ``dtype``, ``usecols``, ``blocksize``.

    Returns
    -------
    dask.dataframe.DataFrame

    Raises
    ------
    FileNotFoundError
        When the path does not exist or the pattern matches no file; the message names it.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from dml.datasets import read_csv
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.csv").write_text("x,y\\n1,2\\n3,4\\n")
    >>> _ = (d / "b.csv").write_text("x,y\\n5,6\\n")
    >>> df = read_csv(d / "*.csv")
    >>> df.npartitions, len(df), df["x"].sum().compute()
    (2, 3, np.int64(9))
    """
    path = _normalise_path(path_or_glob)
    paths = _check_exists(path, "read_csv")
    if "blocksize" not in kwargs and any(p.endswith(_COMPRESSION_SUFFIXES) for p in paths):
        # Compressed files cannot be split into byte ranges: one partition per file.
        kwargs["blocksize"] = None
    df = dd.read_csv(path, **kwargs)
    _warn_stray_strings(df, paths[0])
    return df


#: Rows of the first partition looked at for numeric columns spoiled by a stray string.
STRAY_SAMPLE_ROWS = 2000


def _warn_stray_strings(df, first_file: str) -> None:
    """Warn about text columns that are numbers except for a few values (a stray "n/a" or
    "?"): read as text, a model would one-hot encode every distinct number."""
    import warnings

    import pandas as pd

    text = [c for c, t in df.dtypes.items()
            if pd.api.types.is_object_dtype(t) or pd.api.types.is_string_dtype(t)]
    if not text:
        return
    head = df[text].head(STRAY_SAMPLE_ROWS, npartitions=1)
    for col in text:
        values = head[col].dropna()
        if not len(values):
            continue
        bad = pd.to_numeric(values, errors="coerce").isna()
        if bad.any() and (~bad).sum() >= 0.9 * len(values):
            row = bad[bad].index[0]
            line = f" (line {int(row) + 2} of {first_file!r}, counting the header)" \
                if isinstance(row, (int, np.integer)) else ""
            example = values[bad].iloc[0]
            warnings.warn(
                f"read_csv: column {col!r} holds numbers except {int(bad.sum())} of the first "
                f"{len(values)} values, e.g. {example!r} in row {row!r}{line}. It is read as "
                f"text, so a model would one-hot encode every distinct number. Fix that value "
                f"in the file, or pass na_values=[{example!r}] to read it as a missing number.",
                UserWarning, stacklevel=3)


def read_parquet(path_or_glob, **kwargs):
    """Read a Parquet file, directory (data set) or glob into a Dask DataFrame.

    Parameters
    ----------
    path_or_glob : str, path-like or list of them
        A ``.parquet`` file, a directory of Parquet files, a glob pattern, or a list of files.
    **kwargs
        Passed to ``dask.dataframe.read_parquet``, e.g. ``columns``, ``filters``.

    Returns
    -------
    dask.dataframe.DataFrame

    Raises
    ------
    FileNotFoundError
        When the path does not exist or the pattern matches no file; the message names it.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import pandas as pd
    >>> from dml.datasets import read_parquet
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> pd.DataFrame({"x": [1.0, 2.0]}).to_parquet(d / "part-0.parquet")
    >>> read_parquet(d / "*.parquet")["x"].sum().compute()
    np.float64(3.0)
    """
    path = _normalise_path(path_or_glob)
    _check_exists(path, "read_parquet")
    return dd.read_parquet(path, **kwargs)


def read_table(path, **kwargs):
    """Read a CSV/TSV or Parquet table, chosen by the file extension.

    ``.csv`` and ``.txt`` go to :func:`read_csv`, ``.tsv`` to :func:`read_csv` with ``sep="\\t"``
    (unless given), each optionally compressed (``.gz``, ``.bz2``, ``.xz``, ``.zip``, ``.zst``);
    ``.parquet``, ``.parq``, ``.pq`` and directories go to :func:`read_parquet`. Globs are
    classified by their pattern's extension.

    Parameters
    ----------
    path : str or path-like
        File, directory or glob pattern.
    **kwargs
        Passed to the reader.

    Returns
    -------
    dask.dataframe.DataFrame

    Raises
    ------
    FileNotFoundError
        When nothing exists at ``path``.
    ValueError
        When the extension is not one of the above.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from dml.datasets import read_table
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.tsv"
    >>> _ = p.write_text("a\\tb\\n1\\t2\\n")
    >>> list(read_table(p).columns)
    ['a', 'b']
    """
    p = os.fspath(path)
    name = p.rstrip("/").lower()
    for suffix in _COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name.endswith((".csv", ".txt")):
        return read_csv(p, **kwargs)
    if name.endswith(".tsv"):
        kwargs.setdefault("sep", "\t")
        return read_csv(p, **kwargs)
    if name.endswith((".parquet", ".parq", ".pq")):
        return read_parquet(p, **kwargs)
    if not _has_magic(p):
        _check_exists(p, "read_table")
        if os.path.isdir(p):
            return read_parquet(p, **kwargs)
    raise ValueError(f"read_table: cannot tell the format of {p!r} from its extension; expected "
                     ".csv, .tsv, .txt (optionally compressed), .parquet/.parq/.pq or a Parquet "
                     "directory. Call read_csv or read_parquet directly.")
