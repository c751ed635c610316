"""The leader-elected skeleton the annotator and the descheduler share: one status shape,
the policy reload metrics in every component, and one unit of work run once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

import pytest
from lightkube import AsyncClient
from prometheus_client import CollectorRegistry

from app.descheduler.descheduler import Descheduler, LoopSettings
from app.extender.extender import Extender
from app.extender.http import extender_status
from app.kube import NodeCache
from app.policy import default_policy
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.rebalance.config import DeschedulerConfig
from app.runtime import LeaderElectedService, LeadershipNotAcquired
from app.runtime.flags import LeaseSettings
from tests.annotator.helpers import annotator
from tests.support.fakekube import LEASES
from tests.support.fakekube_fixtures import FakeKube

COMMON = [
    "component",
    "alive",
    "stopped_tasks",
    "ready",
    "not_ready_because",
    "caches_synced",
    "leader",
    "leader_election",
]
LEASE = LeaseSettings(namespace="kube-system", name="test-lease", identity="replica-a")


def test_the_annotator_and_the_descheduler_answer_one_status_shape(fake_kube: FakeKube) -> None:
    async def statuses() -> list[dict[str, object]]:
        source = PrometheusSource(PrometheusSettings(url="http://127.0.0.1:9"))
        async with fake_kube.async_client() as client:
            the_annotator = annotator(fake_kube, client, "http://127.0.0.1:9", lease=LEASE)
            descheduler = Descheduler(
                DeschedulerConfig(), default_policy(), client, source, LoopSettings(lease=LEASE)
            )
            found = [dict(the_annotator.status()), dict(descheduler.status())]
        source.close()
        return found

    annotator_status, descheduler_status = asyncio.run(statuses())
    for status, component in ((annotator_status, "annotator"), (descheduler_status, "descheduler")):
        assert list(status)[: len(COMMON)] == COMMON, component
        assert status["component"] == component
        # Not started: nothing has stopped, no cache is synced, so not ready; a follower.
        assert status["alive"] is True
        assert status["ready"] is False
        assert status["leader"] is False
        assert status["leader_election"] == {
            "enabled": True,
            "identity": "replica-a",
            "lease": "kube-system/test-lease",
            "holder": None,
        }
    assert annotator_status["caches_synced"] == {"nodes": False, "pods": False}
    assert descheduler_status["caches_synced"] == {
        "nodes": False,
        "pods": False,
        "pod_disruption_budgets": False,
    }
    assert "metrics" in annotator_status  # each component's own fields follow
    assert "last_run" in descheduler_status


def test_every_component_reports_policy_reloads_and_the_last_good_load(
    fake_kube: FakeKube,
) -> None:
    async def registries() -> dict[str, CollectorRegistry]:
        source = PrometheusSource(PrometheusSettings(url="http://127.0.0.1:9"))
        async with fake_kube.async_client() as client:
            the_annotator = annotator(fake_kube, client, "http://127.0.0.1:9")
            descheduler = Descheduler(DeschedulerConfig(), default_policy(), client, source)
            found = {
                "annotator": the_annotator.telemetry.registry,
                "descheduler": descheduler.telemetry.registry,
            }
            the_annotator.telemetry.policy.reload_result("error")
            descheduler.telemetry.policy.reload_result("error")
        source.close()
        return found

    found = asyncio.run(registries())
    extender = Extender(default_policy(), mode="test")
    extender.on_policy_reload("error")
    found["extender"] = extender.metrics.registry
    for component, registry in found.items():
        errors = registry.get_sample_value("loadaware_policy_reloads_total", {"result": "error"})
        assert errors == 1, component
        loaded = registry.get_sample_value(
            "loadaware_policy_last_successful_reload_timestamp_seconds"
        )
        assert loaded is not None, component
        assert loaded > 0, component


def held_by_replica_b(fake_kube: FakeKube) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    fake_kube.store.add(
        LEASES,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": LEASE.name, "namespace": LEASE.namespace},
            "spec": {
                "holderIdentity": "replica-b",
                "leaseDurationSeconds": 60,
                "acquireTime": now,
                "renewTime": now,
            },
        },
    )


def one_off_service(
    client: AsyncClient, lead: Callable[[], Coroutine[Any, Any, None]]
) -> LeaderElectedService:
    return LeaderElectedService(
        "test",
        client,
        caches={"nodes": NodeCache(client)},
        lead=lead,
        registry=CollectorRegistry(),
        leader_metric="test_is_leader",
        lease=LEASE,
    )


def test_run_once_runs_the_work_as_leader_on_synced_caches_then_stops_and_releases(
    fake_kube: FakeKube,
) -> None:
    fake_kube.store.add_node("n1")
    led: list[str] = []

    async def lead() -> None:  # the long-running path's work: never run by run_once
        led.append("lead")

    async def scenario() -> tuple[list[str], bool, list[bool]]:
        async with fake_kube.async_client() as client:
            service = one_off_service(client, lead)

            async def work() -> list[str]:
                await service.caches_synced()
                assert service.is_leader
                return sorted(service.caches["nodes"].objects)

            names = await service.run_once(work, leadership_timeout_s=5.0)
            return names, service.is_leader, [task.done() for task in service.background]

    names, leading_after, done = asyncio.run(scenario())
    assert names == ["n1"]
    assert led == []
    assert done  # the cache and the election ran, and stopped with the run
    assert all(done)
    assert not leading_after
    stored = fake_kube.store.get_lease(LEASE.name, LEASE.namespace)
    assert stored is not None
    assert not stored["spec"].get("holderIdentity")  # released for the next run


def test_run_once_without_the_lease_does_not_run_the_work_and_names_the_holder(
    fake_kube: FakeKube,
) -> None:
    held_by_replica_b(fake_kube)
    ran: list[str] = []

    async def work() -> None:
        ran.append("work")

    async def scenario() -> LeadershipNotAcquired:
        async with fake_kube.async_client() as client:
            service = one_off_service(client, work)
            with pytest.raises(LeadershipNotAcquired) as raised:
                # Time to read the lease even on a loaded machine: at 0.5 s, one CI run
                # gave up before its first answer and could name no holder.
                await service.run_once(work, leadership_timeout_s=2.0)
            assert all(task.done() for task in service.background)
            return raised.value

    missed = asyncio.run(scenario())
    assert ran == []
    assert missed.holder == "replica-b"
    assert "kube-system/test-lease not acquired within 2s: it is held by replica-b" in str(missed)
    stored = fake_kube.store.get_lease(LEASE.name, LEASE.namespace)
    assert stored is not None
    assert stored["spec"]["holderIdentity"] == "replica-b"


def test_the_extender_answers_the_probes_with_the_same_payload(fake_kube: FakeKube) -> None:
    async def statuses() -> tuple[dict[str, object], dict[str, object]]:
        async with fake_kube.async_client() as client:
            extender = Extender(default_policy(), node_cache=NodeCache(client))
            not_synced = extender_status(extender)
        return not_synced, extender_status(Extender(default_policy()))

    node_cache_mode, full_nodes_mode = asyncio.run(statuses())
    shared = COMMON[: COMMON.index("leader")]  # no Lease: the extender is never elected
    assert list(node_cache_mode)[: len(shared)] == shared
    assert node_cache_mode["component"] == "extender"
    assert node_cache_mode["alive"] is True
    assert node_cache_mode["ready"] is False
    assert "node cache" in str(node_cache_mode["not_ready_because"])
    assert node_cache_mode["caches_synced"] == {"nodes": False}
    assert node_cache_mode["mode"] == "node-cache"
    assert full_nodes_mode["ready"] is True
    assert full_nodes_mode["not_ready_because"] is None
    assert full_nodes_mode["caches_synced"] == {}
