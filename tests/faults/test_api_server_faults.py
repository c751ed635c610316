"""API server faults, injected for real on the fake API server: the shared caches
(nodes, pods, PDBs) relist and recover, readiness tells the truth, no loop dies."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Node

from app.kube.cache import WatchCache
from app.kube.client import client_for_server
from app.kube.nodes import NodeCache, NodeInfo
from app.kube.pdbs import BudgetCache
from app.kube.pods import PodCache, pod_info
from tests.support.fakekube import NODES, FakeKubeServer
from tests.support.fakekube_fixtures import FakeKube

RETRY_S = 0.05
TIMEOUT_S = 10.0
NODE_LIST = "/api/v1/nodes"


async def until(condition: Callable[[], bool], timeout_s: float = TIMEOUT_S) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - polls state the server changes
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def running(cache: WatchCache[NodeInfo]) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(cache.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def node_cache(fake_kube: FakeKube) -> NodeCache:
    return NodeCache(client_for_server(fake_kube.url), retry_delay_s=RETRY_S,
                     max_retry_delay_s=RETRY_S)


def label(fake_kube: FakeKube, name: str, value: str) -> None:
    fake_kube.store.modify(NODES, name, lambda n: n["metadata"].setdefault("labels", {})
                           .update({"step": value}))


def labelled(cache: NodeCache, name: str, value: str) -> bool:
    node = cache.nodes.get(name)
    return node is not None and node.labels.get("step") == value


@pytest.mark.parametrize("status", [500, 409, 429, 503])
def test_a_failing_first_list_is_not_ready_names_the_error_then_syncs(
    fake_kube: FakeKube, status: int
) -> None:
    fake_kube.store.add_node("n1")
    fake_kube.fail_next("GET", NODE_LIST, status, times=3, retry_after=1 if status == 429 else None)

    async def scenario() -> None:
        cache = node_cache(fake_kube)
        async with running(cache) as task:
            await until(lambda: bool(cache.last_error))
            ok, why = cache.current()
            assert not ok
            assert "node cache has not synced" in why
            assert str(status) in why
            await cache.wait_synced()
            assert cache.current() == (True, "ok")
            assert "n1" in cache.nodes
            assert not task.done()

    asyncio.run(scenario())
    assert len(fake_kube.requests("GET", NODE_LIST)) >= 4


@pytest.mark.parametrize("status", [500, 409, 429])
def test_a_watch_that_fails_relists_and_catches_up(fake_kube: FakeKube, status: int) -> None:
    fake_kube.store.add_node("n1")

    async def scenario() -> None:
        cache = node_cache(fake_kube)
        async with running(cache) as task:
            await cache.wait_synced()
            lists_before = len(fake_kube.requests("GET", NODE_LIST))
            fake_kube.fail_next("GET", NODE_LIST, status, times=2)  # the reconnecting watch
            fake_kube.store.close_watches()  # so that the watch must come back
            label(fake_kube, "n1", "changed-while-failing")
            await until(lambda: labelled(cache, "n1", "changed-while-failing"))
            assert len(fake_kube.requests("GET", NODE_LIST)) > lists_before + 2
            assert cache.current() == (True, "ok")
            assert cache.down_for_s() is None
            assert not task.done()

    asyncio.run(scenario())


def test_410_gone_on_a_watch_relists_without_counting_as_an_outage(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1")

    async def scenario() -> None:
        cache = node_cache(fake_kube)
        cache.outage_grace_s = 0.0  # any outage at all would show
        async with running(cache):
            await cache.wait_synced()
            fake_kube.store.compact()  # every resourceVersion handed out is now too old
            fake_kube.store.close_watches()
            label(fake_kube, "n1", "after-410")
            await until(lambda: labelled(cache, "n1", "after-410"))
            assert cache.last_error == ""
            assert cache.current() == (True, "ok")

    asyncio.run(scenario())


def test_a_dropped_watch_connection_resumes_and_misses_nothing(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1")

    async def scenario() -> None:
        cache = node_cache(fake_kube)
        cache.outage_grace_s = 0.0
        async with running(cache):
            await cache.wait_synced()
            for step in range(3):
                fake_kube.store.close_watches()
                label(fake_kube, "n1", f"drop-{step}")
                await until(functools.partial(labelled, cache, "n1", f"drop-{step}"))
            assert cache.current() == (True, "ok")

    asyncio.run(scenario())


def test_an_api_server_restart_on_the_same_address_is_survived_by_every_shared_cache(
    fake_kube: FakeKube,
) -> None:
    store = fake_kube.store
    store.add_node("n1")
    store.add_pod("p1", "shop", node_name="n1")
    store.add_pdb("b1", "shop", match_labels={"app": "web"})

    async def scenario() -> None:
        client: AsyncClient = client_for_server(fake_kube.url)
        caches: list[WatchCache[Any]] = [
            NodeCache(client, retry_delay_s=RETRY_S, max_retry_delay_s=RETRY_S),
            PodCache(client, pod_info, retry_delay_s=RETRY_S, max_retry_delay_s=RETRY_S),
            BudgetCache(client, retry_delay_s=RETRY_S, max_retry_delay_s=RETRY_S),
        ]
        tasks = [asyncio.create_task(c.run()) for c in caches]
        try:
            for cache in caches:
                await cache.wait_synced()
                cache.outage_grace_s = 0.2
            fake_kube.server.stop()  # the API server goes away ...
            await until(lambda: all(not c.current()[0] for c in caches))
            for cache in caches:
                assert "has not reached the API server" in cache.current()[1]
            store.add_node("n2")  # ... and comes back (same store, same port) with news
            store.add_pod("p2", "shop", node_name="n2")
            new = FakeKubeServer(store)
            new.start(port=int(fake_kube.url.rsplit(":", 1)[1]))
            fake_kube.server = new
            await until(lambda: "n2" in caches[0].objects and "shop/p2" in caches[1].objects)
            await until(lambda: all(c.current()[0] for c in caches))
            assert "shop/b1" in caches[2].objects
            assert not any(t.done() for t in tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(scenario())


def test_restart_server_keeps_the_store_and_the_address(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1")
    url = fake_kube.url
    fake_kube.restart_server()
    assert fake_kube.url == url
    assert fake_kube.client().get(Node, "n1").metadata is not None
