"""Command-line flags that also read from environment variables.

Every flag ``--some-flag`` may instead be set as ``LOADAWARE_SOME_FLAG``, which is how
Kubernetes manifests usually pass settings (from ConfigMaps and Secrets). A flag on
the command line wins over the environment.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from app.policy import parse_duration_s

ENV_PREFIX = "LOADAWARE_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def add_flag(parser: argparse.ArgumentParser, flag: str, **kwargs: Any) -> None:
    """Add ``flag`` whose default comes from its environment variable when that is set."""
    variable = env_name(flag)
    help_text = kwargs.pop("help", "")
    raw = os.environ.get(variable)
    if kwargs.get("action") in ("store_true", argparse.BooleanOptionalAction):
        if raw is not None:
            lowered = raw.strip().lower()
            if lowered not in _TRUE | _FALSE:
                parser.error(f"{variable}={raw!r}: expected true or false")
            kwargs["default"] = lowered in _TRUE
    elif raw is not None:
        kwargs["default"] = raw
    parser.add_argument(flag, help=f"{help_text} [env {variable}]".strip(), **kwargs)


def duration_s(text: str) -> float:
    """A flag value as seconds: a Go duration (``15s``, ``2m``) or a plain number."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_duration_s(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def boolean(value: Any) -> bool:
    # add_flag hands environment values to BooleanOptionalAction as strings.
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise SystemExit(f"error: expected true or false, got {value!r}")


def add_group_flag(group: Any, flag: str, **kwargs: Any) -> None:
    """``add_flag`` for an argument group (which lacks ``error``): bad booleans exit."""
    # add_flag reports a bad boolean through parser.error, which argument groups lack.
    if kwargs.get("action") == "store_true":
        boolean(os.environ.get(env_name(flag), "false"))
    add_flag(group, flag, **kwargs)
