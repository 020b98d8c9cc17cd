"""dml's numba kernels and where their compiled code is cached.

Every numba kernel of dml is declared with :func:`kernel` (``numba.njit`` plus this cache) so
that compiled code goes to one place, never into the installed package: a package directory may
be read-only (a container image) and cache files left in ``site-packages/dml/`` outlive the
package they were compiled from (a later editable install finds a stray ``dml`` namespace
package there).

Where the cache lives
---------------------
``$DML_CACHE_DIR/numba`` when ``DML_CACHE_DIR`` is set, else ``$XDG_CACHE_HOME/dml/numba``
(``~/.cache/dml/numba``). When that directory cannot be written (a read-only container file
system), new code is written to ``<temp dir>/dml-<uid>/numba`` and the unwritable directory is
still *read*: a warm cache compiled into an image at build time (``python -m dml.worker_setup``)
is used as is. Entries are keyed by the kernel's source (a content hash), its argument types,
the numba version and the CPU, so a stale or foreign entry is never used, only recompiled; the
folders are named after the module file and its content, not its path, so the same release
installed in another place reuses them.

The directory is chosen when a kernel module is first imported; set ``DML_CACHE_DIR`` before
that (for Dask workers: in the worker's environment).
"""
from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import numba
from llvmlite import ir
from numba import types
from numba.core import caching, cgutils
from numba.extending import intrinsic

from dml._paths import user_cache_dir

__all__ = ["kernel", "cache_dirs", "kernels", "export", "install", "cpu_key", "prefetch"]

#: Every dispatcher made by :func:`kernel`, in definition order.
_KERNELS: list = []


def _configured_dir() -> Path:
    return user_cache_dir() / "numba"


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


@functools.cache
def _dirs() -> tuple[Path | None, tuple[Path, ...]]:
    configured = _configured_dir()
    if _writable(configured):
        return configured, ()
    readonly = (configured,) if configured.is_dir() else ()
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    fallback = Path(tempfile.gettempdir()) / f"dml-{uid}" / "numba"
    return (fallback if _writable(fallback) else None), readonly


def cache_dirs() -> tuple[Path | None, tuple[Path, ...]]:
    """``(write_dir, read_only_dirs)``: where new compiled code goes (None: nowhere, every
    process compiles) and the unwritable directories whose entries are still loaded.

    Examples
    --------
    >>> from dml._numba import cache_dirs
    >>> write_dir, read_only = cache_dirs()
    >>> write_dir is None or write_dir.name == "numba"
    True
    """
    return _dirs()


def kernels() -> list:
    """The numba dispatchers of every dml kernel imported so far."""
    return list(_KERNELS)


@functools.cache
def _source_digest(path: str, mtime: float, size: int) -> str:
    # (mtime and size in the key: an edited file is hashed again.)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:20]


