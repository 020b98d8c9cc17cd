"""Save and load fitted models as files that cannot run code when they are loaded.

A model file is a zip archive with two members:

``metadata.json``
    Format name and version, the dml version that wrote it, the creation time, the estimator's
    fully qualified class, its ``get_params()`` (as readable JSON), the SHA-256 of the payload,
    its size stored and decompressed and, when a key was set, an HMAC-SHA256 signature.
``payload.npz``
    The fitted state: a NumPy ``.npz`` archive holding no object arrays. Its ``__tree__``
    member is a JSON document describing the estimator (class, parameters, fitted attributes)
    whose arrays are the other members. Lists, dicts, tuples, object arrays with mixed content
    and nested estimators (a ``Pipeline``, a column transformer with its fitted transformers, a
    bagging ensemble's members, a search's best estimator) are encoded as tagged JSON nodes plus
    arrays; arrays of strings are stored with a unicode dtype.

Loading never unpickles and never imports a name taken from the file: an estimator node can only
name a class of an explicit allow-list (every dml estimator, the common scikit-learn steps listed
in ``dml._io_types.SKLEARN_CLASSES`` and whatever the application registered in
:mod:`dml.registry`), and the other nodes are a fixed set of plain types (lists, tuples, dicts,
sets, slices, NumPy arrays/scalars/dtypes, pandas Index/Series/dtypes) or a few objects with a
checked encoding (scikit-learn's fitted tree structure, NumPy random generators, dml's named
scorers). A loaded estimator is rebuilt by calling its class with the saved parameters and
setting the saved attributes, like unpickling does for scikit-learn estimators but without
running any code named by the file. :func:`save` refuses what it could not load back, such as a
``FunctionTransformer`` holding a function.

Hostile files
-------------
Every size is checked before anything is decompressed: the stored payload against the size the
metadata records, the decompressed payload against the recorded decompressed size and against
a limit (by default 256 MiB or 64 times the file's size, whichever is larger, and at most
16 GiB; pass ``max_bytes=`` to :func:`load` to change it), the JSON structure against a smaller
limit (4 MiB or 64 times the file's size, at most 64 MiB: parsed, it takes many times its size),
each array's header against the size of its member, and every member is decompressed in bounded
steps that stop at its declared size. Labels and other strings, which become Python objects
several times the size of their array, count against the same limit.
A file that claims more, or whose data inflates past its claim, is refused with a
:class:`ModelFileError` before the memory is allocated.

Integrity and authenticity
--------------------------
The SHA-256 in the metadata detects accidental damage (truncated copies, bit rot, an edited
payload). It is **not** protection against a deliberate attacker, who can recompute it. For that,
set ``$DML_MODEL_KEY`` (or pass ``key=``) to a secret when saving *and* loading: the metadata,
which includes the payload hash, is then signed with HMAC-SHA256, and :func:`load` refuses files
that are unsigned or whose signature does not verify. Without a key, a signature present in a file
is not checked. Even an unsigned file cannot run code when loaded, but it can contain whatever
model parameters its author chose.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import io as _io
import json
import math
import numbers
import os
import re
import struct
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dml import _io_types

__all__ = ["save", "load", "read_metadata", "ModelFileError", "FORMAT_NAME", "FORMAT_VERSION",
           "KEY_ENV"]

#: Name recorded in every model file's metadata.
FORMAT_NAME = "dml-model"
#: ``(major, minor)``. A reader loads files of its own major version whatever the minor (minor
#: versions only add optional fields); a new major means older readers cannot load the file.
#: 1.1 records the payload's decompressed size.
FORMAT_VERSION = (1, 1)
#: Oldest major format version this dml still reads.
MIN_READ_MAJOR = 1
#: Environment variable holding the HMAC key for signing/verifying model files.
KEY_ENV = "DML_MODEL_KEY"

_METADATA = "metadata.json"
_PAYLOAD = "payload.npz"
_TREE = "__tree__"
_MAX_METADATA_BYTES = 16 * 2**20
# The JSON structure is parsed into Python objects, which take up to twenty times its size:
# it has its own limit, also relative to the file's size (dml's structures compress less than
# twenty times).
_MAX_TREE_BYTES = 64 * 2**20
_MIN_TREE_LIMIT = 4 * 2**20
# Default limit of the decompressed payload: real model arrays compress a few times at most, so
# a small file that claims to hold far more is a decompression bomb.
_MIN_LIMIT = 256 * 2**20
_MAX_RATIO = 64
_MAX_LIMIT = 16 * 2**30
_CHUNK = 2**20
_MEMBER_RE = re.compile(r"(a\d{1,9}|__tree__)\.npy")
# What numpy.save writes: the header is a dict literal with these keys in this order. Parsed
# with a pattern rather than evaluated.
_NPY_HEADER_RE = re.compile(
    r"\{'descr': '([<>|=][a-zA-Z]\d*(?:\[[a-zA-Z0-9]+\])?)', 'fortran_order': (True|False), "
    r"'shape': \(((?:\d+, ?)*\d*)\), \} *\n")
# Everything the zip, zlib and struct layers raise on damaged input.
_CONTAINER_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
                     NotImplementedError, RuntimeError, KeyError, IndexError, TypeError,
                     OverflowError, struct.error, zlib.error)


class ModelFileError(ValueError):
    """A model file that dml refuses to load (corrupted, incompatible, not allowed, not a model,
    or larger than its limits)."""


# ============================================================================================
# save
# ============================================================================================

def save(model: Any, path: str | os.PathLike, *, key: str | bytes | None = None) -> Path:
    """Save a fitted (or unfitted) estimator to a single model file.

    Parameters
    ----------
    model : estimator
        A dml estimator, a ``sklearn.pipeline.Pipeline`` or column transformer of dml and common
        scikit-learn steps, a bagging ensemble, a fitted search, or a class registered in
        :mod:`dml.registry`. Functions (e.g. a ``FunctionTransformer``'s ``func``, a callable
        scorer) cannot be saved.
    path : str or path-like
        Destination file (conventionally ``*.dml``). Written atomically: a partially written
        file never replaces an existing one.
    key : str or bytes, optional
        HMAC key to sign the file with; defaults to ``$DML_MODEL_KEY``. No signature when
        neither is set.

    Returns
    -------
    pathlib.Path
        The path written.

    Notes
    -----
    Fitted attributes that are Dask collections are per-row results kept on the cluster, such
    as the ``labels_`` of a :class:`~dml.cluster.KMeans` fitted on Dask input; they are not
    written, so the loaded model does not have them. Everything the model predicts or
    transforms with is saved.

    Raises
    ------
    TypeError
        The model holds a value or class a model file cannot hold; the message names it.

    Examples
    --------
    >>> import numpy as np, os, tempfile
    >>> import dml
    >>> from sklearn.pipeline import Pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> model = Pipeline([("scale", StandardScaler())]).fit(np.arange(6.0).reshape(3, 2))
    >>> path = os.path.join(tempfile.mkdtemp(), "model.dml")
    >>> _ = dml.save(model, path)
    >>> dml.load(path).transform([[2.0, 3.0]])
    array([[0., 0.]])
    """
    path = Path(os.fspath(path))
    encoder = _io_types.Encoder()
    root = encoder.encode(model, type(model).__name__)
    if not (isinstance(root, dict) and root.get("$") == "estimator"):
        raise TypeError(f"dml.save expects an estimator, got {type(model).__name__}")
    tree = json.dumps({"root": root}, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(tree) > _MAX_TREE_BYTES:
        raise ValueError(f"cannot save {type(model).__name__}: its structure takes "
                         f"{len(tree)} bytes of JSON, more than dml.load accepts "
                         f"({_MAX_TREE_BYTES}); store large data in NumPy arrays.")
    arrays = dict(encoder.arrays)
    arrays[_TREE] = np.frombuffer(tree, dtype=np.uint8)
    buf = _io.BytesIO()
    np.savez_compressed(buf, **arrays)
    payload = buf.getvalue()
    with zipfile.ZipFile(_io.BytesIO(payload)) as npz:
        inflated = sum(info.file_size for info in npz.infolist())

    import dml

    params = model.get_params(deep=False) if hasattr(model, "get_params") else {}
    metadata = {
        "format": FORMAT_NAME,
        "format_version": f"{FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}",
        "dml_version": dml.__version__,
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "estimator": root["class"],
        "params": _describe(params),
        "payload": {"name": _PAYLOAD, "sha256": hashlib.sha256(payload).hexdigest(),
                    "bytes": len(payload), "inflated_bytes": inflated},
        "libraries": _library_versions(),
    }
    key = _key(key)
    if key is not None:
        metadata["signature"] = {"algorithm": "hmac-sha256",
                                 "value": _sign(metadata, key)}
    meta_bytes = json.dumps(metadata, indent=2, allow_nan=False).encode("utf-8")
    if len(meta_bytes) > _MAX_METADATA_BYTES:
        raise ValueError(f"cannot save {type(model).__name__}: its parameters take "
                         f"{len(meta_bytes)} bytes of metadata, more than dml.load accepts "
                         f"({_MAX_METADATA_BYTES}).")

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w") as zf:
            zf.writestr(_METADATA, meta_bytes, compress_type=zipfile.ZIP_DEFLATED)
            # The payload is already compressed.
            zf.writestr(_PAYLOAD, payload, compress_type=zipfile.ZIP_STORED)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    file_size = path.stat().st_size
    limit, tree_limit = _limits(file_size, None)
    if inflated > limit or len(tree) > tree_limit:
        need = inflated if inflated > limit else len(tree)
        warnings.warn(f"{path}: the model takes {inflated:,} bytes decompressed ({len(tree):,} "
                      f"of structure) from a {file_size:,}-byte file, more than dml.load "
                      f"accepts by default; load it with dml.load(path, max_bytes={need}).",
                      UserWarning, stacklevel=2)
    return path


def _limits(file_size: int, max_bytes: int | None) -> tuple[int, int]:
    """Most bytes the payload's arrays and its JSON structure may take decompressed."""
    if max_bytes is not None:
        return max_bytes, min(max_bytes, _MAX_TREE_BYTES)
    return (min(_MAX_LIMIT, max(_MIN_LIMIT, _MAX_RATIO * file_size)),
            min(_MAX_TREE_BYTES, max(_MIN_TREE_LIMIT, _MAX_RATIO * file_size)))


