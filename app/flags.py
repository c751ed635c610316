"""The command-line layer every component builds its flags with.

One set of rules for every flag of every component:

- ``--some-flag`` may instead be set as ``LOADAWARE_SOME_FLAG`` (how Kubernetes
  manifests pass settings, from ConfigMaps and Secrets); the command line wins.
- Values are checked where they are read, by the converters below: durations take Go
  syntax (``15s``, ``2m``, ``1h30m``) or plain seconds and must be positive and finite;
  ports lie in 1-65535; counts are whole numbers of at least 1. A bad value, on the
  command line or in the environment, ends the command with one line that names the
  flag (and the variable) and what would be valid, and exit code 2.
- Help texts end with the default, in one spelling (``on``/``off`` for switches, Go
  syntax for durations), and the variable; ``docs/reference.md`` is generated from them.

Exit codes, the same in every component: 0 done, 1 a failure while running, 2 bad
usage or configuration.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any, Final

from app.objects.durations import format_duration, parse_duration_s

ENV_PREFIX: Final = "LOADAWARE_"

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1  # a failure while running: Prometheus or the API server, a lost lease
EXIT_USAGE: Final = 2  # bad usage or configuration: flags, variables, files

LOG_LEVELS: Final = ("debug", "info", "warning", "error")

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


class UsageError(Exception):
    """Bad usage or configuration; the CLI prints it as one line and exits with code 2."""


def usage_error(prog: str, message: str) -> int:
    """Report bad usage or configuration as argparse does (one line), and its exit code."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


class _FromEnvironment(str):
    """A default read from a variable: converted like a command-line value by argparse,
    but a converter's error then names the variable."""

    variable: str


def _naming_variable(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def converted(text: str) -> Any:
        try:
            return convert(text)
        except argparse.ArgumentTypeError as error:
            if isinstance(text, _FromEnvironment):
                raise argparse.ArgumentTypeError(f"{error} (from {text.variable})") from None
            raise

    converted.__name__ = getattr(convert, "__name__", "value")
    return converted


# --- converters: each returns the value or raises ArgumentTypeError saying what is valid ---


def duration(text: str) -> float:
    """Seconds, from a Go duration (``15s``, ``2m``) or a plain number; positive and finite."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration_s(text)
        except ValueError:
            seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(
            f"expected a positive duration such as 500ms, 15s or 2m, got {text!r}"
        )
    return seconds


def port(text: str) -> int:
    """A TCP port, 1-65535."""
    value = _integer(text)
    if value is None or not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 1-65535, got {text!r}")
    return value


def port_or_off(text: str) -> int:
    """A TCP port, or 0 for off."""
    value = _integer(text)
    if value is None or not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 1-65535, or 0 for off, got {text!r}")
    return value


def count(text: str) -> int:
    """A whole number of at least 1."""
    value = _integer(text)
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def positive_number(text: str) -> float:
    """A finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def http_url(text: str) -> str:
    """An http:// or https:// URL with a host (and a valid port, if it has one)."""
    problem = None
    try:
        parts = urllib.parse.urlsplit(text.strip())
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as error:
        problem = str(error)
    else:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problem = "it needs http:// or https:// and a host"
    if problem is not None:
        raise argparse.ArgumentTypeError(
            f"expected a URL such as http://prometheus.monitoring:9090, got {text!r} ({problem})"
        )
    return text.strip().rstrip("/")


def log_level(text: str) -> str:
    if text.strip().lower() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_LEVELS)}, got {text!r}")
    return text.strip().lower()


def _integer(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def boolean_from_environment(variable: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise UsageError(f"{variable}={raw!r}: expected true or false (also 1/0, yes/no, on/off)")


# --- flags ---


def describe_default(default: Any, convert: Callable[[str], Any] | None) -> str | None:
    """A default in the one spelling help and the reference use."""
    if default is None or default is argparse.SUPPRESS:
        return None
    if isinstance(default, bool):
        return "on" if default else "off"
    if convert is duration and isinstance(default, int | float):
        return format_duration(float(default))
    return str(default)


def add_flag(
    container: Any,
    flag: str,
    *,
    help: str,
    default: Any = None,
    default_text: str | None = None,
    type: Callable[[str], Any] | None = None,
    short: str | None = None,
    **kwargs: Any,
) -> argparse.Action:
    """Add ``flag`` to a parser or argument group, with its variable and its default in
    the help text; ``default_text`` describes a default that is not a plain value (what
    an unset flag means); ``short`` is a one-letter alias (``-o``, as kubectl spells it).
    ``help`` is plain text (no ``%`` formatting)."""
    variable = env_name(flag)
    raw = os.environ.get(variable)
    switch = kwargs.get("action") in ("store_true", argparse.BooleanOptionalAction)
    if switch and default is None:
        default = False
    shown = default_text if default_text is not None else describe_default(default, type)
    if shown is None and kwargs.get("action") is None:
        shown = "none"
    if raw is not None:
        if switch:
            default = boolean_from_environment(variable, raw)
        elif kwargs.get("action") is None:
            marked = _FromEnvironment(raw)
            marked.variable = variable
            default = marked
        else:  # a custom action (repeatable flags) parses the raw text itself
            default = raw
    if type is not None:
        kwargs["type"] = _naming_variable(type)
    suffix = f" (default: {shown})" if shown else ""
    text = f"{help.strip()}{suffix} [env {variable}]".replace("%", "%%")
    names = (short, flag) if short else (flag,)
    action: argparse.Action = container.add_argument(*names, help=text, default=default, **kwargs)
    return action


def add_component(
    components: Any,
    name: str,
    about: tuple[str, str, str],
    add_flags: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """A loop component's subcommand; ``about`` is its (help, description, epilog), the
    description and epilog kept as written."""
    help, description, epilog = about
    parser: argparse.ArgumentParser = components.add_parser(
        name,
        help=help,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(parser)
    parser.set_defaults(run=run)
    return parser
