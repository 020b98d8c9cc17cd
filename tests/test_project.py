"""Project promises: the README's two commands and CI run the same test command."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands():
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands():
    text = (ROOT / "README.md").read_text()
    first_block = text.index("```bash")
    assert text[:first_block].count("\n") <= 2, "the two commands must open the README"
    commands = readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith("dml demo")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def test_ci_tests_the_declared_minimum_versions():
    """.ci/run installs every dependency at its declared minimum in a second environment."""
    import importlib.util
    import tomllib

    spec = importlib.util.spec_from_file_location("min_versions", ROOT / ".ci" / "min_versions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = module.pins(deps)
    assert len(pins) == len(deps)
    for dep, pin in zip(deps, pins):
        name, minimum = dep.replace(" ", "").split(">=")
        assert pin in (f"{name}=={minimum}", f"{name}=={minimum}.*"), (dep, pin)
    with pytest.raises(SystemExit, match="cannot pin"):
        module.pins(["numpy<3"])
    ci = (ROOT / ".ci" / "run").read_text()
    assert "$(python3 .ci/min_versions.py)" in ci and ".venv-min/bin/python -m pytest" in ci
