"""dml.save / dml.load: round trips of every registered estimator, and refusal of bad files."""
from __future__ import annotations

import hashlib
import io
import json
import pickle
import sys
import zipfile

import dask.array as da
import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, is_classifier, is_regressor
from sklearn.pipeline import Pipeline

import dml
from dml import registry
from dml.io import FORMAT_VERSION, KEY_ENV, ModelFileError, load, read_metadata, save

from _io_helpers import assert_same, rewrite  # tests/ is on sys.path


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

RNG = np.random.default_rng(0)
X_COUNTS = RNG.poisson(2.0, size=(120, 4)).astype(np.float64)
Y_LABELS = np.array(["no", "yes", "maybe"], dtype=object)[RNG.integers(0, 3, size=120)]
X_FRAME = pd.DataFrame({
    "colour": np.array(["red", "green", "blue"], dtype=object)[RNG.integers(0, 3, 120)],
    "size": RNG.integers(0, 4, 120),
    "weight": RNG.normal(size=120),
})

#: Documents (and dicts) for the registered text and hashing producers.
_DOCS = ["the cat sat on the mat", "the dog ate my homework", "a cat and a dog"] * 4
TEXT_INPUT = {"hashing_vectorizer": _DOCS, "count_vectorizer": _DOCS, "tfidf_vectorizer": _DOCS,
              "feature_hasher": [{w: 1.0 for w in d.split()} for d in _DOCS]}


def _fit_registered(name):
    """A fitted instance of registry entry ``name`` and the input to compare outputs on."""
    try:
        cls = registry.get(name)
    except ImportError as exc:
        pytest.skip(f"{name} is not available yet: {exc}")
    est = cls()
    if name in TEXT_INPUT:
        X = TEXT_INPUT[name]
        return est.fit(X), X
    if name == "one_hot":
        X = X_FRAME[["colour", "size"]]
        return est.fit(X), X
    if name == "matrix_factorization":
        X = X_COUNTS[:, :2]
        return est.set_params(n_epochs=2).fit(X, X_COUNTS[:, 2] + 1.0), X
    if is_classifier(est):
        return est.fit(X_COUNTS, Y_LABELS), X_COUNTS
    if is_regressor(est):
        return est.fit(X_COUNTS, X_COUNTS @ np.arange(1.0, 5.0)), X_COUNTS
    return est.fit(X_COUNTS), X_COUNTS


def _outputs(est, X) -> dict:
    out = {}
    for method in ("predict", "predict_proba", "predict_log_proba", "transform",
                   "decision_function"):
        if hasattr(est, method):
            try:
                res = getattr(est, method)(X)
            except (AttributeError, NotImplementedError):
                continue
            out[method] = res.toarray() if hasattr(res, "toarray") else np.asarray(res)
    assert out, f"{type(est).__name__} has no output method"
    return out


ESTIMATORS = [n for n in registry.names() if registry.kind(n) != "component"]


# --------------------------------------------------------------------------------------------
# round trips
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ESTIMATORS)
def test_round_trip_every_registered_estimator(name, tmp_path):
    est, X = _fit_registered(name)
    path = save(est, tmp_path / f"{name}.dml")
    loaded = load(path)
    assert type(loaded) is type(est)
    assert loaded.get_params() == est.get_params()
    assert_same(vars(loaded), vars(est))
    before, after = _outputs(est, X), _outputs(loaded, X)
    for method in before:
        np.testing.assert_array_equal(after[method], before[method], err_msg=method)
        assert after[method].dtype == before[method].dtype


@pytest.mark.parametrize("name", ["gaussian_nb", "categorical_nb"])
def test_loaded_model_predicts_dask_input_identically(name, tmp_path):
    est, X = _fit_registered(name)
    loaded = load(save(est, tmp_path / "m.dml"))
    Xd = da.from_array(X, chunks=(50, -1))
    pred = loaded.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), est.predict(X))


