"""With two replicas only the leader writes, and the other takes over when it goes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from app.annotator.annotator import Annotator
from app.runtime.leader_election import LeaderElector
from tests.annotator.helpers import (
    annotator,
    eventually,
    fast_lease,
    metric_value,
    policy,
    running,
)
from tests.annotator.promproxy import PromProxy
from tests.support.fakekube_fixtures import FakeKube
from tests.support.ports import free_port

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/loadaware-annotator"
FAST = policy({"cpu_usage_avg_5m": "1s"})  # the shortest period a policy may have


def patches_by(replica: Annotator) -> float:
    return metric_value(
        replica, "loadaware_annotator_patches_total", {"kind": "metrics", "outcome": "written"}
    )


@pytest.fixture
def one_node(fake_kube: FakeKube, static_prom: PromProxy) -> PromProxy:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")
    static_prom.static_result = [
        {"metric": {"instance": "10.0.0.1:9100"}, "value": [time.time(), "42"]}
    ]
    return static_prom


@contextlib.asynccontextmanager
async def replica(
    fake_kube: FakeKube, prom: PromProxy, identity: str, **config: object
) -> AsyncIterator[tuple[Annotator, asyncio.Task[None]]]:
    async with fake_kube.async_client() as client:
        the_annotator = annotator(
            fake_kube,
            client,
            prom.url,
            the_policy=FAST,
            lease=fast_lease(identity),
            health_host="127.0.0.1",
            **config,  # type: ignore[arg-type]
        )
        async with running(the_annotator) as task:
            yield the_annotator, task


def holder(fake_kube: FakeKube) -> str | None:
    stored = fake_kube.store.get_lease("loadaware-annotator")
    return None if stored is None else stored["spec"].get("holderIdentity")


def test_only_the_leader_writes_and_the_other_takes_over_when_it_stops(
    fake_kube: FakeKube, one_node: PromProxy
) -> None:
    async def scenario() -> None:
        async with replica(fake_kube, one_node, "a") as (a, a_task):
            assert await eventually(lambda: patches_by(a) >= 2, 30)
            async with replica(fake_kube, one_node, "b") as (b, _):
                assert await eventually(lambda: b.pod_watch.synced, 30)
                elector = b.elector
                assert elector is not None
                tried = elector.attempts
                # b has tried to take the lease several times, and may not write.
                assert await eventually(lambda: elector.attempts >= tried + 3, 30)
                assert (a.may_write(), b.may_write()) == (True, False)
                assert patches_by(b) == 0
                assert holder(fake_kube) == "a"

                a_task.cancel()  # graceful stop: a releases the lease
                with contextlib.suppress(asyncio.CancelledError):
                    await a_task
                # Released (holder cleared), so b need not wait out the lease.
                releases = [
                    r for r in fake_kube.requests("PUT", LEASE_PATH)
                    if not (r.body or {}).get("spec", {}).get("holderIdentity")
                ]  # fmt: skip
                assert len(releases) == 1
                assert await eventually(lambda: patches_by(b) >= 1, 30)
                assert holder(fake_kube) == "b"
                a_writes = patches_by(a)
                ticks = b.metric_loop.ticks
                assert await eventually(lambda: b.metric_loop.ticks >= ticks + 2, 30)
                assert patches_by(a) == a_writes  # a stopped, writes nothing more

    asyncio.run(scenario())


def test_a_lease_that_is_not_released_is_taken_over_after_it_expires(
    fake_kube: FakeKube, one_node: PromProxy
) -> None:
    async def scenario() -> float:
        async with replica(fake_kube, one_node, "a") as (a, a_task):
            assert await eventually(a.may_write, 30)
            async with replica(fake_kube, one_node, "b") as (b, _):
                assert await eventually(lambda: b.pod_watch.synced, 30)
                elector = b.elector
                assert elector is not None
                tried = elector.attempts
                assert await eventually(lambda: elector.attempts >= tried + 2, 30)
                # a's release fails: a "crash". Every lease write fails until a has
                # stopped, not only the next: a renews every 0.1 s, and on a loaded
                # machine a renewal took a single failure before the release came.
                # a's last renewal landed before this instant, so the lease runs out
                # at least 1 s (its duration) less one retry period after it.
                fake_kube.fail_next("PUT", LEASE_PATH, 500, times=1_000_000)
                stopped_at = time.monotonic()
                a_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await a_task
                fake_kube.faults.clear()
                assert holder(fake_kube) == "a"
                assert await eventually(b.may_write, 30)
                taken_after_s = time.monotonic() - stopped_at
                assert await eventually(lambda: patches_by(b) >= 1, 30)
                return taken_after_s

    taken_after_s = asyncio.run(scenario())
    # Safety: never before the 1 s lease could have run out (less a retry period). A
    # lower bound only: a loaded machine delays the takeover, it cannot hasten it.
    # Liveness is the `eventually` above; no upper bound.
    assert taken_after_s >= 0.5


def test_a_leader_that_cannot_renew_stops_writing_within_the_renew_deadline(
    fake_kube: FakeKube, one_node: PromProxy
) -> None:
    async def scenario() -> None:
        async with replica(fake_kube, one_node, "a") as (a, _):
            assert await eventually(lambda: patches_by(a) >= 1, 30)
            fake_kube.fail_next("GET", LEASE_PATH, 503, times=1000)
            # When is covered with a fake clock in the test below; here, that it does.
            assert await eventually(lambda: not a.may_write(), 30)
            elector = a.elector
            assert elector is not None
            # Losing the lease cancels the writing task at once; two more election
            # rounds (each a round trip to the same server) let a request already on
            # the wire land. Then three more rounds pass without a write.
            tried = elector.attempts
            assert await eventually(lambda: elector.attempts >= tried + 2, 30)
            writes = len(fake_kube.requests("PATCH", "/api/v1/nodes/*"))
            assert await eventually(lambda: elector.attempts >= tried + 5, 30)
            assert len(fake_kube.requests("PATCH", "/api/v1/nodes/*")) == writes
            assert metric_value(a, "loadaware_annotator_is_leader") == 0
            fake_kube.faults.clear()
            assert await eventually(a.may_write, 30)  # and it comes back

    asyncio.run(scenario())


def test_is_leader_turns_false_at_the_renew_deadline_even_if_the_loop_is_stuck() -> None:
    now = [100.0]
    elector = LeaderElector(None, fast_lease("a"), monotonic=lambda: now[0])  # type: ignore[arg-type]
    elector._leading = True
    elector._last_renew_mono = 100.0
    assert elector.is_leader
    now[0] = 100.59
    assert elector.is_leader
    now[0] = 100.61
    assert not elector.is_leader


def test_a_follower_is_ready_and_says_it_is_not_the_leader(
    fake_kube: FakeKube, one_node: PromProxy
) -> None:
    port_a, port_b = free_port(), free_port()

    async def scenario() -> tuple[dict[str, object], dict[str, object], int]:
        async with replica(fake_kube, one_node, "a", health_port=port_a) as (a, _):
            assert await eventually(a.may_write, 5)
            async with httpx.AsyncClient() as http:
                # The leader's first annotation round, not just its lease, before b starts.
                assert await _eventually_up(http, port_a)
                assert await _eventually_synced(http, port_a, "cpu_usage_avg_5m")
            async with replica(fake_kube, one_node, "b", health_port=port_b) as (b, _):
                assert await eventually(lambda: b.pod_watch.synced and b.nodes.synced, 5)
                async with httpx.AsyncClient() as http:
                    assert await _eventually_up(http, port_b)
                    ready_b = await http.get(f"http://127.0.0.1:{port_b}/readyz")
                    ready_a = await http.get(f"http://127.0.0.1:{port_a}/readyz")
                    metrics = await http.get(f"http://127.0.0.1:{port_b}/metrics")
                    assert "loadaware_annotator_is_leader 0.0" in metrics.text
                    return ready_a.json(), ready_b.json(), ready_b.status_code

    ready_a, ready_b, status_b = asyncio.run(scenario())
    assert status_b == 200
    assert ready_b["ready"] is True
    assert ready_b["leader"] is False
    assert "does not depend on leadership" in str(ready_b["note"])
    assert ready_a["leader"] is True
    metrics_a = ready_a["metrics"]
    assert isinstance(metrics_a, dict)
    assert metrics_a["cpu_usage_avg_5m"]["last_success"] is not None


async def _eventually_up(http: httpx.AsyncClient, port: int) -> bool:
    for _ in range(100):
        with contextlib.suppress(httpx.HTTPError):
            await http.get(f"http://127.0.0.1:{port}/healthz")
            return True
        await asyncio.sleep(0.02)
    return False


async def _eventually_synced(http: httpx.AsyncClient, port: int, metric: str) -> bool:
    for _ in range(250):
        ready = (await http.get(f"http://127.0.0.1:{port}/readyz")).json()
        if ready["metrics"][metric]["last_success"] is not None:
            return True
        await asyncio.sleep(0.02)
    return False
