"""Helpers shared by the dml.save / dml.load tests (test_io*.py)."""
from __future__ import annotations

import hashlib
import io
import json
import math
import zipfile

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator


def assert_same(a, b, where="model"):
    """Deep equality of fitted state: same types, dtypes, shapes and values (NaN == NaN)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, np.ma.MaskedArray):
        assert_same(np.ma.getmaskarray(a), np.ma.getmaskarray(b), f"{where}.mask")
        assert_same(np.asarray(a.data), np.asarray(b.data), f"{where}.data")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != " \
                                                          f"{b.dtype}{b.shape}"
        if a.dtype.kind == "O":
            for i, (x, y) in enumerate(zip(a.ravel(), b.ravel())):
                assert_same(x, y, f"{where}[{i}]")
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} != {list(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, BaseEstimator) or type(a).__module__.startswith(
            ("sklearn.model_selection", "dml.model_selection._split")):
        assert_same(vars(a), vars(b), f"{where}<{type(a).__name__}>")
    elif type(a).__name__ == "Tree":  # scikit-learn's fitted tree structure
        assert_same(a.__getstate__(), b.__getstate__(), f"{where}<Tree>")
        assert (a.n_features, a.n_outputs) == (b.n_features, b.n_outputs), where
        np.testing.assert_array_equal(a.n_classes, b.n_classes, err_msg=where)
    elif type(a).__name__ == "_Scorer":  # dml's named scorers
        assert (a.name, a.row) == (b.name, b.row), where
    elif isinstance(a, np.random.RandomState):
        assert_same(a.get_state(legacy=False), b.get_state(legacy=False), where)
    elif isinstance(a, np.random.Generator):
        assert_same(a.bit_generator.state, b.bit_generator.state, where)
    elif isinstance(a, pd.Index):
        assert a.equals(b) and a.dtype == b.dtype and a.name == b.name, where
    elif a is pd.NA or a is pd.NaT:
        assert b is a, where
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype, where
        assert (a == b) or (a != a and b != b), where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def read_members(path):
    """(metadata dict, payload bytes) of a model file."""
    with zipfile.ZipFile(path) as zf:
        return json.loads(zf.read("metadata.json")), zf.read("payload.npz")


def fix_sizes(meta, payload):
    """Make the metadata's checksum and sizes match ``payload``, as an attacker can."""
    meta["payload"]["sha256"] = hashlib.sha256(payload).hexdigest()
    meta["payload"]["bytes"] = len(payload)
    if "inflated_bytes" in meta["payload"]:
        with zipfile.ZipFile(io.BytesIO(payload)) as npz:
            meta["payload"]["inflated_bytes"] = sum(i.file_size for i in npz.infolist())


def write_members(path, meta, payload, *, payload_method=zipfile.ZIP_STORED):
    """Write a model file from its two members."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("metadata.json", json.dumps(meta))
        zf.writestr("payload.npz", payload, compress_type=payload_method)


def rewrite(path, *, metadata=None, payload=None, tree=None, fix_checksum=True):
    """Rewrite a model file's members (a new, valid zip), optionally fixing the checksum."""
    meta, data = read_members(path)
    if tree is not None:
        npz = np.load(io.BytesIO(data), allow_pickle=False)
        arrays = {k: npz[k] for k in npz.files}
        t = json.loads(bytes(arrays["__tree__"]).decode())
        tree(t)
        arrays["__tree__"] = np.frombuffer(json.dumps(t).encode(), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        data = buf.getvalue()
    if payload is not None:
        data = payload(data)
    if fix_checksum:
        fix_sizes(meta, data)
    if metadata is not None:
        metadata(meta)
    write_members(path, meta, data)
