"""The Lease as the leader election reads and writes it (app/kube/lease.py), on the fake
API server: absent is None, a write another replica made first is None, and every other
failure is LeaseUnavailable saying whether the request reached an API server."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from app.kube.client import client_for_server
from app.kube.lease import LeaseRecord, LeaseStore, LeaseUnavailable
from tests.support.fakekube_fixtures import FakeKube

PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/probe"
NOW = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)


def record(holder: str, transitions: int = 0) -> LeaseRecord:
    return LeaseRecord(holder, 15, NOW, NOW, transitions)


def test_a_lease_is_read_created_and_replaced_and_a_stale_write_loses(
    fake_kube: FakeKube,
) -> None:
    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            store = LeaseStore(client, "default", "probe")
            assert await store.read() is None
            created = await store.create(record("a"))
            assert created is not None
            assert created.record == record("a")
            assert await store.create(record("b")) is None  # it exists: another was first
            read = await store.read()
            assert read is not None
            assert read.record.holder == "a"
            replaced = await store.replace(read, record("b", 1))
            assert replaced is not None
            assert replaced.record == record("b", 1)
            # ``read`` carries the resourceVersion from before: someone wrote since.
            assert await store.replace(read, record("c", 2)) is None
            now = await store.read()
            assert now is not None
            assert now.record.holder == "b"

    asyncio.run(scenario())


def test_a_refusal_says_its_code_and_a_server_that_is_down_says_it_was_not_reached(
    fake_kube: FakeKube,
) -> None:
    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            fake_kube.fail_next("GET", PATH, 403)
            with pytest.raises(LeaseUnavailable, match="forbidden") as refused:
                await LeaseStore(client, "default", "probe").read()
            assert (refused.value.code, refused.value.unreachable) == (403, False)
        down = client_for_server("http://127.0.0.1:9")
        try:
            with pytest.raises(
                LeaseUnavailable, match=r"cannot reach the API server at http://127\.0\.0\.1:9:"
            ) as error:
                await LeaseStore(down, "default", "probe").create(record("a"))
            assert (error.value.code, error.value.unreachable) == (None, True)
        finally:
            await down.close()

    asyncio.run(scenario())
