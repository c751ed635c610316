"""Node pools on a real control plane (issue 45): a GPU-like pool with strict limits and
a general pool with loose ones, in the policy (the extender's filter) and in the
descheduler's configuration (its thresholds).

* The extender, run with the pools policy, sends pods past a GPU node whose CPU is
  under the policy's own limit but over its pool's, onto a general node over the
  policy's own limit but under its pool's; a relabelled node moves to its new pool.
  Both of kube-scheduler's modes: the node names (the extender reads the labels from
  its node watch) and full Nodes (from the request).
* A pod whose own estimate would take a GPU node past its pool's limit is refused the
  node, where a smaller pod is not.
* The descheduler, with the pools configuration, takes a pod off a GPU node hot for
  its pool (not for the configuration's own thresholds), to a general node; the
  replacement, placed by the real kube-scheduler calling the extender, lands there too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from lightkube import Client
from lightkube.resources.core_v1 import Node, Pod

from app.descheduler.descheduler import RunResult
from app.load.samples import format_usage
from app.policy import DEFAULT_POLICY_YAML, Policy, policy_from_mapping
from app.rebalance import NodeKind
from app.rebalance.config import config_from_mapping
from tests.e2e.burst import extender_entry, loadaware_scheduler, outcome_of
from tests.e2e.descheduler import deployment, descheduler_allowed, run_once
from tests.e2e.harness import ControlPlane, pod_object, scheduler_config, wait_until
from tests.support.cadvisor import PodSeries, cadvisor_prometheus

GPU = {"example.com/pool": "gpu"}
GENERAL = {"example.com/pool": "general"}
POD_CORES = 0.3  # each pod's measured usage: 7.5 % of a 4-core node


def pools_document() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)
    document["spec"]["nodePools"] = [
        {
            "name": "gpu",
            "nodeSelector": {"matchLabels": GPU},
            "predicate": [
                {"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.4},
                {"name": "cpu_usage_max_avg_1h", "maxLimitPercent": 0.5},
            ],
        },
        {
            "name": "general",
            "nodeSelector": {
                "matchExpressions": [
                    {"key": "example.com/pool", "operator": "In", "values": ["general"]}
                ]
            },
            "predicate": [
                {"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.9},
                {"name": "cpu_usage_max_avg_1h", "maxLimitPercent": 0.95},
            ],
        },
    ]
    return document


def pools_policy() -> Policy:
    return policy_from_mapping(pools_document(), "node-pools policy")


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(pools_document()))
    return path


def usage_at(cpu: float, memory: float = 0.2) -> dict[str, str]:
    now_s = time.time()
    return {
        metric: format_usage(cpu if metric.startswith("cpu") else memory, now_s)
        for metric in pools_policy().metrics
    }


def small_pod(name: str, namespace: str) -> Pod:
    spec: dict[str, object] = {"containers": [{"name": "c", "image": "example.invalid/app"}]}
    return pod_object({"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def pool_of(url: str, node: str) -> str | None:
    """The node pool the extender's /debug/nodes/NODE says the node is in."""
    with httpx.Client(base_url=url, timeout=5) as http:
        answer = http.get(f"/debug/nodes/{node}")
    return answer.json().get("pool") if answer.status_code == 200 else None


