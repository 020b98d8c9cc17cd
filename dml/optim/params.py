"""The hyper-parameters of the SGD-trained estimators: one table, one ``__init__``.

scikit-learn's ``BaseSGD`` shares one ``__init__`` but every subclass still repeats the
signature. Here each SGD knob is declared once, in :data:`SGD` (the step: optimiser, schedule,
penalty, batches) or :data:`TRAINING` (the loop: stopping, checkpoints, progress), as a
:class:`Param`: default, constraints (:mod:`dml._param_validation`), documentation, and the
flags the machinery reads:

* ``fingerprint=False``: does not change the fitted model, so it is left out of the checkpoint
  fingerprint (a fit resumed with another ``max_iter`` or ``verbose`` continues);
* ``alone=True``: a set value (not None/False/0/empty) keeps a fit out of stacked training
  (:mod:`dml.optim.stacked`): early stopping, checkpoints, callbacks, progress, warm starts;
* ``stackable=True``: a per-model scalar of an SGD step (penalty weight, step constants), in
  which stacked fits may differ;
* ``to="sgd"`` / ``to="train"``: passed as it is to :class:`~dml.optim.engine.SGDConfig` /
  :class:`~dml.optim.training.TrainConfig` under its own name by every estimator.

An estimator class sets ``_params`` (its table: shared entries picked with :func:`table`, plus
its own) and derives from :class:`ParamTableMixin`, which builds from it the ``__init__`` (a
real signature, so ``get_params``/``clone`` work as for any scikit-learn estimator),
``_parameter_constraints`` and the Parameters entries of the shared knobs in the class
docstring (at the line ``{SGD_PARAMETERS}``). A new SGD knob that ``SGDConfig`` takes as it is
therefore touches two places: its entry here and its field in ``SGDConfig``.
"""
from __future__ import annotations

import inspect
import os
import textwrap
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dml._param_validation import RANDOM_STATE, Hidden, Integral, Interval, Real, StrOptions
from dml.optim.optimizers import OPTIMIZERS, Optimizer
from dml.optim.schedules import SCHEDULES, Schedule

__all__ = ["Param", "SGD", "TRAINING", "table", "ParamTableMixin", "passthrough",
           "not_fingerprinted", "keeps_alone", "MARKER"]

#: The docstring line replaced by the shared parameters' documentation.
MARKER = "{SGD_PARAMETERS}"


@dataclass(frozen=True)
class Param:
    """One hyper-parameter: default, constraints, documentation and machinery flags.

    ``doc`` is the numpydoc entry without the name: its first line is the type (the default is
    appended), the rest the description. ``doc=None``: the class documents it by hand.
    """

    default: Any
    constraints: list | str
    doc: str | None = None
    fingerprint: bool = True
    alone: bool = False
    stackable: bool = False
    to: str | None = None
    positional: bool = False

    def but(self, **changes) -> Param:
        """A copy with some fields changed (e.g. another default)."""
        return replace(self, **changes)


def _positive_int(minimum=1):
    return Interval(Integral, minimum, None, closed="left")


