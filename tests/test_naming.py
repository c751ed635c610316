"""One naming rule for every variable, one flag per concept, and the older names still
read with a warning logged once (app/commandline/flags.py)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import build_parser
from app.commandline import flags
from app.commandline.flags import env_name
from tests.deploy.manifests import actions_of, expected_variable, shown_flags, subcommands


def _variables() -> list[tuple[str, str, str]]:
    """(command, flag, variable) for every flag a help shows with its variable."""
    found = []
    for command, parser in subcommands().items():
        for action in actions_of(parser):
            named = re.search(r"\[env (\w+)\]", action.help or "")
            long = [f for f in action.option_strings if f.startswith("--")]
            if named and long:
                found.append((command, long[0], named.group(1)))
    return found


def test_every_variable_follows_the_one_naming_rule() -> None:
    """LOADAWARE_<FLAG> only for a flag several commands share; every other variable
    names its command. A flag several commands have that means something different in
    each (capture's --output is a file, explain's a format) names the command too."""
    wrong = [
        f"loadaware {command} {flag}: reads {variable}, the rule says "
        f"{expected_variable(command, flag)} (add_flag(..., command={command!r}) for a "
        "flag of one command, add_flag for one several commands share)"
        for command, flag, variable in _variables()
        if variable != expected_variable(command, flag)
        and variable != env_name(f"--{command}-{flag.lstrip('-')}")
    ]
    assert len(_variables()) > 100
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize(
    ("flag", "commands"),
    [
        ("--descheduler-config", {"descheduler", "explain", "capture"}),
        ("--install-namespace", {"explain", "capture", "report"}),
    ],
)
def test_one_concept_has_one_flag_in_every_command(flag: str, commands: set[str]) -> None:
    assert {c for c in subcommands() if flag in shown_flags(c)} == commands
    for old in ("--config", "--loadaware-namespace"):
        assert all(old not in shown_flags(c) for c in subcommands())


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    fresh: list[tuple[str, str]] = []
    monkeypatch.setattr(flags, "DEPRECATIONS", fresh)
    for name in list(os.environ):
        if name.startswith("LOADAWARE_"):
            monkeypatch.delenv(name)
    return fresh


OLD_VARIABLES = [
    # (command line, old variable, value, attribute, parsed value, new variable)
    (["descheduler"], "LOADAWARE_DRY_RUN", "true", "dry_run", True,
     "LOADAWARE_DESCHEDULER_DRY_RUN"),
    (["descheduler"], "LOADAWARE_ONCE", "yes", "once", True, "LOADAWARE_DESCHEDULER_ONCE"),
    (["descheduler"], "LOADAWARE_CONFIG", "/d.yaml", "descheduler_config", "/d.yaml",
     "LOADAWARE_DESCHEDULER_CONFIG"),
    (["explain", "node", "n1"], "LOADAWARE_CONFIG", "/d.yaml", "descheduler_config", "/d.yaml",
     "LOADAWARE_DESCHEDULER_CONFIG"),
    (["annotator"], "LOADAWARE_SOFT_TAINTS", "on", "soft_taints", True,
     "LOADAWARE_ANNOTATOR_SOFT_TAINTS"),
    (["annotator"], "LOADAWARE_VALUE_DIVISOR", "4", "value_divisor", 4.0,
     "LOADAWARE_ANNOTATOR_VALUE_DIVISOR"),
    (["extender"], "LOADAWARE_RESERVATION_TTL", "20s", "reservation_ttl", 20.0,
     "LOADAWARE_EXTENDER_RESERVATION_TTL"),
    (["extender"], "LOADAWARE_TLS_CERT", "/c.pem", "tls_cert", "/c.pem",
     "LOADAWARE_EXTENDER_TLS_CERT"),
    (["capture"], "LOADAWARE_LOADAWARE_NAMESPACE", "ops", "install_namespace", "ops",
     "LOADAWARE_INSTALL_NAMESPACE"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "old", "value", "attribute", "parsed", "new"),
    OLD_VARIABLES,
    ids=[f"{case[0][0]}-{case[1]}" for case in OLD_VARIABLES],
)
def test_an_old_variable_is_still_read_with_one_warning(
    warnings: list[tuple[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    old: str,
    value: str,
    attribute: str,
    parsed: object,
    new: str,
) -> None:
    monkeypatch.setenv(old, value)
    build_parser(argv[0])  # built twice, as a process may: still one warning
    args = build_parser(argv[0]).parse_args(argv)
    assert getattr(args, attribute) == parsed
    assert flags.deprecation_warnings(argv[0]) == [f"{old} is deprecated: set {new} instead"]


def test_the_new_variable_wins_over_the_old_without_a_warning(
    warnings: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOADAWARE_DRY_RUN", "false")
    monkeypatch.setenv("LOADAWARE_DESCHEDULER_DRY_RUN", "true")
    args = build_parser("descheduler").parse_args(["descheduler"])
    assert args.dry_run is True
    assert flags.deprecation_warnings("descheduler") == []


@pytest.mark.parametrize(
    ("argv", "attribute", "new"),
    [
        (["descheduler", "--config", "/d.yaml", "--config", "/d.yaml"], "descheduler_config",
         "--descheduler-config"),
        (["explain", "node", "n1", "--config", "/d.yaml"], "descheduler_config",
         "--descheduler-config"),
        (["capture", "--loadaware-namespace", "ops"], "install_namespace",
         "--install-namespace"),
    ],
)
def test_an_old_flag_still_works_with_one_warning(
    warnings: list[tuple[str, str]], argv: list[str], attribute: str, new: str
) -> None:
    args = build_parser(argv[0]).parse_args(argv)
    old = next(a for a in argv if a.startswith("--"))
    assert getattr(args, attribute) == argv[argv.index(old) + 1]
    assert flags.deprecation_warnings(argv[0]) == [f"{old} is deprecated: use {new}"]


def test_an_old_flag_is_hidden_from_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser("descheduler").parse_args(["descheduler", "--help"])
    shown = capsys.readouterr().out
    assert "--descheduler-config FILE" in shown
    assert not re.search(r"--config\b", shown)
    assert isinstance(build_parser("descheduler"), argparse.ArgumentParser)


def test_a_deprecation_warning_is_logged_once_by_the_command_that_reads_it() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADAWARE_")}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "descheduler", "--once", "--no-leader-elect",
         "--config", "/nonexistent/d.yaml"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**env, "LOADAWARE_DRY_RUN": "true", "LOADAWARE_CONFIG": "/also/not/here.yaml"},
    )  # fmt: skip
    assert done.returncode == 2
    assert "/nonexistent/d.yaml" in done.stderr  # the flag wins over the old variable
    for warning in (
        "--config is deprecated: use --descheduler-config",
        "LOADAWARE_DRY_RUN is deprecated: set LOADAWARE_DESCHEDULER_DRY_RUN instead",
        "LOADAWARE_CONFIG is deprecated: set LOADAWARE_DESCHEDULER_CONFIG instead",
    ):
        assert done.stderr.count(warning) == 1, done.stderr


def test_the_shipped_manifests_use_the_current_names() -> None:
    build_parser()  # every command's older names, in RENAMED
    deploy = Path(__file__).resolve().parents[1] / "deploy"
    old = [
        f"{path.relative_to(deploy)}: {name} (now {flags.RENAMED[name]})"
        for path in sorted(deploy.rglob("*.yaml"))
        for name in re.findall(r"\bLOADAWARE_[A-Z_]+\b", path.read_text())
        if name in flags.RENAMED
    ]
    assert old == []
    assert any("LOADAWARE_EXTENDER_TLS_CERT" in p.read_text() for p in deploy.rglob("*.yaml"))


def test_the_changelog_tells_every_rename() -> None:
    build_parser()
    changelog = (Path(__file__).resolve().parents[1] / "CHANGELOG.md").read_text()
    untold = sorted(old for old in flags.RENAMED if f"`{old}`" not in changelog)
    assert untold == [], (
        f"CHANGELOG.md's upgrade notes do not name {untold}: say what each became"
    )
