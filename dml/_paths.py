"""Where dml keeps its per-user files (compiled kernels, data sets): one root for all of them.

Never inside the installed package: a package directory may be read-only (a container image),
and files left in ``site-packages/dml/`` outlive the package they belong to.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["user_cache_dir"]


def user_cache_dir() -> Path:
    """dml's per-user cache root (not created here).

    ``$DML_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/dml``, else ``~/.cache/dml``. dml's
    numba kernels are cached in its ``numba/`` folder and the real data sets are looked for in
    its ``data/`` folder (unless ``$DML_DATA`` names another place).

    Returns
    -------
    pathlib.Path
        The directory, which may not exist yet.

    Examples
    --------
    >>> import os
    >>> from dml._paths import user_cache_dir
    >>> "DML_CACHE_DIR" in os.environ or user_cache_dir().name == "dml"
    True
    """
    root = os.environ.get("DML_CACHE_DIR")
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "dml"
