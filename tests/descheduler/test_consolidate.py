"""Consolidation in the live descheduler (app/descheduler/consolidate.py), against the
fake API server and a real Prometheus: the drain taint goes on before the first
eviction and off when the drain is given up, every evictable pod goes through the
Eviction API, and what keeps a node (an opt-out, a PDB, the floor) keeps it.

Three 4-core nodes: ``idle`` (10 % CPU used, two web pods of 500m), ``used-a`` and
``used-b`` (40 % used: above consolidation.thresholds' 30 %, no candidates; three web
pods each). The web pods use 0.1 core each, so both used nodes stay far under the
65 % targetThresholds with idle's pods added.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from app.descheduler.descheduler import Descheduler, LoopSettings, RunReport, RunResult
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube.events import REASON
from app.policy import default_policy
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.rebalance import DRAIN_TAINT_KEY, render_consolidation
from app.rebalance.config import DeschedulerConfig
from tests.descheduler import cluster
from tests.support.cadvisor import PodSeries, cadvisor_prometheus
from tests.support.fakekube import CONFIGMAPS, NODES, PODS, FakeKubeStore
from tests.support.fakekube_fixtures import FakeKube

MIB = 2.0**20
EVICTIONS = "/api/v1/namespaces/*/pods/*/eviction"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
NODE_LOAD = {"idle": 0.10, "used-a": 0.40, "used-b": 0.40}
PODS_ON = {"idle": 2, "used-a": 3, "used-b": 3}


def seed(store: FakeKubeStore) -> None:
    store.add(CONFIGMAPS, cluster.empty_memory())
    for name, cpu in NODE_LOAD.items():
        store.add_node(name, annotations=cluster.load_annotations(cpu, 0.2),
                       allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"})  # fmt: skip
    for node, count in PODS_ON.items():
        for i in range(count):
            cluster.add_pod(store, f"web-{node}-{i}", node, cpu="500m")


def series() -> list[PodSeries]:
    return [
        PodSeries("shop", f"web-{node}-{i}", {"app": (0.1, 200 * MIB)}, node=node)
        for node, count in PODS_ON.items()
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def prometheus_url() -> Iterator[str]:
    with cadvisor_prometheus(series()) as url:
        yield url


@pytest.fixture
def seeded(fake_kube: FakeKube) -> FakeKube:
    seed(fake_kube.store)
    return fake_kube


def consolidating(**fields: Any) -> DeschedulerConfig:
    settings = {"enabled": True, **fields}
    return cluster.config(consolidation=settings)


def run_once(
    fake_kube: FakeKube,
    url: str,
    config: DeschedulerConfig,
    telemetry: DeschedulerMetrics | None = None,
    *,
    dry_run: bool = False,
) -> RunReport:
    async def scenario() -> RunReport:
        async with descheduler_on(fake_kube, url, config, telemetry, dry_run=dry_run) as one:
            return await one.run_once()

    return asyncio.run(scenario())


@contextlib.asynccontextmanager
async def descheduler_on(
    fake_kube: FakeKube,
    url: str,
    config: DeschedulerConfig,
    telemetry: DeschedulerMetrics | None = None,
    *,
    dry_run: bool = False,
) -> AsyncIterator[Descheduler]:
    """A descheduler on the fake API server and the Prometheus at ``url``."""
    source = PrometheusSource(PrometheusSettings(url=url, timeout_s=5.0))
    try:
        async with fake_kube.async_client() as client:
            yield Descheduler(
                config, default_policy(), client, source,
                LoopSettings(sync_timeout_s=10.0, dry_run=dry_run), telemetry=telemetry,
            )  # fmt: skip
    finally:
        source.close()


def drain_taints(store: FakeKubeStore, node: str) -> list[dict[str, Any]]:
    stored = store.get(NODES, node)
    assert stored is not None
    taints: list[dict[str, Any]] = stored["spec"].get("taints") or []
    return [t for t in taints if t["key"] == DRAIN_TAINT_KEY]


def evicted(fake_kube: FakeKube) -> list[str]:
    return sorted(r.path.split("/")[-2] for r in fake_kube.requests("POST", EVICTIONS))


def kept_whole(fake_kube: FakeKube, report: RunReport) -> dict[str, str]:
    """A run that evicted nothing and tainted no node: why it kept each candidate."""
    assert report.result is RunResult.OK, report.message
    assert evicted(fake_kube) == []
    assert drain_taints(fake_kube.store, "idle") == []
    assert report.consolidation is not None
    return {k.node: k.reason for k in report.consolidation.kept}


def taint_node(store: FakeKubeStore, node: str, value: str) -> None:
    entry = {"key": DRAIN_TAINT_KEY, "value": value, "effect": "NoSchedule"}
    store.modify(NODES, node, lambda n: n["spec"].update(taints=[entry]))


def metric(telemetry: DeschedulerMetrics, name: str, **labels: str) -> float:
    registry: CollectorRegistry = telemetry.registry
    return registry.get_sample_value(name, labels) or 0.0


@pytest.mark.prometheus
def test_the_idle_node_is_tainted_then_every_pod_of_it_evicted_onto_the_used_ones(
    seeded: FakeKube, prometheus_url: str
) -> None:
    telemetry = DeschedulerMetrics()
    before_s = time.time()
    report = run_once(seeded, prometheus_url, consolidating(), telemetry)
    assert report.result is RunResult.OK, report.message
    assert evicted(seeded) == ["web-idle-0", "web-idle-1"]
    [taint] = drain_taints(seeded.store, "idle")
    assert taint["effect"] == "NoSchedule"
    assert before_s - 1 <= int(taint["value"]) <= time.time()
    assert drain_taints(seeded.store, "used-a") == drain_taints(seeded.store, "used-b") == []
    assert report.consolidation is not None
    assert {e.destination for e in report.consolidation.evictions} <= {"used-a", "used-b"}
    assert "start draining idle" in report.message
    events = [e for e in seeded.store.events("shop") if e["reason"] == REASON]
    assert len(events) == 2
    assert all("drained for the node autoscaler" in e["message"] for e in events)
    assert metric(telemetry, "loadaware_descheduler_consolidation_drains_total",
                  event="started") == 1  # fmt: skip
    # The next run finds the drain on the Node itself: nothing more to move, no new taint.
    again = run_once(seeded, prometheus_url, consolidating())
    assert again.consolidation is not None
    assert [(d.node, d.continued, len(d.evictions)) for d in again.consolidation.drains] == [
        ("idle", True, 0)
    ]
    assert len(drain_taints(seeded.store, "idle")) == 1
    assert len(evicted(seeded)) == 2


@pytest.mark.prometheus
def test_a_pod_that_is_not_safe_to_evict_keeps_its_node_untainted_and_whole(
    seeded: FakeKube, prometheus_url: str
) -> None:
    seeded.store.modify(PODS, "web-idle-1",
                        lambda p: p["metadata"].update(annotations={SAFE_TO_EVICT: "false"}),
                        "shop")  # fmt: skip
    kept = kept_whole(seeded, run_once(seeded, prometheus_url, consolidating()))
    assert SAFE_TO_EVICT in kept["idle"]


@pytest.mark.prometheus
def test_a_dry_run_says_what_it_would_drain_and_touches_nothing(
    seeded: FakeKube, prometheus_url: str
) -> None:
    report = run_once(seeded, prometheus_url, consolidating(), dry_run=True)
    assert report.result is RunResult.OK, report.message
    assert evicted(seeded) == []
    assert drain_taints(seeded.store, "idle") == []
    assert "would start draining idle" in report.message
    assert report.consolidation is not None
    table = render_consolidation(report.consolidation)
    assert "idle" in table
    assert "starts" in table
    assert "shop/web-idle-0" in table


@pytest.mark.prometheus
def test_a_drain_older_than_abandon_after_is_given_up_and_its_taint_removed(
    seeded: FakeKube, prometheus_url: str
) -> None:
    taint_node(seeded.store, "idle", str(int(time.time() - 3600)))
    telemetry = DeschedulerMetrics()
    report = run_once(seeded, prometheus_url, consolidating(abandonAfter="30m"), telemetry)
    assert report.result is RunResult.OK, report.message
    assert drain_taints(seeded.store, "idle") == []
    assert evicted(seeded) == []
    assert report.consolidation is not None
    [given_up] = report.consolidation.abandoned
    assert given_up.node == "idle"
    assert "abandonAfter" in given_up.reason
    assert metric(telemetry, "loadaware_descheduler_consolidation_drains_total",
                  event="abandoned") == 1  # fmt: skip
    assert metric(telemetry, "loadaware_descheduler_draining_nodes") == 1


@pytest.mark.prometheus
def test_a_drain_whose_pod_opted_out_since_is_given_up(
    seeded: FakeKube, prometheus_url: str
) -> None:
    taint_node(seeded.store, "idle", str(int(time.time() - 60)))
    seeded.store.modify(PODS, "web-idle-0",
                        lambda p: p["metadata"].update(annotations={SAFE_TO_EVICT: "false"}),
                        "shop")  # fmt: skip
    report = run_once(seeded, prometheus_url, consolidating())
    assert drain_taints(seeded.store, "idle") == []
    assert evicted(seeded) == []
    assert report.consolidation is not None
    assert [k.node for k in report.consolidation.abandoned] == ["idle"]


@pytest.mark.prometheus
def test_a_taint_value_loadaware_did_not_write_is_given_up_at_once(
    seeded: FakeKube, prometheus_url: str
) -> None:
    taint_node(seeded.store, "idle", "someone-else")
    run_once(seeded, prometheus_url, consolidating())
    assert drain_taints(seeded.store, "idle") == []


@pytest.mark.prometheus
def test_the_floor_of_spare_capacity_keeps_the_node(seeded: FakeKube, prometheus_url: str) -> None:
    # used-a and used-b: 3 of 8 cores requested, 4 with idle's pods: 50 % spare left.
    report = run_once(seeded, prometheus_url, consolidating(minSpare={"cpu": 60, "memory": 10}))
    assert evicted(seeded) == []
    assert drain_taints(seeded.store, "idle") == []
    assert report.consolidation is not None
    kept = {k.node: k.reason for k in report.consolidation.kept}
    assert "consolidation.minSpare" in kept["idle"]


@pytest.mark.prometheus
def test_a_pdb_that_allows_no_disruption_leaves_the_node_untainted_and_whole(
    seeded: FakeKube, prometheus_url: str
) -> None:
    seeded.store.add_pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=0)
    report = run_once(seeded, prometheus_url, consolidating())
    assert evicted(seeded) == []  # the planner knows the budget before any 429
    assert report.consolidation is not None
    kept = {k.node: k.reason for k in report.consolidation.kept}
    assert "PDBs" in kept["idle"]
    assert drain_taints(seeded.store, "idle") == []


@pytest.mark.prometheus
def test_hot_spots_come_first_a_run_that_cools_one_starts_no_drain(
    seeded: FakeKube, prometheus_url: str
) -> None:
    seeded.store.modify(NODES, "used-a", lambda n: n["metadata"].update(
        annotations=cluster.load_annotations(0.9, 0.2)))  # fmt: skip
    report = run_once(seeded, prometheus_url, consolidating())
    assert report.plan is not None
    assert report.plan.evictions
    assert drain_taints(seeded.store, "idle") == []
    assert not any(name.startswith("web-idle") for name in evicted(seeded))
    assert "drains wait while hot spots are cooled" in report.message


@pytest.mark.prometheus
def test_a_taint_that_cannot_be_written_leaves_the_node_whole_and_is_counted(
    seeded: FakeKube, prometheus_url: str
) -> None:
    seeded.fail_next("PATCH", "/api/v1/nodes/idle", 403, times=10)  # RBAC without patch
    telemetry = DeschedulerMetrics()
    report = run_once(seeded, prometheus_url, consolidating(), telemetry)
    assert report.result is RunResult.OK, report.message
    assert evicted(seeded) == []  # no pod leaves a node that is not tainted
    assert drain_taints(seeded.store, "idle") == []
    assert metric(telemetry, "loadaware_descheduler_consolidation_drains_total",
                  event="taint_error") == 1  # fmt: skip
    assert metric(telemetry, "loadaware_descheduler_consolidation_drains_total",
                  event="started") == 0  # fmt: skip


@pytest.mark.prometheus
@pytest.mark.parametrize("scheduler", ["soft-taints", "requests"])
def test_beside_a_stock_scheduler_the_drain_taint_is_what_keeps_replacements_off(
    seeded: FakeKube, prometheus_url: str, scheduler: str
) -> None:
    # The idle node carries no soft taint: the hot-spot re-check's "still steered away"
    # rule does not apply to a drain, whose own NoSchedule taint does that.
    config = cluster.config(scheduler=scheduler, consolidation={"enabled": True})
    report = run_once(seeded, prometheus_url, config)
    assert report.result is RunResult.OK, report.message
    assert evicted(seeded) == ["web-idle-0", "web-idle-1"], report.outcomes
    assert len(drain_taints(seeded.store, "idle")) == 1


@pytest.mark.prometheus
def test_a_rise_in_demand_seen_by_an_earlier_run_keeps_room_for_itself(
    seeded: FakeKube, prometheus_url: str
) -> None:
    # Run 1 sees 4 cores of demand; three pods of 2 cores then wait for a node (run 2:
    # a rise of 6 cores) and go. Draining idle would leave 4 cores unrequested on the
    # used nodes: under the 6-core rise, so run 3 keeps idle, where a descheduler that
    # saw no rise drains it (the first test).
    async def scenario() -> RunReport:
        async with descheduler_on(seeded, prometheus_url, consolidating(),
                                  dry_run=True) as descheduler:  # fmt: skip
            first = await descheduler.run_once()
            assert "would start draining idle" in first.message
            demand = descheduler._demand  # the caches see a change a moment later
            for i in range(3):
                cluster.add_pod(seeded.store, f"burst-{i}", "", cpu="2")
            for _ in range(50):
                await descheduler.run_once()
                if demand.latest is not None and demand.latest.cpu_cores == 10:
                    break
            for i in range(3):
                seeded.store.delete(PODS, f"burst-{i}", "shop")
            for _ in range(50):
                last = await descheduler.run_once()
                if demand.latest is not None and demand.latest.cpu_cores == 4:
                    return last
            raise AssertionError("the pod cache never showed the burst pods gone")

    report = asyncio.run(scenario())
    assert report.result is RunResult.OK, report.message
    assert report.consolidation is not None
    assert report.consolidation.drains == []
    kept = {k.node: k.reason for k in report.consolidation.kept}
    assert "6.0 cores rise in demand" in kept["idle"]
    assert evicted(seeded) == []


@pytest.mark.prometheus
def test_a_once_run_goes_on_with_the_demand_history_in_the_memory(
    fake_kube: FakeKube, prometheus_url: str
) -> None:
    # The memory holds a 6-core rise seen by earlier runs (another process): a --once
    # run keeps idle for it, and leaves its own sample in the memory for the next.
    seed(fake_kube.store)
    now_s = time.time()
    earlier = [[now_s - 600, 4.0, 2.0**31], [now_s - 480, 10.0, 2.0**31],
               [now_s - 360, 4.0, 2.0**31]]  # fmt: skip
    document = {"version": 1, "evictions": [], "hotRounds": {}, "demand": earlier}
    fake_kube.store.modify(CONFIGMAPS, cluster.empty_memory()["metadata"]["name"],
                           lambda m: m["data"].update({"state.json": json.dumps(document)}),
                           "default")  # fmt: skip
    kept = kept_whole(fake_kube, run_once(fake_kube, prometheus_url, consolidating()))
    assert "6.0 cores rise in demand" in kept["idle"]
    stored = fake_kube.store.get(CONFIGMAPS, cluster.empty_memory()["metadata"]["name"],
                                 "default")  # fmt: skip
    assert stored is not None
    demand = json.loads(stored["data"]["state.json"])["demand"]
    assert [d[1] for d in demand] == [4.0, 10.0, 4.0, 4.0]  # its own sample added