def _library_versions() -> dict:
    import sklearn

    return {"numpy": np.__version__, "pandas": pd.__version__, "scikit-learn": sklearn.__version__}


def _key(key) -> bytes | None:
    if key is None:
        key = os.environ.get(KEY_ENV) or None
    if key is None:
        return None
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


def _sign(metadata: dict, key: bytes) -> str:
    body = {k: v for k, v in metadata.items() if k != "signature"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hmac.new(key, canonical.encode("utf-8"), hashlib.sha256).hexdigest()


def _describe(value, depth: int = 0):
    """Readable JSON of parameters for the metadata (informational; loading uses the payload)."""
    if depth > 20:
        return "..."
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return [_describe(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _describe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if hasattr(value, "get_params") and not isinstance(value, type):
        cls = type(value)
        return {"estimator": _io_types.class_name(cls) or f"{cls.__module__}.{cls.__qualname__}",
                "params": _describe(value.get_params(deep=False), depth + 1)}
    if isinstance(value, np.ndarray):
        if value.size <= 1000 and value.dtype.kind in "biufUSO":
            return _describe(value.tolist(), depth + 1)
        return f"<array shape={list(value.shape)} dtype={value.dtype}>"
    return repr(value)



# ============================================================================================
# load
# ============================================================================================

def read_metadata(path: str | os.PathLike) -> dict:
    """Read and check a model file's ``metadata.json`` without loading the model.

    Raises :class:`ModelFileError` for a file that is not a dml model file or is of an
    incompatible format version.

    Examples
    --------
    >>> import os, tempfile
    >>> import dml
    >>> from dml.naive_bayes import GaussianNB
    >>> path = dml.save(GaussianNB(), os.path.join(tempfile.mkdtemp(), "m.dml"))
    >>> read_metadata(path)["estimator"]
    'dml.naive_bayes.GaussianNB'
    """
    with _ModelZip(path) as mz:
        return mz.metadata()


def load(path: str | os.PathLike, *, key: str | bytes | None = None,
         max_bytes: int | None = None) -> Any:
    """Load a model saved with :func:`save`.

    Parameters
    ----------
    path : str or path-like
        The model file.
    key : str or bytes, optional
        HMAC key to verify the file's signature with; defaults to ``$DML_MODEL_KEY``. When a key
        is set, unsigned files and files whose signature does not verify are refused.
    max_bytes : int, optional
        Most bytes the model may take once decompressed. By default 256 MiB or 64 times the
        file's size, whichever is larger, and at most 16 GiB (its JSON structure: 4 MiB or 64
        times the file's size, at most 64 MiB): real models compress a few times at most, so a
        file claiming more is refused as a decompression bomb. Strings count with the memory
        they take as Python objects (about 64 bytes each plus their characters). Raise it only
        for a file you trust.

    Returns
    -------
    estimator

    Raises
    ------
    ModelFileError (a ValueError)
        The file is not a dml model file, is corrupted, truncated or was modified, has an
        incompatible format version, names a class that a model file may not hold, fails
        signature verification, or would decompress to more than its metadata records or than
        ``max_bytes``. Whatever is wrong with the file, this is the exception raised.
    FileNotFoundError
        No file at ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> import dml
    >>> from dml.naive_bayes import GaussianNB
    >>> model = GaussianNB().fit([[0.0], [1.0], [5.0], [6.0]], [0, 0, 1, 1])
    >>> path = dml.save(model, os.path.join(tempfile.mkdtemp(), "m.dml"))
    >>> dml.load(path).predict([[0.5], [5.5]])
    array([0, 1])
    """
    if max_bytes is not None and (not isinstance(max_bytes, numbers.Integral)
                                  or isinstance(max_bytes, bool) or max_bytes < 1):
        raise ValueError(f"max_bytes must be a positive integer or None, got {max_bytes!r}")
    name = str(path)
    with _ModelZip(path) as mz:
        meta = mz.metadata()
        info = meta.get("payload")
        if not isinstance(info, dict) or not isinstance(info.get("sha256"), str) or \
                not _is_size(info.get("bytes")):
            raise ModelFileError(f"{name}: the metadata has no payload checksum and size; the "
                                 "file was modified or corrupted. Re-save the model.")
        key = _key(key)
        if key is not None:
            _verify(meta, key, name)
        limit, tree_limit = _limits(mz.file_size, max_bytes)
        inflated = info.get("inflated_bytes")
        if inflated is not None and not _is_size(inflated):
            raise ModelFileError(f"{name}: unreadable decompressed size {inflated!r} in the "
                                 "metadata; the file was modified or corrupted.")
        for claim in (info["bytes"], inflated):
            if claim is not None and claim > limit:
                raise ModelFileError(_too_large(name, claim, mz.file_size, limit))
        payload = mz.read(_PAYLOAD, info["bytes"], exact=True)
    if not _same_digest(hashlib.sha256(payload).hexdigest(), info["sha256"]):
        raise ModelFileError(f"{name}: payload checksum mismatch: the file was modified or "
                             "corrupted. Re-save or re-copy the model file.")
    cls_name = meta.get("estimator")
    if not _io_types.is_allowed(cls_name):
        raise ModelFileError(_not_allowed(name, cls_name))
    arrays = _read_npz(payload, name, inflated, (limit, tree_limit), mz.file_size)
    try:
        tree = json.loads(bytes(arrays.pop(_TREE)).decode("utf-8"))
        root = tree["root"]
        if not isinstance(root, dict) or root.get("$") != "estimator" or \
                root.get("class") != cls_name:
            raise _io_types.Malformed("the payload's estimator does not match the metadata")
        decoder = _io_types.Decoder(arrays, lambda c: ModelFileError(_not_allowed(name, c)),
                                    limit)
        return decoder.decode(root)
    except ModelFileError:
        raise
    except _io_types.Malformed as exc:
        detail = str(exc)
    except Exception as exc:  # noqa: BLE001 - any failure to rebuild is a damaged file
        detail = f"{type(exc).__name__}: {exc}"
    raise ModelFileError(f"{name}: malformed payload ({_short(detail)}); the file was modified "
                         "or corrupted.")


def _short(detail) -> str:
    """An error's text for a message: damaged files can put long junk in it."""
    text = str(detail)
    return text if len(text) <= 200 else text[:200] + "..."


def _same_digest(expected: str, found: str) -> bool:
    # compare_digest refuses non-ASCII strings, which a damaged file can hold.
    return found.isascii() and hmac.compare_digest(expected, found)


def _is_size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _too_large(name: str, claim: int, file_size: int, limit: int, what="the model") -> str:
    return (f"{name}: {what} would take {claim:,} bytes once decompressed, more than the "
            f"{limit:,}-byte limit for a {file_size:,}-byte file. Model data does not compress "
            "that well, so the file is probably a decompression bomb and was not read. If you "
            "trust the file, pass a larger max_bytes to dml.load.")


def _not_allowed(name: str, cls_name) -> str:
    return (f"{name}: the model class {cls_name!r} is not allowed: a dml model file may only "
            f"hold dml's estimators, common scikit-learn steps and classes registered in "
            f"dml.registry ({', '.join(_io_types.allowed())}). If it is your own estimator, "
            "register it first with dml.registry.register(name, 'package.module:ClassName'); "
            "never load model files from untrusted sources.")


class _ModelZip:
    """The model file's zip archive; every failure becomes a :class:`ModelFileError`."""

    def __init__(self, path):
        self.path = path
        self.name = str(path)
        self.file = None
        self.zf = None

    def __enter__(self) -> _ModelZip:
        name = self.name
        self.file = open(self.path, "rb")  # FileNotFoundError / IsADirectoryError pass through
        try:
            self.file_size = os.fstat(self.file.fileno()).st_size
            head = self.file.read(8)
            self.file.seek(0)
            if not head:
                raise ModelFileError(f"{name} is empty: not a dml model file.")
            try:
                self.zf = zipfile.ZipFile(self.file)
            except _CONTAINER_ERRORS as exc:
                if head.startswith(b"PK"):
                    raise ModelFileError(f"{name}: the model file is corrupted or truncated "
                                         f"({_short(exc)}); re-copy or re-save it.") from None
                if head[:1] == b"\x80" and len(head) > 1 and head[1] <= 5:
                    raise ModelFileError(
                        f"{name} looks like a Python pickle, not a dml model file. dml never "
                        "loads pickles because loading one can run arbitrary code; re-save the "
                        "model with dml.save(model, path) from a trusted session.") from None
                raise ModelFileError(f"{name} is not a dml model file (it is not a zip "
                                     "archive); model files are written by dml.save / "
                                     "`dml train`.") from None
        except BaseException:
            self.file.close()
            raise
        return self

    def __exit__(self, *exc):
        if self.zf is not None:
            self.zf.close()
        self.file.close()

    def read(self, member: str, size: int, *, exact: bool) -> bytes:
        """Member ``member``, refused unless it decompresses to ``size`` bytes (or at most
        ``size`` when not ``exact``)."""
        try:
            info = self.zf.getinfo(member)
        except KeyError:
            raise ModelFileError(f"{self.name}: the model file has no {member}; the file was "
                                 "modified or corrupted. Re-save the model.") from None
        if info.file_size > size or (exact and info.file_size != size):
            raise ModelFileError(f"{self.name}: {member} holds {info.file_size:,} bytes but the "
                                 f"metadata records {size:,}; the file was modified or "
                                 "corrupted.")
        try:
            with self.zf.open(info) as f:
                return _read_exactly(f, info.file_size)
        except _CONTAINER_ERRORS as exc:
            raise ModelFileError(f"{self.name}: the model file is corrupted ({_short(exc)}); it "
                                 "was modified or damaged. Re-save or re-copy it.") from None

    def metadata(self) -> dict:
        name = self.name
        if _METADATA not in self.zf.namelist():
            raise ModelFileError(f"{name} is not a dml model file (a zip archive without "
                                 f"{_METADATA}); model files are written by dml.save / "
                                 "`dml train`.")
        if self.zf.getinfo(_METADATA).file_size > _MAX_METADATA_BYTES:
            raise ModelFileError(f"{name}: {_METADATA} is implausibly large; not a dml model "
                                 "file.")
        raw = self.read(_METADATA, _MAX_METADATA_BYTES, exact=False)
        try:
            meta = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ModelFileError(f"{name}: {_METADATA} is unreadable ({_short(exc)}); the file was "
                                 "modified or corrupted.") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
            raise ModelFileError(f"{name} is not a dml model file (its metadata does not say "
                                 f"format {FORMAT_NAME!r}); model files are written by dml.save.")
        _check_version(meta, name)
        return meta


def _read_exactly(f, size: int, out: memoryview | None = None) -> bytearray | None:
    """Read ``size`` bytes from a zip member in bounded steps (into ``out`` when given).

    Zip members stop at their declared size and check their CRC once that size is reached, so
    this never decompresses more than ``size`` bytes plus one step and notices damaged data.
    """
    buf = bytearray()
    pos = 0
    while pos < size:
        chunk = f.read(min(_CHUNK, size - pos))
        if not chunk:
            raise EOFError(f"the data ends after {pos} of {size} bytes")
        if out is None:
            buf += chunk
        else:
            out[pos:pos + len(chunk)] = chunk
        pos += len(chunk)
    if f.read(1):
        raise EOFError("more data than declared")
    return buf if out is None else None


def _read_npz(payload: bytes, name: str, inflated, limits: tuple[int, int],
              file_size: int) -> dict:
    """The payload's arrays, each size checked before it is allocated."""
    try:
        with zipfile.ZipFile(_io.BytesIO(payload)) as npz:
            infos = npz.infolist()
            names = [i.filename for i in infos]
            if len(set(names)) != len(names) or \
                    not all(_MEMBER_RE.fullmatch(n) for n in names) or f"{_TREE}.npy" not in names:
                raise ModelFileError(f"{name}: malformed payload (unexpected members); the file "
                                     "was modified or corrupted.")
            total = sum(i.file_size for i in infos)
            if inflated is not None and total != inflated:
                raise ModelFileError(f"{name}: the payload holds {total:,} bytes decompressed but "
                                     f"the metadata records {inflated:,}; the file was modified "
                                     "or corrupted.")
            limit, tree_limit = limits
            if total > limit:
                raise ModelFileError(_too_large(name, total, file_size, limit))
            tree_size = npz.getinfo(f"{_TREE}.npy").file_size
            if tree_size > tree_limit:
                raise ModelFileError(_too_large(name, tree_size, file_size, tree_limit,
                                                "its structure"))
            arrays = {}
            for info in infos:
                with npz.open(info) as f:
                    arrays[info.filename[:-4]] = _read_npy(f, info.file_size)
    except ModelFileError:
        raise
    except _io_types.Malformed as exc:
        raise ModelFileError(f"{name}: malformed payload ({_short(exc)}); the file was modified or "
                             "corrupted.") from None
    except _CONTAINER_ERRORS as exc:
        raise ModelFileError(f"{name}: the payload could not be read ({_short(exc)}); the file was "
                             "modified or corrupted.") from None
    tree = arrays.get(_TREE)
    if tree.dtype != np.uint8 or tree.ndim != 1:
        raise ModelFileError(f"{name}: malformed payload (bad structure member); the file was "
                             "modified or corrupted.")
    return arrays


def _read_npy(f, size: int) -> np.ndarray:
    """One ``.npy`` member of ``size`` bytes; the header must account for exactly that size."""
    magic = f.read(8)
    if len(magic) != 8 or magic[:6] != b"\x93NUMPY" or magic[6] not in (1, 2, 3):
        raise _io_types.Malformed("an array member is not in NumPy's format")
    len_bytes = f.read(2 if magic[6] == 1 else 4)
    header_len = int.from_bytes(len_bytes, "little")
    if len(len_bytes) not in (2, 4) or header_len > 10_000:
        raise _io_types.Malformed("bad array header")
    header = f.read(header_len)
    m = _NPY_HEADER_RE.fullmatch(header.decode("latin1"))
    if len(header) != header_len or m is None:
        raise _io_types.Malformed("bad array header")
    dtype = np.dtype(m.group(1))
    shape = tuple(int(s) for s in m.group(3).replace(" ", "").split(",") if s)
    count = math.prod(shape)
    if dtype.kind not in "biufcmMUS" or (count and dtype.itemsize == 0):
        raise _io_types.Malformed(f"array dtype {dtype} is not allowed")
    data_size = count * dtype.itemsize
    if 8 + len(len_bytes) + header_len + data_size != size:
        raise _io_types.Malformed("an array's header does not match its size")
    flat = np.empty(count, dtype=dtype)
    _read_exactly(f, data_size, memoryview(flat.view(np.uint8)))
    return flat.reshape(shape, order="F" if m.group(2) == "True" else "C")


def _check_version(meta: dict, name: str) -> None:
    import dml

    version = meta.get("format_version")
    m = re.fullmatch(r"(\d{1,6})\.(\d{1,6})", version) if isinstance(version, str) else None
    if m is None:
        raise ModelFileError(f"{name}: unreadable format version {version!r}; the file was "
                             "modified or corrupted.")
    major = int(m.group(1))
    writer = meta.get("dml_version", "unknown")
    readable = f"{MIN_READ_MAJOR}.x" if MIN_READ_MAJOR == FORMAT_VERSION[0] else \
        f"{MIN_READ_MAJOR}.x to {FORMAT_VERSION[0]}.x"
    if major > FORMAT_VERSION[0]:
        raise ModelFileError(
            f"{name}: model file format {version} (written by dml {writer}) is newer than this "
            f"dml {dml.__version__} can read (format {readable}). Upgrade dml to load it, or "
            "re-save the model with this dml version.")
    if major < MIN_READ_MAJOR:
        raise ModelFileError(
            f"{name}: model file format {version} (written by dml {writer}) is too old for dml "
            f"{dml.__version__} (reads format {readable}). Load it with dml {writer} and retrain, "
            "or convert it by loading and re-saving with an intermediate dml release.")


def _verify(meta: dict, key: bytes, name: str) -> None:
    sig = meta.get("signature")
    if not isinstance(sig, dict) or not isinstance(sig.get("value"), str):
        raise ModelFileError(
            f"{name} is not signed, but ${KEY_ENV} is set, so only signed model files are "
            f"accepted. Re-save it with ${KEY_ENV} set, or unset ${KEY_ENV} to load unsigned "
            "files you trust.")
    if sig.get("algorithm") != "hmac-sha256":
        raise ModelFileError(f"{name}: unsupported signature algorithm {sig.get('algorithm')!r}.")
    try:
        expected = _sign(meta, key)
    except ValueError:  # NaN or infinity in the metadata: dml.save never writes them
        expected = None
    if expected is None or not _same_digest(expected, sig["value"]):
        raise ModelFileError(
            f"{name}: signature does not match: the file was modified or signed with a different "
            f"key. Check ${KEY_ENV}, or re-save the model from a trusted source.")


