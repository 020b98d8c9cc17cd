"""Save and load fitted models as files that cannot run code when they are loaded.

A model file is a zip archive with two members:

``metadata.json``
    Format name and version, the dml version that wrote it, the creation time, the estimator's
    fully qualified class, its ``get_params()`` (as readable JSON), the SHA-256 of the payload and,
    when a key was set, an HMAC-SHA256 signature.
``payload.npz``
    The fitted state: a NumPy ``.npz`` archive read with ``allow_pickle=False``. Its ``__tree__``
    member is a JSON document describing the estimator (class, parameters, fitted attributes)
    whose arrays are the other members. Lists, dicts, tuples, object arrays with mixed content
    and nested estimators (a ``Pipeline`` of dml steps, a column transformer with its fitted
    transformers) are encoded as tagged JSON nodes plus arrays; arrays of strings are stored with
    a unicode dtype.

Loading never unpickles and never imports a name taken from the file: an estimator node can only
name a class registered in :mod:`dml.registry` (the dml estimators, ``sklearn.pipeline.Pipeline``
and whatever the application registered itself), and the other nodes are a fixed set of plain
types (lists, tuples, dicts, sets, slices, NumPy arrays/scalars/dtypes, pandas Index/Series and
dtypes). A loaded estimator is rebuilt by calling its class with the saved parameters and setting
the saved attributes, like unpickling does for scikit-learn estimators but without running any
code named by the file.

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
import os
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from dml import registry

__all__ = ["save", "load", "read_metadata", "ModelFileError", "FORMAT_NAME", "FORMAT_VERSION",
           "KEY_ENV"]

#: Name recorded in every model file's metadata.
FORMAT_NAME = "dml-model"
#: ``(major, minor)``. A reader loads files of its own major version whatever the minor (minor
#: versions only add optional fields); a new major means older readers cannot load the file.
FORMAT_VERSION = (1, 0)
#: Oldest major format version this dml still reads.
MIN_READ_MAJOR = 1
#: Environment variable holding the HMAC key for signing/verifying model files.
KEY_ENV = "DML_MODEL_KEY"

_METADATA = "metadata.json"
_PAYLOAD = "payload.npz"
_TREE = "__tree__"
_MAX_METADATA_BYTES = 64 * 2**20


class ModelFileError(ValueError):
    """A model file that dml refuses to load (corrupted, incompatible, not allowed, not a model)."""


# ============================================================================================
# save
# ============================================================================================

def save(model, path, *, key: str | bytes | None = None) -> Path:
    """Save a fitted (or unfitted) estimator to a single model file.

    Parameters
    ----------
    model : estimator
        A dml estimator, or a ``sklearn.pipeline.Pipeline`` / dml column transformer of them;
        every class in it must be registered in :mod:`dml.registry`.
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

    Examples
    --------
    >>> import numpy as np, os, tempfile
    >>> import dml
    >>> from sklearn.pipeline import Pipeline
    >>> model = Pipeline([("clf", "passthrough")])
    >>> path = os.path.join(tempfile.mkdtemp(), "model.dml")
    >>> _ = dml.save(model, path)
    >>> dml.load(path).steps
    [('clf', 'passthrough')]
    """
    path = Path(os.fspath(path))
    encoder = _Encoder()
    root = encoder.encode(model, type(model).__name__)
    if not (isinstance(root, dict) and root.get("$") == "estimator"):
        raise TypeError(f"dml.save expects an estimator, got {type(model).__name__}")
    tree = json.dumps({"root": root}, allow_nan=False, separators=(",", ":")).encode("utf-8")
    arrays = dict(encoder.arrays)
    arrays[_TREE] = np.frombuffer(tree, dtype=np.uint8)
    buf = _io.BytesIO()
    np.savez_compressed(buf, **arrays)
    payload = buf.getvalue()

    import dml

    metadata = {
        "format": FORMAT_NAME,
        "format_version": f"{FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}",
        "dml_version": dml.__version__,
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "estimator": root["class"],
        "params": _describe(model.get_params(deep=False)),
        "payload": {"name": _PAYLOAD, "sha256": hashlib.sha256(payload).hexdigest(),
                    "bytes": len(payload)},
        "libraries": _library_versions(),
    }
    key = _key(key)
    if key is not None:
        metadata["signature"] = {"algorithm": "hmac-sha256",
                                 "value": _sign(metadata, key)}
    meta_bytes = json.dumps(metadata, indent=2, allow_nan=False).encode("utf-8")

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
    return path


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
        return {"estimator": registry.class_target(cls) or f"{cls.__module__}.{cls.__qualname__}",
                "params": _describe(value.get_params(deep=False), depth + 1)}
    if isinstance(value, np.ndarray):
        if value.size <= 1000 and value.dtype.kind in "biufUSO":
            return _describe(value.tolist(), depth + 1)
        return f"<array shape={list(value.shape)} dtype={value.dtype}>"
    return repr(value)


class _Encoder:
    """Fitted state -> tagged JSON tree + arrays."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self._memo: dict[int, int] = {}     # id(estimator) -> node id
        self._open: set[int] = set()         # estimators being encoded (cycle detection)
        self._alive: list = []               # keep memoised objects alive so ids stay unique

    def _store(self, arr: np.ndarray) -> str:
        key = f"a{len(self.arrays)}"
        self.arrays[key] = arr
        return key

    def encode(self, obj, where: str):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, np.generic):  # before float: np.float64 subclasses float
            return self._scalar(obj, where)
        if isinstance(obj, int):
            return obj
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"$": "float", "value": repr(obj)}
        if isinstance(obj, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if isinstance(obj, tuple):
            return {"$": "tuple", "items": [self.encode(v, f"{where}[{i}]")
                                            for i, v in enumerate(obj)]}
        if isinstance(obj, dict):
            return {"$": "dict", "items": [[self.encode(k, f"{where} key"),
                                            self.encode(v, f"{where}[{k!r}]")]
                                           for k, v in obj.items()]}
        if isinstance(obj, (set, frozenset)):
            items = [self.encode(v, f"{where} item") for v in obj]
            return {"$": "set" if isinstance(obj, set) else "frozenset", "items": items}
        if isinstance(obj, slice):
            return {"$": "slice", "start": self.encode(obj.start, where),
                    "stop": self.encode(obj.stop, where), "step": self.encode(obj.step, where)}
        if isinstance(obj, np.ndarray):
            return self._array(obj, where)
        if isinstance(obj, np.dtype):
            return self._dtype(obj, where)
        if isinstance(obj, pd.api.extensions.ExtensionDtype):
            return self._dtype(obj, where)
        if isinstance(obj, type):
            return self._type(obj, where)
        if obj is pd.NA:
            return {"$": "pd_na"}
        if obj is pd.NaT:
            return {"$": "pd_nat"}
        if isinstance(obj, pd.Index) and not isinstance(obj, pd.MultiIndex):
            return {"$": "pd_index", "values": self._array(np.asarray(obj, dtype=object)
                                                           if obj.dtype == object else
                                                           _plain_values(obj), where),
                    "dtype": self._dtype(obj.dtype, where), "name": self.encode(obj.name, where)}
        if isinstance(obj, pd.Series):
            return {"$": "pd_series", "values": self._array(_plain_values(obj), where),
                    "dtype": self._dtype(obj.dtype, where),
                    "index": self.encode(obj.index, f"{where}.index"),
                    "name": self.encode(obj.name, where)}
        if hasattr(obj, "get_params") and hasattr(obj, "__dict__"):
            return self._estimator(obj, where)
        raise TypeError(_unsupported(obj, where))

    # ---- estimators ----
    def _estimator(self, est, where: str):
        oid = id(est)
        if oid in self._open:
            raise TypeError(f"cannot save {where}: the estimator refers to itself")
        if oid in self._memo:
            return {"$": "ref", "id": self._memo[oid]}
        cls = type(est)
        dotted = registry.class_target(cls)
        if dotted is None:
            raise TypeError(
                f"cannot save {where}: class {cls.__module__}.{cls.__qualname__} is not in "
                "dml.registry, so dml.load could not rebuild it. Register it first, e.g. "
                f"dml.registry.register('{_snake(cls.__name__)}', "
                f"'{cls.__module__}:{cls.__qualname__}').")
        self._open.add(oid)
        try:
            params = est.get_params(deep=False)
            enc_params = {str(k): self.encode(v, f"{where}.{k}") for k, v in params.items()}
            state = {k: v for k, v in vars(est).items() if k not in params}
            enc_state = {}
            for k, v in state.items():
                if not isinstance(k, str):
                    raise TypeError(f"cannot save {where}: attribute name {k!r} is not a string")
                enc_state[k] = self.encode(v, f"{where}.{k}")
        finally:
            self._open.discard(oid)
        node_id = len(self._memo)
        self._memo[oid] = node_id
        self._alive.append(est)
        return {"$": "estimator", "class": dotted, "id": node_id, "params": enc_params,
                "state": enc_state}

    # ---- NumPy ----
    def _scalar(self, value: np.generic, where: str):
        if value.dtype.kind not in "biufUSmM":
            raise TypeError(_unsupported(value, where))
        # A 0-d array keeps the exact dtype and value (incl. NaN, datetime units).
        return {"$": "scalar", "key": self._store(np.asarray(value))}

    def _array(self, arr: np.ndarray, where: str):
        kind = arr.dtype.kind
        if kind in "biufcmMUS":
            return {"$": "ndarray", "key": self._store(arr)}
        if kind == "O":
            flat = arr.ravel(order="C")
            # Arrays of Python strings (labels, feature names, categories) become unicode arrays;
            # trailing NULs would be stripped by the unicode dtype, so those take the slow path.
            if all(type(v) is str and not v.endswith("\x00") for v in flat):
                stored = np.asarray(arr.tolist(), dtype=str) if arr.size else \
                    np.zeros(arr.shape, dtype="U1")
                return {"$": "ndarray", "key": self._store(stored.reshape(arr.shape)),
                        "object": True}
            return {"$": "object_array", "shape": list(arr.shape),
                    "items": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(flat)]}
        raise TypeError(_unsupported(arr, where))

    def _dtype(self, dtype, where: str):
        if isinstance(dtype, np.dtype):
            if dtype.fields is not None or dtype.subdtype is not None:
                raise TypeError(_unsupported(dtype, where))
            return {"$": "dtype", "str": dtype.str}
        if isinstance(dtype, pd.CategoricalDtype):
            cats = dtype.categories
            return {"$": "pd_categorical_dtype",
                    "categories": None if cats is None else self.encode(cats, where),
                    "ordered": bool(dtype.ordered)}
        if isinstance(dtype, pd.api.extensions.ExtensionDtype):
            name = str(dtype)
            try:
                ok = pd.api.types.pandas_dtype(name) == dtype
            except TypeError:
                ok = False
            if not ok:
                raise TypeError(_unsupported(dtype, where))
            return {"$": "pd_dtype", "name": name}
        raise TypeError(_unsupported(dtype, where))

    def _type(self, typ: type, where: str):
        if issubclass(typ, np.generic):
            try:
                name = np.dtype(typ).str
            except TypeError:
                raise TypeError(_unsupported(typ, where)) from None
            if np.dtype(name).type is not typ:
                raise TypeError(_unsupported(typ, where))
            return {"$": "numpy_type", "dtype": name}
        if typ in _BUILTIN_TYPES.values():
            return {"$": "type", "name": typ.__name__}
        raise TypeError(_unsupported(typ, where))


