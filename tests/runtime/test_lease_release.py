"""A stopping leader gives its Lease up even when a request of the release reaches no
API server (a connection refused or reset as the process stops), and never waits past
renewDeadline when none ever does."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, cast

import httpx2
import pytest
from lightkube import AsyncClient

from app.runtime import LeaseSettings
from app.runtime.leader_election import RELEASE_ATTEMPTS, LeaderElector
from tests.support.fakekube_fixtures import FakeKube

SETTINGS = LeaseSettings(
    namespace="default",
    name="probe",
    identity="me",
    lease_duration_s=15.0,
    renew_deadline_s=2.0,
    retry_period_s=0.05,
)


class RefusedWhileStopping:
    """The client, but its first ``refusals`` requests once ``stopping`` is set reach
    no server (httpx's ConnectError, as in the annotator's own stop on a loaded CI)."""

    def __init__(self, client: AsyncClient, refusals: int) -> None:
        self._client = client
        self.refusals = refusals
        self.stopping = False

    @property
    def config(self) -> Any:
        return self._client.config

    def _maybe_refuse(self) -> None:
        if self.stopping and self.refusals > 0:
            self.refusals -= 1
            raise httpx2.ConnectError("All connection attempts failed")

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        self._maybe_refuse()
        return await self._client.get(*args, **kwargs)

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        self._maybe_refuse()
        return await self._client.create(*args, **kwargs)

    async def replace(self, *args: Any, **kwargs: Any) -> Any:
        self._maybe_refuse()
        return await self._client.replace(*args, **kwargs)


def lead_then_stop(fake_kube: FakeKube, refusals: int) -> float:
    """Lead, then stop with ``refusals`` requests refused; the stop's duration."""

    async def scenario() -> float:
        async with fake_kube.async_client() as client:
            flaky = RefusedWhileStopping(client, refusals)
            elector = LeaderElector(cast(AsyncClient, flaky), SETTINGS)
            task = asyncio.create_task(elector.run())
            deadline = time.monotonic() + 10
            while not elector.is_leader:
                assert time.monotonic() < deadline, "never led"
                await asyncio.sleep(0.01)
            flaky.stopping = True
            started = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return time.monotonic() - started

    return asyncio.run(scenario())


@pytest.mark.parametrize("refusals", [1, RELEASE_ATTEMPTS - 1])
def test_a_release_that_reached_no_server_is_tried_again(
    fake_kube: FakeKube, refusals: int
) -> None:
    lead_then_stop(fake_kube, refusals)
    lease = fake_kube.store.get_lease("probe")
    assert lease is not None
    assert not lease["spec"].get("holderIdentity")


def test_a_release_that_never_reaches_a_server_gives_up_within_the_deadline(
    fake_kube: FakeKube, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="app.runtime.leader_election")
    took_s = lead_then_stop(fake_kube, refusals=1000)
    assert took_s < SETTINGS.renew_deadline_s
    lease = fake_kube.store.get_lease("probe")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "me"  # it expires; a successor waits it out
    assert "could not release it (cannot reach the API server" in caplog.text
