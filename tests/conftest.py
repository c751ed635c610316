"""Shared pytest configuration; fixtures live in tests/support and are registered here."""

from __future__ import annotations

import os

import pytest

pytest_plugins: list[str] = [
    "tests.support.prom_fixtures",
    "tests.support.fakekube_fixtures",
]

# The end-to-end tests need a real control plane, found through this variable (a folder
# with etcd, kube-apiserver, kube-controller-manager and kube-scheduler). Without it they
# are left out of collection (not skipped), and the run says so once, at its end.
E2E_ASSETS_ENV = "LOADAWARE_KUBE_ASSETS"
E2E_LEFT_OUT = not os.environ.get(E2E_ASSETS_ENV, "").strip()
collect_ignore: list[str] = ["e2e"] if E2E_LEFT_OUT else []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if E2E_LEFT_OUT:
        terminalreporter.write_line(
            f"e2e: {E2E_ASSETS_ENV} is unset, so the end-to-end tests in tests/e2e (a real "
            "control plane) were left out; see the README's Development section",
            yellow=True,
        )
