"""The trusted types of dml model files: what a file may hold and how each value is rebuilt.

A model file's fitted state is a tagged JSON tree whose arrays live beside it (see
:mod:`dml.io`). This module turns objects into that tree (:class:`Encoder`) and back
(:class:`Decoder`). Both sides work from explicit allow-lists, in the manner of skops' trusted
types:

* estimator classes: every dml estimator (:data:`dml.registry.ESTIMATORS`, including bagging and
  the searches), the common scikit-learn steps and bagging members listed in
  :data:`SKLEARN_CLASSES`, and whatever the application registered in :mod:`dml.registry`. An
  estimator is rebuilt by calling its class with the saved parameters and setting the saved
  attributes, as unpickling does, but the class can only come from these lists;
* a fixed set of plain values: ``None``, booleans, numbers, strings, lists, tuples, dicts, sets,
  slices, NumPy arrays (never object arrays: those become unicode arrays or JSON items), NumPy
  scalars, dtypes and masked arrays, pandas Index/Series/dtypes;
* a few objects with a dedicated, validated encoding: scikit-learn's ``Tree`` (the fitted
  structure of its decision trees), NumPy random generators, dml's named scorers and the
  scorer of ``scoring=None`` (the estimator's own ``score``).

Nothing else can be written or read: no pickle, no import of a name taken from the file, and no
functions (a ``FunctionTransformer`` is only accepted as the identity a column transformer uses
for ``"passthrough"``).
"""
from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pandas as pd

from dml import registry

#: scikit-learn classes a model file may hold besides dml's own estimators: pipeline and
#: column-transformer composition, common preprocessing steps, the cross-validation splitters a
#: search keeps as ``cv``, and simple estimators used as bagging members. Each holds only plain
#: fitted data (arrays, numbers, strings, nested estimators of this list), which is why it is
#: here; estimators that hold compiled structures (neighbours' trees) or functions are not.
SKLEARN_CLASSES = (
    "sklearn.pipeline:Pipeline",
    "sklearn.compose:ColumnTransformer",
    "sklearn.preprocessing:StandardScaler",
    "sklearn.preprocessing:MinMaxScaler",
    "sklearn.preprocessing:MaxAbsScaler",
    "sklearn.preprocessing:RobustScaler",
    "sklearn.preprocessing:Normalizer",
    "sklearn.preprocessing:Binarizer",
    "sklearn.preprocessing:OneHotEncoder",
    "sklearn.preprocessing:OrdinalEncoder",
    "sklearn.preprocessing:PolynomialFeatures",
    "sklearn.preprocessing:KBinsDiscretizer",
    "sklearn.preprocessing:FunctionTransformer",
    "sklearn.impute:SimpleImputer",
    "sklearn.impute:MissingIndicator",
    "sklearn.feature_selection:VarianceThreshold",
    "sklearn.decomposition:PCA",
    "sklearn.decomposition:TruncatedSVD",
    "sklearn.tree:DecisionTreeClassifier",
    "sklearn.tree:DecisionTreeRegressor",
    "sklearn.tree:ExtraTreeClassifier",
    "sklearn.tree:ExtraTreeRegressor",
    "sklearn.linear_model:LinearRegression",
    "sklearn.linear_model:Ridge",
    "sklearn.linear_model:LogisticRegression",
    "sklearn.model_selection:KFold",
    "sklearn.model_selection:StratifiedKFold",
    "sklearn.model_selection:GroupKFold",
    "sklearn.model_selection:ShuffleSplit",
    "sklearn.model_selection:StratifiedShuffleSplit",
)
#: dml classes that are not estimators but may appear in a search's ``cv``.
DML_CLASSES = ("dml.model_selection:KFold", "dml.model_selection:StratifiedKFold",
               "dml.model_selection:ShuffleSplit")

_FUNCTION_TRANSFORMER = "sklearn.preprocessing.FunctionTransformer"
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
_BUILTIN_TYPES = {t.__name__: t for t in (bool, int, float, complex, str, bytes, object)}
_STR_OVERHEAD = 64  # bytes of a Python str object and its pointer, beyond its characters
_DTYPE_RE = re.compile(r"[<>|=][a-zA-Z]\d*(\[[a-zA-Z0-9]+\])?")


