"""Shared pytest configuration; fixtures live in tests/support and are registered here."""

from __future__ import annotations

import gc
import os
from typing import TypeVar

import pytest
from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

T = TypeVar("T")

pytest_plugins: list[str] = [
    "tests.support.prom_fixtures",
    "tests.support.fakekube_fixtures",
    "tests.support.zygote",
]

# The end-to-end tests need a real control plane, found through this variable (a folder
# with etcd, kube-apiserver, kube-controller-manager and kube-scheduler). Without it they
# are left out of collection (not skipped), and the run says so once, at its end.
E2E_ASSETS_ENV = "LOADAWARE_KUBE_ASSETS"
E2E_LEFT_OUT = not os.environ.get(E2E_ASSETS_ENV, "").strip()
collect_ignore: list[str] = ["e2e"] if E2E_LEFT_OUT else []

# The suite runs in parallel workers (scripts/test: pytest-xdist, --dist loadgroup, in
# collection order), which take the next test, or group of tests, as they free up. These
# go first, in this order: each runs for tens of seconds (most of it waiting on a control
# plane, pip or a compiler), and one started last would hold the run open on its own.
STARTS_FIRST = (
    "tests/e2e/",
    "tests/deploy/test_dockerfile.py::test_the_build_stage_install_commands",
    "tests/extender/test_native_sanitized.py::",
    "tests/test_cli_bad_input.py::test_bad_input_ends_in_one_line",  # one group of ~70
    "tests/simulate/test_no_harm.py::test_the_descheduler_never_adds_harm[thousand-nodes",
    "tests/simulate/test_no_harm.py::test_beside_a_load_aware_scheduler_it_adds_no_harm_on_"
    "seeds_it_was_not_built_on[loadaware-thousand-nodes",
    "tests/load/test_load_smoke.py::",
)
# Tests that mostly wait, on purpose (a client that stalls, a timeout, a leader that
# loses its lease), each holding a worker for seconds while using almost no CPU. In
# collection order they sit together (tests/extender, tests/faults, tests/security), and
# once all four workers waited on them at the same time: both cores idle for ~10 s. They
# are spread evenly among the CPU-bound tests instead, so that the other workers keep
# the cores busy while one waits.
WAITS_MOSTLY = (
    "tests/extender/test_slow_clients.py::",
    "tests/security/test_sockets.py::",
    "tests/faults/test_prometheus_faults.py::",
    "tests/faults/test_descheduler_faults.py::",
    "tests/faults/test_readiness_faults.py::",
    "tests/annotator/test_leader.py::",
    "tests/annotator/test_sync_faults.py::",
)
# The simulator's outcome tests: hundreds of CPU-bound tests in a row (test_no_harm's
# thousand-nodes cases start first, above).
KEEPS_CORES_BUSY = (
    "tests/simulate/test_no_harm.py::",
    "tests/simulate/test_soft_taint_outcomes.py::",
)
# The end-to-end files in three groups of about equal time, each run by one worker on
# one control plane (tests/e2e/conftest.py stops it when the worker leaves tests/e2e):
# a control plane per worker, idle for the rest of the run, cost more CPU than they saved.
E2E_GROUPS = {
    "e2e-1": ("burst", "descheduler_placement", "deploy_strict", "extender_requests", "smoke",
              "named_roles", "owner_free_text", "workload_usage_bounds"),
    "e2e-2": ("scheduler_configs", "scheduling", "tenant_limits", "descheduler_limits",
              "descheduler_rbac", "soft_taints", "admission_in_force", "descheduler_opt_outs"),
    "e2e-3": ("annotator", "explain", "capture", "descheduler_small_pods",
              "node_annotation_policy", "workload_usage", "descheduler_hindsight", "consolidation",
              "node_pools", "classes"),
}  # fmt: skip
# The tests of the CLI that run in its zygote (tests/support/zygote.py, the fixture
# ``cli_zygote``): the bad-input cases (their module fixture runs every case) and the
# others. The zygote starts once on each worker that runs one of them (~0.5 CPU-s).
IN_THE_ZYGOTE = (
    *(f"tests/test_cli_bad_input.py::{name}"
      for name in ("test_bad_input_ends_in_one_line", "test_a_case_in_the_zygote",
                   "test_version_prints", "test_global_flags_are_accepted",
                   "test_a_single_run_without_the_lease", "test_old_variable_names",
                   "test_plots_without_matplotlib", "test_a_full_disk",
                   "test_simulate_shows_progress", "test_a_host_never_listened_on")),
    "tests/capture/test_failure_paths.py::",
    "tests/extender/test_policy_atomic.py::test_extender_refuses_an_absurd_weight",
    "tests/extender/test_tls_and_cli.py::test_extender_refuses_to_start_with_a_broken",
    "tests/extender/test_tls_and_cli.py::test_extender_without_a_kubeconfig",
)  # fmt: skip
# Tests that share one costly fixture run on one worker, each group as one unit: the
# CLI's tests in its zygote, the socket tests' real extenders (one start, about a
# CPU-second, on each worker that ran one of them) and the e2e groups.
GROUP_OF = {
    **dict.fromkeys(IN_THE_ZYGOTE, "bad-input-cases"),
    "tests/extender/test_slow_clients.py::": "slow-clients",
    "tests/security/test_sockets.py::": "sockets",
    **{f"tests/e2e/test_{name}.py::": group for group, names in E2E_GROUPS.items()
       for name in names},
}  # fmt: skip


