"""dml.load on hostile and damaged files: decompression bombs and seeded fuzzing.

Every case must end in a :class:`dml.io.ModelFileError` (or, when the damage hit nothing that
matters, the same model) quickly and in bounded memory: never another exception, never a
multi-gigabyte allocation.
"""
from __future__ import annotations

import copy
import functools
import io
import json
import struct
import tempfile
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from dml.io import ModelFileError, load, read_metadata, save
from dml.naive_bayes import GaussianNB

from _io_helpers import assert_same, fix_sizes, read_members, write_members  # tests/ on sys.path

RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 3))
Y = np.array(["a", "b", "c"], dtype=object)[RNG.integers(0, 3, 60)]
MiB = 2**20
GiB = 2**30


def _model():
    return Pipeline([("scale", StandardScaler()), ("nb", GaussianNB())]).fit(X, Y)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model = _model()
    path = save(model, tmp_path_factory.mktemp("hostile") / "model.dml")
    return model, path.read_bytes()


# --------------------------------------------------------------------------------------------
# decompression bombs
# --------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)  # the 2 GiB bomb's CRC takes a second: build it once
def _deflated_zeros(prefix: bytes, n_zeros: int):
    """Raw deflate stream and CRC-32 of ``prefix`` + ``n_zeros`` zero bytes, built in small
    memory: after a full flush, every MiB of zeros compresses to the same bytes."""
    assert n_zeros % MiB == 0
    zeros = bytes(MiB)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH) == block
    stream = head + block * (n_zeros // MiB) + c.flush()
    crc = zlib.crc32(prefix)
    for _ in range(n_zeros // MiB):
        crc = zlib.crc32(zeros, crc)
    return stream, crc


def _zip(members) -> bytes:
    """A zip archive of ``(name, deflated bytes, crc, size)`` members, written by hand so that a
    member's data never has to exist decompressed."""
    out, central = io.BytesIO(), []
    for name, data, crc, size in members:
        offset = out.tell()
        name = name.encode()
        out.write(struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 20, 0, 0, 8, 0, 0x21, crc,
                              len(data), size, len(name), 0) + name + data)
        central.append(struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 20, 3, 20, 0, 0, 8, 0,
                                   0x21, crc, len(data), size, len(name), 0, 0, 0, 0, 0, offset)
                       + name)
    start = out.tell()
    out.write(b"".join(central))
    out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members),
                          out.tell() - start, start, 0))
    return out.getvalue()


def _npy_header(shape, descr="<f8") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape!r}, }}"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1")


def _bomb_payload(payload: bytes, zeros: int, shape, declared: int | None = None):
    """``payload`` with its first fitted array replaced by an .npy of ``zeros`` zero bytes whose
    header says ``shape``; ``declared`` overrides the size its zip entry records."""
    npz = zipfile.ZipFile(io.BytesIO(payload))
    tree = json.loads(npz.read("__tree__.npy")[128:].decode())
    key = tree["root"]["params"]["steps"][1]["items"][1]["state"]["var_"]["key"]
    members = []
    for info in npz.infolist():
        raw = npz.read(info)
        if info.filename == f"{key}.npy":
            header = _npy_header(shape)
            data, crc = _deflated_zeros(header, zeros)
            if declared is not None:  # a CRC that matches the declared bytes
                crc = zlib.crc32((header + bytes(declared))[:declared])
            members.append((info.filename, data, crc,
                            len(header) + zeros if declared is None else declared))
        else:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            members.append((info.filename, c.compress(raw) + c.flush(), zlib.crc32(raw),
                            len(raw)))
    return _zip(members)


