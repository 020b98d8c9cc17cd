"""Progress of a training loop: a log line per epoch and a pluggable progress display.

The loop calls ``progress.start(total, initial, desc)``, ``progress.update(record)`` after each
epoch (``record`` is the epoch's history entry) and ``progress.close()``. Anything with those
three methods can be passed as an estimator's ``progress`` (a notebook widget, a tqdm wrapper);
a plain callable is called with each record. Two displays are built in: :class:`TextProgress`,
one self-overwriting line on stderr when it is a terminal and one line per epoch otherwise
(``progress="text"``, or the default with ``verbose``), and
:class:`NotebookProgress`, an HTML bar updated in place in a Jupyter notebook
(``progress="notebook"``). Both are chosen by name so that estimators keep plain, clonable and
saveable hyper-parameters.
"""
from __future__ import annotations

import html
import logging
import sys
import time

__all__ = ["TextProgress", "NotebookProgress", "CallbackProgress", "make_progress", "log_epoch",
           "in_notebook", "compute_with_progress", "logger"]

logger = logging.getLogger("dml.optim")


class TextProgress:
    """``[#####.....] epoch 5/10  objective 0.4213  val 0.8120  0.31 s/epoch`` on a stream.

    On a terminal the line redraws itself in place (``\\r``); on anything else (a log file, a
    pipe, ``kubectl logs``) every epoch is a plain line of its own, so the log stays readable.

    Parameters
    ----------
    stream : file-like, optional
        Where to write; default ``sys.stderr`` at the time of each write.
    width : int, default 20
        Characters of the bar.
    plain : bool, optional
        One line per epoch; default: when ``stream`` is not a terminal.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()          # not a terminal: one line per epoch
    >>> bar = TextProgress(out, width=4)
    >>> bar.start(2, desc="fit")
    >>> bar.update({"epoch": 1, "objective": 0.5})
    >>> bar.update({"epoch": 2, "objective": 0.25})
    >>> bar.close()
    >>> [line.split("  ")[:2] for line in out.getvalue().splitlines()]
    [['fit [##..] epoch 1/2', 'objective 0.5'], ['fit [####] epoch 2/2', 'objective 0.25']]
    """

    def __init__(self, stream=None, width: int = 20, plain: bool | None = None):
        self.stream = stream
        self.width = width
        self.plain = plain
        self.total = 0
        self._t0 = 0.0
        self._done0 = 0
        self._drawn = False
        self.desc = ""

    def _plain(self, stream) -> bool:
        if self.plain is not None:
            return bool(self.plain)
        isatty = getattr(stream, "isatty", None)
        try:
            return not (isatty and isatty())
        except ValueError:  # a closed stream
            return True

    def start(self, total: int, initial: int = 0, desc: str = "") -> None:
        self.total, self._done0, self.desc = max(int(total), 1), int(initial), desc
        self._t0 = time.perf_counter()
        self._drawn = False

    def update(self, record: dict) -> None:
        stream = self.stream or sys.stderr
        epoch = int(record.get("epoch", 0))
        frac = min(epoch / self.total, 1.0)
        filled = int(round(frac * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        unit = record.get("unit", "epoch")  # "iteration" for k-means, "tree", "fit", ...
        text = f"{self.desc} [{bar}] {unit} {epoch}/{self.total}"
        if record.get("objective") is not None:
            text += f"  objective {record['objective']:.6g}"
        if record.get("validation_score") is not None:
            text += f"  val {record['validation_score']:.4g}"
        if record.get("detail"):  # e.g. a forest's level within its current trees
            text += f"  {record['detail']}"
        if epoch > self._done0:
            rate = (time.perf_counter() - self._t0) / (epoch - self._done0)
            text += f"  {rate:.2f} s/{unit}"
        if self._plain(stream):
            stream.write(text + "\n")
        else:
            stream.write("\r" + text)
            self._drawn = True
        stream.flush()

    def close(self) -> None:
        stream = self.stream or sys.stderr
        if self._drawn:  # end the redrawn line; plain lines already ended
            stream.write("\n")
            stream.flush()
        self._drawn = False


def in_notebook() -> bool:
    """True when running in a Jupyter kernel (where rich HTML output is rendered)."""
    # IPython is imported only if it is already loaded: a kernel always has it, a script should
    # not pay for importing it.
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class NotebookProgress:
    """An HTML progress bar in a notebook cell, updated in place after every epoch.

    Uses IPython's ``display(..., display_id=True)`` and ``DisplayHandle.update``, so it needs
    no widget library and also renders in saved notebooks and headless runs (nbclient,
    nbconvert). The finished bar stays in the cell's output.

    Parameters
    ----------
    width : str, default "20em"
        CSS width of the bar.

    Examples
    --------
    The HTML of the bar after 3 of 10 epochs (in a notebook, ``start`` shows it and every
    ``update`` replaces it):

    >>> bar = NotebookProgress()
    >>> bar.total, bar.desc = 10, "SGDClassifier"
    >>> page = bar.render(3, {"objective": 0.25, "validation_score": 0.9})
    >>> '<progress value="3" max="10"' in page, "epoch 3/10" in page, "val 0.9" in page
    (True, True, True)
    """

    def __init__(self, width: str = "20em"):
        self.width = width
        self.total = 1
        self.desc = ""
        self._t0 = 0.0
        self._done0 = 0
        self._handle = None

    def render(self, epoch: int, record: dict | None = None) -> str:
        """The bar's HTML after ``epoch`` epochs (``record``: that epoch's history entry)."""
        record = record or {}
        unit = html.escape(str(record.get("unit", "epoch")))
        text = f"{unit} {epoch}/{self.total}"
        if record.get("objective") is not None:
            text += f" &middot; objective {record['objective']:.6g}"
        if record.get("validation_score") is not None:
            text += f" &middot; val {record['validation_score']:.4g}"
        if record.get("detail"):
            text += f" &middot; {html.escape(str(record['detail']))}"
        if epoch > self._done0:
            rate = (time.perf_counter() - self._t0) / (epoch - self._done0)
            text += f" &middot; {rate:.2f} s/{unit}"
        return (f'<div class="dml-progress"><code>{html.escape(self.desc)}</code> '
                f'<progress value="{epoch}" max="{self.total}" style="width: {self.width}">'
                f"</progress> {text}</div>")

    def _show(self, content: str) -> None:
        from IPython.display import HTML, display

        if self._handle is None:
            self._handle = display(HTML(content), display_id=True)
        else:
            self._handle.update(HTML(content))

    def start(self, total: int, initial: int = 0, desc: str = "") -> None:
        self.total, self._done0, self.desc = max(int(total), 1), int(initial), desc
        self._t0 = time.perf_counter()
        self._handle = None
        self._show(self.render(self._done0))

    def update(self, record: dict) -> None:
        self._show(self.render(int(record.get("epoch", 0)), record))

    def close(self) -> None:
        # Nothing to tear down: the last update is the final state of the bar.
        pass


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
    """``progress`` as a display object: None → TextProgress when verbose, False → none.

    ``"notebook"`` gives a :class:`NotebookProgress` inside a Jupyter kernel and falls back to
    :class:`TextProgress` elsewhere, so the same code runs as a script.
    """
    if progress is False:
        return None
    if isinstance(progress, str) and progress == "notebook":
        return NotebookProgress() if in_notebook() else TextProgress()
    if progress is None or (isinstance(progress, str) and progress == "text"):
        return TextProgress() if (verbose or progress == "text") else None
    if all(hasattr(progress, m) for m in ("start", "update", "close")):
        return progress
    if callable(progress):
        return CallbackProgress(progress)
    raise TypeError("progress must be None, False, 'text', 'notebook', a callable(record) or an "
                    f"object with start/update/close methods; got {progress!r}")


def log_epoch(name: str, record: dict, level: int = logging.INFO) -> None:
    """One line per epoch on the ``dml.optim`` logger."""
    parts = [f"{name} epoch {record.get('epoch')}"]
    for key in ("objective", "validation_score", "learning_rate"):
        if record.get(key) is not None:
            parts.append(f"{key} {record[key]:.6g}")
    if record.get("seconds") is not None:
        parts.append(f"{record['seconds']:.3f} s")
    logger.log(level, ", ".join(parts))


def compute_with_progress(objs: list, progress, unit: str, log=None, desc: str = "") -> list:
    """``dask.compute(*objs)`` with one progress record as each result arrives.

    On a distributed client the results are followed as they finish (``{"epoch": done,
    "unit": unit}``, and a line on ``log`` at INFO); on another scheduler they all arrive at
    once, then one record says so. ``progress`` None: a plain compute.

    Examples
    --------
    >>> import dask
    >>> seen = []
    >>> compute_with_progress([dask.delayed(abs)(-2), dask.delayed(abs)(-3)],
    ...                       CallbackProgress(seen.append), "member")
    [2, 3]
    >>> seen
    [{'epoch': 2, 'unit': 'member'}]
    """
    import dask

    if progress is None and log is None:
        return list(dask.compute(*objs))
    try:
        from distributed import Client, as_completed

        client = Client.current(allow_global=True)
    except (ImportError, ValueError):
        client = None

    def report(done):
        if progress is not None:
            progress.update({"epoch": done, "unit": unit})
        if log is not None:
            log.info("%s%d/%d %ss done", f"{desc}: " if desc else "", done, len(objs), unit)

    if client is None:
        out = list(dask.compute(*objs))
        report(len(objs))
        return out
    futures = client.compute(list(objs))
    try:
        for done, fut in enumerate(as_completed(futures), 1):
            if fut.status == "error":
                fut.result()  # raises the task's exception here
            report(done)
        return client.gather(futures)
    finally:
        client.cancel([f for f in futures if not f.done()])
