"""Every command's ``--help`` is held to the code as the pages are (tests/deploy/
test_docs.py holds the README, docs/reference.md and docs/troubleshooting.md): a
metric a help names exists (no help names a skip code), and a help written for one command is not
another's copy (issue 46: ``explain node -o`` said what ``explain pod -o`` prints)."""

from __future__ import annotations

import argparse
import re

from tests.deploy.manifests import actions_of, subcommands
from tests.deploy.test_docs import known_metrics


def every_parser() -> dict[str, argparse.ArgumentParser]:
    """Each command and subcommand (``explain node``) by the words that run it."""
    found: dict[str, argparse.ArgumentParser] = {}
    for command, parser in subcommands().items():
        found[command] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found |= {f"{command} {n}": child for n, child in action.choices.items()}
    return found


def help_text(parser: argparse.ArgumentParser) -> str:
    texts = [parser.description or "", parser.epilog or ""]
    texts += [a.help or "" for a in actions_of(parser) if a.help != argparse.SUPPRESS]
    return " ".join(" ".join(texts).split())


METRIC_NAME = re.compile(r"\bloadaware_[a-z_]*[a-z]\b")


def test_a_metric_a_help_names_is_exported() -> None:
    known = known_metrics()
    assert METRIC_NAME.findall("counts in loadaware_policy_reloads_total{result}") == [
        "loadaware_policy_reloads_total"
    ]
    unknown = {
        command: sorted(named - known)
        for command, parser in every_parser().items()
        if (named := set(METRIC_NAME.findall(help_text(parser)))) - known
    }
    assert unknown == {}, f"--help names metrics no component exports: {unknown}"


def output_help(command: str) -> str:
    parser = every_parser()[command]
    action = next(a for a in parser._actions if "--output" in a.option_strings)
    return " ".join((action.help or "").split())


def test_each_explain_command_s_output_help_tells_its_own_output() -> None:
    pod, node = output_help("explain pod"), output_help("explain node")
    assert pod != node
    assert "node's class" in node
    assert "node's class" not in pod
    assert "every node" in pod
