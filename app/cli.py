"""``loadaware <component>``: the single entry point for every component."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from app.annotator import main as annotator_main
from app.descheduler import main as descheduler_main
from app.extender import main as extender_main
from app.policy import check as policy_check
from app.simulate import main as simulate_main

Command = Callable[[argparse.Namespace], int]


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadaware",
        description="Load-aware scheduling for Kubernetes: a node annotator that writes "
        "Prometheus load into Node annotations, a kube-scheduler extender that filters "
        "and scores nodes by it, and a descheduler that moves pods off nodes that stay hot.",
    )
    parser.add_argument("--log-level", default="info", help="debug, info, warning or error")
    components = parser.add_subparsers(dest="component", required=True, metavar="COMPONENT")
    annotator_main.add_parser(components)
    extender_main.add_parser(components)
    descheduler_main.add_parser(components)
    policy_check.add_parser(components)
    simulate_main.add_parser(components)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    command: Command = args.run
    return command(args)


if __name__ == "__main__":
    sys.exit(main())
