"""Per-pod usage against a real Prometheus holding generated cAdvisor series."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from app.prom.client import PrometheusSettings, PrometheusSource
from app.prom.pod_usage import (
    PodUsage,
    PodUsageQueries,
    PodUsageUnavailable,
    read_pod_usage,
)
from app.rebalance.config import DEFAULT_CPU_QUERY, DEFAULT_MEMORY_QUERY
from tests.support.cadvisor import PodSeries, cadvisor_prometheus
from tests.support.promserver import free_port

MIB = 2.0**20

PODS = (
    PodSeries("shop", "web-1", {"app": (0.5, 300 * MIB), "sidecar": (0.1, 50 * MIB)}),
    PodSeries("shop", "web-2", {"app": (1.25, 700 * MIB)}, pause_container=False),
    PodSeries("batch", "job-1", {"worker": (2.0, 2048 * MIB)}, node="node-2"),
)
GARBAGE = (
    ("pod_cpu_cores", {"namespace": "shop", "pod": "nan-pod"}, "NaN"),
    ("pod_cpu_cores", {"namespace": "shop", "pod": "negative-pod"}, "-0.5"),
    ("pod_cpu_cores", {"namespace": "shop", "pod": "fine-pod"}, "0.25"),
    ("pod_cpu_cores", {"namespace": "shop"}, "0.3"),  # no pod label
    ("pod_memory_bytes", {"namespace": "shop", "pod": "nan-pod"}, "1e6"),
    ("pod_memory_bytes", {"namespace": "shop", "pod": "negative-pod"}, "1e6"),
    ("pod_memory_bytes", {"namespace": "shop", "pod": "fine-pod"}, "2e6"),
    ("pod_memory_bytes", {"namespace": "shop", "pod": "memory-only"}, "3e6"),
)


@pytest.fixture(scope="module")
def cadvisor_url() -> Iterator[str]:
    with cadvisor_prometheus(PODS, raw_gauges=GARBAGE) as url:
        yield url


DEFAULT_QUERIES = PodUsageQueries(DEFAULT_CPU_QUERY, DEFAULT_MEMORY_QUERY)


def _read(url: str, queries: PodUsageQueries = DEFAULT_QUERIES) -> PodUsage:
    source = PrometheusSource(PrometheusSettings(url=url, timeout_s=10.0))
    try:
        return asyncio.run(read_pod_usage(source, queries))
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
        cpu="sum by (namespace, pod) (rate(container_cpu_usage_seconds_total[5m]))",
        memory="sum by (namespace, pod) (container_memory_working_set_bytes)",
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
