"""The leader-elected skeleton the annotator and the descheduler share: one status shape,
and the policy reload metrics in every component."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from app.descheduler.descheduler import Descheduler, LoopSettings
from app.extender.extender import Extender
from app.policy import default_policy
from app.prom.client import PrometheusSettings, PrometheusSource
from app.rebalance.config import DeschedulerConfig
from app.runtime.leader_election import LeaseSettings
from tests.annotator.helpers import annotator
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
