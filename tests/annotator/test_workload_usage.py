"""The annotator publishes each workload's observed per-pod usage: measured from a real
Prometheus holding cAdvisor series, grouped by the pods' controllers as the fake API
server lists them, written into one ConfigMap; a tenant's pods only ever set the entry
of a workload in their own namespace (docs/security.md)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from app.annotator.annotator import WorkloadUsageTarget
from app.annotator.workload_usage import per_workload, running_pods
from app.kube import WORKLOAD_USAGE_NAME
from app.kube.workload_usage import USAGE_KEY, decode
from app.objects import PodPlacement, Resources
from tests.annotator.helpers import annotator, eventually, policy, running
from tests.support.cadvisor import PodSeries, cadvisor_prometheus
from tests.support.fakekube import CONFIGMAPS
from tests.support.fakekube_fixtures import FakeKube

MIB = 2.0**20
NAMESPACE = "loadaware"
# shop's Deployment web (ReplicaSet web-7d9f, pod-template-hash 7d9f): three pods that
# request 100m and use 0.6-0.8 core; and a tenant, evil, whose three pods claim the
# same ReplicaSet as their controller and use 6 cores each.
PODS = (
    PodSeries("shop", "web-7d9f-a", {"app": (0.6, 300 * MIB)}, node="node-1"),
    PodSeries("shop", "web-7d9f-b", {"app": (0.7, 310 * MIB)}, node="node-2"),
    PodSeries("shop", "web-7d9f-c", {"app": (0.8, 320 * MIB)}, node="node-1"),
    PodSeries("evil", "web-7d9f-x", {"app": (6.0, 4096 * MIB)}, node="node-2"),
    PodSeries("evil", "web-7d9f-y", {"app": (6.0, 4096 * MIB)}, node="node-2"),
    PodSeries("evil", "web-7d9f-z", {"app": (6.0, 4096 * MIB)}, node="node-1"),
    PodSeries("batch", "solo", {"app": (3.0, 1024 * MIB)}, node="node-1"),  # no controller
)
# node-2's kubelet also claims shop's web-7d9f-a runs on it, at 9 cores (issue 28,
# attack 4): only node-1, where the pod runs, answers for it.
FORGED = (("forged_cpu_cores", {"namespace": "shop", "pod": "web-7d9f-a", "node": "node-2"}, "9"),)


@pytest.fixture(scope="module")
def cadvisor_url() -> Iterator[str]:
    with cadvisor_prometheus(PODS, raw_gauges=FORGED) as url:
        yield url


def add_pods(fake_kube: FakeKube) -> None:
    store = fake_kube.store
    store.add_node("node-1", internal_ip="10.0.0.1")
    store.add_node("node-2", internal_ip="10.0.0.2")
    for pod in PODS:
        owner = None if pod.pod == "solo" else ("ReplicaSet", "web-7d9f")
        store.add_pod(
            pod.pod,
            pod.namespace,
            node_name=pod.node,
            labels={"pod-template-hash": "7d9f"},
            owner=owner,
        )
    # Pending and finished pods of the workload are not measured.
    store.add_pod("web-7d9f-p", "shop", phase="Pending", owner=("ReplicaSet", "web-7d9f"))


def published(fake_kube: FakeKube) -> dict[str, list[float]] | None:
    stored = fake_kube.store.get(CONFIGMAPS, WORKLOAD_USAGE_NAME, NAMESPACE)
    if stored is None:
        return None
    document = json.loads(stored["data"][USAGE_KEY])
    workloads: dict[str, list[float]] = document["workloads"]
    return workloads


@pytest.mark.prometheus
def test_the_leader_publishes_one_pods_usage_per_workload_into_its_configmap(
    fake_kube: FakeKube, cadvisor_url: str
) -> None:
    add_pods(fake_kube)

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(
                fake_kube,
                client,
                cadvisor_url,
                the_policy=policy({"cpu_usage_avg_5m": "1h"}),
                workload_usage=WorkloadUsageTarget(NAMESPACE),
            )
            async with running(the_annotator):
                assert await eventually(
                    lambda: the_annotator.loops.workload_usage_rounds >= 1, 15.0
                )

    asyncio.run(scenario())
    workloads = published(fake_kube)
    assert workloads is not None
    # shop's three pods: the 90th percentile by nearest rank is the highest of three;
    # node-2's forged 9 cores for web-7d9f-a are not in it.
    web = workloads["shop/Deployment/web"]
    assert web[0] == pytest.approx(0.8, rel=0.02)
    assert web[1] == pytest.approx(320 * MIB, rel=0.02)
    # The tenant's pods claim shop's ReplicaSet, but name a workload of their own namespace.
    assert workloads["evil/Deployment/web"][0] == pytest.approx(6.0, rel=0.02)
    # Each entry says how many running pods it was measured on (the pending one is not).
    assert web[2] == 3
    assert workloads["evil/Deployment/web"][2] == 3
    assert set(workloads) == {"shop/Deployment/web", "evil/Deployment/web"}
    stored = fake_kube.store.get(CONFIGMAPS, WORKLOAD_USAGE_NAME, NAMESPACE)
    assert stored is not None
    usage, skipped = decode(stored["data"][USAGE_KEY], now_s=stored_time(stored))
    assert skipped == 0
    assert usage.observed("shop/Deployment/web") == Resources(web[0], web[1])


def stored_time(stored: dict[str, object]) -> float:
    data = stored["data"]
    assert isinstance(data, dict)
    return float(json.loads(data[USAGE_KEY])["publishedAt"])


def test_a_failed_query_writes_nothing_and_the_old_document_stays(fake_kube: FakeKube) -> None:
    """Prometheus unreachable: no ConfigMap is written (the extender's fallback takes
    over once the previous one is stale), the round is counted, the loop goes on."""
    add_pods(fake_kube)

    async def scenario() -> float:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(
                fake_kube,
                client,
                "http://127.0.0.1:9",  # nothing listens on the discard port
                query_timeout_s=0.5,
                the_policy=policy({"cpu_usage_avg_5m": "1h"}),
                workload_usage=WorkloadUsageTarget(NAMESPACE),
            )
            async with running(the_annotator):
                assert await eventually(
                    lambda: the_annotator.loops.workload_usage_rounds >= 1, 15.0
                )
            value = the_annotator.telemetry.registry.get_sample_value(
                "loadaware_annotator_workload_usage_rounds_total", {"result": "query_error"}
            )
            return -1.0 if value is None else value

    assert asyncio.run(scenario()) >= 1.0
    assert published(fake_kube) is None


def test_workloads_are_ordered_by_pods_and_a_pod_without_a_workload_is_left_out() -> None:
    pods = [
        PodPlacement("u1", "n1", pod="a/p1", workload="a/Deployment/x", running=True),
        PodPlacement("u2", "n1", pod="a/p2", workload="a/Deployment/y", running=True),
        PodPlacement("u3", "n2", pod="a/p3", workload="a/Deployment/y", running=True),
        PodPlacement("u7", "n2", pod="a/p7", workload="a/Deployment/y", running=True),
        PodPlacement("u4", "n2", pod="a/p4", workload=None, running=True),
        PodPlacement("u5", "n2", pod="a/p5", workload="a/Deployment/z", running=False),
        PodPlacement("u6", None, pod="a/p6", workload="a/Deployment/z", running=True),
    ]
    workload_of, node_names = running_pods(pods, {})
    assert workload_of == {
        "a/p1": "a/Deployment/x",
        "a/p2": "a/Deployment/y",
        "a/p3": "a/Deployment/y",
        "a/p7": "a/Deployment/y",
    }
    assert node_names["a/p3"] == ("n2",)
    usage = {
        "a/p1": Resources(1.0, 1.0),
        "a/p2": Resources(0.2, 2.0),
        "a/p3": Resources(0.4, 3.0),
        "a/p7": Resources(0.3, 1.0),
        "a/p4": Resources(9.0, 9.0),
    }
    # x, one pod measured, is its own word (fewer than MIN_MEASURED_PODS): left out.
    assert per_workload(usage, workload_of) == [("a/Deployment/y", Resources(0.4, 3.0), 3)]
