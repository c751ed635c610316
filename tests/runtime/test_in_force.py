"""One owner of a value in force: built once, reloaded in one place, read through it,
and a new value in force only once its follower adopted it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.runtime.in_force import InForce


def number(path: Path) -> int:
    text = path.read_text()
    if not text.strip().isdigit():
        raise ValueError(f"not a number: {text!r}")
    return int(text)


def watched(path: Path) -> InForce[int]:
    return InForce(lambda: -1, path, number, errors=(ValueError,), what="number")


def test_without_a_file_the_default_is_in_force_for_good() -> None:
    in_force = InForce(lambda: 7)
    assert in_force.value == 7
    assert in_force.watcher is None
    assert not in_force.check_once()
    assert InForce.fixed("x").value == "x"


def test_the_file_is_read_at_start_and_a_broken_one_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / "value"
    path.write_text("3")
    assert watched(path).value == 3
    path.write_text("three")
    with pytest.raises(ValueError, match="not a number"):
        watched(path)


def test_a_reload_is_in_force_once_the_follower_adopted_it(tmp_path: Path) -> None:
    path = tmp_path / "value"
    path.write_text("3")
    in_force = watched(path)
    seen: list[tuple[int, int]] = []  # (offered, in force while it is offered)
    results: list[str] = []
    in_force.follow(lambda value: seen.append((value, in_force.value)), results.append)
    path.write_text("42")
    assert in_force.check_once()
    assert seen == [(42, 3)]
    assert in_force.value == 42
    assert results == ["success"]


def test_a_value_the_follower_refuses_leaves_the_old_one_in_force(tmp_path: Path) -> None:
    path = tmp_path / "value"
    path.write_text("3")
    in_force = watched(path)
    results: list[str] = []

    def refuse(value: int) -> None:
        raise ValueError(f"cannot use {value}")

    in_force.follow(refuse, results.append)
    path.write_text("42")
    assert not in_force.check_once()
    assert in_force.value == 3
    assert results == ["error"]
    path.write_text("forty")  # unreadable: the follower is never asked
    assert not in_force.check_once()
    assert in_force.value == 3
    assert results == ["error", "error"]
