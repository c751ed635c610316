"""The architecture, checked from the imports: floors, from the ground up.

A package (or a top-level module) of ``app`` may import only from floors below its
own. So no arrow runs back up, no two components import each other, and no package
cycle can form. Every import is read, including those inside functions, where a
circular import would hide. A new package must be given its floor here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FLOORS: list[set[str]] = [
    {"objects"},  # pure shared values; imports nothing of the project
    {"documents", "filewatch", "health", "flags", "logs"},  # small shared machinery
    {"policy"},
    {"load"},  # the one load model
    {"kube", "prom"},  # the outside world: API server and Prometheus
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


def test_every_package_of_app_has_a_floor() -> None:
    units = {unit_of(module_name(path)) or "" for path in app_files()} - {"", "__init__"}
    assert units <= set(FLOOR_OF), sorted(units - set(FLOOR_OF))


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