def group_of(nodeid: str) -> str | None:
    return next((g for prefix, g in GROUP_OF.items() if nodeid.startswith(prefix)), None)


class GroupedScheduling(LoadGroupScheduling):  # type: ignore[misc]
    """xdist's loadgroup, the groups read from GROUP_OF. (Its own ``xdist_group`` marks
    do nothing under pytest 9.2: it renames node ids, which pytest no longer takes;
    pytest-xdist issue 1386.)"""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid) or super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if config.getvalue("dist") != "loadgroup":
        return None
    return GroupedScheduling(config, log)


def _start_rank(item: pytest.Item) -> int:
    ranks = (n for n, prefix in enumerate(STARTS_FIRST) if item.nodeid.startswith(prefix))
    return next(ranks, len(STARTS_FIRST))


def spread_out(items: list[T], spread: list[T]) -> list[T]:
    """``items`` with ``spread`` inserted at even intervals, both in their own order."""
    merged: list[T] = []
    every = (len(items) + 1) / (len(spread) + 1)
    at = iter(round(every * (n + 1)) for n in range(len(spread)))
    next_at = next(at, None)
    spread_left = iter(spread)
    for index, item in enumerate(items):
        while next_at is not None and index == next_at:
            merged.append(next(spread_left))
            next_at = next(at, None)
        merged.append(item)
    merged.extend(spread_left)
    return merged


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_start_rank)  # stable: the order within a rank is kept
    first = [item for item in items if _start_rank(item) < len(STARTS_FIRST)]
    rest = [item for item in items if _start_rank(item) == len(STARTS_FIRST)]
    waits = [item for item in rest if item.nodeid.startswith(WAITS_MOSTLY)]
    others = [item for item in rest if not item.nodeid.startswith(WAITS_MOSTLY)]
    # Among the outcome tests, which keep both cores busy for about a minute: spread by
    # count over the fast tests, several still waited at once; at the very end, one that
    # waits 12 s held the whole run open.
    busy = [n for n, item in enumerate(others) if item.nodeid.startswith(KEEPS_CORES_BUSY)]
    start, end = (busy[0], busy[-1] + 1) if busy else (0, len(others))
    items[:] = [*first, *others[:start], *spread_out(others[start:end], waits), *others[end:]]


def pytest_collection_finish(session: pytest.Session) -> None:
    """The cyclic garbage collector, kept from re-reading what lives all run. What
    collection made (every test module, app/ and its libraries: ~200,000 objects the
    collector tracks) leaves its generations (``gc.freeze``), and a young collection
    waits for 20,000 net allocations, not 700: the tests' servers, clients and
    simulations allocate millions of objects, most of them gone by reference counting
    before any collection. Measured over a whole run (gc.callbacks in each worker):
    19.3 CPU-s in the collector, 14.4 of them in 67 full collections; frozen, 15.9;
    frozen with the young threshold raised, 7.4 (2,000 collections instead of 14,000,
    16 full ones). Cycles are still collected, only less often."""
    gc.freeze()
    gc.set_threshold(20_000, *gc.get_threshold()[1:])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if E2E_LEFT_OUT:
        terminalreporter.write_line(
            f"e2e: {E2E_ASSETS_ENV} is unset, so the end-to-end tests in tests/e2e (a real "
            "control plane) were left out; see docs/developer.md, \"The test suite\"",
            yellow=True,
        )
