"""The architecture, checked from the imports: floors, from the ground up, and fronts.

The floors are import-linter's contracts, in pyproject.toml (``[tool.importlinter]``):
a package (or a top-level module) of ``app`` may import only from floors below its own,
so no arrow runs back up or sideways, no two components import each other, and no
package cycle can form; only ``app.kube`` imports the Kubernetes client. ``lint-imports``
reads every import, including those inside functions and under ``TYPE_CHECKING``; it
runs here and in scripts/test. A new package must be given its floor there (the
contract is exhaustive). Each package's floor there is the one its imports give it (one
above the highest floor it imports from, measured on import-linter's own import graph),
and docs/developer.md lists the same floors.

What the tool does not check is here. Each package has one front, its ``__init__``:
another package of ``app`` imports its names from there (``from app.kube import
NodeCache``), never from the module behind it, so a package can rearrange its modules
without its callers noticing. A component's ``main`` (its process and flags) is the one
module named through the front, by ``cli``, which loads it. Inside a package, modules
import each other by module. Tests may import a package's internals.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def unit_of(module: str) -> str | None:
    """``app.kube.pods`` → ``kube``; None for anything outside ``app``."""
    parts = module.split(".")
    return parts[1] if parts[0] == "app" and len(parts) > 1 else None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def app_files() -> list[Path]:
    return sorted((ROOT / "app").rglob("*.py"))


ENTRY_MODULES = {"main"}  # a command's process and flags, which cli loads by name


def past_the_front(unit: str, module: str, names: list[str], packages: set[str]) -> str | None:
    """The module an import reaches past another package's front for, if it does."""
    parts = module.split(".")
    if parts[0] != "app" or len(parts) < 2 or parts[1] == unit or parts[1] not in packages:
        return None
    if len(parts) > 2:
        return module
    # ``plan`` is both a module and the function rebalance's front exports: the function.
    reached = [n for n in names if n in submodules(parts[1]) and n not in exports(parts[1])]
    return f"{module}.{reached[0]}" if reached else None


def submodules(package: str) -> set[str]:
    folder = ROOT / "app" / package
    return {p.stem for p in folder.glob("*.py")} - ENTRY_MODULES - {"__init__"} | {
        p.parent.name for p in folder.glob("*/__init__.py")
    }


