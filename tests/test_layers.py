"""The architecture, checked from the imports: floors, from the ground up, and fronts.

A package (or a top-level module) of ``app`` may import only from floors below its
own. So no arrow runs back up, no two components import each other, and no package
cycle can form. Every import is read, including those inside functions, where a
circular import would hide. A new package must be given its floor here.

Each package has one front, its ``__init__``: another package of ``app`` imports its
names from there (``from app.kube import NodeCache``), never from the module behind
it, so a package can rearrange its modules without its callers noticing. A
component's ``main`` (its process and flags) is the one module named through the
front, by ``cli``, which loads it. Inside a package, modules import each other by
module. Tests may import a package's internals.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FLOORS: list[set[str]] = [
    {"objects"},  # pure shared values; imports nothing of the project
    {"commandline", "documents", "health"},  # flags and logs, YAML documents, probes
    {"policy"},
    {"load"},  # the one load model
    {"kube", "prom"},  # the outside world: API server and Prometheus
    # What every long-running component shares: the leader-elected service, its Lease,
    # file and policy reload, "run one unit of work once".
    {"runtime"},
    {"rebalance"},  # the descheduling planner (pure)
    {"extender", "annotator", "descheduler", "simulate"},  # components: never each other
    # Commands that are not components; capture reads kube and prom and writes the
    # simulator's scenario schema, so it sits above the components, beside policy_check.
    {"policy_check", "explain", "capture"},
    {"cli"},
]
FLOOR_OF = {unit: level for level, units in enumerate(FLOORS) for unit in units}


def unit_of(module: str) -> str | None:
    """``app.kube.pods`` → ``kube``; None for anything outside ``app``."""
    parts = module.split(".")
    return parts[1] if parts[0] == "app" and len(parts) > 1 else None


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every absolute import in a file, wherever it sits."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            if node.module == "app":  # ``from app import policy_check``
                for alias in node.names:
                    yield node.lineno, f"app.{alias.name}"


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
    """The names in a package's ``__all__``."""
    tree = ast.parse((ROOT / "app" / package / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


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


def violations(files: list[tuple[str, Path]]) -> list[str]:
    """What breaks the floors, for (module name, file) pairs."""
    found = []
    for name, path in files:
        unit = unit_of(name)
        if unit is None:
            continue
        if unit not in FLOOR_OF:
            found.append(f"{name}: app.{unit} has no floor in FLOORS")
            continue
        for line, module in imports(path):
            target = unit_of(module)
            if target is None or target == unit:
                continue
            if target not in FLOOR_OF:
                found.append(f"{name}:{line}: imports {module}, which has no floor")
            elif FLOOR_OF[target] >= FLOOR_OF[unit]:
                direction = (
                    "a floor above" if FLOOR_OF[target] > FLOOR_OF[unit] else "the same floor"
                )
                found.append(f"{name}:{line}: app.{unit} imports {module}, on {direction}")
    return found


def test_no_import_runs_back_up_or_across_a_floor() -> None:
    assert violations([(module_name(path), path) for path in app_files()]) == []


def test_no_package_imports_past_another_packages_front() -> None:
    files = [(module_name(path), path) for path in app_files()]
    assert front_violations(files, packages_of_app()) == []


def test_app_holds_only_packages_and_the_entry_point() -> None:
    loose = {p.name for p in (ROOT / "app").glob("*.py")} - {"__init__.py", "cli.py"}
    assert loose == set()


def test_every_package_of_app_has_a_floor() -> None:
    units = {unit_of(module_name(path)) or "" for path in app_files()} - {"", "__init__"}
    assert units <= set(FLOOR_OF), sorted(units - set(FLOOR_OF))


# A class longer than this does more than one job (issue 29: the god classes).
MAX_CLASS_LINES = 250


def long_classes(files: list[Path], root: Path = ROOT) -> list[str]:
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    found.append(f"{path.relative_to(root)}: {node.name}, {lines} lines")
    return found


def test_no_class_in_app_is_over_250_lines() -> None:
    assert long_classes(app_files()) == []


def test_the_class_check_counts_a_class_s_lines(tmp_path: Path) -> None:
    def write(name: str, body_lines: int) -> Path:
        body = "".join(f"    x{i} = {i}\n" for i in range(body_lines))
        path = tmp_path / f"{name.lower()}.py"
        path.write_text(f"class {name}:\n{body}", encoding="utf-8")
        return path

    files = [write("Big", MAX_CLASS_LINES), write("AtTheBound", MAX_CLASS_LINES - 1)]
    assert long_classes(files, tmp_path) == [f"big.py: Big, {MAX_CLASS_LINES + 1} lines"]


def test_no_module_cycle_inside_a_package() -> None:
    modules = {module_name(path): path for path in app_files()}
    edges = {
        name: {m for _, m in imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for target in sorted(edges[name]):
            if state.get(target) == 1:
                return [*path, name, target]
            if target not in state and (cycle := visit(target, [*path, name])):
                return cycle
        state[name] = 2
        return None

    for name in sorted(modules):
        if name not in state:
            cycle = visit(name, [])
            assert cycle is None, " -> ".join(cycle or [])


def test_the_check_catches_an_arrow_back_up_and_a_sideways_one(tmp_path: Path) -> None:
    """The checker itself, on files written as they must never be."""
    probes = {
        "app.objects.probe": "from app.kube.pods import pod_info\n",
        "app.extender.probe": "from app.annotator import bindings\n",
        "app.policy.probe": "def later() -> None:\n    from app.load import model\n",
        "app.newpackage.probe": "import json\n",
    }
    files = []
    for name, text in probes.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        files.append((name, path))
    found = violations(files)
    assert found == [
        "app.objects.probe:1: app.objects imports app.kube.pods, on a floor above",
        "app.extender.probe:1: app.extender imports app.annotator, on the same floor",
        "app.policy.probe:2: app.policy imports app.load, on a floor above",
        "app.newpackage.probe: app.newpackage has no floor in FLOORS",
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


def test_a_lazy_front_loads_a_name_once_on_first_use_and_refuses_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load_on_use``, the ``__getattr__`` the lazy fronts share, on a package of its
    own: the module is not loaded until its name is looked up, then kept in the front."""
    import sys

    from app.objects import load_on_use

    package = tmp_path / "lazy_front_probe"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "heavy.py").write_text("VALUE = object()\nOTHER = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    front: dict[str, object] = {}
    load = load_on_use("lazy_front_probe", {"heavy": ("VALUE",)}, front)
    assert "lazy_front_probe.heavy" not in sys.modules
    value = load("VALUE")
    assert value is sys.modules["lazy_front_probe.heavy"].VALUE
    assert front == {"VALUE": value}
    with pytest.raises(AttributeError, match="'lazy_front_probe' has no attribute 'OTHER'"):
        load("OTHER")  # in the module, but not named to the front
