"""A small reader for the Dockerfile and .dockerignore, enough to test what they say."""

from __future__ import annotations

import fnmatch
import shlex
from dataclasses import dataclass
from pathlib import Path

INSTRUCTIONS = {
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK",
    "LABEL", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Instruction:
    keyword: str
    argument: str
    line: int


def instructions(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile, continuation lines joined, comments dropped."""
    found: list[Instruction] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, argument = (pending + stripped).partition(" ")
        if keyword.upper() not in INSTRUCTIONS:
            raise ValueError(f"Dockerfile line {start}: unknown instruction {keyword!r}")
        found.append(Instruction(keyword.upper(), argument.strip(), start))
        pending = ""
    if pending:
        raise ValueError("Dockerfile ends inside a continued line")
    return found


def stages(text: str) -> list[list[Instruction]]:
    """Instructions grouped by build stage; each stage starts with its FROM."""
    grouped: list[list[Instruction]] = []
    for instruction in instructions(text):
        if instruction.keyword == "FROM":
            grouped.append([])
        elif not grouped:
            if instruction.keyword != "ARG":
                raise ValueError(f"line {instruction.line}: only ARG may precede FROM")
            continue
        grouped[-1].append(instruction)
    return grouped


def key_values(argument: str) -> dict[str, str]:
    """``ENV``/``LABEL``/``ARG`` arguments in their ``key=value ...`` form."""
    pairs = {}
    for word in shlex.split(argument):
        key, sep, value = word.partition("=")
        pairs[key] = value if sep else ""
    return pairs


def ignored(relative: str, patterns: list[str]) -> bool:
    """Whether .dockerignore's ``patterns`` keep ``relative`` out of the build context."""
    parts = relative.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        for candidate in candidates:
            tail = candidate.rsplit("/", 1)[-1]
            if fnmatch.fnmatchcase(candidate, pattern) or (
                pattern.startswith("**/") and fnmatch.fnmatchcase(tail, bare)
            ):
                return True
    return False


def ignore_patterns(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]
