"""Readiness of the annotator and the descheduler through their own health ports while
the API server is away for longer than the grace: 503 naming the cache, 200 again once
it is back, and no loop dies. Prometheus plays no part (it is unreachable here)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import httpx

from app.annotator.annotator import Annotator, AnnotatorConfig
from app.descheduler.descheduler import Descheduler, LoopSettings
from app.kube.cache import WatchCache
from app.policy import default_policy
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from tests.annotator.helpers import policy
from tests.descheduler import cluster
from tests.support.fakekube import FakeKubeServer
from tests.support.fakekube_fixtures import FakeKube
from tests.support.ports import free_port

GRACE_S = 0.2
TIMEOUT_S = 20.0


async def poll_status(http: httpx.AsyncClient, url: str, status: int) -> httpx.Response:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            answer = await http.get(url)
            if answer.status_code == status:
                return answer
        except httpx.TransportError:
            pass  # the health server is not up yet
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer {status} within {TIMEOUT_S:g}s")
        await asyncio.sleep(0.05)


async def outage(fake_kube: FakeKube, port: int, caches: list[WatchCache[Any]],
                 run: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run the component; take the API server away past the grace, then bring it back."""
    for cache in caches:
        cache.outage_grace_s = GRACE_S
    readyz = f"http://127.0.0.1:{port}/readyz"
    task = asyncio.create_task(run())
    try:
        async with httpx.AsyncClient(timeout=5.0) as http:
            await poll_status(http, readyz, 200)
            api_port = int(fake_kube.url.rsplit(":", 1)[1])
            fake_kube.server.stop()
            down = await poll_status(http, readyz, 503)
            assert "has not reached the API server" in down.json()["not_ready_because"]
            assert down.json()["alive"] is True
            assert (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
            successor = FakeKubeServer(fake_kube.store)
            successor.start(port=api_port)
            fake_kube.server = successor
            back = await poll_status(http, readyz, 200)
            assert back.json()["not_ready_because"] is None
            assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def unreachable_prometheus() -> PrometheusSource:
    return PrometheusSource(PrometheusSettings(url=f"http://127.0.0.1:{free_port()}",
                                               timeout_s=1.0))


def test_annotator_readyz_is_503_during_an_api_server_outage_and_200_after(
    fake_kube: FakeKube,
) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")
    port = free_port()

    async def scenario() -> None:
        source = unreachable_prometheus()
        async with fake_kube.async_client() as client:
            config = AnnotatorConfig(policy=policy(), health_host="127.0.0.1", health_port=port)
            annotator = Annotator(config, client, source)
            await outage(fake_kube, port, [annotator.nodes, annotator.pod_watch], annotator.run)
        source.close()

    asyncio.run(scenario())


def test_descheduler_readyz_is_503_during_an_api_server_outage_and_200_after(
    fake_kube: FakeKube,
) -> None:
    cluster.seed(fake_kube.store)
    port = free_port()

    async def scenario() -> None:
        source = unreachable_prometheus()
        async with fake_kube.async_client() as client:
            descheduler = Descheduler(
                cluster.config(), default_policy(), client, source,
                LoopSettings(health_host="127.0.0.1", health_port=port, sync_timeout_s=5.0),
            )
            caches: list[WatchCache[Any]] = [descheduler.nodes, descheduler.pods,
                                                descheduler.budgets]
            await outage(fake_kube, port, caches, descheduler.run)
        source.close()

    asyncio.run(scenario())
