"""The descheduler loop end to end: the fake API server, a real Prometheus, the planner."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from app.descheduler.descheduler import Descheduler, LoopSettings, RunReport, RunResult
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube import WORKLOAD_USAGE_NAME, state
from app.kube.events import DESTINATION_NODE, REASON, SOURCE_NODE
from app.kube.workload_usage import USAGE_KEY
from app.policy import default_policy
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.rebalance.config import DeschedulerConfig
from app.rebalance.outcome import SkipCode
from app.runtime.flags import LeaseSettings
from tests.descheduler import cluster
from tests.support.cadvisor import cadvisor_prometheus
from tests.support.fakekube import CONFIGMAPS, LEASES, PODS
from tests.support.fakekube_fixtures import FakeKube
from tests.support.ports import free_port

EVICTIONS = "/api/v1/namespaces/*/pods/*/eviction"


@pytest.fixture(scope="module")
def prometheus_url() -> Iterator[str]:
    with cadvisor_prometheus(cluster.series()) as url:
        yield url


def run_once(fake_kube: FakeKube, url: str, config: DeschedulerConfig,
             settings: LoopSettings | None = None, later_s: float = 0.0,
             telemetry: DeschedulerMetrics | None = None) -> RunReport:
    """One run in a fresh process state: new caches; the memory is what the cluster holds."""

    async def scenario() -> RunReport:
        source = PrometheusSource(PrometheusSettings(url=url, timeout_s=5.0))
        try:
            async with fake_kube.async_client() as client:
                descheduler = Descheduler(config, default_policy(), client, source,
                                          settings or LoopSettings(sync_timeout_s=10.0),
                                          clock=lambda: time.time() + later_s,
                                          telemetry=telemetry)
                return await descheduler.run_once()
        finally:
            source.close()

    return asyncio.run(scenario())


def memory_of(fake_kube: FakeKube) -> dict[str, Any]:
    stored = fake_kube.store.get(CONFIGMAPS, state.DEFAULT_NAME, "default")
    assert stored is not None
    document: dict[str, Any] = json.loads(stored["data"][state.STATE_KEY])
    return document


def remembered(fake_kube: FakeKube) -> list[str]:
    return [entry["pod"] for entry in memory_of(fake_kube)["evictions"]]


def evicted_pods(fake_kube: FakeKube) -> list[str]:
    return [r.path.split("/")[-2] for r in fake_kube.requests("POST", EVICTIONS)]


@pytest.fixture
def seeded(fake_kube: FakeKube) -> FakeKube:
    cluster.seed(fake_kube.store)
    return fake_kube


@pytest.mark.prometheus
def test_one_run_moves_just_enough_pods_to_cool_nodes_and_repeats_converge_to_zero(
    seeded: FakeKube, prometheus_url: str
) -> None:
    first = run_once(seeded, prometheus_url, cluster.config())
    assert first.result is RunResult.OK, first.message
    assert first.plan is not None
    moved = first.plan.evictions
    # 85 % - 2 x 11.25 % = 62.5 % <= 65 %: two pods, not one more.
    assert len(first.evicted) == 2
    assert {e.source for e in moved} == {"hot"}
    assert {e.destination for e in moved} <= {"cool-1", "cool-2"}
    assert all(e.pod.name.startswith("web-") for e in moved)
    remaining = {p["metadata"]["name"] for p in seeded.store.pods()}
    assert {"agent-hot", "agent-hot-2", "solo-0"} <= remaining  # nothing protected moved
    assert first.plan.node_classes["blind"].kind.value == "no-data"
    assert first.plan.node_classes["hot-2"].kind.value == "source"
    for _ in range(2):  # later runs, each a new process, on unchanged metrics
        again = run_once(seeded, prometheus_url, cluster.config())
        assert again.result is RunResult.OK, again.message
        assert again.evicted == []
    assert len(evicted_pods(seeded)) == 2


@pytest.mark.prometheus
def test_each_eviction_records_an_event_naming_node_metric_values_and_destination(
    seeded: FakeKube, prometheus_url: str
) -> None:
    report = run_once(seeded, prometheus_url, cluster.config())
    assert report.plan is not None
    events = [e for e in seeded.store.events("shop") if e["reason"] == REASON]
    assert len(events) == len(report.evicted) == 2
    by_pod = {e.pod.name: e for e in report.plan.evictions}
    for event in events:
        planned = by_pod[event["involvedObject"]["name"]]
        assert event["involvedObject"]["kind"] == "Pod"
        assert event["involvedObject"]["uid"] == planned.pod.uid
        message = event["message"]
        assert "node hot is hot" in message
        assert "cpu_usage_avg_5m" in message
        assert f"node {planned.destination}" in message
        annotations = event["metadata"]["annotations"]
        assert annotations[SOURCE_NODE] == "hot"
        assert annotations[DESTINATION_NODE] == planned.destination

    # The memory the next run reads is the descheduler's own ConfigMap, not the Events.
    assert sorted(remembered(seeded)) == sorted(f"shop/{p}" for p in by_pod)


@pytest.mark.prometheus
def test_dry_run_evicts_nothing_and_writes_nothing(seeded: FakeKube, prometheus_url: str) -> None:
    before = seeded.store.resource_version
    report = run_once(seeded, prometheus_url, cluster.config(dryRun=True))
    assert report.result is RunResult.OK
    assert report.plan is not None
    assert len(report.plan.evictions) == 2
    assert evicted_pods(seeded) == []
    assert seeded.requests("POST", "/api/v1/namespaces/*/events") == []
    assert seeded.requests("PATCH") == []
    assert seeded.store.resource_version == before


def test_prometheus_down_evicts_nothing_and_says_why(seeded: FakeKube) -> None:
    report = run_once(seeded, f"http://127.0.0.1:{free_port()}", cluster.config())
    assert report.result is RunResult.PROMETHEUS_DOWN
    assert "Prometheus is down: evicting nothing" in report.message
    assert "cannot connect" in report.message
    assert evicted_pods(seeded) == []


@pytest.mark.prometheus
def test_a_pdb_429_skips_that_pod_and_the_run_goes_on(
    seeded: FakeKube, prometheus_url: str
) -> None:
    seeded.fail_next("POST", EVICTIONS, 429, reason="TooManyRequests",
                     message="Cannot evict pod as it would violate the pod's disruption budget.")
    report = run_once(seeded, prometheus_url, cluster.config())
    assert report.result is RunResult.OK
    assert sorted(report.outcomes.values()) == ["blocked_by_pdb", "evicted"]
    assert len(evicted_pods(seeded)) == 2


@pytest.mark.prometheus
def test_a_run_cut_short_by_api_errors_is_not_repeated_wrongly_by_later_runs(
    seeded: FakeKube, prometheus_url: str
) -> None:
    config = cluster.config(workloadCooldown="0s")
    planned = run_once(seeded, prometheus_url, cluster.config(dryRun=True, workloadCooldown="0s"))
    assert planned.plan is not None
    first, second = (e.pod.name for e in planned.plan.evictions)
    seeded.fail_next("POST", f"/api/v1/namespaces/shop/pods/{second}/eviction", 500)
    cut = run_once(seeded, prometheus_url, config)
    assert cut.outcomes == {f"shop/{first}": "evicted", f"shop/{second}": "error"}
    # A later run, in a new process, knows the first eviction from its memory and moves
    # only the one pod still needed; after that, nothing more.
    healed = run_once(seeded, prometheus_url, config)
    assert len(healed.evicted) == 1
    assert f"shop/{first}" not in healed.evicted
    assert run_once(seeded, prometheus_url, config).evicted == []
    assert len(evicted_pods(seeded)) == 3  # the two successes and the one refused call


def test_all_eviction_calls_failing_stops_the_run_after_a_few(
    seeded: FakeKube, prometheus_url: str
) -> None:
    seeded.fail_next("POST", EVICTIONS, 503, times=100)
    report = run_once(seeded, prometheus_url, cluster.config(workloadCooldown="0s"),
                      LoopSettings(sync_timeout_s=10.0, max_consecutive_errors=1))
    assert report.result is RunResult.API_ERRORS
    assert len(seeded.requests("POST", EVICTIONS)) == 1
    assert "the next run starts over" in report.message


@pytest.mark.prometheus
@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"maxNoOfPodsToEvictPerNode": 1}, 1),
        ({"maxNoOfPodsToEvictPerNamespace": 1}, 1),
        ({"maxNoOfPodsToEvictTotal": 1}, 1),
        ({"maxNoOfPodsToEvictTotal": 0}, 0),
    ],
)
def test_limits_hold_end_to_end(
    seeded: FakeKube, prometheus_url: str, limits: dict[str, int], expected: int
) -> None:
    report = run_once(seeded, prometheus_url, cluster.config(**limits))
    assert len(report.evicted) == expected == len(evicted_pods(seeded))


@pytest.mark.prometheus
def test_workload_cooldown_holds_across_runs(seeded: FakeKube, prometheus_url: str) -> None:
    first = run_once(seeded, prometheus_url, cluster.config(maxNoOfPodsToEvictTotal=1))
    assert len(first.evicted) == 1
    # hot is still above 65 % after one pod (73.75 %), but the Deployment cools down.
    second = run_once(seeded, prometheus_url, cluster.config())
    assert second.evicted == []
    assert second.plan is not None
    assert any("cooldown" in s.reason for s in second.plan.skipped)


@pytest.mark.prometheus
def test_a_workload_evicted_again_by_a_later_run_is_counted_as_repeated(
    seeded: FakeKube, prometheus_url: str
) -> None:
    repeated = "loadaware_descheduler_repeated_evictions_total"
    config = cluster.config(workloadCooldown="0s", maxNoOfPodsToEvictTotal=1)
    first, second = DeschedulerMetrics(), DeschedulerMetrics()
    assert len(run_once(seeded, prometheus_url, config, telemetry=first).evicted) == 1
    assert first.registry.get_sample_value(repeated) == 0.0
    # Without the workload cooldown the next run moves the same Deployment again:
    # the planner allows it, and the metric shows the thrash to the operator.
    again = run_once(seeded, prometheus_url, config, later_s=60.0, telemetry=second)
    assert [key.split("/")[-1][:4] for key in again.evicted] == ["web-"]
    assert second.registry.get_sample_value(repeated) == 1.0


@pytest.mark.prometheus
def test_pods_of_one_workload_evicted_in_one_run_are_not_repeats(
    seeded: FakeKube, prometheus_url: str
) -> None:
    telemetry = DeschedulerMetrics()
    report = run_once(seeded, prometheus_url, cluster.config(), telemetry=telemetry)
    assert len(report.evicted) >= 2
    value = telemetry.registry.get_sample_value("loadaware_descheduler_repeated_evictions_total")
    assert value == 0.0


@pytest.mark.prometheus
def test_debounce_rounds_are_kept_in_the_descheduler_memory_across_once_runs(
    seeded: FakeKube, prometheus_url: str
) -> None:
    config = cluster.config(consecutiveHotRounds=2, interval="60s")
    first = run_once(seeded, prometheus_url, config)
    assert first.evicted == []
    assert first.plan is not None
    assert first.plan.node_classes["hot"].kind.value == "debouncing"
    assert memory_of(seeded)["hotRounds"]["hot"][0] == 1
    assert seeded.requests("PATCH", "/api/v1/nodes/*") == []  # never on the Node
    # The same round again (a manual run beside a CronJob) does not count twice.
    assert run_once(seeded, prometheus_url, config, later_s=5.0).evicted == []
    # One interval later, a new process sees the second consecutive hot round.
    second = run_once(seeded, prometheus_url, config, later_s=60.0)
    assert len(second.evicted) == 2


@pytest.mark.prometheus
def test_leadership_lost_in_the_middle_of_a_run_stops_further_evictions(
    seeded: FakeKube, prometheus_url: str
) -> None:
    lease = LeaseSettings("default", "loadaware-descheduler", "replica-a",
                          lease_duration_s=3.0, renew_deadline_s=2.0, retry_period_s=0.2)

    def taken_by_replica_b(obj: dict[str, Any]) -> None:
        obj["spec"]["holderIdentity"] = "replica-b"
        obj["spec"]["renewTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    async def steal_after_the_first_eviction() -> None:
        for _ in range(500):  # at most 10 s
            if seeded.requests("POST", EVICTIONS):
                break
            await asyncio.sleep(0.02)
        seeded.store.modify(LEASES, lease.name, taken_by_replica_b, namespace=lease.namespace)

    async def scenario() -> RunReport:
        source = PrometheusSource(PrometheusSettings(url=prometheus_url, timeout_s=5.0))
        try:
            async with seeded.async_client() as client:
                # two evictions planned, 2 s apart: the lease is taken in between
                descheduler = Descheduler(cluster.config(evictionsPerSecond=0.5),
                                          default_policy(), client, source,
                                          LoopSettings(sync_timeout_s=10.0, lease=lease))
                stealer = asyncio.create_task(steal_after_the_first_eviction())
                report = await descheduler.run_once()
                await stealer
                return report
        finally:
            source.close()

    report = asyncio.run(scenario())
    assert report.plan is not None
    assert len(report.plan.evictions) == 2
    assert report.result is RunResult.LEADERSHIP_LOST
    assert len(report.evicted) == 1
    assert len(evicted_pods(seeded)) == 1
    assert "leadership lost: stopped before the remaining evictions" in report.message
    stored = seeded.store.get_lease(lease.name, lease.namespace)
    assert stored is not None
    assert stored["spec"]["holderIdentity"] == "replica-b"


@pytest.mark.prometheus
def test_no_per_pod_usage_at_all_evicts_nothing_and_says_why(
    seeded: FakeKube, prometheus_url: str
) -> None:
    # Prometheus answers, but the queries match no series (cAdvisor not scraped, say):
    # every victim's usage would be its requests, a guess; the run must not evict on it.
    blind = {"cpu": "sum by (namespace, pod) (rate(not_scraped_cpu_seconds_total[5m]))",
             "memory": "sum by (namespace, pod) (not_scraped_memory_bytes)"}
    report = run_once(seeded, prometheus_url, cluster.config(podUsageQueries=blind))
    assert report.result is RunResult.NO_POD_USAGE
    assert "no per-pod usage for any pod: evicting nothing" in report.message
    assert report.plan is None
    assert evicted_pods(seeded) == []


@pytest.mark.prometheus
def test_a_dry_run_loop_counts_its_own_rounds_and_previews_evictions_writing_nothing(
    seeded: FakeKube, prometheus_url: str
) -> None:
    config = cluster.config(consecutiveHotRounds=2, interval="60s", dryRun=True)

    async def two_rounds() -> list[RunReport]:
        source = PrometheusSource(PrometheusSettings(url=prometheus_url, timeout_s=5.0))
        offset_s = [0.0]
        try:
            async with seeded.async_client() as client:
                descheduler = Descheduler(config, default_policy(), client, source,
                                          LoopSettings(sync_timeout_s=10.0),
                                          clock=lambda: time.time() + offset_s[0])
                first = await descheduler.run_once()
                offset_s[0] = 60.0
                return [first, await descheduler.run_once()]
        finally:
            source.close()

    first, second = asyncio.run(two_rounds())
    assert first.plan is not None
    assert first.plan.node_classes["hot"].kind.value == "debouncing"
    assert first.plan.evictions == []
    assert second.plan is not None
    assert len(second.plan.evictions) == 2
    assert evicted_pods(seeded) == []
    assert memory_of(seeded)["hotRounds"] == {}  # a dry run writes nothing


@pytest.mark.prometheus
def test_skipped_pods_are_counted_under_a_fixed_set_of_reasons(
    seeded: FakeKube, prometheus_url: str
) -> None:
    # A per-namespace limit of 1 skips pods whose reasons name their namespace; the
    # metric label must stay one of the fixed codes, whatever the text says.
    telemetry = DeschedulerMetrics()

    async def scenario() -> RunReport:
        source = PrometheusSource(PrometheusSettings(url=prometheus_url, timeout_s=5.0))
        try:
            async with seeded.async_client() as client:
                descheduler = Descheduler(
                    cluster.config(maxNoOfPodsToEvictPerNamespace=1), default_policy(), client,
                    source, LoopSettings(sync_timeout_s=10.0), telemetry=telemetry,
                )
                return await descheduler.run_once()
        finally:
            source.close()

    report = asyncio.run(scenario())
    assert report.plan is not None
    assert report.plan.skipped
    labels = {
        sample.labels["reason"]
        for metric in telemetry.registry.collect()
        if metric.name == "loadaware_descheduler_pods_skipped"
        for sample in metric.samples
        if sample.name.endswith("_total")
    }
    assert labels
    assert labels <= {code.value for code in SkipCode}
    assert "eviction_limit" in labels


async def state_window_s(fake_kube: FakeKube, url: str, config: DeschedulerConfig) -> float:
    """How far back the descheduler reads its memory, with this configuration."""
    source = PrometheusSource(PrometheusSettings(url=url, timeout_s=5.0))
    try:
        async with fake_kube.async_client() as client:
            descheduler = Descheduler(config, default_policy(), client, source, LoopSettings())
            return descheduler._window_s()
    finally:
        source.close()


@pytest.mark.prometheus
def test_a_long_workload_cooldown_is_remembered_as_long(
    seeded: FakeKube, prometheus_url: str
) -> None:
    # The memory keeps evictions for as long as the longest rule that reads them:
    # a 2h cooldown is not forgotten after the default 15 minutes.
    long = cluster.config(maxNoOfPodsToEvictTotal=1, workloadCooldown="2h")
    first = run_once(seeded, prometheus_url, long)
    assert len(first.evicted) == 1
    text = memory_of(seeded)
    later_s = time.time() + 90 * 60
    window_s = asyncio.run(state_window_s(seeded, prometheus_url, long))
    assert window_s >= long.workload_cooldown
    saved_state, problems = state.decode(json.dumps(text), later_s, later_s - window_s)
    assert problems == []
    [record] = saved_state.recent(later_s - long.workload_cooldown)
    assert record.workload is not None
    assert record.workload.endswith("/web")


@pytest.mark.prometheus
def test_a_pod_usage_query_prometheus_rejects_is_not_reported_as_prometheus_down(
    seeded: FakeKube, prometheus_url: str
) -> None:
    broken = cluster.config(podUsageQueries={"memory": "sum by (pod) (rate(oops[5m])"})
    report = run_once(seeded, prometheus_url, broken)
    assert report.result is RunResult.BAD_QUERY
    assert "podUsageQueries.memory" in report.message
    assert "rejected the query as invalid" in report.message
    assert evicted_pods(seeded) == []


def _batch_pods_bound_just_now(store: Any) -> None:
    """A pod of shop's Job ``batch`` (100m, no limit) bound on each cool node just now."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for node in ("cool-1", "cool-2"):
        store.add(PODS, {
            "metadata": {"name": f"batch-{node}", "namespace": "shop", "creationTimestamp": now,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": "batch", "uid": "uid-batch",
                                              "controller": True}]},
            "spec": {"nodeName": node, "containers": [{
                "name": "app", "image": "registry.k8s.io/pause:3.9",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
            "status": {"phase": "Running", "qosClass": "Burstable", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}]},
        })  # fmt: skip


