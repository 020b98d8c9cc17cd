"""The parameter contract: declarative constraints, checked once, one error type and wording.

Every public estimator declares ``_parameter_constraints`` (scikit-learn's format: a dict from
parameter name to a list of constraints, any of which may hold), merged from its base classes
with ``{**Base._parameter_constraints, ...}``. ``fit`` and ``partial_fit`` are decorated with
:func:`dml.base.fit_context`, which checks the table (and the estimator's
``_validate_param_relations`` for rules between parameters) before anything else runs. A
violation raises :class:`InvalidParameterError` (a ``ValueError`` and a ``TypeError``) worded
as scikit-learn's::

    The 'alpha' parameter of Ridge must be a float in the range [0.0, inf). Got -1 instead.

Functions (the dataset generators, the cluster-selection helpers) check their arguments with
:func:`check_scalar` / :func:`validate`, which word their errors the same way.

The constraint classes are scikit-learn's (``sklearn.utils._param_validation``), except
:class:`Interval`, which refuses booleans: ``n_estimators=True`` is a mistake, not 1.
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import (HasMethods, Hidden, InvalidParameterError, Options,
                                             RealNotInt)
from sklearn.utils._param_validation import Interval as _SkInterval
from sklearn.utils._param_validation import StrOptions
from sklearn.utils._param_validation import (
    validate_parameter_constraints as _validate_parameter_constraints,
)

__all__ = ["Interval", "StrOptions", "Options", "HasMethods", "Hidden", "InvalidParameterError",
           "Integral", "Real", "RealNotInt", "RANDOM_STATE", "validate", "check_scalar",
           "invalid_parameter"]


class Interval(_SkInterval):
    """scikit-learn's ``Interval``, except that booleans never satisfy it."""

    def is_satisfied_by(self, val):
        if isinstance(val, (bool, np.bool_)):
            return False
        return super().is_satisfied_by(val)


#: dml seeds from any int (``dml._blocks.seed_from``), a RandomState or a Generator.
RANDOM_STATE = [Interval(Integral, None, None, closed="neither"), np.random.RandomState,
                np.random.Generator, None]


def validate(constraints: dict, params: dict, caller: str) -> None:
    """Check ``params`` against ``constraints``; raises :class:`InvalidParameterError`."""
    _validate_parameter_constraints(constraints, params, caller_name=caller)


def check_scalar(value, name: str, caller: str, *, minimum=None, maximum=None,
                 closed: str = "left", integer: bool = False):
    """One numeric argument of a function: an int (``integer``) or a finite real in an interval.

    Returns the value as ``int`` or ``float``.
    """
    kind = Integral if integer else Real
    # An open end excludes infinity: a real without bounds is any finite number.
    validate({name: [Interval(kind, minimum, maximum, closed=closed)]}, {name: value}, caller)
    return int(value) if integer else float(value)


_UNSET = object()


def invalid_parameter(estimator, name: str, requirement: str,
                      value=_UNSET) -> InvalidParameterError:
    """The error for a parameter that breaks a rule the table cannot express.

    Worded as the table's errors: ``The 'l1_ratio' parameter of LogisticRegression must be
    <requirement>. Got 0.5 instead.``
    """
    caller = estimator if isinstance(estimator, str) else type(estimator).__name__
    if value is _UNSET:
        value = getattr(estimator, name)
    return InvalidParameterError(f"The {name!r} parameter of {caller} must be {requirement}. "
                                 f"Got {value!r} instead.")
