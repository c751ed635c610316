"""Command-line flags that also read from environment variables.

Every flag ``--some-flag`` may instead be set as ``LOADAWARE_SOME_FLAG``, which is how
Kubernetes manifests usually pass settings (from ConfigMaps and Secrets). A flag on
the command line wins over the environment.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

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
