"""The entry point builds, and imports, only the command that runs."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import COMMAND_MODULES, _commands, build_parser, command_named

ROOT = Path(__file__).resolve().parents[1]


def helps(parser: argparse.ArgumentParser, command: str) -> dict[str, str]:
    """Every (sub)command parser's --help under ``command``, by its prog."""
    return {
        child.prog: child.format_help()
        for child in _commands(parser)
        if child.prog.split()[1] == command
    }


def test_the_command_table_names_every_command() -> None:
    (commands,) = [
        action.choices
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    ]
    assert set(commands) == set(COMMAND_MODULES)


@pytest.mark.parametrize("command", list(COMMAND_MODULES))
def test_a_command_built_alone_prints_the_same_help(command: str) -> None:
    alone = helps(build_parser(command), command)
    assert alone
    assert alone == helps(build_parser(), command)


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["extender", "--port", "1"], "extender"),
        (["--log-level", "debug", "policy", "check", "p.yaml"], "policy"),
        (["--log-format=json", "--log-level", "simulate", "demo"], "demo"),
        (["--log-lev", "debug", "extender"], None),  # an abbreviation: argparse decides
        (["--help"], None),
        (["--version"], None),
        (["nope"], None),
        ([], None),
    ],
)
def test_the_command_is_read_from_the_flags_before_it(argv: list[str], command: str | None) -> None:
    assert command_named(argv) == command


def test_a_command_imports_no_other_command() -> None:
    code = (
        "import sys; from app.cli import main; code = main(['policy', 'check', '/nonexistent']); "
        "print(sorted(m for m in sys.modules if m.startswith('app.') and m.endswith('.main')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert "/nonexistent" in result.stderr
    assert result.stdout.strip() == "['app.policy_check.main']"  # its own, no other
