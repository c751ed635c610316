"""YAML documents checked by pydantic models, with errors an operator can act on.

The policy, the descheduler's configuration and the simulator's scenarios are all
read this way; every error names the file (``source``) and, for a bad value, the
field. Each caller passes its own error type, so that its callers catch one type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)

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


def read_file(path: str | Path, what: str, error: type[Exception]) -> tuple[str, str]:
    """A file's text and its name as a source for messages."""
    file = Path(path)
    try:
        return file.read_text(encoding="utf-8"), str(file)
    except OSError as problem:
        raise error(f"{file}: cannot read {what}: {problem.strerror or problem}") from None
    except UnicodeDecodeError as problem:
        raise error(
            f"{file}: {what} is not UTF-8 text (byte {problem.start}): save it as UTF-8 YAML"
        ) from None


def parse_yaml(text: str, source: str, error: type[Exception]) -> Any:
    if bracket_depth(text) > MAX_BRACKET_DEPTH:
        raise error(f"{source}: not valid YAML: nested too deeply")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as problem:
        raise error(f"{source}: not valid YAML: {problem}") from None
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