@pytest.mark.prometheus
@pytest.mark.parametrize("published", [True, False])
def test_destinations_count_recent_pods_at_their_workloads_published_usage(
    seeded: FakeKube, prometheus_url: str, published: bool
) -> None:
    """Issue 42, point 6: a pod of a Job published at 3 cores a pod (measured on 3 pods)
    was bound on each cool node just now. The extender counts each at 3 of the node's 4
    cores, so it would reject an evicted pod's replacement there; the descheduler reads
    the same document and plans no eviction. Without the document, the two evictions
    of the run above."""
    _batch_pods_bound_just_now(seeded.store)
    if published:
        document = {"version": 1, "publishedAt": time.time(),
                    "workloads": {"shop/Job/batch": [3.0, 1e8, 3]}}  # fmt: skip
        seeded.store.add(CONFIGMAPS, {
            "metadata": {"name": WORKLOAD_USAGE_NAME, "namespace": "default"},
            "data": {USAGE_KEY: json.dumps(document)},
        })  # fmt: skip
    report = run_once(seeded, prometheus_url, cluster.config(dryRun=True))
    assert report.result is RunResult.OK, report.message
    assert report.plan is not None
    destinations = {e.destination for e in report.plan.evictions}
    if published:
        assert destinations == set(), report.plan.evictions
    else:
        assert len(report.plan.evictions) == 2
        assert destinations <= {"cool-1", "cool-2"}
