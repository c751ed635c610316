"""The shared list+watch caches: changes reach listeners whether watched or found by a relist."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import pytest

from app.kube.client import client_for_server
from app.kube.nodes import NodeCache
from app.kube.pods import PodCache
from app.objects.resources import Resources
from tests.support.fakekube import PODS
from tests.support.fakekube_fixtures import FakeKube

Change = tuple[str, str | None, str | None]


def node_of(pod: object) -> str:
    return str(getattr(pod, "spec").nodeName or "-")  # noqa: B009 - lightkube model


async def until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - polls state the server changes
            await asyncio.sleep(0.02)


def test_pod_changes_made_while_the_watch_was_down_reach_listeners_after_the_relist(
    fake_kube: FakeKube,
) -> None:
    store = fake_kube.store
    store.add_pod("pending")
    store.add_pod("gone", node_name="n1")
    store.add_pod("steady", node_name="n1")

    async def scenario() -> list[Change]:
        cache: PodCache[str] = PodCache(client_for_server(fake_kube.url), node_of)
        changes: list[Change] = []
        cache.add_listener(lambda key, old, new: changes.append((key, old, new)))
        task = asyncio.create_task(cache.run())
        await cache.wait_synced()
        changes.clear()
        task.cancel()  # the watch is down ...
        with contextlib.suppress(asyncio.CancelledError):
            await task
        store.bind("default", "pending", "n2")  # ... while the cluster moves on
        store.add_pod("new", node_name="n3")
        store.delete(PODS, "gone", "default")
        store.compact()  # and the old resourceVersion expires: 410, relist
        task = asyncio.create_task(cache.run())
        await until(lambda: len(changes) == 3)
        assert cache.objects["default/pending"] == "n2"
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return changes

    changes = asyncio.run(scenario())
    assert sorted(changes) == [
        ("default/gone", "n1", None),
        ("default/new", None, "n3"),
        ("default/pending", "-", "n2"),
    ]


def test_the_node_cache_keeps_what_placement_decisions_need(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node(
        "n1", labels={"zone": "a"}, allocatable={"cpu": "7500m", "memory": "30Gi"}
    )
    fake_kube.store.add_node("n2", unschedulable=True, ready=False)

    async def scenario() -> NodeCache:
        cache = NodeCache(client_for_server(fake_kube.url))
        task = asyncio.create_task(cache.run())
        await cache.wait_synced()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return cache

    nodes = asyncio.run(scenario()).nodes
    assert nodes["n1"].labels["zone"] == "a"
    assert nodes["n1"].allocatable == Resources(7.5, 30 * 2**30)
    assert (nodes["n1"].ready, nodes["n1"].unschedulable) == (True, False)
    assert (nodes["n2"].ready, nodes["n2"].unschedulable) == (False, True)


def test_a_cache_that_cannot_reach_the_api_server_says_so_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A component at start against an API server that is down: one warning a retry,
    in the adapter's words, naming the server, and the same as the readiness reason."""
    caplog.set_level(logging.WARNING, logger="app.kube.listwatch")

    async def scenario() -> str:
        client = client_for_server("http://127.0.0.1:9")
        cache = NodeCache(client, retry_delay_s=0.05)
        task = asyncio.create_task(cache.run())
        try:
            await until(lambda: "list/watch failed" in caplog.text)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await client.close()
        return cache.last_error

    last_error = asyncio.run(scenario())
    said = "cannot reach the API server at http://127.0.0.1:9"
    assert last_error.startswith(said), last_error
    line = next(r.getMessage() for r in caplog.records if "list/watch failed" in r.getMessage())
    assert line.startswith(f"node list/watch failed: {said}"), line
    assert "\n" not in line
