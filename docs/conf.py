"""Sphinx configuration of dml's documentation site.

Build it with ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (tests/test_docs.py
runs exactly that). The API reference is generated at build time: the estimator list comes from
:data:`dml.registry.ESTIMATORS` and the functions from the ``__all__`` of the public modules, so a
new estimator family appears here as soon as it has its registry line.
"""
from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from dml.registry import ESTIMATORS  # noqa: E402

project = "dml"
author = "the dml developers"
copyright = "the dml developers"  # noqa: A001
release = importlib.import_module("dml").__dict__.get("__version__", "0.1.0")

extensions = [
    "myst_nb",  # Markdown pages (myst-parser) and notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# Notebooks are shown with the outputs stored in them; the docs build never runs them
# (tests/test_notebooks.py does, on a cluster).
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
# The pages link to files of the repository (README.md, dml/...) that are not part of the site.
suppress_warnings = ["myst.xref_missing", "myst.header"]

autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # numpydoc's Parameters sections already give the types
# Members inherited from dml base classes are documented; scikit-learn's own are skipped below.
autodoc_default_options: dict[str, object] = {}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

html_theme = "alabaster"
html_theme_options = {"description": "Partition-parallel machine learning on Dask"}
html_static_path: list[str] = []
html_title = "dml"


# --- API reference, generated from the registry and the public modules ---------------------

#: Modules whose public functions (``__all__``) are listed; the estimator packages of the
#: registry are added to them, so their helper functions (e.g. the gap statistic) appear too.
FUNCTION_MODULES = ["dml", "dml.io", "dml.metrics", "dml.model_selection", "dml.datasets",
                    "dml.runtime"]


def _estimators_by_package() -> dict[str, list[str]]:
    packages: dict[str, list[str]] = {}
    for name, (target, _registry_name, _kind) in ESTIMATORS.items():
        module, _, qualname = target.partition(":")
        packages.setdefault(module, []).append(qualname)
        assert qualname == name, (name, target)
    return packages


def _public_members(module_name: str) -> list[tuple[str, object]]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return [(n, getattr(module, n)) for n in names
            if inspect.isfunction(getattr(module, n)) or inspect.isclass(getattr(module, n))]


def write_api_pages() -> Path:
    """Write ``api/index.rst`` (an autosummary table per package); returns its path."""
    estimators = _estimators_by_package()
    seen = set()
    for module, classes in estimators.items():
        mod = importlib.import_module(module)
        seen.update(id(getattr(mod, c)) for c in classes)

    lines = ["API reference", "=============", "",
             "Generated from the docstrings. Estimators are listed from ``dml.registry.ESTIMATORS``;",
             "functions from the public modules' ``__all__``.", ""]

    def table(title: str, module: str, names: list[str]) -> None:
        lines.extend([title, "-" * len(title), "", f".. currentmodule:: {module}", "",
                      ".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""])
        lines.extend(f"   {n}" for n in names)
        lines.append("")

    lines.extend(["Estimators", "~~~~~~~~~~", ""])
    for module, classes in estimators.items():
        table(f"``{module}``", module, classes)

    lines.extend(["Functions and other classes", "~~~~~~~~~~~~~~~~~~~~~~~~~~~", ""])
    modules = FUNCTION_MODULES + [m for m in estimators if m not in FUNCTION_MODULES]
    for module in modules:
        names = []
        for name, obj in _public_members(module):
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            names.append(name)
        if names:
            table(f"``{module}`` ", module, names)

    path = HERE / "api" / "index.rst"
    path.parent.mkdir(exist_ok=True)
    text = "\n".join(lines)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


write_api_pages()


# --- Notebooks: copied from notebooks/ (Sphinx reads sources only below docs/) --------------

def copy_notebooks() -> list[str]:
    """Copy ``notebooks/*.ipynb`` into ``docs/notebooks/``; returns the copied names."""
    import shutil

    target = HERE / "notebooks"
    target.mkdir(exist_ok=True)
    names = []
    for source in sorted((HERE.parent / "notebooks").glob("*.ipynb")):
        dest = target / source.name
        if not dest.exists() or dest.read_bytes() != source.read_bytes():
            shutil.copyfile(source, dest)
        names.append(source.name)
    for stale in target.glob("*.ipynb"):
        if stale.name not in names:
            stale.unlink()
    return names


copy_notebooks()


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Document only what dml defines: not scikit-learn's inherited metadata-routing methods
    (``set_fit_request`` and friends, generated per class and cross-referencing sklearn's own
    glossary)."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    if isinstance(obj, property):
        obj = obj.fget
    module = getattr(obj, "__module__", None) or ""
    if callable(obj) and module and not module.startswith("dml"):
        return True
    return None


_SHAPE_NAME = re.compile(r"(?<=[\w])_(?=[,)])")
_BARS = re.compile(r"(?<![`\\])\|(\w+)\|")


def _escape_plain_text(app, what, name, obj, options, lines):
    """Docstrings are written for ``help()``: a shape such as ``(n_features_in_,)`` or a set size
    such as ``|rel|`` is plain text there, but reStructuredText would read a reference or a
    substitution. Escape those two cases."""
    for i, line in enumerate(lines):
        if "of shape" in line:
            line = _SHAPE_NAME.sub(r"\\_", line)
        if "|" in line and "``" not in line:
            line = _BARS.sub(r"\\|\1\\|", line)
        lines[i] = line


def _add_new_pages_to_the_user_guide(app, docname, source):
    """A page added to docs/ (e.g. with a new estimator family) joins the user guide's table of
    contents without an edit of index.md: every top-level page that index.md does not name is
    appended to the ``user-guide`` toctree, in name order."""
    if docname != "index":
        return
    text = source[0]
    named = set(re.findall(r"^([\w/-]+)$", text, re.M))
    extra = sorted(p.stem for p in HERE.glob("*.md") if p.stem != "index" and p.stem not in named)
    if not extra:
        return
    lines = text.split("\n")
    start = lines.index(":name: user-guide")
    end = lines.index("```", start)
    lines[end:end] = extra
    source[0] = "\n".join(lines)


def setup(app):
    app.connect("source-read", _add_new_pages_to_the_user_guide)
    # index.md's table of contents depends on which pages exist: re-read it on every build
    app.connect("env-get-outdated", lambda app, env, added, changed, removed: ["index"])
    app.connect("autodoc-skip-member", _skip_foreign_members)
    app.connect("autodoc-process-docstring", _escape_plain_text)