def exports(package: str) -> set[str]:
    """The names a package's front exports: its ``__all__``, or the ``__all__`` of each
    module it star-imports (at once, or for type checkers with ``load_modules_on_use``)."""
    import importlib

    from app.objects.lazy import declared_exports

    tree = ast.parse((ROOT / "app" / package / "__init__.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names |= set(ast.literal_eval(node.value))
        elif isinstance(node, ast.ImportFrom) and [a.name for a in node.names] == ["*"]:
            assert node.module is not None
            importlib.import_module(f"app.{package}")
            names |= set(declared_exports(f"app.{package}", node.module.rsplit(".", 1)[1]))
    return names


def packages_of_app() -> set[str]:
    return {p.parent.name for p in (ROOT / "app").glob("*/__init__.py")}


def front_violations(files: list[tuple[str, Path]], packages: set[str]) -> list[str]:
    """Imports from another package of ``app`` that go past its front."""
    found = []
    for name, path in files:
        unit = unit_of(name)
        if unit is None:
            continue
        for line, module, names in imported_names(path):
            if reached := past_the_front(unit, module, names, packages):
                front = ".".join(module.split(".")[:2])
                found.append(f"{name}:{line}: imports {reached} past the front {front}")
    return found


def imported_names(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(line, module, names) of every absolute import; ``import a.b`` names nothing."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, [alias.name for alias in node.names]


LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path, python_path: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the contracts of pyproject.toml, on the ``app`` found first
    on ``python_path``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(python_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_hold() -> None:
    """The floors, the components' independence, the module cycles and the Kubernetes
    adapter, as pyproject.toml declares them."""
    result = lint_imports(ROOT, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout
    assert "Contracts: 4 kept, 0 broken." in result.stdout, result.stdout


def declared_floors(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, int]:
    """Each package's floor as the floors contract lists it, from 1, the ground."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["id"] == "floors")
    return {
        name.strip(): floor
        for floor, layer in enumerate(reversed(layers), start=1)
        for name in layer.split("|")
    }


def measured_floors() -> dict[str, int]:
    """Each package's floor as its imports give it: one above the highest floor it
    imports from (import-linter's import graph: every import, also inside functions
    and for type checkers)."""
    graph = grimp.build_graph("app", cache_dir=None)
    imported: dict[str, set[str]] = {}
    for module in graph.modules:
        unit = unit_of(module)
        if unit is None:
            continue
        below = imported.setdefault(unit, set())
        for other in map(unit_of, graph.find_modules_directly_imported_by(module)):
            if other is not None and other != unit:
                below.add(other)

    @functools.cache
    def floor(unit: str) -> int:
        return 1 + max(map(floor, imported[unit]), default=0)

    return {unit: floor(unit) for unit in imported}


def documented_floors(text: str) -> dict[str, int]:
    """The floors docs/developer.md's layout lists: ``N. `app/x/`, `app/y.py`: ...``."""
    layout = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return {
        name: int(number)
        for number, head in re.findall(r"^(\d+)\. ([^:]*):", layout, re.MULTILINE)
        for name in re.findall(r"`app/(\w+)(?:/|\.py)`", head)
    }


def test_each_package_sits_on_the_floor_its_imports_give_it() -> None:
    """The contract's floors are the measured ones: a package that could sit lower is
    moved down, so the list says what the imports show, not only what they may do."""
    assert declared_floors() == measured_floors()


def test_the_developer_docs_list_the_contract_s_floors() -> None:
    text = (ROOT / "docs" / "developer.md").read_text(encoding="utf-8")
    assert documented_floors(text) == declared_floors()


PROBES = {
    "app/objects/probe.py": "from app.kube.pods import pod_info\n",
    "app/extender/probe.py": "from app.annotator import bindings\n",
    "app/annotator/probe.py": "from app.extender import verbs\n",  # down a floor, still no
    "app/kube/probe.py": "from app.policy import Policy\n",  # sideways, on one floor
    "app/policy/probe.py": "def later() -> None:\n    from app.load import model\n",
    "app/explain/probe.py": "from lightkube.resources.core_v1 import Pod\n",
    "app/runtime/probe.py": "import httpx2\n",
    "app/simulate/one.py": "from app.simulate import two\n",
    "app/simulate/two.py": "from app.simulate import one\n",
}


def test_the_contracts_catch_what_they_are_for(tmp_path: Path) -> None:
    """The contracts on a copy of ``app`` with files written as they must never be: an
    arrow back up (also inside a function), a sideways one, a component importing one
    on a floor below, lightkube and its HTTP client outside app/kube, a module cycle,
    and a package with no floor."""
    shutil.copytree(ROOT / "app", tmp_path / "app", ignore=shutil.ignore_patterns("*.so"))
    (tmp_path / "app" / "newpackage").mkdir()
    (tmp_path / "app" / "newpackage" / "__init__.py").write_text("", encoding="utf-8")
    for name, text in PROBES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    result = lint_imports(tmp_path, tmp_path)
    assert result.returncode == 1
    said = result.stdout
    assert "Contracts: 0 kept, 4 broken." in said, said
    for words in (
        "app.objects.probe -> app.kube.pods",
        "app.extender.probe -> app.annotator",
        "app.annotator.probe -> app.extender",
        "app.kube.probe -> app.policy",
        "app.policy.probe -> app.load",
        "app.explain.probe -> lightkube",
        "app.runtime.probe -> httpx2",
        "No cycles are allowed in app.simulate",
        "app.newpackage",
    ):
        assert words in said, words


def test_no_package_imports_past_another_packages_front() -> None:
    files = [(module_name(path), path) for path in app_files()]
    assert front_violations(files, packages_of_app()) == []


def test_app_holds_only_packages_and_the_entry_point() -> None:
    loose = {p.name for p in (ROOT / "app").glob("*.py")} - {"__init__.py", "cli.py"}
    assert loose == set()


# A class longer than this does more than one job (issue 29: the god classes).
MAX_CLASS_LINES = 250
# Within 10 % of the cap: a class that is a sign, not a target (issue 41); a failure
# names these too, so that a split is made along a seam rather than just under the cap.
NEAR_THE_CAP = MAX_CLASS_LINES * 9 // 10


def long_classes(files: list[Path], root: Path = ROOT, bound: int = MAX_CLASS_LINES) -> list[str]:
    """Each class of ``files`` longer than ``bound`` lines, longest first."""
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > bound:
                    found.append((lines, f"{path.relative_to(root)}: {node.name}, {lines} lines"))
    return [text for _, text in sorted(found, key=lambda row: -row[0])]


def test_no_class_in_app_is_over_250_lines() -> None:
    files = app_files()
    near = long_classes(files, bound=NEAR_THE_CAP)
    assert long_classes(files) == [], (
        f"classes over {NEAR_THE_CAP} lines (within 10 % of the cap): {'; '.join(near)}"
    )


def test_the_class_check_counts_a_class_s_lines(tmp_path: Path) -> None:
    def write(name: str, body_lines: int) -> Path:
        body = "".join(f"    x{i} = {i}\n" for i in range(body_lines))
        path = tmp_path / f"{name.lower()}.py"
        path.write_text(f"class {name}:\n{body}", encoding="utf-8")
        return path

    files = [write("Big", MAX_CLASS_LINES), write("AtTheBound", MAX_CLASS_LINES - 1)]
    assert long_classes(files, tmp_path) == [f"big.py: Big, {MAX_CLASS_LINES + 1} lines"]
    files.append(write("Near", NEAR_THE_CAP))
    assert long_classes(files, tmp_path, NEAR_THE_CAP) == [
        f"big.py: Big, {MAX_CLASS_LINES + 1} lines",
        f"atthebound.py: AtTheBound, {MAX_CLASS_LINES} lines",
        f"near.py: Near, {NEAR_THE_CAP + 1} lines",
    ]


def test_the_check_catches_an_import_past_a_front(tmp_path: Path) -> None:
    """The front rule, on files written as they must never be, and as they may be."""
    probes = {
        "app.extender.probe": "from app.kube.nodes import NodeCache\n",
        "app.descheduler.probe": "def later() -> None:\n    from app.kube import pods\n",
        "app.annotator.probe": "import app.prom.client\n",
        "app.simulate.probe": "from app.kube import NodeCache\nfrom app.simulate import cluster\n",
        "app.cli": "from app.extender import main\n",
    }
    files = []
    for name, text in probes.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        files.append((name, path))
    found = front_violations(files, packages_of_app())
    assert found == [
        "app.extender.probe:1: imports app.kube.nodes past the front app.kube",
        "app.descheduler.probe:2: imports app.kube.pods past the front app.kube",
        "app.annotator.probe:1: imports app.prom.client past the front app.prom",
    ]


def test_every_name_a_front_exports_is_there() -> None:
    """A front may load a module on first use (PEP 562, ``__getattr__``): each name it
    exports must still resolve, to the object its module defines, also once every module
    of the package is loaded (loading ``app.x.y`` sets the front's attribute ``y`` to the
    module, which hides a lazily exported name ``y``)."""
    import importlib
    import types

    for package in sorted(packages_of_app()):
        for module in sorted(submodules(package) | ENTRY_MODULES):
            if (ROOT / "app" / package / f"{module}.py").exists() or (
                ROOT / "app" / package / module / "__init__.py"
            ).exists():
                importlib.import_module(f"app.{package}.{module}")
        front = importlib.import_module(f"app.{package}")
        for name in exports(package):
            assert hasattr(front, name), f"app.{package} exports {name}, which it cannot give"
            assert not isinstance(getattr(front, name), types.ModuleType), (
                f"app.{package}.{name} is the module, not the name it exports"
            )


def test_a_front_of_modules_loads_each_listed_name_on_first_use_and_refuses_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load_modules_on_use``: each name listed once, in its module's ``__all__``, read
    from the source; the module is loaded when one of its names is first looked up, and
    every name it lists is then kept in the front."""
    import importlib
    import sys

    from app.objects import load_modules_on_use

    package = tmp_path / "lazy_modules_probe"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "heavy.py").write_text(
        '__all__ = ["VALUE", "MORE"]\nVALUE = object()\nMORE = 2\nOTHER = 1\n',
        encoding="utf-8",
    )
    (package / "unlisted.py").write_text("NAME = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("lazy_modules_probe")  # the front, as its package's import does
    front: dict[str, object] = {}
    load = load_modules_on_use("lazy_modules_probe", ("heavy",), front)
    assert "lazy_modules_probe.heavy" not in sys.modules
    value = load("VALUE")
    assert value is sys.modules["lazy_modules_probe.heavy"].VALUE
    assert front == {"VALUE": value, "MORE": 2}
    with pytest.raises(AttributeError, match="'lazy_modules_probe' has no attribute 'OTHER'"):
        load("OTHER")  # in the module, but not in its __all__
    unlisted = load_modules_on_use("lazy_modules_probe", ("unlisted",), {})
    with pytest.raises(ImportError, match="lists no __all__"):
        unlisted("NAME")


def test_a_front_of_modules_reads_a_module_shipped_without_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With only bytecode beside the package, ``load_modules_on_use`` asks the module
    itself for its ``__all__``."""
    import importlib
    import py_compile

    from app.objects import load_modules_on_use

    package = tmp_path / "bytecode_front_probe"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    source = package / "compiled.py"
    source.write_text('__all__ = ["VALUE"]\nVALUE = 7\n', encoding="utf-8")
    py_compile.compile(str(source), cfile=str(package / "compiled.pyc"), doraise=True)
    source.unlink()
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("bytecode_front_probe")
    front: dict[str, object] = {}
    assert load_modules_on_use("bytecode_front_probe", ("compiled",), front)("VALUE") == 7
    assert front == {"VALUE": 7}
