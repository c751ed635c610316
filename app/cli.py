"""``loadaware <component>``: the single entry point for every component.

Exit codes, the same for every component: 0 done, 1 a failure while running, 2 bad
usage or configuration (see app/flags.py). Bad input ends in one line on stderr, never
in a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata

from app import policy_check
from app.annotator import main as annotator_main
from app.capture import main as capture_main
from app.descheduler import main as descheduler_main
from app.extender import main as extender_main
from app.flags import EXIT_OK, EXIT_USAGE, UsageError, add_flag, log_level
from app.simulate import main as simulate_main

Command = Callable[[argparse.Namespace], int]


def version() -> str:
    try:
        return metadata.version("loadaware")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _runnable(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every (sub)command parser under ``parser`` that runs something."""
    children = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not children:
        yield parser
    for action in children:
        for child in action.choices.values():
            yield from _runnable(child)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadaware",
        description="Load-aware scheduling for Kubernetes: a node annotator that writes "
        "Prometheus load into Node annotations, a kube-scheduler extender that filters "
        "and scores nodes by it, and a descheduler that moves pods off nodes that stay hot.",
        epilog="exit codes: 0 done, 1 a failure while running, 2 bad usage or configuration",
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
    components = parser.add_subparsers(dest="component", required=True, metavar="COMPONENT")
    annotator_main.add_parser(components)
    extender_main.add_parser(components)
    descheduler_main.add_parser(components)
    policy_check.add_parser(components)
    simulate_main.add_parser(components)
    capture_main.add_parser(components)
    # The global flag is accepted after the command name too; there it has no default
    # of its own, so that it overrides the top-level value only when given.
    for command in _runnable(parser):
        command.add_argument(
            "--log-level",
            type=log_level,
            default=argparse.SUPPRESS,
            metavar="LEVEL",
            help=argparse.SUPPRESS,
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        configure_logging(args.log_level)
        command: Command = args.run
        code = command(args)
        sys.stdout.flush()  # here, so that a closed pipe is caught below, not at exit
        return code
    except UsageError as error:
        print(f"loadaware: error: {error}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (`loadaware simulate --list | head`): what it wanted, it
        # has. Point stdout at nothing so that the interpreter's final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
