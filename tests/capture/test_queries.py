"""The capture's queries: the descheduler's series, bounded chunks, one clear error per
missing input (against a real Prometheus), and names matched to workloads."""

from __future__ import annotations

import itertools
import re
import time
from typing import Any

import pytest
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import Pod

from app.capture.catalog import build_catalog
from app.capture.document import Names
from app.capture.history import (
    MAX_SAMPLES_PER_ANSWER,
    RANGE_POINTS_LIMIT,
    CaptureError,
    check_inputs,
    pod_usage_query,
    time_chunks,
)
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.rebalance.config import DEFAULT_CPU_QUERY, DEFAULT_MEMORY_QUERY
from tests.support.cadvisor import PodSeries, cadvisor_prometheus


def test_the_capture_reads_the_descheduler_s_own_series() -> None:
    assert pod_usage_query("cpu") == DEFAULT_CPU_QUERY
    assert pod_usage_query("memory") == DEFAULT_MEMORY_QUERY
    narrowed = pod_usage_query("cpu", 'we"ird', "namespace, pod, node")
    assert 'namespace="we\\"ird"' in narrowed
    assert narrowed.startswith("sum by (namespace, pod, node) (rate(")


@pytest.mark.parametrize(("range_s", "step_s", "series"), [
    (24 * 3600, 1, 1), (24 * 3600, 300, 100_000), (7 * 86400, 15, 40), (3600, 60, 1),
])  # fmt: skip
def test_no_chunk_passes_prometheus_limit_or_the_answer_bound(
    range_s: float, step_s: float, series: int
) -> None:
    chunks = time_chunks(0, range_s, step_s, series)
    assert chunks[0][0] == 0
    assert chunks[-1][1] == range_s // step_s  # every point, once, in order
    for (_, last), (following, _) in itertools.pairwise(chunks):
        assert following == last + 1
    for first, last in chunks:
        points = last - first + 1
        assert points <= RANGE_POINTS_LIMIT
        assert points * series <= max(MAX_SAMPLES_PER_ANSWER, series)


def _source(url: str) -> PrometheusSource:
    return PrometheusSource(PrometheusSettings(url=url, timeout_s=10.0))


@pytest.mark.prometheus
def test_a_prometheus_without_cadvisor_series_is_one_clear_error() -> None:
    gauges = [("up", {"job": "node-exporter"}, "1")]
    with cadvisor_prometheus([], raw_gauges=gauges) as url:
        source = _source(url)
        try:
            with pytest.raises(CaptureError, match="no cAdvisor series") as error:
                check_inputs(source, time.time() - 600, time.time(), url)
        finally:
            source.close()
    assert "\n" not in str(error.value)
    assert "/metrics/cadvisor" in str(error.value)


@pytest.mark.prometheus
def test_a_range_before_the_oldest_data_names_the_range_that_exists() -> None:
    # The fixture holds 30 minutes of history before now.
    with cadvisor_prometheus([PodSeries("shop", "web-1", {"app": (0.5, 2.0**28)})]) as url:
        source = _source(url)
        try:
            now = time.time()
            check_inputs(source, now - 20 * 60, now, url)  # within the data: fine
            with pytest.raises(CaptureError, match="holds data only from") as error:
                check_inputs(source, now - 3 * 3600, now, url)
        finally:
            source.close()
    assert re.search(r"use --range (29|30)m or less", str(error.value)), error.value


def _pod(namespace: str, name: str, owner: tuple[str, str] | None, node: str = "n1") -> Any:
    refs = [OwnerReference(apiVersion="apps/v1", kind=owner[0], name=owner[1], uid="u",
                           controller=True)] if owner else None  # fmt: skip
    return Pod.from_dict({
        "metadata": ObjectMeta(name=name, namespace=namespace, ownerReferences=refs).to_dict(),
        "spec": {"nodeName": node, "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]},
        "status": {"phase": "Running"},
    })  # fmt: skip


def test_pods_of_the_past_are_matched_to_their_workload_by_name() -> None:
    pods = [_pod("shop", "web-7d9f-abcde", ("ReplicaSet", "web-7d9f")),
            _pod("shop", "db-0", ("StatefulSet", "db")),
            _pod("shop", "debug", None)]  # fmt: skip
    # No controller objects readable: each pod is its own workload (kind Pod), named.
    catalog = build_catalog([], pods, {}, [])
    assert {w.kind for w in catalog.workloads.values()} == {"Pod"}
    assert catalog.workload_of_pod("shop", "debug") == "shop-debug"
    assert catalog.workload_of_pod("shop", "gone-xyz") is None
    assert catalog.workload_of_pod("other", "debug") is None


def test_anonymized_names_are_stable_hashes() -> None:
    names = Names(anonymous=True)
    assert names("node-1") == names("node-1")
    assert names("node-1") != names("node-2")
    assert "node" not in names("node-1")
    assert Names()("node-1") == "node-1"