def _plain_values(obj) -> np.ndarray:
    values = obj.to_numpy()
    if values.dtype.kind == "O" or isinstance(obj.dtype, pd.api.extensions.ExtensionDtype):
        values = np.asarray(obj.astype(object))
    return values


_BUILTIN_TYPES = {t.__name__: t for t in (bool, int, float, complex, str, bytes, object)}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z][a-z])", "_", name).lower()


def _unsupported(obj, where: str) -> str:
    kind = type(obj).__name__ if not isinstance(obj, type) else f"the type {obj!r}"
    hint = ""
    if hasattr(obj, "dask") or type(obj).__module__.startswith("dask"):
        hint = " Fitted attributes must be NumPy arrays; compute Dask results before storing them."
    elif callable(obj):
        hint = " Functions cannot be saved (a model file never contains code)."
    return (f"cannot save {where}: values of type {kind} are not supported by dml's model "
            f"format.{hint}")


# ============================================================================================
# load
# ============================================================================================

def read_metadata(path) -> dict:
    """Read and check a model file's ``metadata.json`` without loading the model.

    Raises :class:`ModelFileError` for a file that is not a dml model file or is of an
    incompatible format version.
    """
    with _open_zip(path) as zf:
        return _metadata(zf, str(path))


def load(path, *, key: str | bytes | None = None):
    """Load a model saved with :func:`save`.

    Parameters
    ----------
    path : str or path-like
        The model file.
    key : str or bytes, optional
        HMAC key to verify the file's signature with; defaults to ``$DML_MODEL_KEY``. When a key
        is set, unsigned files and files whose signature does not verify are refused.

    Returns
    -------
    estimator

    Raises
    ------
    ModelFileError (a ValueError)
        The file is not a dml model file, is corrupted or was modified, has an incompatible
        format version, names a class that is not registered in :mod:`dml.registry`, or fails
        signature verification.
    FileNotFoundError
        No file at ``path``.
    """
    name = str(path)
    with _open_zip(path) as zf:
        meta = _metadata(zf, name)
        payload_info = meta.get("payload")
        if not isinstance(payload_info, dict) or not isinstance(payload_info.get("sha256"), str):
            raise ModelFileError(f"{name}: the metadata has no payload checksum; the file was "
                                 "modified or corrupted. Re-save the model.")
        key = _key(key)
        if key is not None:
            _verify(meta, key, name)
        if _PAYLOAD not in zf.namelist():
            raise ModelFileError(f"{name}: the model file has no {_PAYLOAD}; the file was "
                                 "modified or corrupted. Re-save the model.")
        try:
            payload = zf.read(_PAYLOAD)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as exc:
            raise ModelFileError(f"{name}: the model file is corrupted ({exc}); the file was "
                                 "modified or corrupted. Re-save or re-copy it.") from None
    if not hmac.compare_digest(hashlib.sha256(payload).hexdigest(), payload_info["sha256"]):
        raise ModelFileError(f"{name}: payload checksum mismatch: the file was modified or "
                             "corrupted. Re-save or re-copy the model file.")
    cls_name = meta.get("estimator")
    if not isinstance(cls_name, str) or not registry.is_allowed(cls_name):
        raise ModelFileError(_not_allowed(name, cls_name))
    try:
        npz = np.load(_io.BytesIO(payload), allow_pickle=False)
        arrays = {k: npz[k] for k in npz.files}
        tree = json.loads(bytes(arrays.pop(_TREE)).decode("utf-8"))
    except (ValueError, KeyError, OSError, zipfile.BadZipFile, UnicodeDecodeError,
            RecursionError) as exc:
        raise ModelFileError(f"{name}: the payload could not be read ({exc}); the file was "
                             "modified or corrupted.") from None
    decoder = _Decoder(arrays, name)
    try:
        root = tree["root"]
        if not isinstance(root, dict) or root.get("$") != "estimator" or \
                root.get("class") != cls_name:
            raise _Malformed("the payload's estimator does not match the metadata")
        return decoder.decode(root)
    except _Malformed as exc:
        raise ModelFileError(f"{name}: malformed payload ({exc}); the file was modified or "
                             "corrupted.") from None
    except (KeyError, IndexError, TypeError, AttributeError, ValueError, RecursionError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{name}: malformed payload ({type(exc).__name__}: {exc}); the "
                             "file was modified or corrupted.") from None


