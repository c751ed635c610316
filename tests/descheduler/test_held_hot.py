"""Issue 42, point 3, through the descheduler's loop: a tenant's protected burner keeps a
node hot; the loop evicts none of the other tenants' pods and puts one Warning Event on
the Node (the fake API server, a real Prometheus with the pods' cAdvisor series)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.descheduler.descheduler import Descheduler, LoopSettings, RunReport, RunResult
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube.events import HELD_HOT_REASON
from app.policy import default_policy
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.rebalance.config import DeschedulerConfig
from app.rebalance.outcome import SkipCode
from tests.descheduler import cluster
from tests.support.cadvisor import PodSeries, cadvisor_prometheus
from tests.support.fakekube import CONFIGMAPS, PODS
from tests.support.fakekube_fixtures import FakeKube

MIB = 2.0**20
EVICTIONS = "/api/v1/namespaces/*/pods/*/eviction"
NEIGHBOURS = tuple(f"web-{i}" for i in range(6))


def series() -> list[PodSeries]:
    pods = [PodSeries("tenant-a", "burner", {"burn": (2.0, 100 * MIB)}, node="hot")]
    pods += [PodSeries("tenant-b", name, {"app": (0.2, 200 * MIB)}, node="hot")
             for name in NEIGHBOURS]
    return pods


@pytest.fixture(scope="module")
def prometheus_url() -> Iterator[str]:
    with cadvisor_prometheus(series()) as url:
        yield url


def seed(fake_kube: FakeKube) -> None:
    store = fake_kube.store
    store.add(CONFIGMAPS, cluster.empty_memory())
    # hot: 85 % of 4 cores; the burner uses 2 of them on a 1m request, with an emptyDir.
    for name, cpu in {"hot": 0.85, "cool-1": 0.2, "cool-2": 0.2}.items():
        store.add_node(name, annotations=cluster.load_annotations(cpu),
                       allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"})
    for name in NEIGHBOURS:
        cluster.add_pod(store, name, "hot", namespace="tenant-b", cpu="250m")
    store.add(PODS, {
        "metadata": {"name": "burner", "namespace": "tenant-a",
                     "creationTimestamp": cluster.AN_HOUR_AGO, "labels": {"app": "burner"},
                     "annotations": {
                         "descheduler.alpha.kubernetes.io/prefer-no-eviction": "true"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "burner-1", "uid": "uid-burner-1",
                                          "controller": True}]},
        "spec": {"nodeName": "hot",
                 "volumes": [{"name": "scratch", "emptyDir": {}}],
                 "containers": [{"name": "burn", "image": "registry.k8s.io/pause:3.9",
                                 "resources": {"requests": {"cpu": "1m"}}}]},
        "status": {"phase": "Running", "qosClass": "Burstable",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })


def run_once(fake_kube: FakeKube, url: str, config: DeschedulerConfig,
             telemetry: DeschedulerMetrics | None = None) -> RunReport:
    async def scenario() -> RunReport:
        source = PrometheusSource(PrometheusSettings(url=url, timeout_s=5.0))
        try:
            async with fake_kube.async_client() as client:
                descheduler = Descheduler(config, default_policy(), client, source,
                                          LoopSettings(sync_timeout_s=10.0), clock=time.time,
                                          telemetry=telemetry)
                report = await descheduler.run_once()
                again = await descheduler.run_once()  # the same process, a run later
                assert again.result is RunResult.OK, again.message
                return report
        finally:
            source.close()

    return asyncio.run(scenario())


def held_events(fake_kube: FakeKube) -> list[dict[str, Any]]:
    return [e for e in fake_kube.store.events() if e.get("reason") == HELD_HOT_REASON]


@pytest.mark.prometheus
def test_a_protected_burner_gets_no_neighbour_evicted_and_one_node_event(
    fake_kube: FakeKube, prometheus_url: str
) -> None:
    seed(fake_kube)
    telemetry = DeschedulerMetrics()
    report = run_once(fake_kube, prometheus_url, cluster.config(), telemetry)
    assert report.result is RunResult.OK, report.message
    assert telemetry.registry.get_sample_value("loadaware_descheduler_held_hot_nodes") == 1
    skipped = telemetry.registry.get_sample_value(
        "loadaware_descheduler_pods_skipped_total", {"reason": "within_requests"})
    assert skipped == 2 * len(NEIGHBOURS)  # two runs
    assert report.plan is not None
    # Before the fix: four of tenant-b's pods (0.2 core each for the 0.8-core excess).
    assert fake_kube.requests("POST", EVICTIONS) == []
    codes = {s.pod_key: s.code for s in report.plan.skipped}
    assert codes["tenant-a/burner"] is SkipCode.PROTECTED
    assert {codes[f"tenant-b/{name}"] for name in NEIGHBOURS} == {SkipCode.WITHIN_REQUESTS}
    events = held_events(fake_kube)
    assert len(events) == 1  # two runs, one Event: the node is held by the same pod
    event = events[0]
    assert event["involvedObject"]["kind"] == "Node"
    assert event["involvedObject"]["name"] == "hot"
    assert event["type"] == "Warning"
    assert "tenant-a/burner" in event["message"]


@pytest.mark.prometheus
def test_a_dry_run_writes_no_node_event(fake_kube: FakeKube, prometheus_url: str) -> None:
    seed(fake_kube)
    report = run_once(fake_kube, prometheus_url, cluster.config(dryRun=True))
    assert report.plan is not None
    assert "hot" in report.plan.held_hot
    assert held_events(fake_kube) == []
