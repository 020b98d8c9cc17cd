"""Print pip requirements that pin every dependency of pyproject.toml to its declared minimum.

``numpy>=2.0`` becomes ``numpy==2.0.*`` (the lowest allowed minor release, with its newest
patch: the patches fix wheels and builds, not APIs) and ``pandas>=2.2.2`` becomes
``pandas==2.2.2``. ``.ci/run`` installs dml with these pins in a second environment, so that
the minimum versions pyproject.toml declares are tested, not hoped.
"""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def pins(dependencies: list[str]) -> list[str]:
    out = []
    for dep in dependencies:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+(?:\[[^\]]*\])?)\s*>=\s*([0-9][0-9.]*)\s*", dep)
        if m is None:
            raise SystemExit(f"{PYPROJECT.name}: cannot pin {dep!r}; declare it as 'name>=version'")
        name, version = m.groups()
        parts = version.split(".")
        out.append(f"{name}=={version}" if len(parts) >= 3 else f"{name}=={version}.*")
    return out


if __name__ == "__main__":
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    sys.stdout.write("\n".join(pins(deps)) + "\n")
