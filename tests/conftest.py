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

# The suite runs in parallel workers (scripts/test: pytest-xdist, --dist loadgroup, in
# collection order), which take the next test as they free up. These go first: each
# runs for tens of seconds (most of it waiting on pip, a compiler or a control plane),
# and one started last would hold the run open on its own.
STARTS_FIRST = (
    "tests/deploy/test_dockerfile.py::test_the_build_stage_install_commands",
    "tests/extender/test_native_sanitized.py::",
    "tests/e2e/",
    "tests/simulate/test_no_harm.py::test_the_descheduler_never_adds_harm[thousand-nodes",
    "tests/simulate/test_no_harm.py::test_beside_a_load_aware_scheduler_it_adds_no_harm_on_"
    "seeds_it_was_not_built_on[loadaware-thousand-nodes",
    "tests/test_cli_bad_input.py::test_bad_input_ends_in_one_line",  # one group of ~70
    "tests/load/test_load_smoke.py::",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(STARTS_FIRST))  # stable


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if E2E_LEFT_OUT:
        terminalreporter.write_line(
            f"e2e: {E2E_ASSETS_ENV} is unset, so the end-to-end tests in tests/e2e (a real "
            "control plane) were left out; see the README's Development section",
            yellow=True,
        )
