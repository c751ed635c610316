"""What a user sees on a real control plane: pods avoid hot nodes, an all-hot cluster
says why a pod is Pending, and data loadaware cannot trust never blocks scheduling.
Both of kube-scheduler's extender modes: NodeNames (nodeCacheCapable: true) and full
Node objects (nodeCacheCapable: false, extender without its node cache). One extender
per mode serves the tests (tests/e2e/conftest.py), as one serves a cluster's
pods and Nodes as they come and go; kube-scheduler is new in each test."""

from __future__ import annotations

import time

import pytest
from lightkube.resources.core_v1 import Pod

from app.load.samples import format_usage
from app.policy import default_policy
from tests.e2e.burst import annotations_at, outcome_of, scheduler_with_shared_extender
from tests.e2e.harness import ControlPlane, pod_object, wait_until

MODES = pytest.mark.parametrize(
    "node_cache_capable", [True, False], ids=["node-names", "full-nodes"]
)


def small_pod(name: str, namespace: str, node: str | None = None) -> Pod:
    spec: dict[str, object] = {"containers": [{"name": "c", "image": "example.invalid/app"}]}
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod_object({"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def make(cluster: ControlPlane, name: str, annotations: dict[str, str]) -> None:
    cluster.make_node(
        name,
        cpu="8",
        memory="32Gi",
        annotations=annotations,
        labels={"kubernetes.io/hostname": name},
    )


@MODES
def test_pods_avoid_hot_nodes(
    cluster: ControlPlane,
    namespace: str,
    node_cache_capable: bool,
    request: pytest.FixtureRequest,
) -> None:
    make(cluster, "cool", annotations_at(0.20))
    for i in range(3):
        make(cluster, f"hot-{i}", annotations_at(0.90))
    client = cluster.client()
    for i in range(4):
        client.create(small_pod(f"p-{i}", namespace))
    with scheduler_with_shared_extender(
        request, node_cache_capable=node_cache_capable, extender_node_cache=node_cache_capable
    ):
        wait_until(lambda: outcome_of(client, namespace).bound == 4, 120, "4 pods bound")
    outcome = outcome_of(client, namespace)
    assert outcome.placed == {"cool": 4}, outcome.describe()


@MODES
def test_an_all_hot_cluster_leaves_the_pod_pending_and_says_why_across_nodes(
    cluster: ControlPlane,
    namespace: str,
    node_cache_capable: bool,
    request: pytest.FixtureRequest,
) -> None:
    for i in range(3):
        make(cluster, f"hot-{i}", annotations_at(0.90))
    client = cluster.client()
    client.create(small_pod("waits", namespace))
    with scheduler_with_shared_extender(
        request, node_cache_capable=node_cache_capable, extender_node_cache=node_cache_capable
    ):
        wait_until(
            lambda: outcome_of(client, namespace).pending.get("waits"), 120, "FailedScheduling"
        )
    message = outcome_of(client, namespace).pending["waits"]
    # kube-scheduler groups the extender's per-node reasons: "0/3 nodes are available:
    # 3 Load[cpu_usage_avg_5m] is too high (> 0.65)."
    assert "0/3 nodes are available" in message, message
    assert "3 Load[cpu_usage_avg_5m] is too high" in message, message


@MODES
def test_stale_missing_and_garbage_data_never_block_a_pod(
    cluster: ControlPlane,
    namespace: str,
    node_cache_capable: bool,
    request: pytest.FixtureRequest,
) -> None:
    metrics = default_policy().metrics
    an_hour_ago = time.time() - 3600
    nodes = {
        "stale": {m: format_usage(0.95, an_hour_ago) for m in metrics},
        "missing": {},
        "garbage": {m: "NaN,yesterday" for m in metrics} | {"cpu_usage_avg_5m": "-1,x"},
        "future": {m: format_usage(0.95, time.time() + 3600) for m in metrics},
    }
    for name, values in nodes.items():
        make(cluster, name, values)
    client = cluster.client()
    for name in nodes:
        client.create(small_pod(f"on-{name}", namespace, node=name))
    with scheduler_with_shared_extender(
        request, node_cache_capable=node_cache_capable, extender_node_cache=node_cache_capable
    ):
        wait_until(
            lambda: outcome_of(client, namespace).bound == len(nodes), 120, "every pod bound"
        )
    outcome = outcome_of(client, namespace)
    assert outcome.placed == {name: 1 for name in nodes}, outcome.describe()
