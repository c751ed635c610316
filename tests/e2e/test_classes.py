"""Classes of pods on a real control plane (issue 45): production and batch, named by
the PriorityClasses the API server resolves into each pod's ``spec.priority``.

* The extender, run with a classed policy and called by the real kube-scheduler, refuses
  a production pod a node whose production usage (the annotator's per-class annotation,
  set here as the annotator writes it) is over production's own limit, and places a
  batch pod there: the node's own usage is under every limit batch is held to. Both of
  kube-scheduler's modes: node names (the extender reads the annotations from its node
  watch) and full Nodes (from the request, ``--no-node-cache``).
* The descheduler, with the same policy, takes batch pods, and only batch pods, off a
  node whose usage is over production's limit while production runs there, though the
  node is under the configuration's own ``targetThresholds``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.scheduling_v1 import PriorityClass

from app.descheduler.descheduler import RunResult
from app.load.samples import format_usage
from app.policy import DEFAULT_POLICY_YAML, Policy, class_usage_key, policy_from_mapping
from app.rebalance import NodeKind
from app.rebalance.config import config_from_mapping
from tests.e2e.burst import extender_entry, outcome_of
from tests.e2e.descheduler import deployment, descheduler_allowed, run_once
from tests.e2e.harness import ControlPlane, pod_object, scheduler_config, wait_until
from tests.support.cadvisor import PodSeries, cadvisor_prometheus

PRODUCTION_PRIORITY = 9500
BATCH_PRIORITY = 5500


def classes_document() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)
    document["spec"]["classes"] = [
        {
            "name": "production",
            "minPriority": 9000,
            "maxPriority": 9999,
            "predicate": [
                {"name": "production:cpu_usage", "maxLimitPercent": 0.45},
                {"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.55},
            ],
        },
        {
            "name": "batch",
            "minPriority": 5000,
            "maxPriority": 5999,
            "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.9}],
        },
    ]
    return document


def classes_policy() -> Policy:
    return policy_from_mapping(classes_document(), "classes policy")


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(classes_document()))
    return path


@dataclass(frozen=True)
class Priorities:
    production: str  # the PriorityClass names
    batch: str


@pytest.fixture
def priorities(cluster: ControlPlane) -> Iterator[Priorities]:
    """Two PriorityClasses (cluster-scoped: the wipe leaves them), deleted afterwards."""
    suffix = secrets.token_hex(3)
    made = Priorities(f"e2e-production-{suffix}", f"e2e-batch-{suffix}")
    client = cluster.client()
    for name, value in ((made.production, PRODUCTION_PRIORITY), (made.batch, BATCH_PRIORITY)):
        client.create(PriorityClass(metadata=ObjectMeta(name=name), value=value))
    try:
        yield made
    finally:
        for name in (made.production, made.batch):
            client.delete(PriorityClass, name)


def node_annotations(cpu: float, production_cpu: float, batch_cpu: float) -> dict[str, str]:
    """The node's usage for every metric the policy syncs, and its usage by class, as
    the annotator writes them."""
    now_s = time.time()
    annotations = {
        metric: format_usage(cpu if metric.startswith("cpu") else 0.2, now_s)
        for metric in classes_policy().metrics
    }
    for name, used in (("production", production_cpu), ("batch", batch_cpu)):
        annotations[class_usage_key(name, "cpu")] = format_usage(used, now_s)
        annotations[class_usage_key(name, "memory")] = format_usage(0.05, now_s)
    return annotations


def classed_pod(name: str, namespace: str, priority_class: str, node: str | None = None) -> Pod:
    container = {
        "name": "c",
        "image": "example.invalid/app",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }
    spec: dict[str, object] = {"containers": [container], "priorityClassName": priority_class}
    if node is not None:  # kube-scheduler offers the extender this node alone
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod_object({"metadata": {"name": name, "namespace": namespace}, "spec": spec})


@pytest.mark.parametrize("node_cache", [True, False], ids=["node-names", "full-nodes"])
def test_a_node_hot_for_production_refuses_production_and_takes_batch(
    cluster: ControlPlane,
    namespace: str,
    policy_file: Path,
    priorities: Priorities,
    node_cache: bool,
) -> None:
    # shared-1: the node at 50 % (under production's 0.55 on the node, batch's 0.9),
    # production's own pods at 50 % (over production's 0.45 on its own usage); quiet-1
    # has room under both. Where no node passes production under its own limit, the
    # limit yields (tests/extender/test_classes.py): here quiet-1 does, so it is kept.
    for name, usage in (("shared-1", (0.5, 0.5, 0.0)), ("quiet-1", (0.2, 0.05, 0.0))):
        hostname = {"kubernetes.io/hostname": name}
        cluster.make_node(name, annotations=node_annotations(*usage), labels=hostname)
    client = cluster.client()
    args: tuple[str, ...] = ("--policy", str(policy_file))
    if not node_cache:
        args = (*args, "--no-node-cache")
    with cluster.extender(*args) as extender:
        config = scheduler_config([extender_entry(extender.url, node_cache_capable=node_cache)])
        with cluster.scheduler(config):
            for index in range(3):
                client.create(classed_pod(f"web-{index}", namespace, priorities.production))
            client.create(classed_pod("job", namespace, priorities.batch, node="shared-1"))
            wait_until(lambda: outcome_of(client, namespace).bound == 4, 120, "every pod bound")
        outcome = outcome_of(client, namespace)
    web = client.get(Pod, "web-0", namespace=namespace)
    assert web.spec is not None
    assert web.spec.priority == PRODUCTION_PRIORITY  # the Priority admission's
    assert outcome.placed == {"quiet-1": 3, "shared-1": 1}, outcome.describe()
    assert live_pods(client, namespace)["job"] == "shared-1"


def live_pods(client: Client, namespace: str) -> dict[str, str | None]:
    return {
        pod.metadata.name or "": pod.spec.nodeName if pod.spec else None
        for pod in client.list(Pod, namespace=namespace)
        if pod.metadata is not None and pod.metadata.deletionTimestamp is None
    }


@pytest.fixture
def descheduler_state(cluster: ControlPlane) -> Iterator[None]:
    with descheduler_allowed(cluster):
        yield


def test_the_descheduler_moves_batch_off_a_node_where_production_is_hot(
    cluster: ControlPlane, namespace: str, descheduler_state: None, priorities: Priorities
) -> None:
    # mixed-1 at 60 % of 4 cores: over production's 0.55 with production running there,
    # under the configuration's own targetThresholds (65 %). cool-1 at 10 %.
    cluster.make_node(
        "mixed-1", cpu="4", memory="16Gi", annotations=node_annotations(0.6, 0.3, 0.3)
    )
    cluster.make_node("cool-1", cpu="4", memory="16Gi", annotations=node_annotations(0.1, 0, 0))
    client = cluster.client()
    # Placed by a kube-scheduler without the extender while cool-1 is cordoned: all of
    # it lands on mixed-1.
    client.patch(Node, "cool-1", {"spec": {"unschedulable": True}})
    client.create(deployment(namespace, "web", 1, priorityClassName=priorities.production))
    client.create(deployment(namespace, "jobs", 2, priorityClassName=priorities.batch))
    with cluster.scheduler(scheduler_config()):
        wait_until(lambda: outcome_of(client, namespace).bound == 3, 120, "3 pods on mixed-1")
    client.patch(Node, "cool-1", {"spec": {"unschedulable": False}})
    assert set(live_pods(client, namespace).values()) == {"mixed-1"}
    assert cluster.kubelet_mark_ready(namespace) == 3
    # What each pod uses: web 1.2 cores (30 %), each job 0.6 (15 %): 60 % in all.
    series = [
        PodSeries(
            namespace,
            name,
            {"app": (1.2 if name.startswith("web") else 0.6, 100 * 2**20)},
            node="mixed-1",
        )
        for name in live_pods(client, namespace)
    ]
    with cadvisor_prometheus(series) as prometheus_url:
        config = config_from_mapping({"consecutiveHotRounds": 1, "evictionsPerSecond": 50})
        report = run_once(cluster, prometheus_url, config, policy=classes_policy())
    assert report.result is RunResult.OK, report.message
    assert report.plan is not None
    mixed = report.plan.node_classes["mixed-1"]
    assert mixed.kind is NodeKind.SOURCE, mixed.reason
    assert "class production is hot" in mixed.reason
    assert report.evicted, report.outcomes
    moved = {e.pod.name for e in report.plan.evictions}
    # 60 % -> under 55 %: one job of 15 % is enough; the production pod stays.
    assert len(moved) == 1, moved
    assert all(name.startswith("jobs-") for name in moved), moved
    assert {e.destination for e in report.plan.evictions} == {"cool-1"}
