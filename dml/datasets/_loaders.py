"""Loaders of the real data sets: MovieLens "ml-latest-small" and UCI Adult."""
from __future__ import annotations

import os
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dml._param_validation import check_scalar
from dml.datasets._home import ADULT_URL, MOVIELENS_URL, NO_DOWNLOAD, find_file

__all__ = ["load_movielens", "load_adult", "ADULT_COLUMNS"]


def _own_path(path, loader: str) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{loader}: path must be a file or directory (str or path-like) or None, "
                        f"got {type(path).__name__} {path!r}")
    return Path(os.fspath(path)).expanduser()


def _one_source(loader: str, path, data_home) -> None:
    if path is not None and data_home is not None:
        raise ValueError(f"{loader}: pass path= (a copy of your own, read as is) or data_home= "
                         "(the directory holding dml's data sets, checksums verified), not both")


def _split_reads(file: Path, npartitions) -> dict:
    """read_csv keyword arguments giving about ``npartitions`` byte-range partitions."""
    if npartitions is None:
        return {}
    npartitions = check_scalar(npartitions, "npartitions", "load", minimum=1, integer=True)
    return {"blocksize": max(1, file.stat().st_size // npartitions)}


def _exact_partitions(df, npartitions):
    # Byte ranges give npartitions almost always; fix the rare off-by-one at the edges.
    if npartitions is not None and df.npartitions != npartitions:
        df = df.repartition(npartitions=npartitions)
    return df


_RATINGS_DTYPES = {"userId": "int64", "movieId": "int64", "rating": "float64",
                   "timestamp": "int64"}


def load_movielens(path=None, *, data_home=None, npartitions=None):
    """Load MovieLens "ml-latest-small" (100,836 ratings by 610 users on 9,742 movies).

    Reads a local copy; nothing is downloaded. By default the files are looked for in
    ``<data home>/movielens-small/`` (see :func:`data_dir`) and their SHA-256 checksums are
    verified; when ``ratings.csv`` is missing, the error names the path it was looked for at and
    the address to download the data set from. The ratings are a lazy Dask DataFrame read on
    the workers (they must see the same path); the (small) movie table is read into pandas.

    Parameters
    ----------
    path : str or path-like, default=None
        A copy of your own, read as is (no checksum check): a directory containing
        ``ratings.csv`` (and optionally ``movies.csv``, ``README.txt``), or the ratings file
        itself. ``None``: the ``movielens-small`` folder of the data home.
    data_home : str or path-like, default=None
        The data home holding ``movielens-small/``. ``None``: ``$DML_DATA``, else dml's user
        cache directory (``~/.cache/dml/data``); see :func:`data_dir`.
    npartitions : int, default=None
        Number of partitions of ``ratings`` (default: Dask's byte-size rule, one for this file).

    Returns
    -------
    data : sklearn.utils.Bunch
        ``ratings``: Dask DataFrame with columns userId (int64), movieId (int64),
        rating (float64, 0.5 to 5 stars), timestamp (int64, Unix seconds);
        ``movies``: pandas DataFrame with movieId, title, genres (``None`` when ``movies.csv``
        is absent); ``DESCR``: the data set's README (licence and citation) when present.

    Raises
    ------
    FileNotFoundError
        When ``ratings.csv`` is not found; the message says where it is expected and where the
        data set can be downloaded.
    ValueError
        When a file of the data home does not have the expected SHA-256 (damaged, truncated or
        another release), or the ratings file lacks MovieLens' columns.

    Examples
    --------
    The real data set, once its files are in the data home (``$DML_DATA/movielens-small/``):

    >>> from dml.datasets import load_movielens
    >>> ml = load_movielens(npartitions=2)  # doctest: +SKIP
    >>> len(ml.ratings), list(ml.movies.columns)  # doctest: +SKIP
    (100836, ['movieId', 'title', 'genres'])

    A file of your own in MovieLens' layout:

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "ratings.csv").write_text(
    ...     "userId,movieId,rating,timestamp\\n1,10,4.0,964982703\\n2,10,3.5,964982931\\n")
    >>> ml = load_movielens(folder)
    >>> list(ml.ratings.columns), len(ml.ratings), ml.movies is None
    (['userId', 'movieId', 'rating', 'timestamp'], 2, True)
    """
    loader = "load_movielens"
    _one_source(loader, path, data_home)
    if path is None:
        ratings_file = find_file(loader, "movielens", "ratings.csv", data_home)
        movies_file = find_file(loader, "movielens", "movies.csv", data_home, required=False)
        readme = find_file(loader, "movielens", "README.txt", data_home, required=False)
    else:
        root = _own_path(path, loader)
        ratings_file = root / "ratings.csv" if root.is_dir() or root.suffix != ".csv" else root
        if not ratings_file.is_file():
            raise FileNotFoundError(
                f"{loader}: MovieLens ratings not found at {ratings_file} (from path=). Expected "
                "a directory containing ratings.csv (and movies.csv), or the ratings file; "
                f"{NO_DOWNLOAD}: the data set is at {MOVIELENS_URL}")
        beside = ratings_file.parent
        movies_file = beside / "movies.csv" if (beside / "movies.csv").is_file() else None
        readme = beside / "README.txt" if (beside / "README.txt").is_file() else None
    from sklearn.utils import Bunch  # not at module level: workers import this module

    ratings = dd.read_csv(str(ratings_file), dtype=_RATINGS_DTYPES,
                          **_split_reads(ratings_file, npartitions))
    missing = set(_RATINGS_DTYPES) - set(ratings.columns)
    if missing:
        raise ValueError(f"{loader}: {ratings_file} lacks the columns {sorted(missing)}; "
                         f"expected {list(_RATINGS_DTYPES)}")
    ratings = _exact_partitions(ratings[list(_RATINGS_DTYPES)], npartitions)
    movies = (pd.read_csv(movies_file, dtype={"movieId": "int64"})
              if movies_file is not None else None)
    descr = readme.read_text(errors="replace") if readme is not None else ""
    return Bunch(ratings=ratings, movies=movies, DESCR=descr)


#: Columns of the UCI Adult file, in order (header names of the shared copy).
ADULT_COLUMNS = ["age", "type_employer", "fnlwgt", "education", "education_num", "marital",
                 "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
                 "hr_per_week", "country", "income"]
_ADULT_NUMERIC = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss",
                  "hr_per_week"]
_ADULT_CATEGORICAL = [c for c in ADULT_COLUMNS if c not in _ADULT_NUMERIC and c != "income"]
_INCOME = ["<=50K", ">50K"]


def _strip_adult(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for c in _ADULT_CATEGORICAL + ["income"]:
        df[c] = df[c].str.strip()
    # The UCI test split writes "<=50K." / ">50K.".
    df["income"] = df["income"].str.rstrip(".")
    return df


def _adult_features(df: pd.DataFrame) -> pd.DataFrame:
    out = {}
    for c in ADULT_COLUMNS[:-1]:
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            codes = df[c].cat.codes.to_numpy(dtype=np.float64)
            codes[codes < 0] = np.nan
            out[c] = codes
        else:
            out[c] = df[c].to_numpy(dtype=np.float64)
    return pd.DataFrame(out, index=df.index)


def load_adult(path=None, *, data_home=None, as_frame=True, npartitions=None):
    """Load the UCI Adult census data (30,162 rows without missing values in dml's copy).

    Reads a local copy; nothing is downloaded. By default the file is
    ``<data home>/adult/adult.csv`` (see :func:`data_dir`) and its SHA-256 checksum is verified;
    when it is missing, the error names the path it was looked for at and where the file comes
    from. Numeric columns (age, fnlwgt, education_num, capital_gain, capital_loss, hr_per_week)
    are int64; the others are pandas categoricals with known, sorted categories (whitespace
    stripped; ``?`` read as missing). The categories are found with one pass over the file on
    the current scheduler. The target ``income`` is a categorical with categories
    ``['<=50K', '>50K']``.

    Parameters
    ----------
    path : str or path-like, default=None
        A copy of your own, read as is (no checksum check): the file or a directory containing
        ``adult.csv``. It may have the header line of dml's copy (:data:`ADULT_COLUMNS`) or no
        header (the original UCI ``adult.data`` layout). ``None``: the ``adult`` folder of the
        data home.
    data_home : str or path-like, default=None
        The data home holding ``adult/adult.csv``. ``None``: ``$DML_DATA``, else dml's user
        cache directory (``~/.cache/dml/data``); see :func:`data_dir`.
    as_frame : bool, default=True
        ``True``: return one Dask DataFrame with all 15 columns. ``False``: return ``(X, y)``
        Dask arrays with known chunk sizes, as scikit-learn's ``fetch_openml(as_frame=False)``:
        ``X`` float64 with the categorical columns as their category codes (NaN when missing),
        ``y`` int64 (1 for ``>50K``).
    npartitions : int, default=None
        Number of row partitions (default: Dask's byte-size rule, one for this file).

    Returns
    -------
    frame : dask.dataframe.DataFrame
        When ``as_frame=True``.
    (X, y) : tuple of dask.array.Array
        When ``as_frame=False``; X has shape (n_rows, 14).

    Raises
    ------
    FileNotFoundError
        When the file is not found; the message says where it is expected and where it comes
        from.
    ValueError
        When the data home's file does not have the expected SHA-256, the file does not have
        the Adult columns, or ``income`` has other labels.

    Examples
    --------
    dml's copy, once it is in the data home (``$DML_DATA/adult/adult.csv``):

    >>> from dml.datasets import load_adult
    >>> df = load_adult()  # doctest: +SKIP
    >>> len(df), df["income"].cat.categories.tolist()  # doctest: +SKIP
    (30162, ['<=50K', '>50K'])

    A file in the original UCI layout (no header, ``?`` for missing values):

    >>> import tempfile, pathlib
    >>> file = pathlib.Path(tempfile.mkdtemp()) / "adult.data"
    >>> _ = file.write_text(
    ...     "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, "
    ...     "White, Male, 2174, 0, 40, United-States, <=50K\\n"
    ...     "50, ?, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, "
    ...     "White, Male, 0, 0, 13, United-States, >50K\\n")
    >>> df = load_adult(file)
    >>> df["income"].cat.categories.tolist(), str(df["age"].dtype), str(df["sex"].dtype)
    (['<=50K', '>50K'], 'int64', 'category')
    >>> df["type_employer"].compute().isna().tolist()
    [False, True]
    """
    loader = "load_adult"
    _one_source(loader, path, data_home)
    if path is None:
        file = find_file(loader, "adult", "adult.csv", data_home)
    else:
        root = _own_path(path, loader)
        file = root / "adult.csv" if root.is_dir() else root
        if not file.is_file():
            raise FileNotFoundError(
                f"{loader}: the Adult data was not found at {file} (from path=). Expected "
                f"adult.csv or a directory containing it; {NO_DOWNLOAD}: the original is "
                f"adult.data at {ADULT_URL}")
    with open(file, encoding="utf-8", errors="replace") as fh:
        first = [f.strip() for f in fh.readline().split(",")]
    if first == ADULT_COLUMNS:
        header = {"header": 0}
    elif len(first) == len(ADULT_COLUMNS) and first[0].isdigit():
        header = {"header": None, "names": ADULT_COLUMNS}
    else:
        raise ValueError(f"load_adult: {file} does not look like the Adult data: expected the "
                         f"columns {ADULT_COLUMNS}, found the first line {first}")
    dtypes = {c: "int64" for c in _ADULT_NUMERIC}
    dtypes.update({c: "object" for c in _ADULT_CATEGORICAL + ["income"]})
    raw = dd.read_csv(str(file), dtype=dtypes, skipinitialspace=True, na_values=["?"],
                      **header, **_split_reads(file, npartitions))
    clean = _exact_partitions(raw.map_partitions(_strip_adult, meta=raw._meta), npartitions)
    # Known categories need the distinct values: one pass over the file, small results.
    # split_out=1: a tree reduction; Dask's default (a P2P shuffle per column on a distributed
    # cluster) is needless for a few dozen values and floods the log with shuffle warnings.
    uniques = dask.compute(*[clean[c].dropna().unique(split_out=1)
                             for c in _ADULT_CATEGORICAL + ["income"]])
    found = dict(zip(_ADULT_CATEGORICAL + ["income"], (sorted(map(str, u)) for u in uniques)))
    unknown = sorted(set(found.pop("income")) - set(_INCOME))
    if unknown:
        raise ValueError(f"load_adult: the income column of {file} has labels {unknown}; "
                         f"expected only {_INCOME}")
    types = {c: pd.CategoricalDtype(cats) for c, cats in found.items()}
    types["income"] = pd.CategoricalDtype(_INCOME)
    frame = clean.astype(types)[ADULT_COLUMNS]
    if as_frame:
        return frame
    features = frame.map_partitions(_adult_features, meta=pd.DataFrame(
        {c: pd.Series(dtype=np.float64) for c in ADULT_COLUMNS[:-1]}))
    lengths = tuple(int(n) for n in frame.map_partitions(len).compute())
    X = features.to_dask_array(lengths=lengths)
    y = frame["income"].cat.codes.astype(np.int64).to_dask_array(lengths=lengths)
    return X, y