def test_unfitted_estimator_round_trip(tmp_path):
    cls = registry.get("gaussian_nb")
    est = cls(var_smoothing=1e-3, priors=[0.2, 0.3, 0.5])
    loaded = load(save(est, tmp_path / "m.dml"))
    assert loaded.get_params() == est.get_params()
    assert not hasattr(loaded, "classes_")


def test_pipeline_of_dml_steps(tmp_path):
    try:
        scaler = registry.get("minmax_scaler")()
    except ImportError as exc:
        pytest.skip(str(exc))
    pipe = Pipeline([("scale", scaler), ("nb", registry.get("multinomial_nb")(alpha=0.5))])
    pipe.fit(X_COUNTS, Y_LABELS)
    loaded = load(save(pipe, tmp_path / "pipe.dml"))
    assert isinstance(loaded, Pipeline)
    assert [n for n, _ in loaded.steps] == ["scale", "nb"]
    assert_same(loaded.steps, pipe.steps)
    np.testing.assert_array_equal(loaded.predict(X_COUNTS), pipe.predict(X_COUNTS))
    np.testing.assert_array_equal(loaded.predict_proba(X_COUNTS), pipe.predict_proba(X_COUNTS))
    meta = read_metadata(tmp_path / "pipe.dml")
    assert meta["estimator"] == "sklearn.pipeline.Pipeline"
    steps = meta["params"]["steps"]
    assert steps[1][0] == "nb" and steps[1][1]["params"]["alpha"] == 0.5


def test_column_transformer_pipeline(tmp_path):
    try:
        ColumnTransformer = registry.get("column_transformer")
        OneHot, Scaler = registry.get("one_hot"), registry.get("standard_scaler")
    except ImportError as exc:
        pytest.skip(str(exc))
    ct = ColumnTransformer([("oh", OneHot(handle_unknown="ignore"), ["colour"]),
                            ("sc", Scaler(), ["size", "weight"])])
    pipe = Pipeline([("pre", ct), ("nb", registry.get("gaussian_nb")())]).fit(X_FRAME, Y_LABELS)
    loaded = load(save(pipe, tmp_path / "ct.dml"))
    assert_same(loaded.steps, pipe.steps)
    np.testing.assert_array_equal(loaded.predict(X_FRAME), pipe.predict(X_FRAME))
    np.testing.assert_array_equal(loaded.predict_proba(X_FRAME), pipe.predict_proba(X_FRAME))


class Exotic(BaseEstimator):
    """Fitted state with every kind of value the format encodes."""

    def __init__(self, alpha=1.0, dtype=np.float64, inner=None, steps=()):
        self.alpha = alpha
        self.dtype = dtype
        self.inner = inner
        self.steps = steps

    def fit(self, X=None, y=None):
        mixed = np.empty(7, dtype=object)
        mixed[:] = [1, "a", None, 2.5, float("nan"), ("t", 1), np.arange(2)]
        self.mixed_ = mixed
        self.labels_ = np.array(["x", "yy", "zzz"], dtype=object)
        self.labels2d_ = np.array([["a", "b"], ["c", "d"]], dtype=object)
        self.nested_ = {"a": [1, 2, {"b": (3, 4)}], 5: np.arange(3), (1, 2): "tuple key"}
        self.scalars_ = [np.float32(1.5), np.int64(7), np.bool_(True), float("inf"),
                         float("-inf"), np.float64("nan"), 2**70]
        self.slices_ = {"s": slice(0, 10, 2), "t": slice(None, 3)}
        self.index_ = pd.Index(["a", "b"], name="cols")
        self.sets_ = ({1, 2}, frozenset({"a"}))
        self.dtypes_ = [np.dtype("float32"), np.dtype("<U3"), np.dtype("O"),
                        pd.CategoricalDtype(["a", "b"], ordered=True)]
        self.types_ = [np.float64, np.int32, float, str]
        self.empty_ = np.array([], dtype=object)
        self.nul_ = np.array(["a\x00", "b"], dtype=object)
        self.bytes_ = np.array([b"ab", b"c"])
        self.dt_ = np.array(["2020-01-01", "NaT"], dtype="datetime64[ns]")
        self.categories_ = [np.array(["a", "b"], dtype=object), np.array([1, 2])]
        self.shared_ = self.inner
        self.na_ = [pd.NA, pd.NaT]
        return self