#: The SGD step's knobs.
SGD: dict[str, Param] = {
    "penalty": Param("l2", [StrOptions({"l2", "l1", "elasticnet"}),
                            Hidden(StrOptions({"none"})), None],
                     '{"l2", "l1", "elasticnet"} or None\n'
                     "The regulariser; its l1 part is a proximal (soft-threshold) step."),
    "alpha": Param(1e-4, [Interval(Real, 0, None, closed="left")],
                   "float\nPenalty strength; also sets the ``optimal`` step size "
                   "1 / (alpha (t0 + t)).", stackable=True),
    "l1_ratio": Param(0.15, [Interval(Real, 0, 1, closed="both")],
                      "float\nElastic-net mixing ρ (penalty ρ‖w‖₁ + (1 − ρ)/2 ‖w‖²).",
                      stackable=True),
    "learning_rate": Param("optimal", [StrOptions(set(SCHEDULES)), Schedule],
                           '{"optimal", "constant", "invscaling", "adaptive"}\n'
                           "The step size schedule (see :mod:`dml.optim.schedules`); "
                           '"adaptive" divides the step by 5 whenever the objective stalls.'),
    "eta0": Param(0.01, [Interval(Real, 0, None, closed="left")],
                  "float\nInitial step size (not used by ``optimal``).", stackable=True),
    "power_t": Param(0.5, [Interval(Real, None, None, closed="neither")],
                     "float\nExponent of the ``invscaling`` schedule: the initial step / "
                     "t^power_t.", stackable=True),
    "optimizer": Param("sgd", [StrOptions(set(OPTIMIZERS)), Optimizer],
                       '{"sgd", "momentum", "nesterov", "adam"}\nThe update rule.'),
    "momentum": Param(0.9, [Interval(Real, 0, 1, closed="left")],
                      "float\nMomentum of the momentum and Nesterov updates."),
    "average": Param(False, ["boolean", _positive_int(0)],
                     "bool or int\nReturn the average of the iterates (after step ``average`` "
                     "when an int)."),
    "batch_size": Param(32, [_positive_int()], "int\nRows per mini-batch step."),
    "local_steps": Param(None, [_positive_int(), StrOptions({"epoch"}), None],
                         'int, "epoch" or None\nMini-batch steps every stream takes between '
                         "combinations of the streams; None: rounds of about 256 steps of all "
                         "streams together (with the ``optimal`` schedule 4 rounds per epoch, in "
                         "each of which every stream walks a quarter of its epoch); "
                         "\"epoch\": "
                         "one round per epoch (the fewest passes when the data is read from "
                         "storage on every pass). See docs/partition_parallel_sgd.md.",
                         to="sgd"),
    "stream_steps": Param(128, [_positive_int(), None],
                          "int or None\nMini-batch steps per epoch of one stream, about: "
                          "consecutive blocks are walked in sequence by one model, the rows "
                          "cut into as many streams of this many steps as they hold, as equal "
                          "as the block boundaries allow, so a model's progress per epoch does "
                          "not shrink as the data is cut into more partitions. None: every "
                          "block is a stream (plain local SGD).", to="sgd"),
    "combine": Param("auto", [StrOptions({"auto", "sum", "average"})],
                     '{"auto", "sum", "average"}\nHow the streams\' updates are combined after '
                     'a round: "sum" adds them (as one sequential pass would make them), '
                     '"average" averages the streams\' parameters; "auto": "average" for '
                     'learning_rate="optimal", "sum" otherwise.', to="sgd"),
    "shuffle": Param(True, ["boolean"],
                     "bool\nVisit every block's rows in a new seeded order each epoch."),
}

#: The training loop's knobs.
TRAINING: dict[str, Param] = {
    "max_iter": Param(1000, [_positive_int()], "int\nMaximum number of epochs.",
                      fingerprint=False),
    "tol": Param(1e-3, [Interval(Real, 0, None, closed="left"), None],
                 "float or None\nStop when the epoch objective (or the validation score with "
                 "``early_stopping``) has not improved by ``tol`` for ``n_iter_no_change`` "
                 "epochs; None: run ``max_iter`` epochs."),
    "n_iter_no_change": Param(5, [_positive_int()],
                              "int\nEpochs without improvement before stopping.", to="train"),
    "early_stopping": Param(False, ["boolean"],
                            "bool\nHold out ``validation_fraction`` of every block's rows "
                            "(a seeded random subset) and stop on their score.", alone=True),
    "validation_fraction": Param(0.1, [Interval(Real, 0, 1, closed="neither")],
                                 "float\nThe held-out part with ``early_stopping``."),
    "random_state": Param(None, RANDOM_STATE,
                          "int, RandomState, Generator or None\nSeeds the shuffles and the "
                          "validation split."),
    "verbose": Param(0, ["verbose"],
                     "int\nLog a line per epoch on the ``dml.optim`` logger and show a "
                     "progress line on stderr.", fingerprint=False, alone=True, to="train"),
    "warm_start": Param(False, ["boolean"],
                        "bool\nStart from the previous fit's coefficients (the optimiser "
                        "state restarts).", fingerprint=False, alone=True),
    "checkpoint_dir": Param(None, [str, os.PathLike, None],
                            "str or None\nWrite the training state there every "
                            "``checkpoint_every`` epochs; a fit started again with the same "
                            "directory resumes from it and ends with the same model.",
                            fingerprint=False, alone=True),
    "checkpoint_every": Param(1, [_positive_int()], "int\nEpochs between checkpoints.",
                              fingerprint=False, to="train"),
    "persist": Param("auto", [StrOptions({"auto"}), "boolean"],
                     '{"auto", True, False}\nKeep the prepared blocks in worker memory '
                     '("auto": when they take at most half of it).', fingerprint=False),
    "progress": Param(None, "no_validation",
                      'None, False, "text", "notebook", callable or object\nProgress display '
                      '(see :mod:`dml.optim.progress`); "notebook": an HTML bar in Jupyter.',
                      fingerprint=False, alone=True, to="train"),
    "callbacks": Param(None, [list, tuple, None],
                       "list of callables or None\n``callback(state, record)`` after every "
                       "epoch; returning True stops training.", fingerprint=False, alone=True),
}

