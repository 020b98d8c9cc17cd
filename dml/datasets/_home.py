"""Where the real data sets live, where to get them, and the checksums that identify them.

dml never downloads anything (clusters often have no internet access, and a download inside a
task would run once per worker). The loaders look for each file in the *data home*, a directory
holding one folder per data set (``movielens-small/``, ``adult/``), and check its SHA-256 before
reading it, so that a truncated copy or another release of the data never gives silently
different numbers. When a file is missing or differs, the error names the path it was looked for
at and says where the file comes from.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from dml._paths import user_cache_dir

__all__ = ["data_dir", "DATA_DIR_ENV", "find_file", "sha256_of", "MOVIELENS_URL", "ADULT_URL",
           "NO_DOWNLOAD"]

#: Environment variable naming the data home (see :func:`data_dir`).
DATA_DIR_ENV = "DML_DATA"

NO_DOWNLOAD = "dml never downloads data"


@dataclass(frozen=True)
class _DataSet:
    """A data set's folder in the data home, its files' SHA-256 and how to obtain them."""

    folder: str
    sha256: dict[str, str]
    source: str


MOVIELENS_URL = "https://files.grouplens.org/datasets/movielens/ml-latest-small.zip"
ADULT_URL = "https://archive.ics.uci.edu/dataset/2/adult"

_DATASETS = {
    "movielens": _DataSet(
        folder="movielens-small",
        sha256={
            "ratings.csv": "aa289ca83157595d0df6aea1be6a4ded676ddc4385472e8313a8ed9805352646",
            "movies.csv": "5a5f32dd9bb3797b8e728a1b98958789d2b13f294a69fdfbc5727f8a9611aa07",
            "README.txt": "63d22ac138e80fae37021797ed8e1b9424b5239dc576a137422adf783ae3f404",
        },
        source=(f"download MovieLens \"ml-latest-small\" (GroupLens, generated 2018-09-26) from "
                f"{MOVIELENS_URL}, unzip it and copy ratings.csv, movies.csv and README.txt "
                "from its ml-latest-small/ folder into {folder}")),
    "adult": _DataSet(
        folder="adult",
        sha256={
            "adult.csv": "23959c20762e10ad3cf7af811ea355b81fff9f69debbed9a5505657f3145d8cf",
        },
        source=("copy adult.csv from the dml project's data (shared/data/adult/adult.csv beside "
                "a checkout of the project) into {folder}. That file is UCI Adult's training "
                f"part (adult.data, {ADULT_URL}) without the rows with missing values, "
                "shuffled, with a header line: a downloaded adult.data has another checksum, "
                "read it with load_adult(path=...) instead")),
}


def data_dir(data_home=None) -> Path:
    """The data home: the directory holding dml's real data sets, one folder each.

    The loaders look for ``<data home>/movielens-small/ratings.csv`` (also ``movies.csv`` and
    ``README.txt``) and ``<data home>/adult/adult.csv``. The directory is neither created nor
    required to exist here; a loader whose file is missing says where to put it and where the
    file comes from.

    Parameters
    ----------
    data_home : str or path-like, default=None
        The data home itself (``~`` is expanded). ``None``: ``$DML_DATA`` when set, else the
        ``data/`` folder of dml's user cache directory: ``$DML_CACHE_DIR/data``, else
        ``$XDG_CACHE_HOME/dml/data``, else ``~/.cache/dml/data``.

    Returns
    -------
    pathlib.Path
        The data home.

    Examples
    --------
    >>> from pathlib import Path
    >>> from dml.datasets import data_dir
    >>> data_dir("~/my-data") == Path.home() / "my-data"
    True
    >>> data_dir().name  # doctest: +SKIP
    'data'
    """
    if data_home is None:
        env = os.environ.get(DATA_DIR_ENV)
        return Path(env).expanduser() if env else user_cache_dir() / "data"
    if not isinstance(data_home, (str, os.PathLike)):
        raise TypeError(f"data_home must be a path (str or path-like) or None, got "
                        f"{type(data_home).__name__} {data_home!r}")
    return Path(os.fspath(data_home)).expanduser()


def _origin(data_home) -> str:
    """Why the data home is where it is, for error messages."""
    if data_home is not None:
        return "given as data_home="
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return f"from ${DATA_DIR_ENV}={env}"
    return f"the default, as ${DATA_DIR_ENV} is not set"


def sha256_of(file: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB pieces."""
    digest = hashlib.sha256()
    with open(file, "rb") as fh:
        for piece in iter(lambda: fh.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


def find_file(loader: str, dataset: str, name: str, data_home, *,
              required: bool = True) -> Path | None:
    """The verified path of ``name`` of ``dataset`` in the data home.

    Returns ``None`` for a missing optional file (``required=False``).

    Raises
    ------
    FileNotFoundError
        When a required file is missing: the message gives the path, how the data home was
        chosen and where the file comes from.
    ValueError
        When the file's SHA-256 is not the expected one.
    """
    spec = _DATASETS[dataset]
    root = data_dir(data_home)
    folder = root / spec.folder
    file = folder / name
    how = spec.source.format(folder=f"{folder}{os.sep}")
    if not file.is_file():
        if not required:
            return None
        raise FileNotFoundError(
            f"{loader}: {name} was not found at {file} (data home {root}: "
            f"{_origin(data_home)}). {NO_DOWNLOAD}: {how}. Or point ${DATA_DIR_ENV} (or "
            f"data_home=) at a directory holding {spec.folder}/{name}, or pass path= to read a "
            "copy of your own.")
    expected = spec.sha256[name]
    found = sha256_of(file)
    if found != expected:
        raise ValueError(
            f"{loader}: {file} is not the expected {spec.folder}/{name}: its SHA-256 is "
            f"{found}, expected {expected}. The file is damaged, truncated or from another "
            f"release; replace it ({how}), or pass path= to read a file of your own without "
            "this check.")
    return file