@pytest.fixture
def exotic_registered():
    registry.register("io_test_exotic", f"{__name__}:Exotic", replace=True)
    yield
    registry.unregister("io_test_exotic")


def test_exotic_state_round_trip(tmp_path, exotic_registered):
    inner = Exotic(alpha=2.0)
    est = Exotic(alpha=0.5, dtype=np.float32, inner=inner,
                 steps=[("a", Exotic(dtype=str)), ("b", "passthrough")]).fit()
    path = save(est, tmp_path / "exotic.dml")
    loaded = load(path)
    assert_same(vars(loaded), vars(est))
    assert loaded.shared_ is loaded.inner  # shared references stay shared
    assert loaded.dtype is np.float32 and loaded.steps[0][1].dtype is str
    # The payload holds no object (pickled) arrays: strings are unicode arrays.
    with zipfile.ZipFile(path) as zf:
        npz = np.load(io.BytesIO(zf.read("payload.npz")), allow_pickle=False)
        kinds = {npz[k].dtype.kind for k in npz.files}
    assert "O" not in kinds and "U" in kinds


def test_metadata_contents(tmp_path):
    est, _ = _fit_registered("gaussian_nb")
    path = save(est, tmp_path / "m.dml")
    meta = read_metadata(path)
    assert meta["format"] == "dml-model"
    assert meta["format_version"] == f"{FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}"
    assert meta["dml_version"] == dml.__version__
    assert meta["estimator"] == registry.target("gaussian_nb").replace(":", ".")
    assert meta["params"] == json.loads(json.dumps(est.get_params(deep=False)))
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["metadata.json", "payload.npz"]
        digest = hashlib.sha256(zf.read("payload.npz")).hexdigest()
    assert meta["payload"]["sha256"] == digest
    assert "signature" not in meta
    import datetime

    assert datetime.datetime.fromisoformat(meta["created_at"]).tzinfo is not None


def test_save_refuses_unregistered_and_unencodable(tmp_path):
    from sklearn.naive_bayes import GaussianNB as SkGNB

    with pytest.raises(TypeError, match="sklearn.naive_bayes.GaussianNB is not one of the "
                                        "types a dml model file can hold.*register"):
        save(SkGNB(), tmp_path / "m.dml")
    est, _ = _fit_registered("gaussian_nb")
    est.callback_ = print
    with pytest.raises(TypeError, match=r"GaussianNB.callback_.*Functions cannot be saved"):
        save(est, tmp_path / "m.dml")
    assert not (tmp_path / "m.dml").exists()


def test_save_overwrites_atomically(tmp_path):
    est, X = _fit_registered("gaussian_nb")
    path = tmp_path / "m.dml"
    save(registry.get("gaussian_nb")(), path)
    save(est, path)
    np.testing.assert_array_equal(load(path).predict(X), est.predict(X))
    assert [p.name for p in tmp_path.iterdir()] == ["m.dml"]


# --------------------------------------------------------------------------------------------
# refusals
# --------------------------------------------------------------------------------------------

@pytest.fixture
def model_file(tmp_path):
    est, _ = _fit_registered("gaussian_nb")
    return save(est, tmp_path / "model.dml")


def test_tampered_payload_with_valid_zip_is_refused(model_file):
    # Flip bytes inside the payload but write a new, internally consistent zip.
    def flip(data):
        b = bytearray(data)
        b[len(b) // 2] ^= 0xFF
        return bytes(b)

    rewrite(model_file, payload=flip, fix_checksum=False)
    with pytest.raises(ModelFileError, match="checksum mismatch: the file was modified or "
                                             "corrupted"):
        load(model_file)


def test_bytes_flipped_in_file_are_refused(model_file):
    data = bytearray(model_file.read_bytes())
    data[-200] ^= 0xFF  # inside the stored payload: the zip CRC no longer matches
    model_file.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="modified or corrupted|corrupted"):
        load(model_file)