def _not_allowed(name: str, cls_name) -> str:
    return (f"{name}: the model class {cls_name!r} is not allowed: dml only loads estimator "
            f"classes registered in dml.registry ({', '.join(registry.allowed())}). If it is "
            "your own estimator, register it first with dml.registry.register(name, "
            "'package.module:ClassName'); never load model files from untrusted sources.")


class _open_zip:
    """Open ``path`` as a zip archive or raise a :class:`ModelFileError` saying what it is."""

    def __init__(self, path):
        self.path = path
        self.zf = None

    def __enter__(self) -> zipfile.ZipFile:
        name = str(self.path)
        with open(self.path, "rb") as f:  # FileNotFoundError / IsADirectoryError pass through
            head = f.read(8)
        if not head:
            raise ModelFileError(f"{name} is empty: not a dml model file.")
        try:
            self.zf = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            if head.startswith(b"PK"):
                raise ModelFileError(f"{name}: the model file is corrupted or truncated ({exc}); "
                                     "re-copy or re-save it.") from None
            if head[:1] == b"\x80" and len(head) > 1 and head[1] <= 5:
                raise ModelFileError(
                    f"{name} looks like a Python pickle, not a dml model file. dml never loads "
                    "pickles because loading one can run arbitrary code; re-save the model with "
                    "dml.save(model, path) from a trusted session.") from None
            raise ModelFileError(f"{name} is not a dml model file (it is not a zip archive); "
                                 "model files are written by dml.save / `dml train`.") from None
        return self.zf

    def __exit__(self, *exc):
        if self.zf is not None:
            self.zf.close()


