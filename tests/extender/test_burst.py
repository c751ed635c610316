"""A burst of pods through the real HTTP path, under kube-scheduler's timing.

20 burstable pods (request 200m, limit 3 CPU) arrive at once. One 8-CPU node looks
coolest (0.15 CPU), the other 23 sit at 0.50. A small scheduler loop plays
kube-scheduler: for each pod it calls filter, then prioritize unless exactly one node
passed, adds the extender score (x 10, weight 1) to NodeResourcesFit's LeastAllocated
score over the requests it has itself assumed, breaks ties at random, and binds through
the fake API server's binding subresource. It starts the next pod right away, while the
extender's pod watch lags the bindings by ``WATCH_LAG_S``: the extender sees none of the
burst's bindings until it is over, as with a real kube-scheduler.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from typing import Any

import httpx
import pytest
from lightkube import AsyncClient

from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.kube.client import client_for_server
from app.kube.nodes import NodeCache
from app.kube.pods import PodCache, scheduled_pod
from app.objects.pods import ScheduledPod
from app.objects.resources import Resources
from app.policy import DEFAULT_POLICY_YAML, Policy, policy_from_yaml
from tests.extender.nodes import usage_annotations
from tests.extender.test_node_cache_mode import wait_for
from tests.support import http_client
from tests.support.asgi_server import serve
from tests.support.fakekube import PODS
from tests.support.fakekube_fixtures import FakeKube

WATCH_LAG_S = 1.0
NODES = 24
PODS_IN_BURST = 20
COOLEST = "node-00"
ALLOCATABLE = Resources(8.0, 32 * 2.0**30)
POD_CPU_REQUEST = 0.2


class LaggingPodCache(PodCache[ScheduledPod]):
    """A pod cache whose watch delivers every change ``lag_s`` late."""

    def __init__(self, client: AsyncClient, lag_s: float) -> None:
        super().__init__(client, scheduled_pod, retry_delay_s=0.05)
        self.lag_s = lag_s

    def apply(self, key: str, state: ScheduledPod | None) -> None:
        if not self.synced:
            super().apply(key, state)
            return
        asyncio.get_running_loop().call_later(self.lag_s, super().apply, key, state)


def estimation(enabled: bool) -> Policy:
    return policy_from_yaml(DEFAULT_POLICY_YAML + f"  estimation: {{enabled: {enabled}}}\n")


def burst_pod(index: int) -> dict[str, Any]:
    resources = {
        "requests": {"cpu": "200m", "memory": "256Mi"},
        "limits": {"cpu": "3", "memory": "512Mi"},
    }
    return {
        "metadata": {"name": f"burst-{index:02d}", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "app", "resources": resources}]},
        "status": {"phase": "Pending"},
    }


@pytest.fixture
def cluster(fake_kube: FakeKube) -> FakeKube:
    for i in range(NODES):
        cpu = 0.15 if i == 0 else 0.50
        fake_kube.store.add_node(
            f"node-{i:02d}",
            annotations=usage_annotations(cpu, 0.30),
            allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"},
        )
    return fake_kube


def serve_extender(fake_kube: FakeKube, policy: Policy) -> Any:
    client = client_for_server(fake_kube.url)
    extender = Extender(
        policy,
        node_cache=NodeCache(client, retry_delay_s=0.05),
        pod_cache=LaggingPodCache(client, WATCH_LAG_S),
    )
    return extender, serve(ExtenderApp(extender))


def least_allocated(assumed_cpu: float) -> float:
    """NodeResourcesFit LeastAllocated over cpu and memory (memory requests are tiny)."""
    cpu_score = (ALLOCATABLE.cpu_cores - assumed_cpu) * 100 / ALLOCATABLE.cpu_cores
    return (cpu_score + 100.0) / 2


def schedule_burst(url: str, fake_kube: FakeKube, seed: int) -> Counter[str]:
    """Play kube-scheduler over the burst; return where the pods landed."""
    rng = random.Random(seed)
    pods = [fake_kube.store.add(PODS, burst_pod(i)) for i in range(PODS_IN_BURST)]
    names = [f"node-{i:02d}" for i in range(NODES)]
    assumed: Counter[str] = Counter()  # kube-scheduler's own cache of assumed pods
    api = fake_kube.http()
    with httpx.Client(base_url=url) as extender:
        for pod in pods:
            args = {"Pod": pod, "Nodes": None, "NodeNames": names}
            feasible = extender.post("/filter", json=args).json()["NodeNames"]
            if not feasible:
                continue  # unschedulable for now: kube-scheduler would retry later
            if len(feasible) == 1:
                chosen = feasible[0]  # kube-scheduler skips prioritize
            else:
                args["NodeNames"] = feasible
                scores = extender.post("/prioritize", json=args).json()
                totals = {
                    s["Host"]: s["Score"] * 10 + least_allocated(assumed[s["Host"]] * 0.2)
                    for s in scores
                }
                top = max(totals.values())
                chosen = rng.choice(sorted(n for n, t in totals.items() if t == top))
            assumed[chosen] += 1
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": pod["metadata"]["name"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": chosen},
            }
            path = f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}/binding"
            assert api.post(path, json=binding).status_code == 201
    return assumed


def sample(metrics: str, name: str, **labels: str) -> float:
    """One sample of the /metrics text (0 when the series is absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    match = re.search(rf"^{name}{{{wanted}}} (\S+)$", metrics, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def landed(fake_kube: FakeKube) -> Counter[str]:
    return Counter(p["spec"].get("nodeName") for p in fake_kube.store.pods())


@pytest.mark.parametrize("enabled", [True, False])
def test_burst_lands_at_most_two_pods_on_the_coolest_node_only_with_estimation(
    cluster: FakeKube, enabled: bool
) -> None:
    extender, server = serve_extender(cluster, estimation(enabled))
    with server as url:
        wait_for(lambda: http_client.get(f"{url}/readyz").status_code == 200)
        wait_for(lambda: len(extender.table) == NODES)
        placed = schedule_burst(url, cluster, seed=7)
        assert placed == landed(cluster)
        assert sum(placed.values()) == PODS_IN_BURST
        if enabled:
            assert placed[COOLEST] <= 2
            # The watch catches up: every reservation ends confirmed or moved.
            wait_for(lambda: extender.reserve is not None and extender.reserve.reservations == 0)
            # No node takes more than its limit plus one pod: 0.50 + 0.32 is over 0.65.
            assert all(count <= 1 for node, count in placed.items() if node != COOLEST)
            # Every pod was reserved where the answer put it on top, and went there,
            # though 23 nodes tie: the answer's top is unique.
            metrics = http_client.get(f"{url}/metrics").text
            made = sum(
                sample(metrics, "loadaware_extender_reservations_made_total", verb=verb)
                for verb in ("filter", "prioritize")
            )
            assert made == PODS_IN_BURST
            ended = "loadaware_extender_reservations_ended_total"
            assert sample(metrics, ended, result="confirmed") == PODS_IN_BURST
            # Now the bound pods count on the nodes they went to.
            view = http_client.get(f"{url}/debug/nodes/{COOLEST}").json()
            cpu = view["metrics"]["cpu_usage_avg_5m"]
            assert cpu["measured"] == 0.15
            assert cpu["estimated_addition"] == pytest.approx(0.31875 * placed[COOLEST], abs=1e-4)
            # Reserved here, then bound: "scored" (the estimate rests on its limit).
            assert [p["kind"] for p in view["estimate"]["pods"]] == ["scored"] * placed[COOLEST]
            other = next(n for n in placed if n != COOLEST)
            assert http_client.get(f"{url}/debug/nodes/{other}").json()["verdict"] == "overloaded"
        else:
            assert placed[COOLEST] >= PODS_IN_BURST // 2
