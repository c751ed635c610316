"""The simulator runs production's rules, not copies of them: the debounce rule, the
extender's wire answer and kube-scheduler's request scoring each live in one module a
floor below the components, and both production and the simulator import them from
there (through its package's front). Read from the source (as
tests/test_layers.py reads the floors), so that a copy brought back fails here."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from app.objects.lazy import declared_exports

APP = Path(__file__).resolve().parents[2] / "app"

# rule -> (its one home, the functions it consists of)
RULES = {
    "debounce": ("app.rebalance.debounce", {"previous_hot_rounds", "record_hot_rounds"}),
    "wire answer": (
        "app.load.prioritize",
        {
            "can_be_preferred",
            "plain_priority",
            "preferred_priority",
            "preferred_position",
            "host_priorities",
            "host_priorities_and_preferred",
        },
    ),
    "node verdict": ("app.load.verdict", {"node_verdict"}),
    "request scoring": (
        "app.load.default_profile",
        {
            "fits_requests",
            "non_zero_requests",
            "resource_score",
            "resource_scores",
            "taint_toleration_scores",
        },
    ),
}
# Who must take each rule from its home: production and the simulator.
USERS = [
    ("descheduler/decide.py", "debounce", {"previous_hot_rounds", "record_hot_rounds"}),
    ("simulate/descheduling.py", "debounce", {"previous_hot_rounds", "record_hot_rounds"}),
    # The Python fallback index asks the rule itself; the native one is held to it on
    # random inputs (tests/extender/test_index.py).
    ("extender/index.py", "wire answer", {"host_priorities_and_preferred"}),
    # The simulator picks the preferred node over whole arrays (held to host_priorities by
    # tests/simulate/test_scheduling.py) and answers it and the others by the rule's own.
    (
        "simulate/scheduling.py",
        "wire answer",
        {"plain_priority", "preferred_priority"},
    ),
    # Every node's verdict is node_verdict's: the extender's table, the simulator's load filter
    # and explain (held equal on random nodes by tests/load/test_verdict.py).
    ("extender/verdicts.py", "node verdict", {"node_verdict"}),
    ("simulate/scheduling.py", "node verdict", {"node_verdict"}),
    ("explain/pod.py", "node verdict", {"node_verdict"}),
    (
        "simulate/scheduling.py",
        "request scoring",
        {
            "fits_requests",
            "non_zero_requests",
            "resource_score",
            "resource_scores",
            "taint_toleration_scores",
        },
    ),
    (
        "rebalance/kube_scheduler.py",
        "request scoring",
        {"fits_requests", "non_zero_requests", "resource_scores", "taint_toleration_scores"},
    ),
]


def tree(relative: str) -> ast.Module:
    path = APP / relative
    return ast.parse(path.read_text(), str(path))


def imported_from(module: ast.Module, source: str) -> set[str]:
    """The names ``module`` imports from ``source``; a star import, every name in
    ``source``'s ``__all__`` (as the package fronts take their modules' names)."""
    names = {
        alias.name
        for node in ast.walk(module)
        if isinstance(node, ast.ImportFrom) and node.module == source
        for alias in node.names
    }
    if "*" in names:
        package, name = source.rsplit(".", 1)
        importlib.import_module(package)
        names = names - {"*"} | set(declared_exports(package, name))
    return names


@pytest.mark.parametrize(("relative", "rule", "names"), USERS)
def test_production_and_the_simulator_import_each_rule_from_its_one_home(
    relative: str, rule: str, names: set[str]
) -> None:
    home, _ = RULES[rule]
    # Through the home package's front (app.load), which takes the names from the home.
    front = home.rsplit(".", 1)[0]
    through_front = imported_from(tree(relative), front) & imported_from(
        tree(front.removeprefix("app.") + "/__init__.py"), home
    )
    missing = names - imported_from(tree(relative), home) - through_front
    assert not missing, f"app/{relative} does not take {sorted(missing)} from {home}"


def test_no_module_but_the_rules_home_defines_them() -> None:
    homes = {home.removeprefix("app.").replace(".", "/") + ".py" for home, _ in RULES.values()}
    rule_names = set().union(*(names for _, names in RULES.values()))
    copies = [
        f"{path.relative_to(APP)}:{node.lineno} {node.name}"
        for path in sorted(APP.rglob("*.py"))
        if str(path.relative_to(APP)) not in homes
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in rule_names
    ]
    assert not copies, f"copies of a rule outside its home: {copies}"


def test_the_simulator_keeps_no_debounce_bookkeeping_of_its_own() -> None:
    # observe_round/PlannerState count rounds in memory with no clock: the rule the
    # descheduler's state does not follow (a stale count restarts, a repeat run in the
    # same round does not count twice).
    for path in sorted((APP / "simulate").glob("*.py")):
        used = {
            alias.name
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        assert not used & {"observe_round", "PlannerState"}, path.name
    assert not (APP / "descheduler" / "debounce.py").exists()
