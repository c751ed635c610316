"""Bursts through the real kube-scheduler v1.36: the estimate must hold under its timing.

kube-scheduler asks about the next pod milliseconds after it chose a node for the last
one, long before that binding reaches the extender's pod watch. Every shape here checks
what the issue asks: the coolest node gets at most 2 pods, no node ends above its limit
plus one pod's estimate, the pods that fit are bound, and the rest are reported
unschedulable with the load reason. One extender per mode serves the tests
(tests/e2e/conftest.py): each test waits until it holds no estimate of an earlier
test's pods, so every burst starts from its own Nodes' loads.
"""

from __future__ import annotations

import pytest

from tests.e2e.burst import (
    burst_pod,
    check_burst,
    make_nodes,
    node_capacity,
    scheduler_with_shared_extender,
    settle,
)
from tests.e2e.harness import ControlPlane

PODS = 20
TIED = {"cool": 0.10, **{f"warm-{i}": 0.45 for i in range(5)}}
DIFFERENT = {"n-10": 0.10, "n-15": 0.15, "n-30": 0.30, "n-40": 0.40, "n-50": 0.50, "n-60": 0.60}


@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["node-names", "full-nodes"])
def test_a_backlog_on_nodes_that_tie(
    cluster: ControlPlane,
    namespace: str,
    node_cache_capable: bool,
    request: pytest.FixtureRequest,
) -> None:
    make_nodes(cluster, TIED)
    client = cluster.client()
    for i in range(PODS):
        client.create(burst_pod(f"burst-{i:02d}", namespace))
    with scheduler_with_shared_extender(request, node_cache_capable=node_cache_capable):
        outcome = settle(client, namespace, expected_bound=7, pods=PODS)
    check_burst(outcome, TIED, PODS)


def test_pods_created_while_the_scheduler_runs_on_nodes_that_tie(
    cluster: ControlPlane, namespace: str, request: pytest.FixtureRequest
) -> None:
    make_nodes(cluster, TIED)
    client = cluster.client()
    with scheduler_with_shared_extender(request, node_cache_capable=True):
        for i in range(PODS):
            client.create(burst_pod(f"live-{i:02d}", namespace))
        outcome = settle(client, namespace, expected_bound=7, pods=PODS)
    check_burst(outcome, TIED, PODS)


def test_a_backlog_on_nodes_that_differ(
    cluster: ControlPlane, namespace: str, request: pytest.FixtureRequest
) -> None:
    make_nodes(cluster, DIFFERENT)
    client = cluster.client()
    for i in range(PODS):
        client.create(burst_pod(f"burst-{i:02d}", namespace))
    fit = sum(node_capacity(cpu) for cpu in DIFFERENT.values())
    with scheduler_with_shared_extender(request, node_cache_capable=True):
        outcome = settle(client, namespace, expected_bound=fit, pods=PODS)
    check_burst(outcome, DIFFERENT, PODS)


def test_pods_that_only_one_node_can_take(
    cluster: ControlPlane, namespace: str, request: pytest.FixtureRequest
) -> None:
    """kube-scheduler skips prioritize when one node is feasible: filter must reserve."""
    make_nodes(cluster, TIED)
    client = cluster.client()
    only = {"kubernetes.io/hostname": "warm-0"}
    pods = 6
    for i in range(pods):
        client.create(burst_pod(f"pinned-{i:02d}", namespace, node_selector=only))
    with scheduler_with_shared_extender(request, node_cache_capable=True):
        outcome = settle(client, namespace, expected_bound=1, pods=pods)
    assert outcome.placed == {"warm-0": 1}, outcome.describe()
    check_burst(outcome, {"warm-0": TIED["warm-0"]}, pods)