def _trusted_targets() -> list[str]:
    dml_targets = [target for target, _, _ in registry.ESTIMATORS.values()]
    return [*dml_targets, *DML_CLASSES, *SKLEARN_CLASSES]


def _dotted(target: str) -> str:
    return target.replace(":", ".")


def is_allowed(dotted_class) -> bool:
    """True when a model file may name ``"package.module.ClassName"`` (nothing is imported)."""
    return isinstance(dotted_class, str) and (
        dotted_class in {_dotted(t) for t in _trusted_targets()}
        or registry.is_allowed(dotted_class))


def allowed() -> list[str]:
    """Every class a model file may name, as ``"package.module.ClassName"``, sorted."""
    return sorted({_dotted(t) for t in _trusted_targets()} | set(registry.allowed()))


def resolve(dotted_class: str):
    """Import an allowed class; only ever called with a name :func:`is_allowed` accepted."""
    for target in _trusted_targets():
        if _dotted(target) == dotted_class:
            return registry.resolve_target(target)
    return registry.dotted_to_class(dotted_class)


def class_name(cls) -> str | None:
    """The allowed ``"package.module.ClassName"`` recorded for ``cls``, or None."""
    for target in _trusted_targets():
        if target.rsplit(":", 1)[1] != cls.__name__:
            continue
        try:
            if registry.resolve_target(target) is cls:
                return _dotted(target)
        except ImportError:
            continue
    return registry.class_target(cls)


def _is_type(obj, module: str, name: str) -> bool:
    cls = type(obj)
    return cls.__name__ == name and cls.__module__ == module


def _is_dask(obj) -> bool:
    return type(obj).__module__.startswith("dask.") and hasattr(obj, "__dask_graph__")


class Malformed(Exception):
    """A payload that does not follow the format (turned into a ModelFileError by the caller)."""


def unsupported(obj, where: str) -> str:
    kind = type(obj).__name__ if not isinstance(obj, type) else f"the type {obj!r}"
    hint = ""
    if hasattr(obj, "dask") or type(obj).__module__.startswith("dask"):
        hint = " Fitted attributes must be NumPy arrays; compute Dask results before storing them."
    elif type(obj).__module__.startswith("scipy.stats"):
        hint = (" A search's scipy.stats distributions cannot be saved; save the fitted "
                "search's best_estimator_ instead.")
    elif callable(obj):
        hint = " Functions cannot be saved (a model file never contains code)."
    return (f"cannot save {where}: values of type {kind} are not supported by dml's model "
            f"format.{hint}")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z][a-z])", "_", name).lower()


def _plain_values(obj) -> np.ndarray:
    values = obj.to_numpy()
    if values.dtype.kind == "O" or isinstance(obj.dtype, pd.api.extensions.ExtensionDtype):
        values = np.asarray(obj.astype(object))
    return values


# ============================================================================================
# encoding
# ============================================================================================