@pytest.mark.parametrize("node_cache", [True, False], ids=["node-names", "full-nodes"])
def test_the_extender_judges_each_node_by_its_pool_s_limits(
    cluster: ControlPlane, namespace: str, policy_file: Path, node_cache: bool
) -> None:
    # gpu-1 at 50 %: under the policy's own 0.65, over its pool's 0.4.
    # general-1 at 80 %: over the policy's own 0.65, under its pool's 0.9.
    cluster.make_node("gpu-1", annotations=usage_at(0.5), labels=GPU)
    cluster.make_node("general-1", annotations=usage_at(0.8), labels=GENERAL)
    client = cluster.client()
    args: tuple[str, ...] = ("--policy", str(policy_file), "--debug-endpoints")
    if not node_cache:
        args = (*args, "--no-node-cache")
    with cluster.extender(*args) as extender:
        config = scheduler_config([extender_entry(extender.url, node_cache_capable=node_cache)])
        with cluster.scheduler(config):
            for i in range(3):
                client.create(small_pod(f"p-{i}", namespace))
            wait_until(lambda: outcome_of(client, namespace).bound == 3, 120, "3 pods bound")
        assert outcome_of(client, namespace).placed == {"general-1": 3}
        # Relabelled, general-1 is in the GPU pool: at 80 % it is over 0.4, and so is
        # every node now; the next pod waits, with the pool's limit as the reason. With
        # its node cache the extender learns it from the node watch alone; without, from
        # the Nodes in kube-scheduler's next request (a new kube-scheduler: its cache
        # has the new labels for sure).
        client.patch(Node, "general-1", {"metadata": {"labels": GPU}})
        if node_cache:
            wait_until(lambda: pool_of(extender.url, "general-1") == "gpu", 60, "the relabel")
        with cluster.scheduler(config):
            client.create(small_pod("waits", namespace))
            wait_until(
                lambda: outcome_of(client, namespace).pending.get("waits"), 120, "FailedScheduling"
            )
    message = outcome_of(client, namespace).pending["waits"]
    assert "Load[cpu_usage_avg_5m] is too high (> 0.4)" in message, message
    assert "2 Load[cpu_usage_avg_5m] is too high (> 0.4)" in message, message


