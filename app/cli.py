"""``loadaware <component>``: the single entry point for every component.

Exit codes, the same for every component: 0 done, 1 a failure while running, 2 bad
usage or configuration, 130 interrupted (see app/commandline/flags.py). Bad input ends
in one line on stderr, never in a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata

from app.annotator import main as annotator_main
from app.capture import main as capture_main
from app.commandline import (
    DEPRECATIONS,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    LOG_FORMATS,
    Parser,
    UsageError,
    add_flag,
    configure_logging,
    log_level,
)
from app.descheduler import main as descheduler_main
from app.explain import main as explain_main
from app.extender import main as extender_main
from app.policy_check import main as policy_check_main
from app.simulate import main as simulate_main

Command = Callable[[argparse.Namespace], int]


def version() -> str:
    try:
        return metadata.version("loadaware")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def log_format(text: str) -> str:
    if text.strip().lower() not in LOG_FORMATS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_FORMATS)}, got {text!r}")
    return text.strip().lower()


GLOBAL_FLAGS = (("--log-level", log_level), ("--log-format", log_format))


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


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="loadaware",
        description="Load-aware scheduling for Kubernetes: a node annotator that writes "
        "Prometheus load into Node annotations, a kube-scheduler extender that filters "
        "and scores nodes by it, and a descheduler that moves pods off nodes that stay hot.",
        epilog="exit codes: 0 done (a server or loop stopped by SIGTERM or SIGINT "
        "included), 1 a failure while running, 2 bad usage or configuration, 130 "
        "interrupted before a one-shot command finished",
    )
    parser.add_argument("--version", action="version", version=f"loadaware {version()}")
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
    annotator_main.add_parser(components)
    extender_main.add_parser(components)
    descheduler_main.add_parser(components)
    policy_check_main.add_parser(components)
    explain_main.add_parser(components)
    simulate_main.add_parser(components)
    capture_main.add_parser(components)
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
        parser = build_parser()
        args = parser.parse_args(argv)
        configure_logging(args.log_level, args.log_format)
        for command_name, warning in DEPRECATIONS:
            if command_name in ("", args.component):
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