class Encoder:
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
        if isinstance(obj, np.ma.MaskedArray):
            return {"$": "masked_array", "data": self._array(np.asarray(obj.data), where),
                    "mask": self._array(np.ma.getmaskarray(obj), where),
                    "fill_value": self.encode(obj.fill_value, f"{where}.fill_value")}
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
        special = self._special(obj, where)
        if special is not None:
            return special
        if hasattr(obj, "__dict__") and (hasattr(obj, "get_params") or
                                         class_name(type(obj)) is not None):
            return self._estimator(obj, where)
        raise TypeError(unsupported(obj, where))

    # ---- objects with a dedicated encoding ----
    def _special(self, obj, where: str):
        if type(obj) is np.random.RandomState:
            return {"$": "random_state",
                    "state": self.encode(obj.get_state(legacy=False), f"{where}.state")}
        if type(obj) is np.random.Generator:
            bg = obj.bit_generator
            if type(bg).__name__ not in _BIT_GENERATORS or \
                    getattr(np.random, type(bg).__name__) is not type(bg):
                raise TypeError(unsupported(bg, where))
            return {"$": "generator", "bit_generator": type(bg).__name__,
                    "state": self.encode(bg.state, f"{where}.state")}
        if _is_type(obj, "sklearn.tree._tree", "Tree"):
            return self._tree(obj, where)
        if _is_type(obj, "dml.model_selection._scoring", "_Scorer"):
            from dml.model_selection import get_scorer

            if get_scorer(obj.name).row != obj.row:
                raise TypeError(f"cannot save {where}: the scorer {obj.name!r} differs from "
                                "dml's scorer of that name")
            return {"$": "dml_scorer", "name": obj.name}
        if _is_type(obj, "dml.model_selection._scoring", "_EstimatorScorer"):
            return {"$": "dml_estimator_scorer"}  # scoring=None: stateless
        return None

    def _tree(self, tree, where: str):
        cls, args, state = tree.__reduce__()
        n_features, n_classes, n_outputs = args
        nodes = state["nodes"]
        return {"$": "sklearn_tree", "n_features": int(n_features),
                "n_classes": self._array(np.asarray(n_classes), where),
                "n_outputs": int(n_outputs),
                "nodes": {f: self._array(np.ascontiguousarray(nodes[f]), f"{where}.nodes.{f}")
                          for f in nodes.dtype.names},
                "state": {k: self.encode(v, f"{where}.{k}") for k, v in state.items()
                          if k != "nodes"}}

    # ---- estimators ----
    def _estimator(self, est, where: str):
        oid = id(est)
        if oid in self._open:
            raise TypeError(f"cannot save {where}: the estimator refers to itself")
        if oid in self._memo:
            return {"$": "ref", "id": self._memo[oid]}
        cls = type(est)
        dotted = class_name(cls)
        if dotted is None:
            raise TypeError(
                f"cannot save {where}: class {cls.__module__}.{cls.__qualname__} is not one of "
                "the types a dml model file can hold (dml's estimators, common scikit-learn "
                "steps, and classes registered in dml.registry), so dml.load could not rebuild "
                "it. If it only holds plain fitted data, register it first, e.g. "
                f"dml.registry.register('{_snake(cls.__name__)}', "
                f"'{cls.__module__}:{cls.__qualname__}').")
        if dotted == _FUNCTION_TRANSFORMER:
            _check_function_transformer(vars(est), where)
        self._open.add(oid)
        try:
            params = est.get_params(deep=False) if hasattr(est, "get_params") else {}
            enc_params = {str(k): self.encode(v, f"{where}.{k}") for k, v in params.items()}
            # Dask collections among the fitted attributes are per-row results kept on the
            # cluster (KMeans.labels_ of Dask input); a model file holds the model, not them.
            # An estimator whose fitted state lives partly on the cluster (the neighbours'
            # training set) says what a file holds with ``_model_state()``.
            attrs = est._model_state() if hasattr(est, "_model_state") else vars(est)
            state = {k: v for k, v in attrs.items() if k not in params and not _is_dask(v)}
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
            raise TypeError(unsupported(value, where))
        # A 0-d array keeps the exact dtype and value (incl. NaN, datetime units).
        return {"$": "scalar", "key": self._store(np.asarray(value))}

    def _array(self, arr: np.ndarray, where: str):
        kind = arr.dtype.kind
        if kind in "biufcmMUS" and arr.dtype.fields is None and arr.dtype.itemsize > 0:
            return {"$": "ndarray", "key": self._store(np.asarray(arr))}
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
        raise TypeError(unsupported(arr, where))

    def _dtype(self, dtype, where: str):
        if isinstance(dtype, np.dtype):
            if dtype.fields is not None or dtype.subdtype is not None:
                raise TypeError(unsupported(dtype, where))
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
                raise TypeError(unsupported(dtype, where))
            return {"$": "pd_dtype", "name": name}
        raise TypeError(unsupported(dtype, where))

    def _type(self, typ: type, where: str):
        if issubclass(typ, np.generic):
            try:
                name = np.dtype(typ).str
            except TypeError:
                raise TypeError(unsupported(typ, where)) from None
            if np.dtype(name).type is not typ:
                raise TypeError(unsupported(typ, where))
            return {"$": "numpy_type", "dtype": name}
        if typ in _BUILTIN_TYPES.values():
            return {"$": "type", "name": typ.__name__}
        raise TypeError(unsupported(typ, where))