def test_truncated_file_is_refused(model_file):
    data = model_file.read_bytes()
    model_file.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="corrupted or truncated"):
        load(model_file)


def test_empty_and_text_files_are_refused(tmp_path):
    (tmp_path / "empty.dml").write_bytes(b"")
    with pytest.raises(ModelFileError, match="empty: not a dml model file"):
        load(tmp_path / "empty.dml")
    (tmp_path / "notes.dml").write_text("hello")
    with pytest.raises(ModelFileError, match="not a dml model file .*not a zip archive"):
        load(tmp_path / "notes.dml")


def test_other_zip_files_are_refused(tmp_path):
    np.savez(tmp_path / "arrays.npz", a=np.arange(3))
    with pytest.raises(ModelFileError, match="not a dml model file .*without metadata.json"):
        load(tmp_path / "arrays.npz")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as zf:
        zf.writestr("metadata.json", json.dumps({"format": "something-else"}))
    with pytest.raises(ModelFileError, match="not a dml model file"):
        load(tmp_path / "other.zip")


@pytest.mark.parametrize("version, match", [
    ("2.0", r"format 2.0 .* is newer than this dml .* Upgrade dml"),
    ("17.3", r"format 17.3 .* is newer"),
    ("0.9", r"format 0.9 .* is too old"),
    ("one", r"unreadable format version"),
])
def test_incompatible_format_versions_are_refused(model_file, version, match):
    rewrite(model_file, metadata=lambda m: m.update(format_version=version))
    with pytest.raises(ModelFileError, match=match):
        load(model_file)


def test_newer_minor_version_still_loads(model_file):
    rewrite(model_file, metadata=lambda m: m.update(format_version=f"{FORMAT_VERSION[0]}.99",
                                                   new_optional_field=[1, 2]))
    assert load(model_file).classes_.tolist() == sorted(set(Y_LABELS))


def test_format_1_0_files_still_load(model_file):
    # Format 1.0 (dml before the decompressed size was recorded) wrote the same members.
    assert read_metadata(model_file)["payload"]["inflated_bytes"] > 0

    def as_1_0(meta):
        meta["format_version"] = "1.0"
        del meta["payload"]["inflated_bytes"]

    rewrite(model_file, metadata=as_1_0)
    assert load(model_file).classes_.tolist() == sorted(set(Y_LABELS))


def test_disallowed_class_in_metadata_is_refused(model_file):
    rewrite(model_file, metadata=lambda m: m.update(estimator="os.system"))
    with pytest.raises(ModelFileError, match="'os.system' is not allowed.*dml.registry"):
        load(model_file)


def test_disallowed_class_in_payload_is_refused_without_importing_it(model_file):
    # An attacker who rewrites the payload and recomputes the checksum still cannot name a
    # class outside the registry, and the named module is never imported.
    evil = "dml_test_evil_module.Evil"

    def swap(tree):
        tree["root"]["class"] = evil

    rewrite(model_file, tree=swap, metadata=lambda m: m.update(estimator=evil))
    with pytest.raises(ModelFileError, match=f"'{evil}' is not allowed"):
        load(model_file)
    assert "dml_test_evil_module" not in sys.modules

    def nested(tree):
        tree["root"]["class"] = registry.target("gaussian_nb").replace(":", ".")
        tree["root"]["state"]["hook_"] = {"$": "estimator", "class": "subprocess.Popen",
                                          "id": 99, "params": {}, "state": {}}

    rewrite(model_file, tree=nested,
            metadata=lambda m: m.update(estimator=registry.target("gaussian_nb")
                                        .replace(":", ".")))
    with pytest.raises(ModelFileError, match="'subprocess.Popen' is not allowed"):
        load(model_file)


def test_unknown_node_type_is_refused(model_file):
    def bad(tree):
        tree["root"]["state"]["x_"] = {"$": "__import__", "name": "os"}

    rewrite(model_file, tree=bad)
    with pytest.raises(ModelFileError, match="malformed payload .*unknown node type"):
        load(model_file)


