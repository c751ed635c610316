"""The command-line layer every component builds its flags with.

One set of rules for every flag of every component:

- ``--some-flag`` may instead be set as ``LOADAWARE_SOME_FLAG`` (how Kubernetes
  manifests pass settings, from ConfigMaps and Secrets); the command line wins.
- Values are checked where they are read, by the converters below: durations take Go
  syntax (``15s``, ``2m``, ``1h30m``) or plain seconds and lie between 1ms and 720h (the
  cap policy durations have); ports lie in 1-65535; counts are whole numbers of at least
  1; addresses are IP addresses or host names. A bad value, on the command line or in
  the environment, ends the command with one line that names the flag (and the
  variable) and what would be valid, a hint to ``--help``, and exit code 2.
- One rule names every variable: a flag several commands share, meaning the same
  thing in each (``--kubeconfig``, ``--prometheus-url``, ``--policy``), is
  ``LOADAWARE_<FLAG>``; a flag of one command only is ``LOADAWARE_<COMMAND>_<FLAG>``
  (``LOADAWARE_SIMULATE_JSON``, ``LOADAWARE_DESCHEDULER_DRY_RUN``). One concept has one
  flag in every command (``--descheduler-config``, ``--install-namespace``). An older
  name that was documented, variable or flag, still works, with a deprecation warning
  logged once.
- Help texts end with the default, in one spelling (``on``/``off`` for switches, Go
  syntax for durations), and the variable; ``docs/reference.md`` is generated from them.

Exit codes, the same in every component: 0 done, 1 a failure while running, 2 bad
usage or configuration (an address that cannot be listened on included: a port in use,
a host that does not resolve), 130 interrupted (Ctrl-C) before a one-shot command
finished. A server or loop stopped by SIGTERM or SIGINT exits 0.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import re
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any, Final, NoReturn

from app.objects import MAX_DURATION_S, MIN_DURATION_S, format_duration, parse_duration_s

__all__ = [
    "DEPRECATIONS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_MEANINGS",
    "EXIT_OK",
    "EXIT_USAGE",
    "INTERRUPTED_TEXT",
    "Parser",
    "UsageError",
    "add_component",
    "add_deprecated_alias",
    "add_flag",
    "add_own_flag",
    "count",
    "deprecation_warnings",
    "duration",
    "env_name",
    "fraction",
    "host",
    "http_url",
    "log_level",
    "port",
    "port_or_off",
    "positive_number",
    "seed",
    "timeout",
    "usage_error",
]

ENV_PREFIX: Final = "LOADAWARE_"

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1  # a failure while running: Prometheus or the API server, a lost lease
EXIT_USAGE: Final = 2  # bad usage or configuration: flags, variables, files, addresses
EXIT_INTERRUPTED: Final = 130  # Ctrl-C (SIGINT) before a one-shot command finished
# Each exit code in the one wording every help text and document uses
# (tests/deploy/test_docs.py holds them to it).
EXIT_MEANINGS: Final = {
    EXIT_OK: "done",
    EXIT_FAILED: "a failure while running",
    EXIT_USAGE: "bad usage or configuration",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C) before a one-shot command finished",
}
INTERRUPTED_TEXT: Final = f"{EXIT_INTERRUPTED} {EXIT_MEANINGS[EXIT_INTERRUPTED]}"

# MIN_DURATION_S, MAX_DURATION_S: the one range of durations, in flags and in files
# (app/objects/durations.py).
MIN_TIMEOUT_S: Final = 0.1  # a connection timeout below this refuses every honest client

LOG_LEVELS: Final = ("debug", "info", "warning", "error")

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


# Older names still accepted, old -> new (variables and flags), for the reference.
RENAMED: dict[str, str] = {}
# (command, warning) for each deprecated variable or flag found set; the CLI logs those
# of the command it runs once logging is configured.
DEPRECATIONS: list[tuple[str, str]] = []


class UsageError(Exception):
    """Bad usage or configuration; the CLI prints it as one line and exits with code 2."""


# A negative number or duration: ``-5``, ``-0.5``, ``-5s``, ``-1h30m``.
_NEGATIVE_VALUE: Final = re.compile(r"^-(\d+(\.\d*)?|\.\d+)([a-zµμ]+(\d+(\.\d*)?)?)*$")


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is the one line that says what is wrong and a hint to
    ``--help``, rather than the whole usage block before it. Subcommand parsers are of
    this class too (argparse makes them of their parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # ``--reservation-ttl -5s`` is a flag and its (bad) value, for the converter to
        # refuse with what is valid: argparse takes only ``-5`` and ``-.5`` for values,
        # and answered ``-5s`` with "expected one argument".
        self._negative_number_matcher = _NEGATIVE_VALUE

    def error(self, message: str) -> NoReturn:
        self.exit(
            EXIT_USAGE,
            f"{self.prog}: error: {message}\n(run '{self.prog} --help' for the flags)\n",
        )


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


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        try:
            return parse_duration_s(text)
        except ValueError:
            return math.nan


def _seconds_within(text: str, min_s: float, expected: str) -> float:
    """``text``'s seconds, from ``min_s`` to 720h; else ``expected`` is what the error says."""
    seconds = _seconds(text)
    if not (math.isfinite(seconds) and min_s <= seconds <= MAX_DURATION_S):
        raise argparse.ArgumentTypeError(
            f"expected {expected} to 720h such as 500ms, 15s or 2m, got {text!r}"
        )
    return seconds


