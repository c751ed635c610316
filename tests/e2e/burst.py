"""A burst of pods through a real kube-scheduler and the extender: setup and the checks
a user would make afterwards (where did the pods go, and why are the rest Pending?)."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import pytest
from lightkube import ALL_NS, Client
from lightkube.resources.core_v1 import Event, Node, Pod

from app.load.samples import format_usage
from app.policy import default_policy
from tests.e2e.harness import ControlPlane, Extender, pod_object, scheduler_config, wait_until

NODE_CPU = 8.0
CPU_LIMIT_PERCENT = 0.65  # crane's default for cpu_usage_avg_5m
# Burstable pods: request 100m, limit 4 CPU. The estimate is max(request, limit) x 0.85.
POD_REQUEST_CPU = "100m"
POD_LIMIT_CPU = "4"
POD_ESTIMATE = 4 * 0.85 / NODE_CPU  # 0.425 of a node
LOAD_REASON = "Load[cpu_usage_avg_5m] is too high"


def annotations_at(cpu: float, memory: float = 0.2) -> dict[str, str]:
    """Fresh annotations for every metric of crane's default policy."""
    now_s = time.time()
    return {
        metric: format_usage(cpu if metric.startswith("cpu") else memory, now_s)
        for metric in default_policy().metrics
    }


def node_capacity(cpu: float) -> int:
    """How many burst pods a node at ``cpu`` takes: it passes filter while its estimated
    usage is within the limit, and each pod adds POD_ESTIMATE."""
    placed = 0
    while cpu + placed * POD_ESTIMATE <= CPU_LIMIT_PERCENT:
        placed += 1
    return placed


def make_nodes(cluster: ControlPlane, usage: Mapping[str, float]) -> None:
    for name, cpu in usage.items():
        cluster.make_node(
            name,
            cpu=str(int(NODE_CPU)),
            memory="32Gi",
            annotations=annotations_at(cpu),
            labels={"kubernetes.io/hostname": name},
        )


