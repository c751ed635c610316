"""Per-pod usage against a real Prometheus holding generated cAdvisor series."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from app.objects.nodes import NodeInfo
from app.objects.pods import PodInfo
from app.objects.resources import Resources
from app.prom.client import PrometheusSource
from app.prom.pod_usage import (
    PodNodes,
    PodUsage,
    PodUsageQueries,
    PodUsageUnavailable,
    pod_nodes,
    read_pod_usage,
)
from app.prom.settings import PrometheusSettings
from app.rebalance.config import DEFAULT_CPU_QUERY, DEFAULT_MEMORY_QUERY
from tests.support.cadvisor import PodSeries, cadvisor_prometheus
from tests.support.ports import free_port

MIB = 2.0**20

PODS = (
    PodSeries("shop", "web-1", {"app": (0.5, 300 * MIB), "sidecar": (0.1, 50 * MIB)}),
    PodSeries("shop", "web-2", {"app": (1.25, 700 * MIB)}, pause_container=False),
    PodSeries("batch", "job-1", {"worker": (2.0, 2048 * MIB)}, node="node-2"),
)
ON_1 = {"node": "node-1"}
GARBAGE = (
    ("pod_cpu_cores", {"namespace": "shop", "pod": "nan-pod", **ON_1}, "NaN"),
    ("pod_cpu_cores", {"namespace": "shop", "pod": "negative-pod", **ON_1}, "-0.5"),
    ("pod_cpu_cores", {"namespace": "shop", "pod": "fine-pod", **ON_1}, "0.25"),
    ("pod_cpu_cores", {"namespace": "shop", **ON_1}, "0.3"),  # no pod label
    ("pod_memory_bytes", {"namespace": "shop", "pod": "nan-pod", **ON_1}, "1e6"),
    ("pod_memory_bytes", {"namespace": "shop", "pod": "negative-pod", **ON_1}, "1e6"),
    ("pod_memory_bytes", {"namespace": "shop", "pod": "fine-pod", **ON_1}, "2e6"),
    ("pod_memory_bytes", {"namespace": "shop", "pod": "memory-only", **ON_1}, "3e6"),
    # Issue 28, attack 4: node-2's kubelet publishes a series for a pod on node-1, and
    # node-1's own series for it names its node only by instance (InternalIP:port).
    ("forged_cpu_cores", {"namespace": "shop", "pod": "victim", "node": "node-2"}, "7"),
    ("forged_cpu_cores", {"namespace": "shop", "pod": "victim",
                          "instance": "10.0.0.1:10250"}, "0.5"),
    ("forged_cpu_cores", {"namespace": "shop", "pod": "victim"}, "3"),  # names no node
    ("forged_memory_bytes", {"namespace": "shop", "pod": "victim", "node": "node-2"}, "9e9"),
    ("forged_memory_bytes", {"namespace": "shop", "pod": "victim", "node": "node-1"}, "1e8"),
)
# Where each pod runs: its node's name and InternalIP (pod_nodes builds this from the caches).
PLACED = {
    **{f"{p.namespace}/{p.pod}": (p.node, f"10.0.0.{p.node[-1]}") for p in PODS},
    **{f"shop/{name}": ("node-1", "10.0.0.1")
       for name in ("nan-pod", "negative-pod", "fine-pod", "memory-only", "victim")},
}


@pytest.fixture(scope="module")
def cadvisor_url() -> Iterator[str]:
    with cadvisor_prometheus(PODS, raw_gauges=GARBAGE) as url:
        yield url


DEFAULT_QUERIES = PodUsageQueries(DEFAULT_CPU_QUERY, DEFAULT_MEMORY_QUERY)


def _read(url: str, queries: PodUsageQueries = DEFAULT_QUERIES,
          placed: PodNodes = PLACED) -> PodUsage:
    source = PrometheusSource(PrometheusSettings(url=url, timeout_s=10.0))
    try:
        return asyncio.run(read_pod_usage(source, queries, placed))
    finally:
        source.close()


@pytest.mark.prometheus
def test_default_queries_give_each_pods_container_sum_without_double_counting(
    cadvisor_url: str,
) -> None:
    result = _read(cadvisor_url)
    assert set(result.usage) == {f"{p.namespace}/{p.pod}" for p in PODS}
    for pod in PODS:
        usage = result.usage[f"{pod.namespace}/{pod.pod}"]
        # The pod cgroup (container="") and the pause container (container="POD") are
        # there too; counting them would give about twice these values.
        assert usage.cpu_cores == pytest.approx(pod.cpu_cores, rel=1e-6)
        assert usage.memory_bytes == pytest.approx(pod.memory_bytes, rel=1e-9)
    assert result.dropped_total == 0
    assert result.newest_sample_s is not None


@pytest.mark.prometheus
def test_a_query_that_sums_every_series_would_double_count(cadvisor_url: str) -> None:
    naive = PodUsageQueries(
        cpu="sum by (namespace, pod, node) (rate(container_cpu_usage_seconds_total[5m]))",
        memory="sum by (namespace, pod, node) (container_memory_working_set_bytes)",
    )
    usage = _read(cadvisor_url, naive).usage["shop/web-1"]
    assert usage.cpu_cores > 1.9 * PODS[0].cpu_cores
    assert usage.memory_bytes > 1.9 * PODS[0].memory_bytes


@pytest.mark.prometheus
def test_nan_negative_and_unlabelled_samples_are_dropped_and_counted(cadvisor_url: str) -> None:
    result = _read(cadvisor_url, PodUsageQueries(cpu="pod_cpu_cores", memory="pod_memory_bytes"))
    assert set(result.usage) == {"shop/fine-pod"}
    assert result.usage["shop/fine-pod"].cpu_cores == pytest.approx(0.25)
    assert result.usage["shop/fine-pod"].memory_bytes == pytest.approx(2e6)
    assert result.dropped == {"cpu:nan": 1, "cpu:negative": 1, "cpu:no_pod_labels": 1}
    # nan-pod, negative-pod (memory only once their CPU is dropped) and memory-only.
    assert result.partial == 3


@pytest.mark.prometheus
def test_a_pods_usage_counts_only_from_the_node_it_runs_on(cadvisor_url: str) -> None:
    """Issue 28, attack 4: a kubelet exports what it likes, so another node's series for
    a pod, or one that names no node, must not count; the pod's own node's does, whether
    it names the node by the node label or by its instance address."""
    result = _read(cadvisor_url, PodUsageQueries(cpu="forged_cpu_cores",
                                                 memory="forged_memory_bytes"))
    assert result.usage["shop/victim"] == Resources(0.5, 1e8)
    assert result.dropped == {"cpu:wrong_node": 1, "cpu:no_node_label": 1,
                              "memory:wrong_node": 1}


@pytest.mark.prometheus
def test_the_default_queries_drop_a_pods_series_from_another_node(cadvisor_url: str) -> None:
    moved = {**PLACED, "batch/job-1": ("node-1", "10.0.0.1")}  # its series say node-2
    result = _read(cadvisor_url, placed=moved)
    assert "batch/job-1" not in result.usage
    assert result.dropped == {"cpu:wrong_node": 1, "memory:wrong_node": 1}
    unplaced = {key: nodes for key, nodes in PLACED.items() if key != "shop/web-1"}
    assert "shop/web-1" not in _read(cadvisor_url, placed=unplaced).usage


def test_pod_nodes_names_each_placed_pods_node_and_its_address() -> None:
    nodes = {"n1": NodeInfo("n1", {}, "10.0.0.1"), "n2": NodeInfo("n2", {}, None)}
    pods = [PodInfo("a", "on-1", "u1", "n1", "Running", True, False, None),
            PodInfo("a", "on-2", "u2", "n2", "Running", True, False, None),
            PodInfo("a", "gone", "u3", "n9", "Running", True, False, None),
            PodInfo("a", "pending", "u4", None, "Pending", False, False, None)]
    assert pod_nodes(pods, nodes) == {"a/on-1": ("n1", "10.0.0.1"), "a/on-2": ("n2",),
                                      "a/gone": ("n9",)}


@pytest.mark.prometheus
def test_a_query_prometheus_rejects_raises_with_the_resource_named(cadvisor_url: str) -> None:
    broken = PodUsageQueries(DEFAULT_CPU_QUERY, memory="sum by (pod) (rate(oops[5m])")
    with pytest.raises(PodUsageUnavailable, match="pod memory usage query failed") as caught:
        _read(cadvisor_url, broken)
    assert caught.value.resource == "memory"
    # Prometheus is up and said the PromQL is wrong: not "down", and the parser's words.
    assert caught.value.reason == "bad_query"
    assert "rejected the query as invalid" in str(caught.value)
    assert "parse error" in str(caught.value)


def test_prometheus_down_raises_a_connection_error() -> None:
    with pytest.raises(PodUsageUnavailable, match="cannot connect to Prometheus") as caught:
        _read(f"http://127.0.0.1:{free_port()}")
    assert caught.value.reason == "connection"


def test_an_empty_query_is_refused_with_its_resource_named() -> None:
    with pytest.raises(ValueError, match="pod cpu usage query is empty"):
        PodUsageQueries(cpu="  ", memory=DEFAULT_MEMORY_QUERY)
