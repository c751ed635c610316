"""The warm taint written by the annotator, on the fake API server: ``loadaware.io/warm``
on the nodes whose usage runs far ahead of the requests of the pods the pod watch sees
on them, taken off when they cool past the hold, and off every node with soft taints
off."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from app.load import WARM_TAINT_KEY, WarmTaintSettings
from tests.annotator.helpers import eventually, running
from tests.annotator.promproxy import PromProxy
from tests.annotator.test_soft_taints import (
    OURS,
    SETTINGS,
    Clock,
    cpu,
    set_cpu,
    set_taints,
    taints,
    the_annotator,
)
from tests.support.fakekube_fixtures import FakeKube

WARM = {"key": WARM_TAINT_KEY, "value": "true", "effect": "PreferNoSchedule"}
WARM_HOLD_S = WarmTaintSettings().min_hold_s
SIXTEEN = {"cpu": "16", "memory": "64Gi", "pods": "110"}
SERVICES = [f"svc-{i}" for i in range(20)]
BATCH = [f"batch-{i}" for i in range(4)]


def a_cluster(fake_kube: FakeKube) -> None:
    """24 nodes of 16 cores: 20 of five service pods (2.5 cores asked, 0.30 used), 4 of
    one batch pod and three service pods (2 cores asked, 0.46 used)."""
    store = fake_kube.store
    for name in SERVICES:
        store.add_node(name, annotations=cpu(0.30), allocatable=SIXTEEN)
        for i in range(5):
            store.add_pod(f"{name}-web-{i}", node_name=name, requests={"cpu": "500m"})
    for name in BATCH:
        store.add_node(name, annotations=cpu(0.46), allocatable=SIXTEEN)
        store.add_pod(f"{name}-job", node_name=name, requests={"cpu": "500m"})
        for i in range(3):
            store.add_pod(f"{name}-web-{i}", node_name=name, requests={"cpu": "500m"})


def warm_nodes(fake_kube: FakeKube) -> set[str]:
    return {n for n in [*SERVICES, *BATCH] if WARM in taints(fake_kube, n)}


def test_the_nodes_far_ahead_of_their_requests_get_the_warm_taint_and_lose_it_when_cool(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    a_cluster(fake_kube)
    caplog.set_level(logging.INFO, logger="app.annotator")
    clock = Clock()

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, SETTINGS, clock)
            async with running(annotator):
                assert await eventually(lambda: warm_nodes(fake_kube) == set(BATCH))
                rounds = annotator.loops.soft_taint_rounds
                assert await eventually(lambda: annotator.loops.soft_taint_rounds >= rounds + 3)
                assert warm_nodes(fake_kube) == set(BATCH)  # no flapping, no other node
                assert all(OURS not in taints(fake_kube, n) for n in BATCH)  # none is hot
                set_cpu(fake_kube, "batch-0", cpu(0.30))  # cooled: held for a while
                rounds = annotator.loops.soft_taint_rounds
                assert await eventually(lambda: annotator.loops.soft_taint_rounds >= rounds + 3)
                assert WARM in taints(fake_kube, "batch-0")
                for name in [*SERVICES, *BATCH]:  # the readings must stay fresh
                    usage = 0.46 if name in BATCH[1:] else 0.30
                    set_cpu(fake_kube, name, cpu(usage, age_s=10 - WARM_HOLD_S - 30))
                clock.offset_s = WARM_HOLD_S + 30
                assert await eventually(lambda: WARM not in taints(fake_kube, "batch-0"))
                assert warm_nodes(fake_kube) == set(BATCH[1:])

    asyncio.run(scenario())
    assert "warm taint put on node batch-1: warm: cpu_usage_avg_5m 0.46 with 0.12" in caplog.text
    assert "warm taint taken off node batch-0" in caplog.text


def test_turned_off_it_takes_the_warm_taint_off_every_node(
    fake_kube: FakeKube, static_prom: PromProxy
) -> None:
    a_cluster(fake_kube)
    set_taints(fake_kube, "batch-0", [WARM])
    set_taints(fake_kube, "svc-3", [WARM, OURS])

    async def scenario() -> Any:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, None)
            async with running(annotator):
                assert await eventually(lambda: not warm_nodes(fake_kube))
                assert await eventually(lambda: taints(fake_kube, "svc-3") == [])

    asyncio.run(scenario())