_SHARED = {**SGD, **TRAINING}


def table(*names, exclude=(), **own) -> dict[str, Param]:
    """A class's table: the shared entries ``names`` (all but ``exclude`` for ``"*"``) and its own.

    ``own`` maps a name to a :class:`Param` (an entry of the class) or to a dict of changes to
    the shared entry of that name (``batch_size={"default": "auto"}``). Order: the positional
    parameters of ``own`` as given, the class's other own parameters, then the shared ones.
    """
    names = list(_SHARED) if names == ("*",) else list(names)
    shared = {n: _SHARED[n] for n in _SHARED
              if (n in names or n in own) and n not in exclude}
    mine = {}
    for n, p in own.items():
        if isinstance(p, dict):
            shared[n] = _SHARED[n].but(**p)
        else:
            shared.pop(n, None)
            mine[n] = p
    first = {n: p for n, p in mine.items() if p.positional}
    return {**first, **{n: p for n, p in mine.items() if n not in first}, **shared}


def _is_set(value) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, (list, tuple)) and not value:
        return False
    if isinstance(value, (int, float, np.number)) and value == 0:
        return False
    return True


def not_fingerprinted(est) -> set:
    """Names of the estimator's parameters that do not change the fitted model."""
    return {n for n, p in type(est)._params.items() if not p.fingerprint}


def keeps_alone(est) -> bool:
    """Whether a parameter value keeps this fit out of stacked training."""
    return any(p.alone and _is_set(getattr(est, n)) for n, p in type(est)._params.items())


def passthrough(est, to: str, values: dict | None = None) -> dict:
    """The knobs passed as they are to ``SGDConfig`` (``to="sgd"``) or ``TrainConfig``
    (``to="train"``): the estimator's value, else the one in ``values``, else the default."""
    values = values or {}
    return {n: values[n] if n in values else getattr(est, n, p.default)
            for n, p in _SHARED.items() if p.to == to}


def _document(cls) -> str | None:
    doc = cls.__doc__
    if doc is None or MARKER not in doc:
        return doc
    line = next(ln for ln in doc.splitlines() if ln.strip() == MARKER)
    indent = line[:len(line) - len(line.lstrip())]
    entries = []
    for name, p in cls._params.items():
        if p.doc is None:
            continue
        kind, _, text = p.doc.partition("\n")
        entries.append(f"{indent}{name} : {kind}, default={p.default!r}")
        entries.extend(textwrap.wrap(text, 96 - len(indent), initial_indent=indent + "    ",
                                     subsequent_indent=indent + "    "))
    return doc.replace(line, "\n".join(entries))


def _make_init(cls):
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for name, p in cls._params.items():
        kind = (inspect.Parameter.POSITIONAL_OR_KEYWORD if p.positional
                else inspect.Parameter.KEYWORD_ONLY)
        params.append(inspect.Parameter(name, kind, default=p.default))
    signature = inspect.Signature(params)

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            setattr(self, name, value)

    __init__.__signature__ = signature
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__module__ = cls.__module__
    __init__.__doc__ = f"Store the hyper-parameters (see :class:`{cls.__name__}`)."
    return __init__


class ParamTableMixin:
    """Builds ``__init__``, ``_parameter_constraints`` and the docs from the class's ``_params``.

    A class that sets ``_params`` in its body gets them; its subclasses inherit them unless
    they set their own. Any class's docstring line ``{SGD_PARAMETERS}`` becomes the entries of
    the table's documented parameters.
    """

    _params: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_params" in cls.__dict__:
            cls._parameter_constraints = {n: p.constraints for n, p in cls._params.items()}
            cls.__init__ = _make_init(cls)
        if "__doc__" in cls.__dict__:
            cls.__doc__ = _document(cls)
