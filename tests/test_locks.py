"""tests/support/locks.py: what the test workers build once and share."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from tests.support.locks import kept_once


def _make_slowly(marks: Path) -> bytes:
    with marks.open("a") as out:
        out.write("made\n")
    time.sleep(0.3)  # long enough that the other process asks while this one makes it
    return b"the thing"


def _ask(path: Path, marks: Path, answers: Path) -> None:
    made = kept_once(path, lambda: _make_slowly(marks))
    with answers.open("ab") as out:
        out.write(made + b"\n")


def test_two_processes_asking_at_once_make_it_once_and_both_get_it(tmp_path: Path) -> None:
    path, marks, answers = tmp_path / "thing", tmp_path / "marks", tmp_path / "answers"
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_ask, args=(path, marks, answers)) for _ in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(30)
        assert process.exitcode == 0
    assert marks.read_text() == "made\n"
    assert answers.read_bytes() == b"the thing\nthe thing\n"
    assert path.read_bytes() == b"the thing"
    assert not list(tmp_path.glob("*.partial"))


def test_a_make_that_fails_leaves_nothing_for_the_next_to_read(tmp_path: Path) -> None:
    path = tmp_path / "thing"

    def fail() -> bytes:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="no"):
        kept_once(path, fail)
    assert not path.exists()
    assert kept_once(path, lambda: b"made") == b"made"
    assert kept_once(path, lambda: b"not asked") == b"made"
