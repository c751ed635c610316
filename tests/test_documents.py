"""How every YAML input is read (app/documents/reading.py): a regular file under a size
limit, read bounded; a key written twice is an error, not the last one silently kept."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from app.documents import MAX_CONFIG_BYTES, parse_yaml, read_file


class Refused(ValueError):
    pass


def test_a_device_is_refused_before_it_is_read() -> None:
    # /dev/zero never ends: it was read until the kernel killed the process.
    with pytest.raises(Refused, match=r"^/dev/zero: cannot read policy file: it is a device"):
        read_file("/dev/zero", "policy file", Refused)


def test_a_folder_is_refused_as_a_folder(tmp_path: Path) -> None:
    with pytest.raises(Refused, match="it is a folder, not a regular file"):
        read_file(tmp_path, "policy file", Refused)


def test_a_pipe_without_a_writer_is_refused_without_waiting_for_one(tmp_path: Path) -> None:
    fifo = tmp_path / "policy.yaml"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_file(fifo, "policy file", Refused)
        except Refused as error:
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)  # a blocking open would hang here (no hang: the bound is the test)
    assert not reader.is_alive()
    assert "a device, a pipe or a socket" in str(outcome[0])


def test_a_file_past_the_limit_is_refused_and_one_at_it_is_read(tmp_path: Path) -> None:
    at_the_limit = tmp_path / "at.yaml"
    at_the_limit.write_bytes(b"#" * MAX_CONFIG_BYTES)
    assert len(read_file(at_the_limit, "policy file", Refused)[0]) == MAX_CONFIG_BYTES
    past = tmp_path / "past.yaml"
    past.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(Refused, match=r"past.yaml: policy file is larger than the limit of 1 MiB"):
        read_file(past, "policy file", Refused)


def test_a_smaller_limit_is_the_callers(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: x\n" * 200)
    with pytest.raises(Refused, match="larger than the limit of 1 KiB"):
        read_file(path, "scenario file", Refused, limit_bytes=1024)


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        ("a: 1\nb: 2\na: 3\n", "a", "lines 1 and 3"),
        # A second, empty predicate dropped every filter of a policy.
        ("spec:\n  predicate: [{name: x}]\n  priority: []\n  predicate:\n", "predicate",
         "lines 2 and 4"),
        ("x: {a: 1, a: 2}\n", "a", "lines 1 and 1"),
        ("- {name: n, count: 1}\n- name: m\n  name: k\n", "name", "lines 2 and 3"),
    ],
)  # fmt: skip
def test_a_key_written_twice_is_an_error_naming_it_and_its_lines(
    text: str, key: str, lines: str
) -> None:
    with pytest.raises(Refused) as caught:
        parse_yaml(text, "p.yaml", Refused)
    assert str(caught.value) == (
        f"p.yaml: not valid YAML: key {key!r} is written twice in one mapping ({lines}): keep one"
    )


def test_the_same_key_in_two_mappings_and_a_merged_key_overridden_are_allowed() -> None:
    text = "a: {x: 1}\nb: {x: 2}\nbase: &b {y: 1, z: 2}\nc:\n  <<: *b\n  y: 3\n"
    assert parse_yaml(text, "p.yaml", Refused) == {
        "a": {"x": 1}, "b": {"x": 2}, "base": {"y": 1, "z": 2}, "c": {"y": 3, "z": 2},
    }  # fmt: skip


def test_keys_that_differ_in_type_are_two_keys() -> None:
    assert parse_yaml("1: a\n'1': b\n", "p.yaml", Refused) == {1: "a", "1": "b"}
