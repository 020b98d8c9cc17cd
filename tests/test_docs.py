"""The documentation site (docs/) builds without a warning and covers what it should.

:func:`test_site_builds_without_warnings` is the CI build of the site: it runs the command the
docs describe (``python -m sphinx -W --keep-going -b html docs OUT``) and then checks that every
estimator of :data:`dml.registry.ESTIMATORS` has an API page and every notebook was rendered. The
other tests check that the code's pointers into docs/ lead somewhere.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dml import registry

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: "docs/name.md" as the code cites the user-guide pages.
_DOCS_POINTER = re.compile(r"docs/([\w-]+\.md)")


def _source_files():
    return sorted((ROOT / "dml").rglob("*.py"))


def test_no_spec_section_references_in_the_code():
    """Users do not have the project's internal specification: the code explains itself or
    points to a page of docs/, never to "SPEC §N"."""
    offenders = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
                 for path in _source_files()
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if re.search(r"SPEC\s*§|\bSPEC\b", line)]
    assert not offenders, "\n".join(offenders)


def test_every_docs_page_the_code_points_to_exists():
    cited = {}
    for path in _source_files():
        for name in _DOCS_POINTER.findall(path.read_text(encoding="utf-8")):
            cited.setdefault(name, path.relative_to(ROOT))
    assert cited, "the code cites no docs/ page: the pattern above is out of date"
    missing = {name: str(where) for name, where in cited.items() if not (DOCS / name).is_file()}
    assert not missing, missing


@pytest.mark.slow
def test_site_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_nb")
    out = tmp_path / "html"
    # -W turns warnings (a broken cross-reference, a malformed docstring, a page outside every
    # toctree) into errors; --keep-going reports all of them, not only the first.
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q",
                            "-b", "html", str(DOCS), str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stdout[-5000:] + build.stderr[-10000:]

    generated = out / "api" / "generated"
    for name, (target, _, _) in registry.ESTIMATORS.items():
        module = target.partition(":")[0]
        page = generated / f"{module}.{name}.html"
        assert page.is_file(), f"no API page for {target}"
        html = page.read_text(encoding="utf-8")
        assert f'id="{module}.{name}"' in html
        assert f'id="{module}.{name}.fit"' in html, f"{name}.fit is not documented"

    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for source in notebooks:
        page = out / "notebooks" / f"{source.stem}.html"
        assert page.is_file(), f"{source.name} was not rendered"
        html = page.read_text(encoding="utf-8")
        cells = json.loads(source.read_text(encoding="utf-8"))["cells"]
        code = next(c for c in cells if c["cell_type"] == "code")
        first_line = "".join(code["source"]).strip().splitlines()[0]
        # the rendered page holds the notebook's code (highlighted: compare the identifiers)
        for word in re.findall(r"[A-Za-z_]{4,}", first_line):
            assert word in html, f"{source.name}: {word!r} of its first code cell is missing"
        # ... and its stored outputs: the figures are on the page (the build runs no notebook)
        assert "<img" in html, f"{source.name}: no figure rendered"

    # every page of docs/ is on the site (conf.py adds the ones index.md does not name to the
    # user guide), and so are the included READMEs and results
    pages = [p.stem for p in DOCS.glob("*.md")] + ["api/index"]
    for page in ("benchmarks", "jobs", "kubernetes", "partition_parallel_sgd", "naive_bayes"):
        assert page in pages
    for page in pages:
        assert (out / f"{page}.html").is_file(), page


def _public_methods():
    """(path, function) of every public method the registry's estimators define in dml."""
    import inspect

    found = {}
    for target, _, _ in registry.ESTIMATORS.values():
        cls = registry.resolve_target(target)
        for name in dir(cls):
            if name.startswith("_"):
                continue
            owner = next(k for k in cls.__mro__ if name in vars(k))
            func = vars(owner)[name]
            if inspect.isfunction(func) and owner.__module__.startswith("dml."):
                found[f"{owner.__module__}.{owner.__qualname__}.{name}"] = inspect.unwrap(func)
    return sorted(found.items())


def test_public_methods_have_type_hints():
    """fit/predict/transform/score/... of every estimator annotate their parameters and return
    type (dml._typing has the aliases: ArrayLike for data, Self for fit, Any for outputs whose
    kind follows the input's)."""
    import inspect

    missing = []
    for path, func in _public_methods():
        sig = inspect.signature(func)
        bare = [p.name for p in sig.parameters.values()
                if p.name != "self" and p.annotation is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if bare or sig.return_annotation is inspect.Signature.empty:
            missing.append(f"{path}: parameters {bare}"
                           + ("" if sig.return_annotation is not inspect.Signature.empty
                              else ", return type"))
    assert not missing, "\n".join(missing)


def test_package_ships_its_type_hints():
    """PEP 561: dml/py.typed exists and pyproject.toml installs it with the package."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    assert (ROOT / "dml" / "py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["dml"]


def _api_modules():
    """The modules the API reference lists (docs/conf.py), loaded without running Sphinx."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_dml_docs_conf", DOCS / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    packages = conf._estimators_by_package()
    return conf.FUNCTION_MODULES + [m for m in packages if m not in conf.FUNCTION_MODULES]


def test_every_public_function_is_in_all():
    """The API reference lists a module's ``__all__``: a public function or class of dml that a
    module exposes but leaves out of ``__all__`` gets no page (silhouette_score had none)."""
    import importlib
    import inspect

    modules = _api_modules()
    assert "dml.metrics" in modules
    missing = []
    for name in modules:
        module = importlib.import_module(name)
        exported = set(getattr(module, "__all__", ()))
        for attr, value in vars(module).items():
            if attr.startswith("_") or not (inspect.isfunction(value) or inspect.isclass(value)):
                continue
            # Defined in the module or its private submodules (not a helper it imports).
            home = getattr(value, "__module__", "") or ""
            if (home == name or home.startswith(name + ".")) and attr not in exported:
                missing.append(f"{name}.{attr}")
    assert not missing, f"public but not in __all__ (no API page): {missing}"
