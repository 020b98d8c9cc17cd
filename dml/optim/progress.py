"""Progress of a training loop: a log line per epoch and a pluggable progress display.

The loop calls ``progress.start(total, initial, desc)``, ``progress.update(record)`` after each
epoch (``record`` is the epoch's history entry) and ``progress.close()``. Anything with those
three methods can be passed as an estimator's ``progress`` (a notebook widget, a tqdm wrapper);
a plain callable is called with each record. :class:`TextProgress` is the built-in display: one
self-overwriting line on stderr, no dependency.
"""
from __future__ import annotations

import logging
import sys
import time

__all__ = ["TextProgress", "CallbackProgress", "make_progress", "log_epoch", "logger"]

logger = logging.getLogger("dml.optim")


class TextProgress:
    """``[#####.....] epoch 5/10  objective 0.4213  val 0.8120  0.31 s/epoch`` on a stream."""

    def __init__(self, stream=None, width: int = 20):
        self.stream = stream
        self.width = width
        self.total = 0
        self._t0 = 0.0
        self._done0 = 0
        self.desc = ""

    def start(self, total: int, initial: int = 0, desc: str = "") -> None:
        self.total, self._done0, self.desc = max(int(total), 1), int(initial), desc
        self._t0 = time.perf_counter()

    def update(self, record: dict) -> None:
        stream = self.stream or sys.stderr
        epoch = int(record.get("epoch", 0))
        frac = min(epoch / self.total, 1.0)
        filled = int(round(frac * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        rate = (time.perf_counter() - self._t0) / max(epoch - self._done0, 1)
        text = f"\r{self.desc} [{bar}] epoch {epoch}/{self.total}"
        if record.get("objective") is not None:
            text += f"  objective {record['objective']:.6g}"
        if record.get("validation_score") is not None:
            text += f"  val {record['validation_score']:.4g}"
        text += f"  {rate:.2f} s/epoch"
        stream.write(text)
        stream.flush()

    def close(self) -> None:
        stream = self.stream or sys.stderr
        stream.write("\n")
        stream.flush()


class CallbackProgress:
    """Adapts a plain ``callable(record)`` to the progress protocol."""

    def __init__(self, fn):
        self.fn = fn

    def start(self, total, initial=0, desc=""):
        pass

    def update(self, record):
        self.fn(record)

    def close(self):
        pass


def make_progress(progress, verbose) -> object | None:
    """``progress`` as a display object: None → TextProgress when verbose, False → none."""
    if progress is False:
        return None
    if progress is None or progress == "text":
        return TextProgress() if (verbose or progress == "text") else None
    if all(hasattr(progress, m) for m in ("start", "update", "close")):
        return progress
    if callable(progress):
        return CallbackProgress(progress)
    raise TypeError("progress must be None, False, 'text', a callable(record) or an object with "
                    f"start/update/close methods; got {type(progress).__name__}")


def log_epoch(name: str, record: dict, level: int = logging.INFO) -> None:
    """One line per epoch on the ``dml.optim`` logger."""
    parts = [f"{name} epoch {record.get('epoch')}"]
    for key in ("objective", "validation_score", "learning_rate"):
        if record.get(key) is not None:
            parts.append(f"{key} {record[key]:.6g}")
    if record.get("seconds") is not None:
        parts.append(f"{record['seconds']:.3f} s")
    logger.log(level, ", ".join(parts))