def _metadata(zf: zipfile.ZipFile, name: str) -> dict:
    if _METADATA not in zf.namelist():
        raise ModelFileError(f"{name} is not a dml model file (a zip archive without "
                             f"{_METADATA}); model files are written by dml.save / `dml train`.")
    info = zf.getinfo(_METADATA)
    if info.file_size > _MAX_METADATA_BYTES:
        raise ModelFileError(f"{name}: {_METADATA} is implausibly large; not a dml model file.")
    try:
        meta = json.loads(zf.read(_METADATA).decode("utf-8"))
    except (zipfile.BadZipFile, EOFError, OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelFileError(f"{name}: {_METADATA} is unreadable ({exc}); the file was modified "
                             "or corrupted.") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{name} is not a dml model file (its metadata does not say format "
                             f"{FORMAT_NAME!r}); model files are written by dml.save.")
    _check_version(meta, name)
    return meta


def _check_version(meta: dict, name: str) -> None:
    import dml

    version = meta.get("format_version")
    m = re.fullmatch(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
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
    if not hmac.compare_digest(_sign(meta, key), sig["value"]):
        raise ModelFileError(
            f"{name}: signature does not match: the file was modified or signed with a different "
            f"key. Check ${KEY_ENV}, or re-save the model from a trusted source.")


class _Malformed(Exception):
    pass


class _Decoder:
    """Tagged JSON tree + arrays -> objects, constructing only allow-listed classes."""

    def __init__(self, arrays: dict[str, np.ndarray], name: str):
        self.arrays = arrays
        self.name = name
        self.memo: dict[int, object] = {}

    def _get(self, key) -> np.ndarray:
        if not isinstance(key, str) or key not in self.arrays:
            raise _Malformed(f"missing array {key!r}")
        return self.arrays[key]

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if not isinstance(node, dict):
            raise _Malformed(f"unexpected node {type(node).__name__}")
        tag = node.get("$")
        method = getattr(self, f"_d_{tag}", None) if isinstance(tag, str) and \
            tag.isidentifier() else None
        if method is None:
            raise _Malformed(f"unknown node type {tag!r}")
        return method(node)

    def _d_float(self, node):
        value = node["value"]
        if value not in ("nan", "inf", "-inf"):
            raise _Malformed(f"bad float {value!r}")
        return float(value)

    def _d_tuple(self, node):
        return tuple(self.decode(v) for v in node["items"])

    def _d_set(self, node):
        return {self.decode(v) for v in node["items"]}

    def _d_frozenset(self, node):
        return frozenset(self.decode(v) for v in node["items"])

    def _d_dict(self, node):
        out = {}
        for item in node["items"]:
            k, v = item
            out[self.decode(k)] = self.decode(v)
        return out

    def _d_slice(self, node):
        parts = [self.decode(node[k]) for k in ("start", "stop", "step")]
        if not all(p is None or isinstance(p, int) for p in parts):
            raise _Malformed("bad slice")
        return slice(*parts)

    def _d_scalar(self, node):
        arr = self._get(node["key"])
        if arr.ndim != 0:
            raise _Malformed("scalar is not 0-d")
        return arr[()]

    def _d_ndarray(self, node):
        arr = self._get(node["key"])
        if node.get("object"):
            if arr.dtype.kind != "U":
                raise _Malformed("object string array is not unicode")
            out = np.empty(arr.shape, dtype=object)
            out[...] = arr.tolist() if arr.ndim else arr.item()
            return out
        return arr

    def _d_object_array(self, node):
        shape = tuple(node["shape"])
        if not all(isinstance(s, int) and s >= 0 for s in shape):
            raise _Malformed("bad shape")
        items = [self.decode(v) for v in node["items"]]
        if len(items) != math.prod(shape):
            raise _Malformed("object array size does not match its shape")
        out = np.empty(len(items), dtype=object)
        for i, v in enumerate(items):
            out[i] = v
        return out.reshape(shape)

    def _d_dtype(self, node):
        s = node["str"]
        if not isinstance(s, str) or not re.fullmatch(r"[<>|=][a-zA-Z]\d*(\[[a-zA-Z0-9]+\])?", s):
            raise _Malformed(f"bad dtype {s!r}")
        return np.dtype(s)

    def _d_numpy_type(self, node):
        dt = self._d_dtype({"str": node["dtype"]})
        return dt.type

    def _d_type(self, node):
        typ = _BUILTIN_TYPES.get(node["name"])
        if typ is None:
            raise _Malformed(f"type {node['name']!r} is not allowed")
        return typ

    def _d_pd_na(self, node):
        return pd.NA

    def _d_pd_nat(self, node):
        return pd.NaT

    def _d_pd_categorical_dtype(self, node):
        cats = node.get("categories")
        return pd.CategoricalDtype(None if cats is None else self.decode(cats),
                                   ordered=bool(node.get("ordered")))

    def _d_pd_dtype(self, node):
        name = node["name"]
        if not isinstance(name, str) or len(name) > 100:
            raise _Malformed("bad pandas dtype")
        try:
            # pandas_dtype parses a dtype name from pandas' own table; it imports nothing.
            return pd.api.types.pandas_dtype(name)
        except TypeError as exc:
            raise _Malformed(f"unknown pandas dtype {name!r}") from exc

    def _d_pd_index(self, node):
        return pd.Index(self.decode(node["values"]), dtype=self.decode(node["dtype"]),
                        name=self.decode(node["name"]))

    def _d_pd_series(self, node):
        return pd.Series(self.decode(node["values"]), index=self.decode(node["index"]),
                         dtype=self.decode(node["dtype"]), name=self.decode(node["name"]))

    def _d_ref(self, node):
        try:
            return self.memo[node["id"]]
        except (KeyError, TypeError):
            raise _Malformed(f"dangling reference {node.get('id')!r}") from None

    def _d_estimator(self, node):
        cls_name = node["class"]
        if not isinstance(cls_name, str) or not registry.is_allowed(cls_name):
            raise ModelFileError(_not_allowed(self.name, cls_name))
        cls = registry.dotted_to_class(cls_name)
        params = {k: self.decode(v) for k, v in _str_keys(node["params"]).items()}
        try:
            est = cls(**params)
        except TypeError as exc:
            raise ModelFileError(
                f"{self.name}: the saved parameters of {cls_name} do not fit this dml version's "
                f"class ({exc}); load it with the dml version that wrote it "
                "and retrain.") from None
        state = {k: self.decode(v) for k, v in _str_keys(node["state"]).items()}
        est.__dict__.update(state)
        node_id = node.get("id")
        if not isinstance(node_id, int) or node_id in self.memo:
            raise _Malformed("bad estimator id")
        self.memo[node_id] = est
        return est


def _str_keys(d) -> dict:
    if not isinstance(d, dict) or not all(isinstance(k, str) and k.isidentifier() for k in d):
        raise _Malformed("attribute names must be identifiers")
    if any(k.startswith("__") for k in d):
        raise _Malformed("dunder attribute names are not allowed")
    return d
