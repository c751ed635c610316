"""``loadaware <component>``: the single entry point for every component.

Exit codes, the same for every component: 0 done, 1 a failure while running, 2 bad
usage or configuration, 130 interrupted (see app/commandline/flags.py). Bad input ends
in one line on stderr, never in a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence

from app.commandline import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    LOG_FORMATS,
    Parser,
    UsageError,
    add_flag,
    configure_logging,
    deprecation_warnings,
    log_level,
)

Command = Callable[[argparse.Namespace], int]

# Each command's module (its ``add_parser`` and what runs it), in the order ``--help``
# lists them. A module is imported only for the command that runs: each pulls in its own
# stack (the web server, the Kubernetes client, numpy), and a process that starts one
# command, or stops at a bad flag, should not pay for the other six.
COMMAND_MODULES: dict[str, str] = {
    "annotator": "app.annotator.main",
    "extender": "app.extender.main",
    "demo": "app.extender.main",
    "descheduler": "app.descheduler.main",
    "policy": "app.policy_check.main",
    "explain": "app.explain.main",
    "simulate": "app.simulate.main",
    "capture": "app.capture.main",
}


def version() -> str:
    from importlib import metadata  # ~30 ms of imports and a search of sys.path

    try:
        return metadata.version("loadaware")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


class _PrintVersion(argparse._VersionAction):
    """``--version``: the installed version, looked up only when asked for (argparse's
    own action takes the text when the parser is built, in every process)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        parser._print_message(f"loadaware {version()}\n", sys.stdout)  # as argparse's own
        parser.exit()


def log_format(text: str) -> str:
    if text.strip().lower() not in LOG_FORMATS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_FORMATS)}, got {text!r}")
    return text.strip().lower()


GLOBAL_FLAGS = (("--log-level", log_level), ("--log-format", log_format))
GLOBAL_FLAG_NAMES = tuple(flag for flag, _ in GLOBAL_FLAGS)


def _commands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every (sub)command parser under ``parser``, those that group others included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield child
                yield from _commands(child)


class _ClosedStdout:
    """Stands for a closed stdout (``loadaware ... >&-``): writing to it is an error
    the CLI reports in one line, as for a full disk."""

    def write(self, _text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, where the global flags before it say it plainly; None
    where only the whole parser can tell (``--help``, a bad or abbreviated flag, a
    command that does not exist)."""
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg in GLOBAL_FLAG_NAMES:
            rest = rest[1:]  # its value
        elif not arg.startswith(tuple(f"{flag}=" for flag in GLOBAL_FLAG_NAMES)):
            return arg if arg in COMMAND_MODULES else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line. With ``only`` (a command name) only that command's parsers are
    built and only its module is imported; for that command it parses and prints what
    the whole parser does (a command's usage and errors never name the others)."""
    parser = Parser(
        prog="loadaware",
        description="Load-aware scheduling for Kubernetes: a node annotator that writes "
        "Prometheus load into Node annotations, a kube-scheduler extender that filters "
        "and scores nodes by it, and a descheduler that moves pods off nodes that stay hot.",
        epilog="exit codes: 0 done (a server or loop stopped by SIGTERM or SIGINT "
        "included), 1 a failure while running, 2 bad usage or configuration, 130 "
        "interrupted (Ctrl-C) before a one-shot command finished",
    )
    parser.add_argument("--version", action=_PrintVersion)
    add_flag(
        parser,
        "--log-level",
        type=log_level,
        default="info",
        metavar="LEVEL",
        help="debug, info, warning or error; also accepted after the command name",
    )
    add_flag(
        parser,
        "--log-format",
        type=log_format,
        default="text",
        metavar="FORMAT",
        help="text, or json (one object a line) for log pipelines; also accepted after "
        "the command name",
    )
    components = parser.add_subparsers(dest="component", required=True, metavar="COMPONENT")
    wanted = COMMAND_MODULES.values() if only is None else [COMMAND_MODULES[only]]
    for module in dict.fromkeys(wanted):  # once each, in order (extender's has demo too)
        importlib.import_module(module).add_parser(components)
    # The global flags are accepted after any command name too (`policy --log-level
    # debug check`); there they have no default of their own, so that they override
    # the top-level value only when given.
    for command in _commands(parser):
        for flag, convert in GLOBAL_FLAGS:
            command.add_argument(
                flag,
                type=convert,
                default=argparse.SUPPRESS,
                metavar="VALUE",
                help=argparse.SUPPRESS,
            )
    return parser


def _quiet_stdout() -> None:
    """Point stdout at nothing, so that the interpreter's final flush is quiet."""
    if isinstance(sys.stdout, _ClosedStdout):
        return
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.stdout = _ClosedStdout()


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stdout is None:  # started with stdout closed
        sys.stdout = _ClosedStdout()
    try:
        given = sys.argv[1:] if argv is None else argv
        parser = build_parser(command_named(given))
        args = parser.parse_args(given)
        configure_logging(args.log_level, args.log_format)
        for warning in deprecation_warnings(args.component):
            logging.getLogger("app.commandline.flags").warning("%s", warning)
        command: Command = args.run
        code = command(args)
        sys.stdout.flush()  # here, so that a closed pipe is caught below, not at exit
        return code
    except UsageError as error:
        print(f"loadaware: error: {error}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        # Ctrl-C before a command took the signal over (while starting): no traceback.
        print("loadaware: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`loadaware simulate --list | head`): what it wanted, it
        # has.
        _quiet_stdout()
        return EXIT_OK
    except OSError as error:
        if error.errno not in (errno.EBADF, errno.ENOSPC, errno.EIO, errno.EDQUOT):
            raise
        # Output that cannot be written (stdout closed, a full disk) is a failure.
        _quiet_stdout()
        print(
            f"loadaware: error: cannot write the output: {error.strerror}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
