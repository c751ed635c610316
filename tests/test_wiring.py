"""Each component is built in one pass: every part gets what it reads through its
constructor, and nothing is wired into a part after it was built (issue 41).

Read from the source of the four components (extender, annotator, descheduler,
simulate), in the places where wiring happens:

- a constructor (``__init__``'s body; parameter defaults are declarations) holds no
  lambda and no nested function (a closure over an object perhaps not built yet), sets
  no attribute of another object (``part.on_change = ...``, ``self.part.attr = ...``:
  an injection after construction), and hands no part ``self`` (a part reading its
  parent; ``weakref.proxy(self)`` included);
- a component's ``main.py`` holds no lambda and no nested function in its functions
  (a sort key aside: it wires nothing);
- no component imports ``weakref``: a part that must not keep the whole alive should
  not hold it at all.

Listening to a cache or to the policy in force (``add_listener``, ``follow``) is a
call the part's owner makes on it, as a watch, not an injection: it stays allowed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"
COMPONENTS = ("extender", "annotator", "descheduler", "simulate")


def _is_sort_key(lambda_: ast.Lambda, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(lambda_)
    return isinstance(parent, ast.keyword) and parent.arg == "key"


def _on_self(target: ast.Attribute) -> bool:
    return isinstance(target.value, ast.Name) and target.value.id == "self"


def _attribute_targets(node: ast.AST) -> list[ast.Attribute]:
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    else:
        return []
    found: list[ast.Attribute] = []
    for target in targets:
        for one in target.elts if isinstance(target, ast.Tuple) else [target]:
            if isinstance(one, ast.Attribute):
                found.append(one)
    return found


def wiring_after_construction(source: str, *, main: bool = False) -> list[str]:
    """Each place in ``source`` that wires a part into another outside a constructor's
    arguments, as ``line: what``."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.name for alias in node.names]
            if "weakref" in names or getattr(node, "module", None) == "weakref":
                found.append(f"{node.lineno}: imports weakref")
    functions = [
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    for function in functions:
        constructor = function.name == "__init__"
        if not (constructor or main):
            continue
        where = "__init__" if constructor else f"{function.name}()"
        for statement in function.body:
            for node in ast.walk(statement):
                if isinstance(node, ast.Lambda) and not _is_sort_key(node, parents):
                    found.append(f"{node.lineno}: a lambda in {where}")
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    found.append(f"{node.lineno}: a nested function {node.name} in {where}")
                if not constructor:
                    continue
                for target in _attribute_targets(node):
                    if not _on_self(target):
                        found.append(f"{target.lineno}: sets {ast.unparse(target)} in __init__")
                if isinstance(node, ast.Call):
                    given = [*node.args, *(keyword.value for keyword in node.keywords)]
                    if any(isinstance(arg, ast.Name) and arg.id == "self" for arg in given):
                        found.append(f"{node.lineno}: hands self to {ast.unparse(node.func)}")
    return found


def component_modules() -> list[Path]:
    return sorted(path for name in COMPONENTS for path in (APP / name).rglob("*.py"))


@pytest.mark.parametrize("path", component_modules(), ids=lambda p: str(p.relative_to(APP)))
def test_no_part_is_wired_into_another_after_construction(path: Path) -> None:
    found = wiring_after_construction(path.read_text(), main=path.name == "main.py")
    assert not found, f"app/{path.relative_to(APP)}: " + "; ".join(found)


@pytest.mark.parametrize(
    ("source", "main", "expected"),
    [
        # What the components did before issue 41, one shape each.
        (
            "class E:\n    def __init__(self, f):\n        self.l = L(lambda: self.t.p)\n",
            False,
            "3: a lambda in __init__",
        ),
        (
            "class E:\n    def __init__(self, f):\n        f.on_change = self.changed\n",
            False,
            "3: sets f.on_change in __init__",
        ),
        (
            "class E:\n    def __init__(self):\n        self.verbs.raise_left = g\n",
            False,
            "3: sets self.verbs.raise_left in __init__",
        ),
        (
            "class D:\n    def __init__(self, c):\n        self.e = Evictor(c, self)\n",
            False,
            "3: hands self to Evictor",
        ),
        (
            "import weakref\nclass S:\n    def __init__(self):\n"
            "        self.o = make(weakref.proxy(self))\n",
            False,
            "1: imports weakref",
        ),
        (
            "class A:\n    def __init__(self):\n        def on_read(r):\n            pass\n",
            False,
            "3: a nested function on_read in __init__",
        ),
        ("def run(a):\n    x = Thing(lambda: a.b)\n", True, "2: a lambda in run()"),
        (
            "def run(a):\n    def ready():\n        pass\n",
            True,
            "2: a nested function ready in run()",
        ),
    ],
)
def test_the_check_finds_each_shape_of_wiring(source: str, main: bool, expected: str) -> None:
    assert expected in wiring_after_construction(source, main=main)


def test_the_check_leaves_construction_and_plain_data_alone() -> None:
    source = (
        "class E:\n"
        "    def __init__(self, cache, on_change=lambda: None):\n"
        "        self.ledger = Ledger(cache, on_end=self.ended)\n"
        "        self.a, self.b = 1, 2\n"
        "        cache.add_listener(self.on_pod)\n"
        "        self.names = sorted(cache, key=lambda n: n.lower())\n"
        "    def record(self, report):\n"
        "        report.result = 'ok'\n"
        "def run(args):\n"
        "    return sorted(args.names, key=lambda name: name[::-1])\n"
    )
    assert wiring_after_construction(source, main=True) == []