class _Exploit:
    """Unpickling this writes a file: what a malicious pickle could do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickle_file_renamed_is_refused_without_unpickling(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "model.dml"
    path.write_bytes(pickle.dumps(_Exploit(str(marker))))
    with pytest.raises(ModelFileError, match="looks like a Python pickle.*never loads pickles"):
        load(path)
    assert not marker.exists()


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.dml")


# --------------------------------------------------------------------------------------------
# HMAC signatures
# --------------------------------------------------------------------------------------------

def test_signed_files_verify_with_the_key(tmp_path, monkeypatch):
    est, X = _fit_registered("gaussian_nb")
    monkeypatch.setenv(KEY_ENV, "s3cret")
    path = save(est, tmp_path / "m.dml")
    assert read_metadata(path)["signature"]["algorithm"] == "hmac-sha256"
    np.testing.assert_array_equal(load(path).predict(X), est.predict(X))
    # Wrong key.
    with pytest.raises(ModelFileError, match="signature does not match"):
        load(path, key="other")
    # Without a key the signature cannot be checked, but the file still loads.
    monkeypatch.delenv(KEY_ENV)
    load(path)


def test_signature_catches_a_recomputed_checksum(tmp_path, monkeypatch):
    est, _ = _fit_registered("gaussian_nb")
    monkeypatch.setenv(KEY_ENV, "s3cret")
    path = save(est, tmp_path / "m.dml")

    def scale_priors(tree):
        tree["root"]["params"]["var_smoothing"] = 0.5

    rewrite(path, tree=scale_priors)  # checksum recomputed: only the key can tell
    with pytest.raises(ModelFileError, match="signature does not match: the file was modified"):
        load(path)


def test_unsigned_file_refused_when_key_is_set(model_file, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "s3cret")
    with pytest.raises(ModelFileError, match=f"not signed, but \\${KEY_ENV} is set"):
        load(model_file)


# --------------------------------------------------------------------------------------------
# the registry (the allow-list)
# --------------------------------------------------------------------------------------------

def test_registry_lookup_and_suggestions():
    assert registry.get("gaussian_nb").__name__ == "GaussianNB"
    assert {"gaussian_nb", "multinomial_nb", "bernoulli_nb", "categorical_nb"} <= \
        set(registry.names("model"))
    assert {"standard_scaler", "minmax_scaler", "one_hot"} <= set(registry.names("transformer"))
    with pytest.raises(registry.UnknownNameError,
                       match=r"unknown model 'gausian_nb'; did you mean 'gaussian_nb'\? Known: "
                             r"adaboost_classifier, bernoulli_nb, categorical_nb") as exc:
        registry.get("gausian_nb", kind="model")
    assert isinstance(exc.value, ValueError) and isinstance(exc.value, KeyError)
    with pytest.raises(ValueError, match="import string"):
        registry.register("bad_target", "no colon here")
    with pytest.raises(ValueError, match="already registered"):
        registry.register("gaussian_nb", "sklearn.naive_bayes:GaussianNB")
    assert registry.is_allowed("sklearn.pipeline.Pipeline")
    assert not registry.is_allowed("os.system")


def test_registering_makes_a_class_loadable(tmp_path):
    from sklearn.naive_bayes import GaussianNB as SkGNB

    est = SkGNB().fit(X_COUNTS, Y_LABELS)
    registry.register("sk_gaussian_nb_test", "sklearn.naive_bayes:GaussianNB")
    try:
        path = save(est, tmp_path / "sk.dml")
        np.testing.assert_array_equal(load(path).predict(X_COUNTS), est.predict(X_COUNTS))
    finally:
        registry.unregister("sk_gaussian_nb_test")
    with pytest.raises(ModelFileError, match="not allowed"):
        load(path)


def test_registry_import_is_lazy():
    import subprocess

    code = ("import sys, dml.registry, dml.io; "
            "heavy = [m for m in ('dml.naive_bayes', 'dml.preprocessing', 'dml.compose', "
            "'distributed') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
