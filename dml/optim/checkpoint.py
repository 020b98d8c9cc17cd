"""Checkpoints of a :class:`~dml.optim.state.TrainState`: atomic writes, verified resumes.

A checkpoint directory holds

* ``state-<epoch>.npz``: every array of the state (parameters, optimiser slots, best parameters,
  solver arrays), and
* ``checkpoint.json``: the scalars, the history, the name of the npz file and a *fingerprint* of
  the fit (estimator, hyper-parameters that change the result, data shape and partitioning).

Both are written to a temporary file and moved into place with ``os.replace``; the json is
replaced last, so a reader sees either the previous complete checkpoint or the new one, never a
mix, even when the process dies mid-write. Older npz files are deleted afterwards.

:func:`load` refuses a checkpoint whose fingerprint differs from the current fit's, naming the
entries that differ: resuming someone else's training silently would be worse than starting over.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from dml.optim.optimizers import OptimizerState
from dml.optim.state import TrainState

__all__ = ["save", "load", "exists", "FORMAT", "CheckpointMismatch"]

FORMAT = "dml-train-state/1"
_JSON = "checkpoint.json"


class CheckpointMismatch(ValueError):
    """The checkpoint directory holds the state of a different fit."""


def _float(x):
    # JSON has no inf/nan: store them as strings.
    x = float(x)
    return x if math.isfinite(x) else repr(x)


def _unfloat(x):
    return float(x)


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _jsonable(obj):
    """History/extra values as plain JSON (NumPy scalars → Python numbers)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _float(obj)
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    return obj


def _unjson_history(records):
    out = []
    for r in records:
        out.append({k: (float(v) if isinstance(v, str) and v in ("inf", "-inf", "nan") else v)
                    for k, v in r.items()})
    return out


def save(directory, state: TrainState, fingerprint: dict | None = None) -> Path:
    """Write ``state`` to ``directory`` atomically; returns the json path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    arrays = {"params": state.params}
    for k, v in state.opt.slots.items():
        arrays[f"slot/{k}"] = v
    if state.best_params is not None:
        arrays["best_params"] = state.best_params
    for k, v in state.arrays.items():
        arrays[f"array/{k}"] = v
    npz_name = f"state-{state.epoch:06d}.npz"
    _atomic_write(d / npz_name, lambda fh: np.savez(fh, **arrays))
    meta = {
        "format": FORMAT,
        "npz": npz_name,
        "fingerprint": _jsonable(fingerprint or {}),
        "seed": int(state.seed),
        "epoch": int(state.epoch),
        "t": int(state.opt.t),
        "lr_scale": _float(state.lr_scale),
        "best_objective": _float(state.best_objective),
        "best_score": _float(state.best_score),
        "no_improvement": int(state.no_improvement),
        "stop_reason": state.stop_reason,
        "history": _jsonable(state.history),
        "extra": _jsonable(state.extra),
    }
    text = json.dumps(meta, indent=1).encode()
    _atomic_write(d / _JSON, lambda fh: fh.write(text))
    for old in d.glob("state-*.npz"):
        if old.name != npz_name:
            try:
                old.unlink()
            except FileNotFoundError:
                pass
    return d / _JSON


def exists(directory) -> bool:
    return directory is not None and (Path(directory) / _JSON).exists()


def load(directory, fingerprint: dict | None = None) -> TrainState | None:
    """The state saved in ``directory``, or None when there is no checkpoint there.

    Raises :class:`CheckpointMismatch` when the saved fingerprint differs from ``fingerprint``.
    """
    d = Path(directory)
    path = d / _JSON
    if not path.exists():
        return None
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the checkpoint {path}: {exc}; delete the directory to "
                         "start the fit over") from None
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path} is not a dml training checkpoint of format {FORMAT!r} (found "
                         f"{meta.get('format')!r}); use another checkpoint_dir")
    if fingerprint is not None:
        want = _jsonable(fingerprint)
        have = meta.get("fingerprint", {})
        diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
        if diff:
            details = "; ".join(f"{k}: checkpoint {have.get(k)!r} vs now {want.get(k)!r}"
                                for k in diff[:5])
            raise CheckpointMismatch(
                f"the checkpoint in {d} was written by a different fit ({details}). Use a new "
                "checkpoint_dir, or delete this one to start over.")
    with np.load(d / meta["npz"], allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    slots = {k[5:]: v for k, v in arrays.items() if k.startswith("slot/")}
    extra_arrays = {k[6:]: v for k, v in arrays.items() if k.startswith("array/")}
    return TrainState(
        params=arrays["params"], opt=OptimizerState(int(meta["t"]), slots), seed=int(meta["seed"]),
        epoch=int(meta["epoch"]), lr_scale=_unfloat(meta["lr_scale"]),
        best_objective=_unfloat(meta["best_objective"]), best_score=_unfloat(meta["best_score"]),
        no_improvement=int(meta["no_improvement"]), best_params=arrays.get("best_params"),
        history=_unjson_history(meta["history"]), stop_reason=meta["stop_reason"],
        arrays=extra_arrays, extra=meta.get("extra", {}))
