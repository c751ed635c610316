"""The annotator publishes each node's usage by class of pods: measured from a real
Prometheus holding cAdvisor series, classed by the pods' priority and labels as the fake
API server lists them, written onto each node as loadaware.io/class-usage.* annotations
the extender reads (docs/tuning.md, "Classes of pods")."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from app.annotator.class_usage import classed_pods
from app.load.samples import parse_usage
from app.objects import NodeInfo, PodPlacement, Resources
from app.policy import class_usage_key, policy_from_mapping
from tests.annotator.helpers import annotator, eventually, running
from tests.support.cadvisor import PodSeries, cadvisor_prometheus
from tests.support.fakekube import NODES
from tests.support.fakekube_fixtures import FakeKube

MIB = 2.0**20
GIB = 2.0**30
# node-1 (4 cores, 16Gi): two production pods using 1 and 0.6 core, one batch pod using 2,
# one pod in no class; node-2: one batch pod. node-2's kubelet also claims a production
# pod of node-1 at 3 cores: only node-1 answers for it.
PODS = (
    PodSeries("shop", "web-a", {"app": (1.0, 1 * GIB)}, node="node-1"),
    PodSeries("shop", "web-b", {"app": (0.6, 1 * GIB)}, node="node-1"),
    PodSeries("etl", "job-a", {"app": (2.0, 2 * GIB)}, node="node-1"),
    PodSeries("etl", "job-b", {"app": (1.0, 4 * GIB)}, node="node-2"),
    PodSeries("misc", "loose", {"app": (3.0, 1 * GIB)}, node="node-1"),
)
FORGED = (("forged_cpu_cores", {"namespace": "shop", "pod": "web-a", "node": "node-2"}, "3"),)
PRIORITY = {"web-a": 9500, "web-b": 9000, "job-a": 5500, "job-b": 5999, "loose": 7000}
POLICY = policy_from_mapping(
    {
        "spec": {
            "syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "1h"}],
            "classes": [
                {"name": "production", "minPriority": 9000, "maxPriority": 9999},
                {"name": "batch", "minPriority": 5000, "maxPriority": 5999},
            ],
        }
    }
)


@pytest.fixture(scope="module")
def cadvisor_url() -> Iterator[str]:
    with cadvisor_prometheus(PODS, raw_gauges=FORGED) as url:
        yield url


def annotations_of(node: dict[str, Any] | None) -> dict[str, str]:
    assert node is not None
    annotations: dict[str, str] = node["metadata"]["annotations"]
    return annotations


def value(annotations: dict[str, str], name: str, resource: str) -> float:
    sample = parse_usage(annotations[class_usage_key(name, resource)])
    assert sample is not None
    return sample.value


@pytest.mark.prometheus
def test_the_leader_writes_each_node_s_usage_by_class(
    fake_kube: FakeKube, cadvisor_url: str
) -> None:
    store = fake_kube.store
    store.add_node("node-1", internal_ip="10.0.0.1")
    store.add_node("node-2", internal_ip="10.0.0.2")
    for pod in PODS:
        store.add_pod(pod.pod, pod.namespace, node_name=pod.node, priority=PRIORITY[pod.pod])
    store.add_pod("web-p", "shop", phase="Pending", priority=9500)  # pending: not measured

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(fake_kube, client, cadvisor_url, the_policy=POLICY)
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.class_usage.rounds >= 1, 15.0)
            ok = the_annotator.telemetry.registry.get_sample_value(
                "loadaware_annotator_class_usage_rounds_total", {"result": "ok"}
            )
            assert ok is not None
            assert ok >= 1

    asyncio.run(scenario())
    one, two = (annotations_of(store.get(NODES, name)) for name in ("node-1", "node-2"))
    assert value(one, "production", "cpu") == pytest.approx(1.6 / 4, rel=0.02)  # not forged
    assert value(one, "production", "memory") == pytest.approx(2 / 16, rel=0.02)
    assert value(one, "batch", "cpu") == pytest.approx(2.0 / 4, rel=0.02)
    assert value(two, "batch", "memory") == pytest.approx(4 / 16, rel=0.02)
    assert value(two, "production", "cpu") == 0.0  # a class without a pod there: 0
    # At most two keys per class; the pod in no class counts for none.
    assert sum(key.startswith("loadaware.io/class-usage.") for key in one) == 4


def test_a_policy_without_classes_publishes_nothing(fake_kube: FakeKube) -> None:
    from tests.annotator.helpers import policy

    async def scenario() -> int | None:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(fake_kube, client, "http://127.0.0.1:9", the_policy=policy())
            return await the_annotator.class_usage.publish(the_annotator.policy, [], {})

    assert asyncio.run(scenario()) is None


def test_only_running_pods_with_a_node_and_a_class_are_measured() -> None:
    nodes = {"n1": NodeInfo("n1", {}, "10.0.0.1", allocatable=Resources(4, 16 * GIB))}
    pods = [
        PodPlacement("1", "n1", pod="a/web", running=True, priority=9500),
        PodPlacement("2", "n1", pod="a/job", running=True, priority=5000),
        PodPlacement("3", "n1", pod="a/odd", running=True, priority=7000),  # no class
        PodPlacement("4", None, pod="a/new", running=False, priority=9500),
        PodPlacement("5", "n1", pod="a/done", running=False, priority=9500),
        PodPlacement("6", "n1", pod="a/none", running=True),  # no priority: no class
    ]
    class_of, node_of, names = classed_pods(pods, nodes, POLICY)
    assert class_of == {"a/web": "production", "a/job": "batch"}
    assert node_of == {"a/web": "n1", "a/job": "n1"}
    assert names["a/web"] == ("n1", "10.0.0.1")


def test_a_failed_query_writes_nothing_and_is_counted(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("node-1", internal_ip="10.0.0.1")
    fake_kube.store.add_pod("web-a", "shop", node_name="node-1", priority=9500)

    async def scenario() -> float:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(
                fake_kube, client, "http://127.0.0.1:9", query_timeout_s=0.5, the_policy=POLICY
            )
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.class_usage.rounds >= 1, 15.0)
            value = the_annotator.telemetry.registry.get_sample_value(
                "loadaware_annotator_class_usage_rounds_total", {"result": "query_error"}
            )
            return -1.0 if value is None else value

    assert asyncio.run(scenario()) >= 1.0
    written = annotations_of(fake_kube.store.get(NODES, "node-1"))
    assert not any(key.startswith("loadaware.io/class-usage.") for key in written)
