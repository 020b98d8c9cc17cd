"""Package namespaces that import their modules on first use (PEP 562).

A Dask worker imports a module when it unpickles a task's function, and with it that module's
package ``__init__``. A package whose ``__init__`` imported all its estimators made a worker
running one kernel import scikit-learn, SciPy's statistics and pandas: about a second of CPU
on its first task (``docs/cold_start.md``). With :func:`attach`, ``from dml.tree import
DecisionTreeClassifier``, ``dml.tree.DecisionTreeClassifier``, ``dir(dml.tree)`` and ``from
dml.tree import *`` work as before, and importing ``dml.tree._kernels`` imports no estimator.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

__all__ = ["attach"]


def attach(package: str, where: dict[str, str]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for the package ``package`` whose public names live in the
    modules ``where`` names.

    Parameters
    ----------
    package : str
        The package's name (its ``__name__``).
    where : dict of str to str
        Public name → module that defines it (the name is looked up there on first use, then
        kept in the package's namespace); ``"module:other"`` for a name that is another name
        of ``module`` (an alias).

    Returns
    -------
    tuple of callable
        Assign them to the package's ``__getattr__`` and ``__dir__``.

    Examples
    --------
    >>> import dml.tree
    >>> "DecisionTreeClassifier" in dir(dml.tree)
    True
    >>> from dml.tree import DecisionTreeClassifier
    >>> DecisionTreeClassifier.__module__
    'dml.tree._classes'
    """
    def __getattr__(name):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = where[name].partition(":")
        value = getattr(importlib.import_module(module), attr or name)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