def limited_pod(name: str, namespace: str, cpu_limit: str) -> Pod:
    resources = {"requests": {"cpu": "100m"}, "limits": {"cpu": cpu_limit}}
    container = {"name": "c", "image": "example.invalid/app", "resources": resources}
    spec: dict[str, object] = {"containers": [container]}
    return pod_object({"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def test_a_pod_that_would_take_a_pool_s_node_past_its_limit_is_refused(
    cluster: ControlPlane, namespace: str, policy_file: Path
) -> None:
    """A node in a pool passes a pod only where the pod's own estimate fits under the
    pool's limits: gpu-1 at 30 % of 8 cores, under its pool's 0.4, has room for a pod
    limited to 0.5 CPU (estimated at 0.85 x 0.5 cores: 5 % of the node), not for one
    limited to 2 CPU (21 %): that one waits, with the pool's room as the reason. (The
    estimate needs the node cache: with --no-node-cache there is none, and a pool's node
    is judged by its usage before the pod, as without pools.)"""
    cluster.make_node("gpu-1", annotations=usage_at(0.3), labels=GPU)
    client = cluster.client()
    args = ("--policy", str(policy_file), "--debug-endpoints")
    with cluster.extender(*args) as extender:
        config = scheduler_config([extender_entry(extender.url, node_cache_capable=True)])
        with cluster.scheduler(config):
            client.create(limited_pod("big", namespace, "2"))
            wait_until(
                lambda: outcome_of(client, namespace).pending.get("big"), 120, "FailedScheduling"
            )
            client.create(limited_pod("small", namespace, "500m"))
            wait_until(lambda: outcome_of(client, namespace).bound == 1, 120, "small bound")
        outcome = outcome_of(client, namespace)
    assert outcome.placed == {"gpu-1": 1}, outcome.describe()
    message = outcome.pending["big"]
    assert "no room for the pod's estimated usage under its node pool's limits" in message


@pytest.fixture
def descheduler_state(cluster: ControlPlane) -> Iterator[None]:
    with descheduler_allowed(cluster):
        yield


def live_pods(client: Client, namespace: str) -> dict[str, str | None]:
    return {
        pod.metadata.name or "": pod.spec.nodeName if pod.spec else None
        for pod in client.list(Pod, namespace=namespace)
        if pod.metadata is not None and pod.metadata.deletionTimestamp is None
    }


def usage_series(client: Client, namespace: str) -> list[PodSeries]:
    return [
        PodSeries(namespace, name, {"app": (POD_CORES, 100 * 2**20)}, node=node)
        for name, node in live_pods(client, namespace).items()
        if node is not None
    ]


POOLS_CONFIG = {
    "consecutiveHotRounds": 1,
    "evictionsPerSecond": 50,
    "nodePools": [
        {
            "name": "gpu",
            "nodeSelector": {"matchLabels": GPU},
            "thresholds": {"cpu": 20},
            "targetThresholds": {"cpu": 40},
        },
        {
            "name": "general",
            "nodeSelector": {"matchLabels": GENERAL},
            "thresholds": {"cpu": 60},
            "targetThresholds": {"cpu": 85},
        },
    ],
}


def test_the_descheduler_moves_pods_off_a_node_hot_for_its_pool(
    cluster: ControlPlane, namespace: str, descheduler_state: None, policy_file: Path
) -> None:
    # gpu-1 at 50 %: hot for its pool (above 40), not for the configuration's own 65.
    # general-1 at 45 %: a destination for its pool (at or below 60), not for the own 40.
    cluster.make_node("gpu-1", cpu="4", memory="16Gi", annotations=usage_at(0.5), labels=GPU)
    cluster.make_node(
        "general-1", cpu="4", memory="16Gi", annotations=usage_at(0.45), labels=GENERAL
    )
    client = cluster.client()
    # The Deployment is placed by a kube-scheduler without the extender while general-1
    # is cordoned, so all of it lands on gpu-1.
    client.patch(Node, "general-1", {"spec": {"unschedulable": True}})
    client.create(deployment(namespace, "web", 4))
    with cluster.scheduler(scheduler_config()):
        wait_until(lambda: outcome_of(client, namespace).bound == 4, 120, "4 web pods on gpu-1")
    client.patch(Node, "general-1", {"spec": {"unschedulable": False}})
    assert set(live_pods(client, namespace).values()) == {"gpu-1"}
    assert cluster.kubelet_mark_ready(namespace) == 4
    before = set(live_pods(client, namespace))

    with cadvisor_prometheus(usage_series(client, namespace)) as prometheus_url:
        # Without pools, 50 % is under 65 %: nothing moves.
        plain = run_once(
            cluster,
            prometheus_url,
            config_from_mapping({k: v for k, v in POOLS_CONFIG.items() if k != "nodePools"}),
            policy=pools_policy(),
        )
        assert plain.result is RunResult.OK, plain.message
        assert plain.plan is not None
        assert plain.evicted == [], plain.outcomes
        assert plain.plan.node_classes["gpu-1"].kind is NodeKind.NEUTRAL
        report = run_once(
            cluster, prometheus_url, config_from_mapping(POOLS_CONFIG), policy=pools_policy()
        )
    assert report.result is RunResult.OK, report.message
    assert report.plan is not None
    gpu = report.plan.node_classes["gpu-1"]
    assert gpu.kind is NodeKind.SOURCE
    assert gpu.high_fraction["cpu"] == pytest.approx(0.40)
    assert report.plan.node_classes["general-1"].kind is NodeKind.DESTINATION
    assert len(report.evicted) >= 1, report.outcomes
    assert {e.destination for e in report.plan.evictions} == {"general-1"}

    # The replacement, placed by kube-scheduler with the pools policy's extender: gpu-1
    # is still over its pool's 0.4, general-1 under its pool's 0.9.
    cluster.kubelet_reap(namespace)
    args = ("--policy", str(policy_file), "--debug-endpoints")
    with loadaware_scheduler(cluster, node_cache_capable=True, extender_args=args):
        wait_until(
            lambda: len(live_pods(client, namespace)) == 4
            and all(live_pods(client, namespace).values()),
            120,
            "the replacements bound",
        )
    after = live_pods(client, namespace)
    replacements = set(after) - before
    assert replacements, after
    assert {after[name] for name in replacements} == {"general-1"}, outcome_of(
        client, namespace
    ).describe()