def _check_function_transformer(attrs: dict, where: str) -> None:
    """Only the identity FunctionTransformer (a column transformer's passthrough) is data."""
    code = [k for k in ("func", "inverse_func") if attrs.get(k) is not None]
    if callable(attrs.get("feature_names_out")):
        code.append("feature_names_out")
    if code:
        raise TypeError(
            f"cannot save {where}: a FunctionTransformer with {', '.join(code)} set holds Python "
            "code, and a model file never contains code (loading it would have to run that "
            "code). Replace the step with an equivalent dml or scikit-learn transformer, or "
            "save the model without it and re-create the step after loading.")


# ============================================================================================
# decoding
# ============================================================================================

class Decoder:
    """Tagged JSON tree + arrays -> objects, constructing only allow-listed classes."""

    def __init__(self, arrays: dict[str, np.ndarray], not_allowed, max_bytes: int):
        self.arrays = arrays
        self.not_allowed = not_allowed   # class name -> the exception to raise
        # Strings become Python objects, several times the size of their unicode array: they
        # count against the same limit as the decompressed data.
        self.string_budget = max_bytes
        self.memo: dict[int, object] = {}
        self._used: set[str] = set()

    def _get(self, key) -> np.ndarray:
        if not isinstance(key, str) or key not in self.arrays:
            raise Malformed(f"missing array {key!r}")
        # Each array is written for one value; a file naming one array many times could make
        # loading copy it over and over.
        if key in self._used:
            raise Malformed(f"array {key!r} is used twice")
        self._used.add(key)
        return self.arrays[key]

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if not isinstance(node, dict):
            raise Malformed(f"unexpected node {type(node).__name__}")
        tag = node.get("$")
        method = getattr(self, f"_d_{tag}", None) if isinstance(tag, str) and \
            tag.isidentifier() else None
        if method is None:
            raise Malformed(f"unknown node type {tag!r}")
        return method(node)

    def _d_float(self, node):
        value = node["value"]
        if value not in ("nan", "inf", "-inf"):
            raise Malformed(f"bad float {value!r}")
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
            raise Malformed("bad slice")
        return slice(*parts)

    def _d_scalar(self, node):
        arr = self._get(node["key"])
        if arr.ndim != 0:
            raise Malformed("scalar is not 0-d")
        return arr[()]

    def _d_ndarray(self, node):
        arr = self._get(node["key"])
        if node.get("object"):
            if arr.dtype.kind != "U":
                raise Malformed("object string array is not unicode")
            self.string_budget -= arr.size * (_STR_OVERHEAD + arr.dtype.itemsize)
            if self.string_budget < 0:
                raise Malformed("its strings would take more memory than the size limit")
            out = np.empty(arr.shape, dtype=object)
            out[...] = arr.tolist() if arr.ndim else arr.item()
            return out
        return arr

    def _d_object_array(self, node):
        shape = tuple(node["shape"])
        if not all(isinstance(s, int) and s >= 0 for s in shape):
            raise Malformed("bad shape")
        items = [self.decode(v) for v in node["items"]]
        if len(items) != math.prod(shape):
            raise Malformed("object array size does not match its shape")
        out = np.empty(len(items), dtype=object)
        for i, v in enumerate(items):
            out[i] = v
        return out.reshape(shape)

    def _d_masked_array(self, node):
        data, mask = self.decode(node["data"]), self.decode(node["mask"])
        if not isinstance(data, np.ndarray) or not isinstance(mask, np.ndarray) or \
                mask.dtype != bool or mask.shape != data.shape:
            raise Malformed("bad masked array")
        return np.ma.MaskedArray(data, mask=mask, fill_value=self.decode(node["fill_value"]))

    def _d_dtype(self, node):
        s = node["str"]
        if not isinstance(s, str) or not _DTYPE_RE.fullmatch(s):
            raise Malformed(f"bad dtype {s!r}")
        return np.dtype(s)

    def _d_numpy_type(self, node):
        dt = self._d_dtype({"str": node["dtype"]})
        return dt.type

    def _d_type(self, node):
        typ = _BUILTIN_TYPES.get(node["name"])
        if typ is None:
            raise Malformed(f"type {node['name']!r} is not allowed")
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
            raise Malformed("bad pandas dtype")
        try:
            # pandas_dtype parses a dtype name from pandas' own table; it imports nothing.
            return pd.api.types.pandas_dtype(name)
        except TypeError as exc:
            raise Malformed(f"unknown pandas dtype {name!r}") from exc

    def _d_pd_index(self, node):
        return pd.Index(self.decode(node["values"]), dtype=self.decode(node["dtype"]),
                        name=self.decode(node["name"]))

    def _d_pd_series(self, node):
        return pd.Series(self.decode(node["values"]), index=self.decode(node["index"]),
                         dtype=self.decode(node["dtype"]), name=self.decode(node["name"]))

    def _d_random_state(self, node):
        rs = np.random.RandomState()
        rs.set_state(self.decode(node["state"]))
        return rs

    def _d_generator(self, node):
        name = node["bit_generator"]
        if name not in _BIT_GENERATORS:
            raise Malformed(f"bit generator {name!r} is not allowed")
        bg = getattr(np.random, name)()
        bg.state = self.decode(node["state"])
        return np.random.Generator(bg)

    def _d_dml_scorer(self, node):
        from dml.model_selection import get_scorer

        name = node["name"]
        scorer = get_scorer(name) if isinstance(name, str) else None
        if not _is_type(scorer, "dml.model_selection._scoring", "_Scorer"):
            raise Malformed(f"unknown scorer {name!r}")
        return scorer

    def _d_dml_estimator_scorer(self, node):
        from dml.model_selection._scoring import _EstimatorScorer

        return _EstimatorScorer()

    def _d_sklearn_tree(self, node):
        from sklearn.tree._tree import Tree

        n_features, n_outputs = node["n_features"], node["n_outputs"]
        n_classes = self.decode(node["n_classes"])
        if not (isinstance(n_features, int) and isinstance(n_outputs, int)
                and isinstance(n_classes, np.ndarray) and n_classes.dtype.kind in "iu"
                and n_classes.shape == (n_outputs,) and n_features >= 1 and n_outputs >= 1
                and (n_classes >= 1).all()):
            raise Malformed("bad scikit-learn tree shape")
        tree = Tree(n_features, n_classes.astype(np.intp), n_outputs)
        layout = tree.__getstate__()
        fields = {k: self.decode(v) for k, v in _str_keys(node["nodes"]).items()}
        state = {k: self.decode(v) for k, v in _str_keys(node["state"]).items()}
        node_dtype = layout["nodes"].dtype
        if set(fields) != set(node_dtype.names) or set(state) | {"nodes"} != set(layout):
            raise Malformed("the scikit-learn tree layout differs from this scikit-learn's; "
                            "load the model with the scikit-learn version that saved it")
        count, depth = state["node_count"], state["max_depth"]
        if not (isinstance(count, int) and isinstance(depth, int) and 1 <= count
                and 0 <= depth < count):
            raise Malformed("bad tree node count or depth")
        nodes = np.zeros(count, dtype=node_dtype)
        for f, values in fields.items():
            if not isinstance(values, np.ndarray) or values.shape != (count,) or \
                    values.dtype != node_dtype.fields[f][0]:
                raise Malformed(f"bad tree nodes field {f!r}")
            nodes[f] = values
        _check_tree_nodes(nodes, n_features)
        state["nodes"] = nodes
        tree.__setstate__(state)
        return tree

    def _d_ref(self, node):
        try:
            return self.memo[node["id"]]
        except (KeyError, TypeError):
            raise Malformed(f"dangling reference {node.get('id')!r}") from None

    def _d_estimator(self, node):
        cls_name = node["class"]
        if not is_allowed(cls_name):
            raise self.not_allowed(cls_name)
        cls = resolve(cls_name)
        params = {k: self.decode(v) for k, v in _str_keys(node["params"]).items()}
        state = {k: self.decode(v) for k, v in _str_keys(node["state"]).items()}
        for k in state:
            # An instance attribute named like a method or property would replace it.
            attr = inspect.getattr_static(cls, k, None)
            if callable(attr) or hasattr(attr, "__get__"):
                raise Malformed(f"attribute {k!r} would replace {cls_name}.{k}")
        if cls_name == _FUNCTION_TRANSFORMER:
            try:
                _check_function_transformer({**params, **state}, cls_name)
            except TypeError as exc:
                raise Malformed(str(exc)) from None
        try:
            est = cls(**params)
        except TypeError as exc:
            raise Malformed(
                f"the saved parameters of {cls_name} do not fit this version's class ({exc}); "
                "load the model with the versions that wrote it (see its metadata) and "
                "retrain") from None
        tree = state.get("tree_")
        if _is_type(tree, "sklearn.tree._tree", "Tree") and \
                state.get("n_features_in_") != tree.n_features:
            # Predicting checks X against n_features_in_, the tree reads tree.n_features columns.
            raise Malformed("the tree's feature count does not match n_features_in_")
        if cls_name.startswith("dml.") and "nodes_" in state:
            _check_dml_nodes(state["nodes_"])
        est.__dict__.update(state)
        node_id = node.get("id")
        if not isinstance(node_id, int) or node_id in self.memo:
            raise Malformed("bad estimator id")
        self.memo[node_id] = est
        return est


