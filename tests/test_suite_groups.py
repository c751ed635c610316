"""How tests/conftest.py hands the suite to its workers: every e2e file belongs to one
of the e2e groups (a file left out runs ungrouped and starts a control plane of its own
on each worker), and the tests that mostly wait are spread through the run."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

from tests.conftest import (
    E2E_GROUPS,
    IN_THE_ZYGOTE,
    KEEPS_CORES_BUSY,
    WAITS_MOSTLY,
    group_of,
    spread_out,
)


def test_every_e2e_file_is_in_exactly_one_group() -> None:
    files = sorted(
        p.stem.removeprefix("test_") for p in (Path(__file__).parent / "e2e").glob("test_*.py")
    )
    grouped = [name for names in E2E_GROUPS.values() for name in names]
    assert sorted(grouped) == files


def test_spread_out_keeps_every_item_once_in_order_at_even_intervals() -> None:
    items: list[int | str] = list(range(100))
    spread: list[int | str] = ["a", "b", "c", "d"]
    merged = spread_out(items, spread)
    assert [x for x in merged if isinstance(x, int)] == items
    assert [x for x in merged if isinstance(x, str)] == spread
    at = [n for n, x in enumerate(merged) if isinstance(x, str)]
    gaps = [later - earlier for earlier, later in itertools.pairwise([-1, *at, len(merged)])]
    assert max(gaps) - min(gaps) <= 2, gaps  # no two of them side by side, none bunched


def test_spread_out_with_more_to_spread_than_items_loses_nothing() -> None:
    items: list[int | str] = [1, 2]
    spread: list[int | str] = ["a", "b", "c", "d", "e"]
    merged = spread_out(items, spread)
    assert sorted(map(str, merged)) == ["1", "2", "a", "b", "c", "d", "e"]
    assert [x for x in merged if isinstance(x, str)] == ["a", "b", "c", "d", "e"]


def test_every_file_named_as_waiting_mostly_or_keeping_the_cores_busy_exists() -> None:
    root = Path(__file__).parents[1]
    for prefix in (*WAITS_MOSTLY, *KEEPS_CORES_BUSY):
        assert (root / prefix.removesuffix("::")).is_file(), prefix


def test_the_tests_that_use_the_cli_zygote_share_one_worker() -> None:
    """A test that asks for the zygote outside the group starts a second one on its
    worker; a name in the group that no longer exists groups nothing."""
    root = Path(__file__).parents[1]
    tests: dict[str, set[str]] = {}  # node id: the fixtures it asks for
    for path in sorted((root / "tests").rglob("test_*.py")):
        text = path.read_text()
        if "cli_zygote" not in text and path.name != "test_cli_bad_input.py":
            continue  # (a file that does not name it cannot be grouped with it by prefix)
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                nodeid = f"{path.relative_to(root)}::{node.name}"
                tests[nodeid] = {arg.arg for arg in node.args.args}
    in_zygote = {
        nodeid
        for nodeid, fixtures in tests.items()
        if "cli_zygote" in fixtures
        or (nodeid.startswith("tests/test_cli_bad_input.py") and "results" in fixtures)
    }
    assert in_zygote  # what this test reads is still there
    for nodeid in tests:
        assert (group_of(nodeid) == "bad-input-cases") == (nodeid in in_zygote), nodeid
    for prefix in IN_THE_ZYGOTE:
        assert any(nodeid.startswith(prefix) for nodeid in in_zygote), prefix