class _Locator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Caches a kernel under ``<dir>/<module file>_<hash of the file's content>/``.

    numba's own locators name the folder after the source file's *path*, so a fresh install
    of the same release in another place (a new virtualenv, a clone, a container that installs
    elsewhere than the image that compiled it) found nothing and compiled everything again.
    Named after the content, identical sources share their compiled code wherever they are
    installed, and different releases keep separate folders (no overwriting each other's
    entries when two are used by turns)."""

    def __init__(self, py_func, py_file, root: Path):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        st = os.stat(py_file)
        name = os.path.splitext(os.path.basename(py_file))[0]
        digest = _source_digest(os.path.abspath(py_file), st.st_mtime, st.st_size)
        self._cache_path = str(root / f"{name}_{digest}")

    def get_cache_path(self):
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        write_dir, _ = _dirs()
        if write_dir is None or not os.path.exists(py_file):
            return None
        return cls(py_func, py_file, write_dir)


class _CacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = [_Locator]


class _KernelCache(caching.FunctionCache):
    """numba's per-function disk cache in dml's directory, also reading the read-only ones."""

    _impl_class = _CacheImpl

    def __init__(self, py_func):
        super().__init__(py_func)
        locator = self._impl.locator
        subpath = os.path.basename(locator.get_cache_path())
        stamp = locator.get_source_stamp()
        self._readonly = [caching.IndexDataCacheFile(str(d / subpath), self._impl.filename_base,
                                                     stamp)
                          for d in _dirs()[1]]

    def _load_overload(self, sig, target_context):
        data = super()._load_overload(sig, target_context)
        if data is not None or not self._enabled:
            return data
        key = self._index_key(sig, target_context.codegen())
        for layer in self._readonly:
            try:
                found = layer.load(key)
            except Exception:  # an unreadable or foreign entry is recompiled, never fatal
                found = None
            if found is not None:
                return self._impl.rebuild(target_context, found)
        return None

    def contains(self, sig, target_context) -> bool:
        """Whether an entry for ``sig`` exists in one of the directories (nothing is loaded)."""
        target_context.refresh()
        key = self._index_key(sig, target_context.codegen())
        for layer in [self._cache_file, *self._readonly]:
            try:
                if key in layer._load_index():
                    return True
            except Exception:
                pass
        return False


def kernel(func=None, **options):
    """``numba.njit(**options)`` whose compiled code is cached in dml's cache directory.

    Use it instead of ``numba.njit(cache=True)`` for every kernel of dml (``cache`` is not an
    option here: it is always on, in the directory :func:`cache_dirs` names).

    Examples
    --------
    >>> import numpy as np
    >>> from dml._numba import kernel
    >>> @kernel(nogil=True)
    ... def total(x):
    ...     s = 0.0
    ...     for v in x:
    ...         s += v
    ...     return s
    >>> float(total(np.arange(4.0)))
    6.0
    """
    if "cache" in options:
        raise TypeError("kernel() always caches (in dml's cache directory); remove cache=")

    def decorate(f):
        dispatcher = numba.njit(**options)(f)
        if _dirs()[0] is not None and getattr(dispatcher, "_cache", None) is not None:
            try:
                dispatcher._cache = _KernelCache(dispatcher.py_func)
            except RuntimeError:  # no source file (e.g. defined in a REPL): compile per process
                pass
        _KERNELS.append(dispatcher)
        return dispatcher

    return decorate(func) if func is not None else decorate


# ---------------------------------------------------------------------------------------------
# Compiled code that travels: compiled once on one worker, used by the others
# ---------------------------------------------------------------------------------------------

#: (dispatcher, signature) → the payload :func:`install` made an overload from.
_INSTALLED: dict = {}


def cpu_key(dispatcher) -> tuple:
    """What compiled code depends on besides the source and the types: the target triple, the
    CPU name and its features (numba's own cache key). Code moves only between equal keys."""
    return dispatcher.targetctx.codegen().magic_tuple()


def export(dispatcher, sig) -> bytes:
    """The compiled code of ``dispatcher`` for ``sig`` (compiled or loaded from the cache first
    when needed) as bytes for :func:`install` in another process: numba's own cache entry
    format (object code, not LLVM IR), so installing costs what a cache hit costs."""
    from numba.core.serialize import dumps

    sig = tuple(sig)
    dispatcher.compile(sig)
    if (dispatcher, sig) in _INSTALLED:
        return _INSTALLED[dispatcher, sig]
    try:
        return dumps(dispatcher.overloads[sig]._reduce())
    except RuntimeError:
        # Loaded from the cache: numba keeps no object code of it in memory, so the cache
        # entry it came from is what travels (the same data).
        cache = dispatcher._cache
        ctx = dispatcher.targetctx
        key = cache._index_key(sig, ctx.codegen())
        for layer in [cache._cache_file, *getattr(cache, "_readonly", ())]:
            try:
                found = layer.load(key)
            except Exception:
                found = None
            if found is not None:
                return dumps(found)
        raise


def install(dispatcher, sig, payload: bytes) -> bool:
    """Make the code :func:`export` gave this process's overload of ``dispatcher`` for ``sig``
    (what numba does when it loads a cache entry) and write it to the cache directory when the
    cache lacks it. Returns False when an overload already existed (nothing done).

    The caller checks :func:`cpu_key` first: code compiled for another CPU must not run here.
    """
    import pickle

    from numba.core.compiler import CompileResult
    from numba.core.compiler_lock import global_compiler_lock

    sig = tuple(sig)
    with global_compiler_lock:  # as Dispatcher.compile: no half-added overload seen elsewhere
        if sig in dispatcher.overloads:
            return False
        ctx = dispatcher.targetctx
        ctx.refresh()
        data = pickle.loads(payload)
        cres = CompileResult._rebuild(ctx, *data)
        ctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        dispatcher.add_overload(cres)
        # Kept: numba holds no object code of a rebuilt overload, and this worker may be asked
        # for it later (a worker joining the cluster).
        _INSTALLED[dispatcher, sig] = payload
        cache = dispatcher._cache
        if isinstance(cache, _KernelCache) and not cache.contains(sig, ctx):
            try:  # the entry as numba writes it (the rebuilt overload cannot be reduced again)
                cache._impl.locator.ensure_cache_path()
                cache._cache_file.save(cache._index_key(sig, ctx.codegen()), data)
            except Exception:  # an unwritable cache costs later processes a compile, no more
                pass
    return True



def _prefetch_codegen(context, builder, signature, args):
    aty = signature.args[0]
    ary = context.make_array(aty)(context, builder, args[0])
    inds = [context.cast(builder, v, t, types.intp)
            for v, t in zip(args[1:], signature.args[1:])]
    ptr = cgutils.get_item_pointer(context, builder, aty, ary, inds, wraparound=False)
    i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
        ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0")
    # (address, read, highest temporal locality, data cache): prefetcht0 on x86.
    builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                      ir.Constant(i32, 1)])
    return context.get_dummy_value()


@intrinsic
def prefetch(typingctx, arr, i, j):
    """Inside a kernel: ask the CPU to start loading ``arr[i, j]`` (a 2-D array) into its
    cache now. Only a hint: no value changes, and the indices are not checked (a prefetch of
    an address outside the array does not fault).

    What it is for: a loop that reads rows in an order known ahead (a list of row indices)
    waits on a cache miss at nearly every row, which the hardware prefetchers cannot foresee;
    asking for a row some iterations ahead overlaps those waits with the work on the current
    rows (LightGBM's histogram loops do the same).

    Examples
    --------
    >>> import numpy as np
    >>> from dml._numba import kernel, prefetch
    >>> @kernel
    ... def gather_sum(x, rows):
    ...     s = 0.0
    ...     for k in range(rows.shape[0]):
    ...         if k + 8 < rows.shape[0]:
    ...             prefetch(x, rows[k + 8], 0)
    ...         s += x[rows[k], 0]
    ...     return s
    >>> float(gather_sum(np.arange(6.0).reshape(3, 2), np.array([2, 0, 2])))
    8.0
    """
    if (not isinstance(arr, types.Array) or arr.ndim != 2
            or not isinstance(i, types.Integer) or not isinstance(j, types.Integer)):
        return None
    return types.void(arr, i, j), _prefetch_codegen
