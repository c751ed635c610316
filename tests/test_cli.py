"""The entry point builds, and imports, only the command that runs."""

from __future__ import annotations

import argparse
import os
import socket
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


# What serves or queries (the web server, the Kubernetes and Prometheus clients, the
# metrics registry), and what models (numpy, pydantic): none of it is needed to print a
# command's help or to refuse a flag, and each costs tenths of a second at every start.
SERVING = ("fastapi", "uvicorn", "lightkube", "httpx2", "requests", "prometheus_api_client",
           "prometheus_client")  # fmt: skip
MODELLING = ("numpy", "pydantic")


LIGHT_STARTS = {
    "extender --help": SERVING + MODELLING,
    "extender --port 99999": SERVING + MODELLING,
    "demo --help": SERVING + MODELLING,
    "descheduler --help": SERVING + MODELLING,
    "descheduler --once --query-timeout=-1": SERVING + MODELLING,
    "policy --help": SERVING + MODELLING,
    "simulate --help": SERVING + MODELLING,
    "explain --help": SERVING + MODELLING,
    "capture --step 0x": SERVING + MODELLING,
    "simulate burst --seed abc": SERVING + MODELLING,
    "policy check /nonexistent": (*SERVING, "numpy"),  # the schema, not the load model
    "annotator --help": SERVING + MODELLING,
    "annotator --health-port 70000": SERVING + MODELLING,
    # The whole parser, every command's flags: the version is looked up only when asked.
    "--help": SERVING + MODELLING,
    "--version": SERVING + MODELLING,
    # A file read and refused: its schema, not what would run it.
    "simulate /nonexistent.yaml": (*SERVING, "numpy"),
    # (Its file watcher counts reloads: the metrics registry, not what serves it.)
    "descheduler --once --descheduler-config /nonexistent.yaml": (*SERVING[:-1], "numpy"),
    # Its files read, no kubeconfig: the Kubernetes client, not the descheduler.
    "descheduler --once --prometheus-url http://127.0.0.1:9": ("fastapi", "uvicorn", "numpy"),
}


@pytest.mark.parametrize("command", list(LIGHT_STARTS))
def test_help_and_a_bad_flag_load_nothing_that_serves(command: str) -> None:
    argv, not_loaded = command.split(), LIGHT_STARTS[command]
    code = (
        "import sys\nfrom app.cli import main\n"
        "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as stop:\n    code = stop.code\n"
        f"print(code, sorted(m for m in sys.modules if m.split('.')[0] in {not_loaded!r}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    exit_code, loaded = result.stdout.splitlines()[-1].split(" ", 1)
    assert exit_code == ("0" if {"--help", "--version"} & set(argv) else "2"), result.stderr
    assert loaded == "[]", f"loadaware {command} loaded {loaded}"


# A kubeconfig whose API server does not answer: a client is built from it, never used.
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: abc}}]
current-context: x
"""
SERVES = ("fastapi", "uvicorn", "numpy")


@pytest.mark.parametrize(
    ("argv", "not_loaded"),
    [
        (["extender", "--no-node-cache", "--port", "PORT"], (*SERVES, "lightkube")),
        (["demo", "--port", "PORT"], (*SERVES, "lightkube")),
        # Their client is built (and its kubeconfig checked) before the port is bound.
        (["annotator", "--kubeconfig", "KUBECONFIG", "--prometheus-url", "http://127.0.0.1:9",
          "--health-port", "PORT"], SERVES),
        (["descheduler", "--kubeconfig", "KUBECONFIG", "--prometheus-url", "http://127.0.0.1:9",
          "--health-port", "PORT"], SERVES),
    ],
)  # fmt: skip
def test_a_port_in_use_is_refused_before_what_serves_is_loaded(
    argv: list[str], not_loaded: tuple[str, ...], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        given = {"PORT": str(taken.getsockname()[1]), "KUBECONFIG": str(kubeconfig)}
        argv = [given.get(arg, arg) for arg in argv]
        code = (
            "import sys\nfrom app.cli import main\ntry:\n    code = main(sys.argv[1:])\n"
            "except SystemExit as stop:\n    code = stop.code\n"
            "print(code, sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{not_loaded!r}))"
        )
        result = subprocess.run(
            [sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True,
            timeout=60, env={**os.environ, "LOADAWARE_LEADER_ELECT": "false"},
        )  # fmt: skip
    assert "cannot listen" in result.stderr, result.stderr
    assert result.stdout.splitlines()[-1] == "2 []", result.stdout
