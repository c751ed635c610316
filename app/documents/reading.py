"""YAML documents checked by pydantic models, with errors an operator can act on.

The policy, the descheduler's configuration and the simulator's scenarios are all
read this way; every error names the file (``source``) and, for a bad value, the
field. Each caller passes its own error type, so that its callers catch one type.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_SCENARIO_BYTES",
    "parse_yaml",
    "read_bytes",
    "read_file",
    "size_text",
    "validate",
]

M = TypeVar("M", bound=BaseModel)

# The largest file read as a policy, a descheduler configuration or a pod manifest, and
# as a scenario (a captured one holds usage series). Past these a file is a mistake or
# an attack: PyYAML parses about 0.6 MiB a CPU-second, so a 200 MB policy parsed for
# minutes, and ``/dev/zero`` was read until the kernel killed the process. A file must
# also be a regular file: a device, a pipe or a folder is refused before it is read.
MAX_CONFIG_BYTES = 2**20  # 1 MiB; the shipped policy is 1 KiB
MAX_SCENARIO_BYTES = 16 * 2**20  # 16 MiB: about 30 CPU-s of parsing

# Brackets (``[``, ``{``) open at once, at most. A real document nests a few levels, and
# a file nested deeper is refused before it is parsed: PyYAML's scanner takes time
# quadratic in this depth (0.9 s of CPU for ``[`` x 10,000 before its parser gave up
# with a RecursionError). Brackets in strings and comments count too, which only a
# document with over a hundred unclosed ones inside its strings could notice.
MAX_BRACKET_DEPTH = 100
_BRACKET = re.compile(r"[\[\]{}]")


def bracket_depth(text: str, limit: int = MAX_BRACKET_DEPTH) -> int:
    """How deep ``text``'s brackets nest, counted up to just past ``limit``."""
    depth = deepest = 0
    for match in _BRACKET.finditer(text):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        else:
            depth = max(depth - 1, 0)
    return deepest


def format_validation_error(error: ValidationError) -> str:
    """One indented line per problem: ``  field.path: message``."""
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"]) or "(top level)"
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"  {location}: {message}")
    return "\n".join(lines)


def size_text(size_bytes: int) -> str:
    """``1 MiB``, ``16 MiB``, ``512 KiB``: a limit as the messages and the docs say it."""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= factor:
            return f"{size_bytes / factor:g} {unit}"
    return f"{size_bytes} bytes"


def read_bytes(path: str | Path, what: str, error: type[Exception], limit_bytes: int) -> bytes:
    """A regular file's bytes, at most ``limit_bytes`` of them: a larger file, a device
    (``/dev/zero``), a pipe or a folder raises ``error`` naming the file, before more
    than ``limit_bytes + 1`` bytes are read. Opened without blocking, so that a FIFO
    with no writer does not hang the command."""
    file = Path(path)
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as problem:
        raise error(f"{file}: cannot read {what}: {problem.strerror or problem}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a device, a pipe or a socket"
            raise error(f"{file}: cannot read {what}: it is {kind}, not a regular file")
        chunks, left = [], limit_bytes + 1
        while left > 0 and (chunk := os.read(fd, min(left, 2**20))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as problem:
        raise error(f"{file}: cannot read {what}: {problem.strerror or problem}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit_bytes:
        raise error(
            f"{file}: {what} is larger than the limit of {size_text(limit_bytes)}: "
            f"is it the right file?"
        )
    return data


def read_file(
    path: str | Path, what: str, error: type[Exception], limit_bytes: int = MAX_CONFIG_BYTES
) -> tuple[str, str]:
    """A file's text and its name as a source for messages (read as ``read_bytes``)."""
    file = Path(path)
    data = read_bytes(file, what, error, limit_bytes)
    try:
        return data.decode("utf-8"), str(file)
    except UnicodeDecodeError as problem:
        raise error(
            f"{file}: {what} is not UTF-8 text (byte {problem.start}): save it as UTF-8 YAML"
        ) from None


class DuplicateKeyError(yaml.YAMLError):
    """A mapping that writes a key twice (YAML requires keys to be unique)."""


_MERGE_TAG = "tag:yaml.org,2002:merge"


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader, but a key written twice in one mapping is an error.

    PyYAML keeps the last of them silently: a second, empty ``predicate:`` dropped every
    filter of a policy. Checked on the composed nodes, before merge keys (``<<``) are
    applied, so that a key overriding a merged one stays allowed, as YAML says."""

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        node: yaml.MappingNode = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE_TAG:
                continue
            line = key.start_mark.line + 1
            first = seen.get((key.tag, key.value))
            if first is not None:
                raise DuplicateKeyError(
                    f"key {key.value!r} is written twice in one mapping (lines {first} and "
                    f"{line}): keep one"
                )
            seen[(key.tag, key.value)] = line
        return node


def yaml_problem(problem: yaml.YAMLError) -> str:
    """PyYAML's error on one line: what is wrong and where (line and column counted
    from 1), without its excerpt of the file and its ``<unicode string>`` placeholders."""
    if not isinstance(problem, yaml.MarkedYAMLError):
        return " ".join(str(problem).split())
    mark = problem.problem_mark or problem.context_mark
    what = ": ".join(p for p in (problem.context, problem.problem) if p) or "cannot parse it"
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{what}{where}"


def parse_yaml(text: str, source: str, error: type[Exception]) -> Any:
    if bracket_depth(text) > MAX_BRACKET_DEPTH:
        raise error(f"{source}: not valid YAML: nested too deeply")
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as problem:
        raise error(f"{source}: not valid YAML: {yaml_problem(problem)}") from None
    except RecursionError:
        # A hostile or broken file (``[[[[...``) nests deeper than any real document.
        raise error(f"{source}: not valid YAML: nested too deeply") from None


def validate(model: type[M], document: Any, source: str, kind: str, error: type[Exception]) -> M:
    """``document`` as ``model``; a non-mapping or a bad field raises ``error``."""
    if not isinstance(document, Mapping):
        raise error(f"{source}: expected a {kind} mapping at the top level")
    try:
        return model.model_validate(document)
    except RecursionError:
        raise error(f"{source}: invalid {kind}: nested too deeply") from None
    except ValidationError as problem:
        details = format_validation_error(problem)
        if "\n" not in details:  # one problem: one line, as the CLI reports bad input
            raise error(f"{source}: invalid {kind}: {details.removeprefix('  ')}") from None
        raise error(f"{source}: invalid {kind}:\n{details}") from None