def _check_tree_nodes(nodes: np.ndarray, n_features: int) -> None:
    """Children only point forward and features exist: predicting cannot read out of bounds or
    loop."""
    idx = np.arange(len(nodes))
    left, right, feature = nodes["left_child"], nodes["right_child"], nodes["feature"]
    leaf = left == -1
    inner = ~leaf
    ok = (right[leaf] == -1).all() and \
        ((left[inner] > idx[inner]) & (left[inner] < len(nodes))).all() and \
        ((right[inner] > idx[inner]) & (right[inner] < len(nodes))).all() and \
        ((feature[inner] >= 0) & (feature[inner] < n_features)).all()
    if not ok:
        raise Malformed("the scikit-learn tree's nodes are inconsistent")


def _check_dml_nodes(nodes) -> None:
    """dml's trees and forests (``nodes_``): a node splits exactly when it has children, and
    children point forward within their own tree, so walking a tree always ends at a leaf."""
    if not isinstance(nodes, dict):
        raise Malformed("bad tree nodes")
    arrays = [nodes.get(k) for k in ("tree_start", "children_left", "children_right", "feature")]
    if not all(isinstance(a, np.ndarray) and a.ndim == 1 and a.dtype.kind in "iu"
               for a in arrays):
        raise Malformed("bad tree nodes")
    start, left, right, feature = arrays
    n = len(left)
    if len(right) != n or len(feature) != n or len(start) < 2 or start[0] != 0 or \
            start[-1] != n or (np.diff(start) < 1).any():
        raise Malformed("bad tree node ranges")
    end = np.repeat(start[1:], np.diff(start))
    idx = np.arange(n)
    leaf = left == -1
    inner = ~leaf
    ok = (right[leaf] == -1).all() and ((feature >= 0) == inner).all() and all(
        ((c[inner] > idx[inner]) & (c[inner] < end[inner])).all() for c in (left, right))
    if not ok:
        raise Malformed("the tree's nodes are inconsistent")


def _str_keys(d) -> dict:
    if not isinstance(d, dict) or not all(isinstance(k, str) and k.isidentifier() for k in d):
        raise Malformed("attribute names must be identifiers")
    if any(k.startswith("__") for k in d):
        raise Malformed("dunder attribute names are not allowed")
    return d
