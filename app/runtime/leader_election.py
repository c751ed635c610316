"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

Only the leader writes annotations; the other replicas run their caches and watches
so that they can take over at once. The rules follow client-go's leaderelection:

* A candidate takes the lease when it is free, or when its record has not changed for
  ``leaseDurationSeconds`` *as measured by the candidate's own clock* since it first
  saw that record, so the replicas' wall clocks need not agree.
* Every write carries the lease's resourceVersion; a 409 means another replica wrote
  first, and this one backs off.
* The leader renews every retry period. ``is_leader`` turns false as soon as the last
  successful renewal is older than the renew deadline, even if the renew loop itself
  is stuck, so a leader cut off from the API server stops writing before anybody else
  can take the lease (renew deadline < lease duration).
* On shutdown the leader releases the lease, so a successor need not wait it out; a
  request of the release that reaches no API server is tried again, all of it within
  the renew deadline.

The election's flags (``--leader-elect``, ``--lease-*``, ``--leader-elect-*``) and the
``LeaseSettings`` they give are in ``flags``, which a command's parser loads without
the Kubernetes client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from app.kube import KubeClient, LeaseRecord, LeaseStore, LeaseUnavailable, ReadLease
from app.runtime.flags import LeaseSettings

__all__ = [
    "LeaderElector",
]

log = logging.getLogger(__name__)

# A release that reached no API server is tried again, this often in all, waiting
# RELEASE_RETRY_S times the attempt between tries (within renewDeadline, the bound on
# the whole release).
RELEASE_ATTEMPTS = 3
RELEASE_RETRY_S = 0.1