def burst_pod(name: str, namespace: str, node_selector: Mapping[str, str] | None = None) -> Pod:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "example.invalid/app",
                "resources": {
                    "requests": {"cpu": POD_REQUEST_CPU, "memory": "64Mi"},
                    "limits": {"cpu": POD_LIMIT_CPU, "memory": "64Mi"},
                },
            }
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return pod_object({"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def extender_entry(url: str, *, node_cache_capable: bool, weight: int = 8) -> dict[str, Any]:
    """The extenders[] entry of scheduler-config/kube-scheduler-config.yaml, pointed at ``url``."""
    return {
        "urlPrefix": url,
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": weight,
        "nodeCacheCapable": node_cache_capable,
        "enableHTTPS": False,
        "httpTimeout": "1s",
        "ignorable": True,
    }


@dataclass
class Outcome:
    """Where a burst ended: pods per node, and the Pending pods' last FailedScheduling."""

    placed: Counter[str] = field(default_factory=Counter)
    pending: dict[str, str] = field(default_factory=dict)  # pod -> its last message, or ""

    @property
    def bound(self) -> int:
        return sum(self.placed.values())

    def describe(self) -> str:
        return f"placed={dict(sorted(self.placed.items()))} pending={self.pending}"


def outcome_of(client: Client, namespace: str) -> Outcome:
    outcome = Outcome()
    messages: dict[str, tuple[str, str]] = {}
    for event in client.list(Event, namespace=namespace):
        if event.reason != "FailedScheduling" or event.involvedObject.name is None:
            continue
        stamp = str(event.lastTimestamp or event.eventTime or "")
        previous = messages.get(event.involvedObject.name)
        if previous is None or stamp >= previous[0]:
            messages[event.involvedObject.name] = (stamp, event.message or "")
    for pod in client.list(Pod, namespace=namespace):
        name = pod.metadata.name if pod.metadata else None
        if name is None:
            continue
        node = pod.spec.nodeName if pod.spec else None
        if node:
            outcome.placed[node] += 1
        else:
            outcome.pending[name] = messages.get(name, ("", ""))[1]
    return outcome


def settle(
    client: Client, namespace: str, expected_bound: int, pods: int, timeout_s: float = 180
) -> Outcome:
    """Wait until ``expected_bound`` pods are bound and every other one has been reported
    unschedulable; then wait a little longer for anything that would still bind."""

    def settled() -> Outcome | None:
        outcome = outcome_of(client, namespace)
        if outcome.bound + len(outcome.pending) != pods:
            return None
        if outcome.bound < expected_bound or any(not m for m in outcome.pending.values()):
            return None
        return outcome

    try:
        wait_until(settled, timeout_s, f"{expected_bound} of {pods} pods bound, the rest reported")
    except AssertionError as error:
        raise AssertionError(f"{error}: {outcome_of(client, namespace).describe()}") from None
    # A pod placed beyond what fits would bind within a few scheduling attempts.
    quiet_until = time.monotonic() + 5.0
    with contextlib.suppress(AssertionError):
        wait_until(
            lambda: (
                time.monotonic() >= quiet_until
                or outcome_of(client, namespace).bound > expected_bound
            ),
            10,
            "a quiet period",
        )
    return outcome_of(client, namespace)


@contextlib.contextmanager
def loadaware_scheduler(
    cluster: ControlPlane, *, node_cache_capable: bool, extender_args: Sequence[str] = ()
) -> Iterator[tuple[Extender, Any]]:
    """The extender (with its caches synced), then a kube-scheduler that calls it."""
    with cluster.extender(*extender_args) as extender:
        config = scheduler_config(
            [extender_entry(extender.url, node_cache_capable=node_cache_capable)]
        )
        with cluster.scheduler(config) as scheduler:
            yield extender, scheduler


def shared_extender(request: pytest.FixtureRequest, *, node_cache: bool) -> Extender:
    """The shared extender with its node cache on or off (tests/e2e/conftest.py),
    caught up with the cluster as the test made it (wait_caught_up)."""
    name = "extender_with_node_cache" if node_cache else "extender_without_node_cache"
    extender = cast(Extender, request.getfixturevalue(name))
    cluster = cast(ControlPlane, request.getfixturevalue("cluster"))
    wait_caught_up(cluster, extender, node_cache=node_cache)
    return extender


def wait_caught_up(cluster: ControlPlane, extender: Extender, *, node_cache: bool) -> None:
    """Wait until an extender that ran through earlier tests holds this test's cluster
    and nothing of theirs: no estimate of a pod the API server no longer has (the wipe
    deleted the earlier tests' pods, and the pod watch tells the extender; namespaces
    are never reused), and, with its node cache, exactly the Nodes the API server has,
    each with the annotations it has now (an earlier test's Nodes had the same names
    and other loads). Without its node cache the extender reads each Node from
    kube-scheduler's request. Needs --debug-endpoints."""
    client = cluster.client()

    def caught_up() -> bool:
        with httpx.Client(base_url=extender.url, timeout=5) as http:
            estimated = http.get("/debug/estimates", params={"limit": 1000}).json()["pods"]
            views = (
                http.get("/debug/nodes", params={"limit": 1000}).json()["nodes"]
                if node_cache
                else []
            )
        if estimated:  # rarely: most tests reach the extender before their pods bind
            pods = {
                f"{pod.metadata.namespace}/{pod.metadata.name}"
                for pod in client.list(Pod, namespace=ALL_NS)
                if pod.metadata is not None
            }
            if any(estimate["pod"] not in pods for estimate in estimated):
                return False
        if not node_cache:
            return True
        have = {
            view["name"]: {metric: m["raw"] for metric, m in view["metrics"].items()}
            for view in views
        }
        want = {
            node.metadata.name: node.metadata.annotations or {}
            for node in client.list(Node)
            if node.metadata is not None and node.metadata.name
        }
        return have.keys() == want.keys() and all(
            raw == want[name].get(metric)
            for name, raws in have.items()
            for metric, raw in raws.items()
        )

    wait_until(caught_up, 30, "the shared extender to catch up with the test's cluster")


@contextlib.contextmanager
def scheduler_with_shared_extender(
    request: pytest.FixtureRequest, *, node_cache_capable: bool, extender_node_cache: bool = True
) -> Iterator[Any]:
    """loadaware_scheduler for a test that needs no fresh extender: the shared extender
    (its node cache on unless ``extender_node_cache`` is False), caught up with the
    cluster the test made, then a kube-scheduler that calls it, sending node names
    (``node_cache_capable``) or whole Nodes."""
    extender = shared_extender(request, node_cache=extender_node_cache)
    cluster = cast(ControlPlane, request.getfixturevalue("cluster"))
    config = scheduler_config([extender_entry(extender.url, node_cache_capable=node_cache_capable)])
    with cluster.scheduler(config) as scheduler:
        yield scheduler


def check_burst(outcome: Outcome, usage: Mapping[str, float], pods: int) -> None:
    """What the issue asks of every burst shape."""
    coolest = min(usage, key=lambda name: usage[name])
    assert outcome.placed[coolest] <= 2, outcome.describe()
    for node, placed in outcome.placed.items():
        ended = usage[node] + placed * POD_ESTIMATE
        assert ended <= CPU_LIMIT_PERCENT + POD_ESTIMATE + 1e-9, (
            f"{node} ends at an estimated {ended:.3f} CPU: {outcome.describe()}"
        )
    fit = sum(min(node_capacity(cpu), pods) for cpu in usage.values())
    assert outcome.bound == min(fit, pods), outcome.describe()
    for pod, message in outcome.pending.items():
        assert LOAD_REASON in message, f"{pod}: {message!r}"
