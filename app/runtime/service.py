"""The skeleton of a leader-elected loop component (the annotator, the descheduler).

Every replica runs the same background tasks: the watch caches, the file watchers
(policy, configuration), the health server and, with a Lease, leader election. Only
the leader runs the component's own work (``lead``); losing the Lease cancels it.
Signals stay with the component, so that SIGTERM can release the Lease before exit.

``/healthz`` and ``/readyz`` answer the one status shape of every component
(``app.health.probe_status``), with the election's fields after it::

    {"component", "alive", "stopped_tasks", "ready", "not_ready_because",
     "caches_synced": {cache: bool}, "leader",
     "leader_election": {"enabled", "identity", "lease", "holder"},
     ...the component's own fields}

Alive: no background task has stopped. Ready: every cache is current. Readiness does
not depend on leadership: a follower with synced caches is a healthy standby.

``run_once`` is the same skeleton for a single unit of work (``descheduler --once``):
caches and election start as in ``run``, the work runs once the Lease is held, and
everything stops after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Gauge

from app.health import EmbeddedServer, build_app, embedded_server, listen, probe_status, serve
from app.kube import KubeClient, WatchCache
from app.runtime.flags import LeaseSettings
from app.runtime.leader_election import LeaderElector, LeaderWork

__all__ = [
    "LeaderElectedService",
    "LeadershipNotAcquired",
    "Runnable",
    "run_until_signalled",
]

Work = Callable[[], Coroutine[Any, Any, None]]
T = TypeVar("T")
log = logging.getLogger(__name__)


class LeadershipNotAcquired(Exception):
    """A single run (``run_once``) did not get the Lease in time: another replica holds
    it (``holder``), or the API server could not be reached or refused it."""

    def __init__(self, lease: LeaseSettings, holder: str | None, waited_s: float) -> None:
        self.lease = lease
        self.holder = holder
        self.waited_s = waited_s
        self.why = (
            f"it is held by {holder}"
            if holder is not None
            else "the API server could not be reached or refused it (see the lease warnings above)"
        )
        super().__init__(
            f"lease {lease.namespace}/{lease.name} not acquired within {waited_s:g}s: {self.why}"
        )


class Runnable(Protocol):
    """A file watcher, or anything else that runs until cancelled."""

    async def run(self) -> None: ...


class LeaderElectedService:
    """Caches, watchers, health server and Lease of one component, and its status."""

    def __init__(
        self,
        component: str,
        client: KubeClient,
        *,
        caches: Mapping[str, WatchCache[Any]],
        lead: Work,
        registry: CollectorRegistry,
        leader_metric: str,  # the name of the 0/1 leadership gauge
        lease: LeaseSettings | None = None,
        health_host: str = "0.0.0.0",
        health_port: int | None = None,  # None: no HTTP server
        # Already bound to health_host:health_port, by a process that binds before it
        # loads the component (a port in use is told at once); None: bound by ``run``.
        health_socket: socket.socket | None = None,
        on_leadership: Callable[[bool], None] = lambda _leading: None,
        details: Callable[[], Mapping[str, Any]] = dict,
    ) -> None:
        self.component = component
        self.caches = dict(caches)
        self.lease = lease
        self._registry = registry
        self._health_host = health_host
        self._health_port = health_port
        self._health_socket = health_socket
        self._on_leadership = on_leadership
        self._details = details
        self.leading = Gauge(
            leader_metric,
            "1 while this replica holds the Lease (or runs without leader election), else 0.",
            registry=registry,
        )
        self.elector = (
            LeaderElector(client, lease, on_change=self._leadership_changed)
            if lease is not None
            else None
        )
        self.leader_work = LeaderWork(lead, name=f"{component}-lead")
        self._run_lead_on_leadership = True  # False in run_once: that run is the work
        self._leading = asyncio.Event()
        self.background: list[asyncio.Task[Any]] = []
        self.server: EmbeddedServer | None = None

    @property
    def is_leader(self) -> bool:
        """Whether this replica may act: it holds the Lease, or runs without one."""
        return self.elector is None or self.elector.is_leader

    def _leadership_changed(self, leading: bool) -> None:
        self.leading.set(1 if leading else 0)
        if leading:
            self._leading.set()
        else:
            self._leading.clear()
        self._on_leadership(leading)
        if self._run_lead_on_leadership:
            self.leader_work.set_leading(leading)

    def _start_caches(self, group: asyncio.TaskGroup) -> None:
        self.background = [
            group.create_task(cache.run(), name=f"{name}-cache")
            for name, cache in self.caches.items()
        ]

    async def run(self, watchers: tuple[Runnable, ...] = ()) -> None:
        """Run every background task, and ``lead`` while leading, until cancelled.

        The health port is bound first, unless given bound: one that cannot be listened
        on raises CannotListen before anything starts."""
        health_socket = self._health_socket
        if health_socket is None and self._health_port is not None:
            health_socket = listen(
                self._health_host, self._health_port, ("--health-host", "--health-port")
            )
        try:
            async with asyncio.TaskGroup() as group:
                self._start_caches(group)
                for watcher in watchers:
                    self.background.append(group.create_task(watcher.run(), name="reload"))
                if health_socket is not None:
                    self.background.append(
                        group.create_task(self._serve_health(health_socket), name="health")
                    )
                if self.elector is not None:
                    self.background.append(group.create_task(self.elector.run(), name="leader"))
                else:
                    self._leadership_changed(True)
        finally:
            await self.leader_work.stop()

    async def run_once(self, work: Callable[[], Awaitable[T]], leadership_timeout_s: float) -> T:
        """Run ``work`` once, as ``run`` would run ``lead``, and stop: start the caches
        and, with a Lease, the election; wait up to ``leadership_timeout_s`` for the
        Lease (raising LeadershipNotAcquired without it, so that a CronJob run never
        acts beside a running replica); run the work; then stop the caches and release
        the Lease. No health server and no file watchers: the run is over before they
        would matter. Waiting for the caches is the work's own step, as in ``lead``."""
        self._run_lead_on_leadership = False
        missed: LeadershipNotAcquired | None = None
        async with asyncio.TaskGroup() as group:
            self._start_caches(group)
            if self.elector is not None:
                self.background.append(group.create_task(self.elector.run(), name="leader"))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(leadership_timeout_s):
                        await self._leading.wait()
            try:
                if self.elector is not None and not self.is_leader:
                    # Raised outside the group, which would wrap it in an ExceptionGroup.
                    missed = LeadershipNotAcquired(
                        self.elector.settings, self.elector.holder, leadership_timeout_s
                    )
                else:
                    result = await work()
            finally:
                for task in self.background:
                    task.cancel()
        if missed is not None:
            raise missed
        return result

    async def _serve_health(self, sock: socket.socket) -> None:
        note = (
            "readiness does not depend on leadership: a follower with synced caches is a "
            "healthy standby; only the leader acts"
        )
        app = build_app(f"loadaware {self.component}", self.status, self._registry, note)
        port = self._health_port or 0
        self.server = embedded_server(app, self._health_host, port)
        try:
            await serve(self.server, port, sock)
        finally:
            sock.close()

    def stale_caches(self) -> str:
        """Why a cache cannot be trusted now (empty when every cache is current)."""
        return "; ".join(why for ok, why in (c.current() for c in self.caches.values()) if not ok)

    async def caches_synced(self) -> None:
        for cache in self.caches.values():
            await cache.wait_synced()

    def status(self) -> dict[str, Any]:
        """The one status shape, with the component's own fields after it."""
        stopped = [t.get_name() for t in self.background if t.done()]
        if self.leader_work.ended:
            stopped.append(self.leader_work.name)
        lease = self.lease
        return {
            **probe_status(
                self.component,
                stopped_tasks=stopped,
                not_ready_because=self.stale_caches(),
                caches_synced={name: cache.synced for name, cache in self.caches.items()},
            ),
            "leader": self.is_leader,
            "leader_election": {
                "enabled": lease is not None,
                "identity": lease.identity if lease else None,
                "lease": f"{lease.namespace}/{lease.name}" if lease else None,
                "holder": self.elector.holder if self.elector else None,
            },
            **self._details(),
        }


async def run_until_signalled(component: str, work: Coroutine[Any, Any, None]) -> None:
    """Run a component until SIGTERM or SIGINT, which cancel it: its ``finally`` blocks
    (releasing the Lease, stopping the health server) run before the process exits."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    try:
        await work
    except asyncio.CancelledError:
        log.info("%s stopped", component)