LeadershipListener = Callable[[bool], None]


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        settings: LeaseSettings,
        *,
        on_change: LeadershipListener | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lease = LeaseStore(client, settings.namespace, settings.name)
        self.settings = settings
        self._on_change = on_change
        self._monotonic = monotonic
        self._leading = False
        self.attempts = 0  # acquire-or-renew rounds run (tests wait on it, not on time)
        self._last_renew_mono = -float("inf")
        self._observed_record: tuple[Any, ...] | None = None
        self._observed_at_mono = 0.0
        self.holder: str | None = None  # the last holder this replica saw

    @property
    def is_leader(self) -> bool:
        return self._leading and (
            self._monotonic() - self._last_renew_mono < self.settings.renew_deadline_s
        )

    async def run(self) -> None:
        s = self.settings
        log.info("leader election: candidate %s for lease %s/%s", s.identity, s.namespace, s.name)
        try:
            while True:
                try:
                    async with asyncio.timeout(s.retry_period_s * 2):
                        renewed = await self._try_acquire_or_renew()
                except TimeoutError:
                    renewed = False
                    log.warning("lease %s/%s: API call timed out", s.namespace, s.name)
                except Exception:  # an undecodable answer must not end the election loop
                    renewed = False
                    log.exception("lease %s/%s: unexpected error", s.namespace, s.name)
                if renewed:
                    self._last_renew_mono = self._monotonic()
                    self._set_leading(True)
                elif self._leading and not self.is_leader:
                    log.error(
                        "lease %s/%s: could not renew within %gs; stopped writing annotations",
                        s.namespace,
                        s.name,
                        s.renew_deadline_s,
                    )
                    self._set_leading(False)
                elif self._leading and self.holder not in (None, s.identity):
                    log.error("lease %s/%s was taken by %s", s.namespace, s.name, self.holder)
                    self._set_leading(False)
                self.attempts += 1
                # Jitter so followers do not all hit the API server in the same instant.
                delay_s = (
                    s.retry_period_s
                    if self._leading
                    else s.retry_period_s * (1 + random.uniform(0, 0.2))
                )
                await asyncio.sleep(delay_s)
        finally:
            if self._leading:
                self._set_leading(False)
                await self._release_within(s.renew_deadline_s)

    async def _release_within(self, timeout_s: float) -> None:
        """Release the lease, shielded from the cancellation that stops this loop, but
        never waiting on an API server that does not answer: a stop must not hang, and
        an unreleased lease only makes the successor wait for it to expire."""
        release = asyncio.ensure_future(self._release())
        try:
            await asyncio.wait_for(asyncio.shield(release), timeout_s)
        except TimeoutError:
            release.cancel()
            s = self.settings
            log.warning(
                "lease %s/%s: not released within %gs; a successor takes over after it expires",
                s.namespace,
                s.name,
                timeout_s,
            )

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        s = self.settings
        if leading:
            log.info("lease %s/%s acquired by %s: now writing", s.namespace, s.name, s.identity)
        else:
            log.info("lease %s/%s: %s is no longer leader", s.namespace, s.name, s.identity)
        if self._on_change is not None:
            self._on_change(leading)

    def _observe(self, lease: ReadLease) -> None:
        record = lease.record
        seen = (record.holder, record.renewed, record.duration_s)
        if seen != self._observed_record:
            self._observed_record = seen
            self._observed_at_mono = self._monotonic()
        self.holder = record.holder

    async def _try_acquire_or_renew(self) -> bool:
        s = self.settings
        now = datetime.now(UTC)
        try:
            lease = await self._lease.read()
        except LeaseUnavailable as error:
            log.warning("lease %s/%s: cannot read it: %s", s.namespace, s.name, error)
            return False
        if lease is None:
            return await self._create(now)
        self._observe(lease)
        record = lease.record
        held_by_other = record.holder not in (None, s.identity)
        duration_s = record.duration_s or s.lease_duration_s
        if held_by_other and self._monotonic() < self._observed_at_mono + duration_s:
            return False
        ours = record.holder == s.identity
        renewed = LeaseRecord(
            holder=s.identity,
            duration_s=max(1, round(s.lease_duration_s)),
            acquired=record.acquired if ours and record.acquired else now,
            renewed=now,
            transitions=(record.transitions or 0) + (0 if ours else 1),
        )
        return await self._replace(lease, renewed)

    async def _create(self, now: datetime) -> bool:
        s = self.settings
        record = LeaseRecord(
            holder=s.identity,
            duration_s=max(1, round(s.lease_duration_s)),
            acquired=now,
            renewed=now,
            transitions=0,
        )
        try:
            created = await self._lease.create(record)
        except LeaseUnavailable as error:
            rights = (
                f". The annotator needs create, get and update on leases in namespace {s.namespace}"
                if error.code is not None
                else ""
            )
            log.warning("lease %s/%s: cannot create it: %s%s", s.namespace, s.name, error, rights)
            return False
        if created is None:  # another replica created it first
            return False
        self._observe(created)
        return True

    async def _replace(self, lease: ReadLease, record: LeaseRecord) -> bool:
        s = self.settings
        try:
            updated = await self._lease.replace(lease, record)
        except LeaseUnavailable as error:
            log.warning("lease %s/%s: cannot update it: %s", s.namespace, s.name, error)
            return False
        if updated is None:
            log.debug("lease %s/%s: another replica updated it first", s.namespace, s.name)
            return False
        self._observe(updated)
        return True

    async def _release(self) -> None:
        """Give the lease up so that a successor takes over without waiting it out. A
        request that reached no API server (a connection refused or reset as the
        process stops) is tried again, up to ``RELEASE_ATTEMPTS`` in all; the caller
        bounds the whole by ``renewDeadline``."""
        s = self.settings
        for attempt in range(1, RELEASE_ATTEMPTS + 1):
            try:
                await self._give_up()
                return
            except LeaseUnavailable as error:
                if error.unreachable and attempt < RELEASE_ATTEMPTS:
                    await asyncio.sleep(RELEASE_RETRY_S * attempt)
                    continue
                failure = str(error)
            log.warning(
                "lease %s/%s: could not release it (%s); a successor takes over after it expires",
                s.namespace,
                s.name,
                failure,
            )
            return

    async def _give_up(self) -> None:
        s = self.settings
        lease = await self._lease.read()
        if lease is None or lease.record.holder != s.identity:
            return
        record = lease.record
        released = LeaseRecord(
            holder=None,
            duration_s=1,
            acquired=record.acquired,
            renewed=datetime.now(UTC),
            transitions=record.transitions,
        )
        if await self._lease.replace(lease, released) is None:
            log.warning(
                "lease %s/%s: could not release it (another replica wrote it first)",
                s.namespace,
                s.name,
            )
            return
        log.info("lease %s/%s released by %s", s.namespace, s.name, s.identity)


class LeaderWork:
    """The work a replica does only while it leads: started when leadership is won,
    cancelled when it is lost, and cancelled and awaited when the process stops."""

    def __init__(self, work: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        self._work = work
        self.name = name
        self._task: asyncio.Task[None] | None = None

    def set_leading(self, leading: bool) -> None:
        if leading:
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._work(), name=self.name)
        elif self._task is not None:
            self._task.cancel()
            self._task = None

    @property
    def ended(self) -> bool:
        """True when the work stopped by itself while leading: it crashed."""
        return self._task is not None and self._task.done()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
