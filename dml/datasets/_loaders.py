"""Loaders of the real data sets: MovieLens "ml-latest-small" and UCI Adult."""
from __future__ import annotations

import os
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dml._param_validation import check_scalar

__all__ = ["load_movielens", "load_adult", "data_dir", "DATA_DIR_ENV", "ADULT_COLUMNS"]

#: Environment variable that overrides where :func:`data_dir` looks for the shared data sets.
DATA_DIR_ENV = "DML_DATA_DIR"

# ============================================================================================
# Shared data sets
# ============================================================================================

_NO_DOWNLOAD = "dml never downloads data"


def data_dir() -> Path:
    """The directory holding dml's shared data sets (``movielens-small/``, ``adult/``).

    ``$DML_DATA_DIR`` when set; otherwise ``shared/data`` beside the repository
    (``<repo>/../shared/data``).

    Raises
    ------
    FileNotFoundError
        When ``$DML_DATA_DIR`` names a missing directory, or it is unset and no
        ``shared/data`` directory exists beside the repository.

    Examples
    --------
    >>> from dml.datasets import data_dir
    >>> (data_dir() / "adult").is_dir()
    True
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"${DATA_DIR_ENV} is set to {env!r}, which is not a "
                                    f"directory; point it at the directory holding "
                                    f"movielens-small/ and adult/ ({_NO_DOWNLOAD})")
        return path
    repo = Path(__file__).resolve().parents[2]
    beside = repo.parent / "shared" / "data"
    if beside.is_dir():
        return beside
    raise FileNotFoundError(
        f"dml's data directory was not found: set ${DATA_DIR_ENV} to the directory holding "
        f"movielens-small/ and adult/, or put them in {beside} ({_NO_DOWNLOAD}); or pass the "
        "path to the loader")


def _dataset_path(path, subdir: str) -> Path:
    if path is None:
        return data_dir() / subdir
    return Path(os.fspath(path)).expanduser()


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


def load_movielens(path=None, *, npartitions=None):
    """Load MovieLens "ml-latest-small" (100,836 ratings by 610 users on 9,742 movies).

    Reads the local copy; nothing is downloaded. The ratings are a lazy Dask DataFrame read on
    the workers; the (small) movie table is read into pandas.

    Parameters
    ----------
    path : str or path-like, default=None
        Directory containing ``ratings.csv`` (and ``movies.csv``). ``None``: the
        ``movielens-small`` directory of :func:`data_dir`.
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
        When ``ratings.csv`` is not found; the message says where it is expected.

    Examples
    --------
    >>> from dml.datasets import load_movielens
    >>> ml = load_movielens(npartitions=2)
    >>> ml.ratings.npartitions, list(ml.ratings.columns)
    (2, ['userId', 'movieId', 'rating', 'timestamp'])
    >>> list(ml.movies.columns)
    ['movieId', 'title', 'genres']
    """
    root = _dataset_path(path, "movielens-small")
    ratings_file = root / "ratings.csv" if root.is_dir() or root.suffix != ".csv" else root
    if not ratings_file.is_file():
        raise FileNotFoundError(
            f"load_movielens: MovieLens ratings not found at {ratings_file}. Expected a directory "
            f"containing ratings.csv (and movies.csv), such as {DATA_DIR_ENV}/movielens-small; "
            f"{_NO_DOWNLOAD}, so copy the files there or pass path=")
    from sklearn.utils import Bunch  # not at module level: workers import this module

    root = ratings_file.parent
    ratings = dd.read_csv(str(ratings_file), dtype=_RATINGS_DTYPES,
                          **_split_reads(ratings_file, npartitions))
    missing = set(_RATINGS_DTYPES) - set(ratings.columns)
    if missing:
        raise ValueError(f"load_movielens: {ratings_file} lacks the columns {sorted(missing)}; "
                         f"expected {list(_RATINGS_DTYPES)}")
    ratings = _exact_partitions(ratings[list(_RATINGS_DTYPES)], npartitions)
    movies_file = root / "movies.csv"
    movies = (pd.read_csv(movies_file, dtype={"movieId": "int64"})
              if movies_file.is_file() else None)
    readme = root / "README.txt"
    descr = readme.read_text(errors="replace") if readme.is_file() else ""
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


def load_adult(path=None, *, as_frame=True, npartitions=None):
    """Load the UCI Adult census data (30,162 rows without missing values in the shared copy).

    Reads the local copy; nothing is downloaded. Numeric columns (age, fnlwgt, education_num,
    capital_gain, capital_loss, hr_per_week) are int64; the others are pandas categoricals with
    known, sorted categories (whitespace stripped; ``?`` read as missing). The categories are
    found with one pass over the file on the current scheduler. The target ``income`` is a
    categorical with categories ``['<=50K', '>50K']``.

    Parameters
    ----------
    path : str or path-like, default=None
        The ``adult.csv`` file or a directory containing it. ``None``: the ``adult`` directory
        of :func:`data_dir`. The file may have the header line of the shared copy
        (:data:`ADULT_COLUMNS`) or no header (the original UCI ``adult.data`` layout).
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
        When the file is not found; the message says where it is expected.
    ValueError
        When the file does not have the Adult columns or ``income`` has other labels.

    Examples
    --------
    >>> from dml.datasets import load_adult
    >>> df = load_adult()
    >>> df["income"].cat.categories.tolist()
    ['<=50K', '>50K']
    >>> str(df["age"].dtype), str(df["sex"].dtype)
    ('int64', 'category')
    """
    root = _dataset_path(path, "adult")
    file = root / "adult.csv" if root.is_dir() else root
    if not file.is_file():
        raise FileNotFoundError(
            f"load_adult: the Adult data was not found at {file}. Expected adult.csv (or a "
            f"directory containing it), such as {DATA_DIR_ENV}/adult/adult.csv; {_NO_DOWNLOAD}, "
            "so copy the file there or pass path=")
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
