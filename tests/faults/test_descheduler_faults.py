"""Descheduler faults: two replicas with leader election on one fake API server. The
leader is cut off from the API server in the middle of a run; the other replica
takes over without evicting anything twice, repeating what was done, or passing a PDB."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import pytest

from app.descheduler.descheduler import Descheduler, LoopSettings, RunReport, RunResult
from app.policy import default_policy
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.runtime.flags import LeaseSettings
from tests.descheduler import cluster
from tests.support.cadvisor import cadvisor_prometheus
from tests.support.fakekube_fixtures import FakeKube

pytestmark = pytest.mark.prometheus

EVICTIONS = "/api/v1/namespaces/*/pods/*/eviction"
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/*"


@pytest.fixture(scope="module")
def prometheus_url() -> Iterator[str]:
    with cadvisor_prometheus(cluster.series()) as url:
        yield url


def lease_for(identity: str) -> LeaseSettings:
    return LeaseSettings("default", "loadaware-descheduler", identity,
                         lease_duration_s=1.5, renew_deadline_s=1.0, retry_period_s=0.1)


def evicted(fake_kube: FakeKube) -> list[str]:
    """Pods whose eviction was asked for and that are gone: evicted for real."""
    asked = [r.path.split("/")[-2] for r in fake_kube.requests("POST", EVICTIONS)]
    return [name for name in asked if fake_kube.store.get_pod(name, "shop") is None]


def test_a_leader_cut_off_mid_run_stops_and_the_standby_takes_over_without_repeats(
    fake_kube: FakeKube, prometheus_url: str
) -> None:
    cluster.seed(fake_kube.store)
    # Two disruptions allowed for the web Deployment, shared by both replicas.
    fake_kube.store.add_pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=2)

    async def cut_off_after_the_first_eviction(leader: Descheduler) -> None:
        async with asyncio.timeout(20):
            while not fake_kube.requests("POST", EVICTIONS):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            # The leader can no longer renew (nor evict): the API server fails it.
            fake_kube.fail_next("*", LEASE_PATH, 500, times=1_000_000)
            fake_kube.fail_next("POST", EVICTIONS, 500, times=1_000_000)
            while leader.may_evict():  # noqa: ASYNC110
                await asyncio.sleep(0.02)

    async def replica(identity: str, source: PrometheusSource) -> RunReport:
        async with fake_kube.async_client() as client:
            descheduler = Descheduler(
                cluster.config(evictionsPerSecond=0.2), default_policy(), client, source,
                LoopSettings(sync_timeout_s=15.0, lease=lease_for(identity), identity=identity),
            )
            if identity == "replica-a":
                cutter = asyncio.create_task(cut_off_after_the_first_eviction(descheduler))
                report = await descheduler.run_once()
                await cutter
                fake_kube.faults.clear()  # the API server is back for the standby
                return report
            return await descheduler.run_once()

    async def scenario() -> tuple[RunReport, RunReport]:
        source = PrometheusSource(PrometheusSettings(url=prometheus_url, timeout_s=5.0))
        try:
            async with asyncio.timeout(90):  # a hang fails here, not at CI's deadline
                return await both(source)
        finally:
            source.close()

    async def both(source: PrometheusSource) -> tuple[RunReport, RunReport]:
        first = await replica("replica-a", source)
        second = await replica("replica-b", source)
        return first, second

    first, second = asyncio.run(scenario())
    assert first.result is RunResult.LEADERSHIP_LOST, first.message
    assert first.plan is not None
    assert len(first.plan.evictions) == 2
    assert len(first.evicted) == 1
    # No pod was asked to be evicted twice, and only the leader's one web pod is gone.
    asked = Counter(r.path.split("/")[-2] for r in fake_kube.requests("POST", EVICTIONS))
    assert max(asked.values()) == 1, asked
    assert [n for n in evicted(fake_kube) if n.startswith("web-")] == [
        first.evicted[0].split("/")[-1]
    ]
    pdb = fake_kube.store.get_pdb("web", "shop")
    assert pdb is not None
    assert pdb["status"]["disruptionsAllowed"] >= 0
    # The standby led, and repeated nothing of the first run for the web Deployment.
    assert second.result is not RunResult.NOT_LEADER, second.message
    assert not any("web-" in str(pod) for pod in second.evicted), second.evicted
