"""Habits checked by the test suite: lint (ruff), numpydoc docstrings, a doctest per estimator.

``ruff`` and ``numpydoc`` come with the ``test`` extra. The numpydoc checks run on the public
estimator classes (``dml.registry.ESTIMATORS``) with the codes of :data:`NUMPYDOC_CHECKS`.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dml import registry

ROOT = Path(__file__).resolve().parents[1]

#: numpydoc validation codes every public estimator's docstring passes: it exists (GL08), has
#: an Examples section (EX01), documents every parameter (PR01) and no other (PR02), with
#: "name : type" entries (PR10).
NUMPYDOC_CHECKS = {"GL08", "EX01", "PR01", "PR02", "PR10"}


def _classes():
    return [registry.resolve_target(target) for target, _, _ in registry.ESTIMATORS.values()]


def test_ruff():
    """``ruff check dml tests`` with the configuration of pyproject.toml finds nothing."""
    pytest.importorskip("ruff")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "dml", "tests"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__name__)
def test_numpydoc(cls):
    validate = pytest.importorskip("numpydoc.validate").validate
    target = next(t for t, _, _ in registry.ESTIMATORS.values() if t.endswith(":" + cls.__name__))
    errors = [f"{code}: {msg}" for code, msg in validate(target.replace(":", "."))["errors"]
              if code in NUMPYDOC_CHECKS]
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__name__)
def test_every_estimator_has_a_doctest_and_no_template_leftovers(cls):
    """A runnable example (``--doctest-modules`` runs it) and no unfilled template: a
    ``%(...)s`` or a lone ``%`` line (the tree docstrings had one), or the table marker."""
    doc = cls.__doc__
    assert doc is not None, f"{cls.__name__} has no docstring (an expression is not one)"
    assert ">>> " in doc
    assert "%(" not in doc and "{SGD_PARAMETERS}" not in doc
    assert not [line for line in doc.splitlines() if line.strip() == "%"]