def duration(text: str) -> float:
    """Seconds, from a Go duration (``15s``, ``2m``) or a plain number; 1ms to 720h."""
    return _seconds_within(text, MIN_DURATION_S, "a positive duration from 1ms")


def timeout(text: str) -> float:
    """A connection timeout: a duration of at least 100ms (shorter refuses every client)."""
    return _seconds_within(text, MIN_TIMEOUT_S, "a duration from 100ms")


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


def seed(text: str) -> int:
    """A random seed: a whole number of at least 0 (what numpy accepts)."""
    value = _integer(text)
    if value is None or not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 0, got {text!r}")
    return value


_HOST_LABEL: Final = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def host(text: str) -> str:
    """An address to listen on: an IP address or a host name (RFC 1123)."""
    value = text.strip()
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    labels = value.rstrip(".").split(".")
    if len(value) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels):
        return value
    raise argparse.ArgumentTypeError(
        f"expected an IP address or a host name such as 0.0.0.0 or localhost, got {text!r}"
    )


def positive_number(text: str) -> float:
    """A finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number from 0 to 1 (a share, a margin)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1 such as 0.3, got {text!r}")
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


def _one_of(
    choices: Any, convert: Callable[[str], Any] | None
) -> Callable[[str], Any]:
    """``convert``, checking a variable's value against ``choices`` as argparse checks a
    command-line value (it checks no default, and a variable's value is one)."""

    def checked(text: str) -> Any:
        value = convert(text) if convert is not None else text
        if isinstance(text, _FromEnvironment) and value not in choices:
            raise argparse.ArgumentTypeError(
                f"expected one of {', '.join(map(str, choices))}, got {text!r}"
            )
        return value

    checked.__name__ = getattr(convert, "__name__", "value")
    return checked


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


def add_deprecated_alias(container: Any, old: str, flag: str, dest: str, **kwargs: Any) -> None:
    """``old``, a documented older name of ``flag``: still accepted, hidden from help,
    with a deprecation warning."""

    class _Alias(argparse.Action):
        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: Any,
            option_string: str | None = None,
        ) -> None:
            DEPRECATIONS.append(("", f"{old} is deprecated: use {flag}"))
            setattr(namespace, self.dest, values)

    RENAMED[old] = flag
    container.add_argument(
        old, dest=dest, action=_Alias, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs
    )


def add_own_flag(container: Any, command: str, flag: str, **kwargs: Any) -> argparse.Action:
    """A flag of ``command`` alone that was once read under the generic name: its
    variable names the command (``LOADAWARE_EXTENDER_TLS_CERT``), and the generic name
    it had (``LOADAWARE_TLS_CERT``) is still read, with a deprecation warning. A new
    flag of one command is ``add_flag(..., command=...)``: it has no older name."""
    return add_flag(container, flag, command=command, old_variable=env_name(flag), **kwargs)


def deprecation_warnings(command: str) -> list[str]:
    """The deprecation warnings for ``command`` (and the global flags), each once."""
    return list(dict.fromkeys(w for c, w in DEPRECATIONS if c in ("", command)))


def describe_default(default: Any, convert: Callable[[str], Any] | None) -> str | None:
    """A default in the one spelling help and the reference use."""
    if default is None or default is argparse.SUPPRESS:
        return None
    if isinstance(default, bool):
        return "on" if default else "off"
    if convert in (duration, timeout) and isinstance(default, int | float):
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
    command: str | None = None,
    old_variable: str | None = None,
    **kwargs: Any,
) -> argparse.Action:
    """Add ``flag`` to a parser or argument group, with its variable and its default in
    the help text; ``default_text`` describes a default that is not a plain value (what
    an unset flag means); ``short`` is a one-letter alias (``-o``, as kubectl spells it).
    ``help`` is plain text (no ``%`` formatting).

    ``command`` puts the command's name in the variable (a flag of one command only);
    ``old_variable`` is a documented older name, still read, with a deprecation warning."""
    named = env_name(f"{command}-{flag.lstrip('-')}" if command else flag)
    variable = named
    if old_variable is not None:
        RENAMED[old_variable] = named
    raw = os.environ.get(variable)
    if raw is None and old_variable is not None and old_variable in os.environ:
        raw = os.environ[old_variable]
        variable = old_variable
        DEPRECATIONS.append((command or "", f"{old_variable} is deprecated: set {named} instead"))
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
    choices = kwargs.get("choices")
    if choices is not None and raw is not None and not switch:
        type = _one_of(choices, type)
    if type is not None:
        kwargs["type"] = _naming_variable(type)
    suffix = f" (default: {shown})" if shown else ""
    text = f"{help.strip()}{suffix} [env {named}]".replace("%", "%%")
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
