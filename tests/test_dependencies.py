"""Every third-party package the code imports is declared in pyproject.toml.

A package that only arrives as a dependency of a dependency can disappear in any
upgrade. The product code may use only [project] dependencies, except that a
component folder with an extra of its own name (``app/simulate`` and the ``simulate``
extra) may also use that extra; tests and benchmarks may also use the dev extra.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = {"app", "tests", "bench"}
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _name(requirement: str) -> str:
    """``"uvloop>=0.19; sys_platform != 'win32'"`` → ``"uvloop"``, normalized."""
    return _normalize(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])


def _normalize(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


RUNTIME = {_name(r) for r in PROJECT["dependencies"]}
DEV = RUNTIME | {_name(r) for r in PROJECT["optional-dependencies"]["dev"]}


EXTRAS = {
    name: {_name(r) for r in requirements}
    for name, requirements in PROJECT["optional-dependencies"].items()
    if name != "dev"
}


def declared_for(where: str, declared: set[str]) -> set[str]:
    """What a file may import: the folder's set, plus its component's own extra."""
    parts = Path(where).parts
    if len(parts) > 2 and parts[0] == "app" and parts[1] in EXTRAS:
        return declared | EXTRAS[parts[1]]
    return declared


def imported_modules(folder: str) -> list[tuple[str, str]]:
    """(top-level third-party module, file that imports it), once per file and module."""
    found: dict[tuple[str, str], None] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                    found.setdefault((top, str(path.relative_to(ROOT))), None)
    return list(found)


def undeclared(folder: str, declared: set[str]) -> list[str]:
    distributions = packages_distributions()
    problems = []
    for module, where in imported_modules(folder):
        owners = {_normalize(d) for d in distributions.get(module, [module])}
        if not owners & declared_for(where, declared):
            problems.append(f"{where} imports {module} (from {', '.join(sorted(owners))})")
    return problems


@pytest.mark.parametrize(("folder", "declared"), [("app", RUNTIME), ("tests", DEV), ("bench", DEV)])
def test_every_imported_package_is_declared(folder: str, declared: set[str]) -> None:
    assert undeclared(folder, declared) == []


def test_an_extra_covers_only_its_own_component() -> None:
    assert "matplotlib" in declared_for("app/simulate/summary.py", RUNTIME)
    assert "matplotlib" not in declared_for("app/extender/extender.py", RUNTIME)