def test_bomb_helpers_build_a_valid_archive():
    # The bomb below is only meaningful if numpy itself reads it: check a 3 MiB one.
    stream = _bomb_payload(_payload_of(_model()), 3 * MiB, (3 * MiB // 8,))
    npz = np.load(io.BytesIO(stream), allow_pickle=False)
    arrays = {k: npz[k] for k in npz.files}
    assert max(a.nbytes for a in arrays.values()) == 3 * MiB
    assert len(stream) < 64 * 1024


def _payload_of(model) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        return read_members(save(model, f"{d}/m.dml"))[1]


@pytest.mark.parametrize("variant", ["metadata_tells_the_size", "metadata_lies",
                                     "format_1_0_without_size", "member_size_lies"])
def test_two_gib_bomb_is_refused_in_bounded_memory(saved, tmp_path, variant):
    _, original = saved
    path = tmp_path / "bomb.dml"
    path.write_bytes(original)
    meta, payload = read_members(path)
    zeros = 2 * GiB
    header_len = len(_npy_header((zeros // 8,)))
    declared = 4096 if variant == "member_size_lies" else None
    bomb = _bomb_payload(payload, zeros, (zeros // 8,), declared)
    assert len(bomb) < 3 * MiB
    fix_sizes(meta, bomb)  # the attacker recomputes the checksum
    if variant == "metadata_tells_the_size":
        assert meta["payload"]["inflated_bytes"] > zeros + header_len
    if variant == "metadata_lies":
        meta["payload"]["inflated_bytes"] = len(payload)
    if variant == "format_1_0_without_size":
        meta["format_version"] = "1.0"
        del meta["payload"]["inflated_bytes"]
    write_members(path, meta, bomb)

    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError) as exc:
            load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * MiB, f"loading the bomb allocated {peak / MiB:.0f} MiB"
    message = str(exc.value)
    assert str(path) in message
    expected = {
        "metadata_tells_the_size": r"would take 2,147,48\d,\d{3} bytes once decompressed, more "
                                   r"than the 268,435,456-byte limit for a \d,\d{3},\d{3}-byte "
                                   r"file.*probably a decompression bomb.*max_bytes",
        "metadata_lies": r"the payload holds 2,147,48\d,\d{3} bytes decompressed but the "
                         r"metadata records",
        "format_1_0_without_size": r"would take 2,147,48\d,\d{3} bytes once decompressed.*"
                                   r"decompression bomb",
        "member_size_lies": r"malformed payload \(an array's header does not match its size\)",
    }[variant]
    assert exc.match(expected)


def test_json_structure_bomb_is_refused_in_bounded_memory(saved, tmp_path):
    # 24 MiB of "[]," parse into ~500 MB of Python lists, from a file of a few tens of KiB.
    _, original = saved
    path = tmp_path / "m.dml"
    path.write_bytes(original)
    meta, payload = read_members(path)
    npz = np.load(io.BytesIO(payload), allow_pickle=False)
    arrays = {k: npz[k] for k in npz.files}
    tree = json.loads(bytes(arrays["__tree__"]).decode())
    tree["root"]["state"]["junk_"] = "@"
    text = json.dumps(tree).replace('"@"', "[" + "[]," * (8 * MiB) + "[]]").encode()
    arrays["__tree__"] = np.frombuffer(text, dtype=np.uint8)
    del text, tree
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    del arrays
    fix_sizes(meta, buf.getvalue())
    write_members(path, meta, buf.getvalue())
    assert path.stat().st_size < 128 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match=r"its structure would take 25,\d{3},\d{3} bytes "
                                                 r"once decompressed, more than the 4,194,304-byte "
                                                 r"limit.*decompression bomb"):
            load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MiB


def test_strings_count_against_the_limit(tmp_path):
    # 2 million 2-character labels: 16 MB as a unicode array, ~150 MB as Python strings.
    from dml.preprocessing import OneHotEncoder

    labels = np.array([f"{i % 97:02d}" for i in range(2_000_000)], dtype=object)
    model = OneHotEncoder().fit(labels[:100].reshape(-1, 1))
    model.categories_ = [labels]
    path = save(model, tmp_path / "m.dml")
    with pytest.raises(ModelFileError, match="its strings would take more memory than the size "
                                             "limit"):
        load(path, max_bytes=100 * MiB)
    assert len(load(path, max_bytes=200 * MiB).categories_[0]) == 2_000_000


def test_oversized_members_of_the_model_file_are_refused(saved, tmp_path):
    _, original = saved
    path = tmp_path / "m.dml"
    path.write_bytes(original)
    meta, payload = read_members(path)
    # The stored payload claims more than the metadata records.
    meta_big = copy.deepcopy(meta)
    meta_big["payload"]["bytes"] = len(payload) - 1
    write_members(path, meta_big, payload)
    with pytest.raises(ModelFileError, match=r"payload.npz holds [\d,]+ bytes but the metadata "
                                             r"records [\d,]+; the file was modified"):
        load(path)
    # A metadata member that inflates to 1 GiB is refused before it is read.
    stream, crc = _deflated_zeros(b"{", 1024 * MiB)
    path.write_bytes(_zip([("metadata.json", stream, crc, 1024 * MiB + 1)]))
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match="metadata.json is implausibly large"):
            read_metadata(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MiB


def test_max_bytes_limits_and_is_checked(saved, tmp_path):
    model, original = saved
    path = tmp_path / "m.dml"
    path.write_bytes(original)
    with pytest.raises(ModelFileError, match=r"would take [\d,]+ bytes once decompressed, more "
                                             r"than the 100-byte limit.*pass a larger max_bytes"):
        load(path, max_bytes=100)
    assert_same(vars(load(path, max_bytes=10 * MiB)), vars(model))
    for bad in (0, -5, 1.5, True, "1GB"):
        with pytest.raises(ValueError, match="max_bytes must be a positive integer or None"):
            load(path, max_bytes=bad)


def test_highly_compressible_model_warns_at_save_and_needs_max_bytes(tmp_path, monkeypatch):
    import dml.io

    monkeypatch.setattr(dml.io, "_MIN_LIMIT", 64 * 1024)  # instead of building 256 MiB
    model = GaussianNB().fit(np.zeros((4, 20_000)), [0, 1, 0, 1])
    with pytest.warns(UserWarning, match=r"more than dml.load accepts by default; load it with "
                                         r"dml.load\(path, max_bytes=\d+\)"):
        path = save(model, tmp_path / "m.dml")
    with pytest.raises(ModelFileError, match="probably a decompression bomb"):
        load(path)
    need = read_metadata(path)["payload"]["inflated_bytes"]
    assert_same(vars(load(path, max_bytes=need)), vars(model))
    with pytest.raises(ModelFileError, match="probably a decompression bomb"):
        load(path, max_bytes=need - 1)


# --------------------------------------------------------------------------------------------
# fuzzing
# --------------------------------------------------------------------------------------------

def _mutate(data: bytes, rng: np.random.Generator) -> tuple[str, bytes]:
    b = bytearray(data)
    n = len(b)
    kind = ["flip", "byte", "truncate", "extend", "insert", "zero", "duplicate",
            "swap"][rng.integers(0, 8)]
    i = int(rng.integers(0, n))
    if kind == "flip":
        for _ in range(int(rng.integers(1, 4))):
            j = int(rng.integers(0, n))
            b[j] ^= 1 << int(rng.integers(0, 8))
    elif kind == "byte":
        b[i] = int(rng.integers(0, 256))
    elif kind == "truncate":
        del b[i:]
    elif kind == "extend":
        b += rng.bytes(int(rng.integers(1, 5000)))
    elif kind == "insert":
        b[i:i] = rng.bytes(int(rng.integers(1, 64)))
    elif kind == "zero":
        k = int(rng.integers(1, 256))
        b[i:i + k] = bytes(len(b[i:i + k]))
    elif kind == "duplicate":
        k = int(rng.integers(1, 512))
        b[i:i] = b[i:i + k]
    else:  # swap two 4-byte words (sizes, offsets, CRCs)
        j = int(rng.integers(0, max(n - 4, 1)))
        i = min(i, n - 4)
        b[i:i + 4], b[j:j + 4] = b[j:j + 4], b[i:i + 4]
    return f"{kind}@{i}", bytes(b)


def test_fuzzed_model_files_load_identically_or_are_refused(saved, tmp_path):
    model, original = saved
    rng = np.random.default_rng(20)
    path = tmp_path / "fuzz.dml"
    outcomes = {"loaded": 0, "refused": 0}
    for case in range(400):
        what, data = _mutate(original, rng)
        path.write_bytes(data)
        try:
            loaded = load(path)
        except ModelFileError as exc:
            message = str(exc)
            assert str(path) in message and len(message) > 40, (case, what, message)
            outcomes["refused"] += 1
        else:
            assert_same(vars(loaded), vars(model), f"case {case} ({what})")
            np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
            outcomes["loaded"] += 1
        try:
            read_metadata(path)
        except ModelFileError:
            pass
    assert outcomes["refused"] > 300, outcomes
    assert outcomes["loaded"] > 0, outcomes  # e.g. bytes appended after the archive


_JUNK = [None, -1, 0, 2**70, 1.5, "x", "", [], {}, [[[[]]]], {"$": None},
         {"$": "estimator", "class": "os.system", "id": 0, "params": {}, "state": {}},
         {"$": "estimator", "class": "sklearn.preprocessing.FunctionTransformer", "id": 99,
          "params": {"func": {"$": "type", "name": "float"}}, "state": {}},
         {"$": "ndarray", "key": "a0"}, {"$": "scalar", "key": "a1"},
         {"$": "ndarray", "key": "a0", "object": True},
         {"$": "object_array", "shape": [10**12], "items": []},
         {"$": "object_array", "shape": [-1], "items": []},
         {"$": "ref", "id": 999}, {"$": "dtype", "str": "<U999999999999"},
         {"$": "dtype", "str": "|O"}, {"$": "numpy_type", "dtype": "|V8"},
         {"$": "type", "name": "eval"}, {"$": "slice", "start": "a", "stop": 1, "step": None},
         {"$": "float", "value": "1e999"}, {"$": "pd_dtype", "name": "category" * 20},
         {"$": "pd_index", "values": 3, "dtype": None, "name": None},
         {"$": "random_state", "state": {}}, {"$": "generator", "bit_generator": "os",
                                              "state": {}},
         {"$": "dml_scorer", "name": "nope"}, {"$": "masked_array", "data": 1, "mask": 2,
                                               "fill_value": None},
         {"$": "sklearn_tree", "n_features": 2, "n_classes": {"$": "ndarray", "key": "a0"},
          "n_outputs": 1, "nodes": {}, "state": {}},
         {"$": "dict", "items": [[[], 1]]}, {"$": "set", "items": [[]]}, {"$": "tuple"}]


def _paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, path + (i,))


def test_fuzzed_structure_with_recomputed_checksum_is_loaded_or_refused(saved, tmp_path):
    # An attacker can rewrite the payload and its checksum: the decoder itself must then turn
    # every inconsistency into a ModelFileError.
    _, original = saved
    path = tmp_path / "m.dml"
    path.write_bytes(original)
    meta, payload = read_members(path)
    npz = np.load(io.BytesIO(payload), allow_pickle=False)
    arrays = {k: npz[k] for k in npz.files}
    tree = json.loads(bytes(arrays.pop("__tree__")).decode())
    paths = [p for p in _paths(tree) if p]
    rng = np.random.default_rng(7)
    refused = 0
    for case in range(250):
        t = copy.deepcopy(tree)
        mutated = dict(arrays)
        for _ in range(int(rng.integers(1, 3))):
            p = paths[int(rng.integers(0, len(paths)))]
            parent = t
            try:
                for k in p[:-1]:
                    parent = parent[k]
                parent[p[-1]] = copy.deepcopy(_JUNK[int(rng.integers(0, len(_JUNK)))])
            except (KeyError, IndexError, TypeError):
                continue
        if rng.random() < 0.3:  # also swap an array for one of another dtype or shape
            k = sorted(mutated)[int(rng.integers(0, len(mutated)))]
            mutated[k] = [np.arange(3), np.array("s"), np.zeros((2, 2), "f4"),
                          np.array([], "i1")][int(rng.integers(0, 4))]
        mutated["__tree__"] = np.frombuffer(json.dumps(t).encode(), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **mutated)
        fix_sizes(meta, buf.getvalue())
        write_members(path, meta, buf.getvalue())
        try:
            load(path)
        except ModelFileError as exc:
            assert str(path) in str(exc)
            refused += 1
    assert refused > 150


@pytest.mark.parametrize("signed", [False, True])
def test_fuzzed_metadata_is_loaded_or_refused(saved, tmp_path, signed):
    model, original = saved
    path = tmp_path / "m.dml"
    if signed:
        save(model, path, key="k3y")
    else:
        path.write_bytes(original)
    meta, payload = read_members(path)
    paths = [p for p in _paths(meta) if p]
    junk = _JUNK + [float("nan"), "1.0", "99.1", "1." + "9" * 5000, "é", "\ud800", 10**30,
                    {"algorithm": "hmac-sha256", "value": "é"}]
    rng = np.random.default_rng(11)
    refused = 0
    for case in range(200):
        m = copy.deepcopy(meta)
        p = paths[int(rng.integers(0, len(paths)))]
        parent = m
        for k in p[:-1]:
            parent = parent[k]
        parent[p[-1]] = copy.deepcopy(junk[int(rng.integers(0, len(junk)))])
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("metadata.json", json.dumps(m))
            zf.writestr("payload.npz", payload)
        try:
            loaded = load(path, key="k3y" if signed else None)
        except ModelFileError as exc:
            assert str(path) in str(exc), (case, p)
            refused += 1
        else:
            assert_same(vars(loaded), vars(model), f"case {case} {p}")
    assert refused > (180 if signed else 20), refused  # unsigned: most fields are informational
