"""A cache of one resource kind, kept current by list and watch, that tells listeners
about every change.

Each object is reduced by a ``transform`` to what its users read, so that a cache of
100,000 pods stays small. A relist (at start, after a watch expired or broke) is
diffed against the cache, so listeners see the same (old, new) changes whether an
update arrived by watch or was found by a relist. During the first list the cache is
not yet ``synced``: listeners that count transitions (bindings, say) can tell history
from news.

Once synced, a cache stays synced, but it is only ``current`` while the API server
answers. A list or watch failure starts an outage (``down_for_s``) that ends with
the next successful list; a watch that ends cleanly and reconnects is no outage. A
quiet watch is healthy however long nothing changes, so readiness is judged by the
outage, not by the time since the last event. Components report not ready once an
outage has lasted longer than ``OUTAGE_GRACE_S``: a single relist (410 Gone, one
dropped connection) does not flip readiness, an API server that stays away does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from lightkube import AsyncClient

from app.kube.api_errors import describe_api_error
from app.kube.listwatch import list_then_watch

__all__ = [
    "WatchCache",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

OUTAGE_GRACE_S = 60.0
"""How long a synced cache may fail to reach the API server and still count as current."""

Listener = Callable[[str, T | None, T | None], object]
"""Called with an object's key, its previous state (None if new) and its new state
(None when it is gone)."""


class WatchCache(Generic[T]):
    """All objects of ``resource``, reduced by ``transform``. Run ``run()`` as a task."""

    def __init__(
        self,
        client: AsyncClient,
        resource: Any,
        transform: Callable[[Any], T],
        key_of: Callable[[Any], str],
        *,
        what: str,
        namespace: str | None = None,
        while_down: str = "",
        retry_delay_s: float = 1.0,
        max_retry_delay_s: float = 30.0,
    ) -> None:
        self._client = client
        self._server = str(client.config.cluster.server or "")  # named when unreachable
        self._resource = resource
        self._transform = transform
        self._key_of = key_of
        self._namespace = namespace
        self.what = what
        self._while_down = while_down
        self._objects: dict[str, T] = {}
        self._listeners: list[Listener[T]] = []
        self._synced = asyncio.Event()
        self._retry_delay_s = retry_delay_s
        self._max_retry_delay_s = max_retry_delay_s
        self.last_heard_s: float | None = None  # monotonic time of the last list or event
        self.failing_since_s: float | None = None  # monotonic start of the current outage
        self.last_error = ""
        self.outage_grace_s = OUTAGE_GRACE_S

    @property
    def objects(self) -> Mapping[str, T]:
        return MappingProxyType(self._objects)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def add_listener(self, listener: Listener[T]) -> None:
        self._listeners.append(listener)

    def age_s(self) -> float | None:
        """Seconds since the API server was last heard from, or None before the first list."""
        return None if self.last_heard_s is None else time.monotonic() - self.last_heard_s

    def down_for_s(self) -> float | None:
        """Seconds the API server has failed this cache's list or watch; None while it answers."""
        if self.failing_since_s is None:
            return None
        return time.monotonic() - self.failing_since_s

    def current(self) -> tuple[bool, str]:
        """Whether readers may trust the cache: synced, and any outage no longer than
        ``outage_grace_s``; with the reason for the operator when not."""
        if not self.synced:
            reason = f": {self.last_error}" if self.last_error else ""
            return False, f"{self.what} cache has not synced with the API server yet{reason}"
        down_s = self.down_for_s()
        if down_s is not None and down_s > self.outage_grace_s:
            return False, (
                f"{self.what} cache has not reached the API server for {down_s:.0f}s "
                f"(last error: {self.last_error}); its objects may be out of date"
            )
        return True, "ok"

    async def run(self) -> None:
        await list_then_watch(
            self._relist,
            self._watch,
            what=self.what,
            retry_delay_s=self._retry_delay_s,
            max_retry_delay_s=self._max_retry_delay_s,
            while_down=self._while_down,
            on_failure=self._on_failure,
            server=self._server,
        )

    def _on_failure(self, error: BaseException) -> None:
        self.last_error = describe_api_error(error, self._server)
        if self.failing_since_s is None:
            self.failing_since_s = time.monotonic()

    def _scope(self) -> dict[str, Any]:
        return {} if self._namespace is None else {"namespace": self._namespace}

    async def _relist(self) -> str:
        listing = self._client.list(self._resource, **self._scope())
        fresh: dict[str, T] = {}
        async for obj in listing:
            reduced = self._reduce(obj)
            if reduced is not None:
                fresh[reduced[0]] = reduced[1]
        for key in self._objects.keys() - fresh.keys():
            self.apply(key, None)
        for key, state in fresh.items():
            if self._objects.get(key) != state:
                self.apply(key, state)
        self.last_heard_s = time.monotonic()
        self.failing_since_s = None
        if not self._synced.is_set():
            log.info("%s cache synced: %d objects", self.what, len(self._objects))
            self._synced.set()
        return listing.resourceVersion

    async def _watch(self, resource_version: str) -> None:
        events = self._client.watch(
            self._resource, resource_version=resource_version, **self._scope()
        )
        async for event_type, obj in events:
            self.last_heard_s = time.monotonic()
            if event_type == "BOOKMARK":
                continue
            reduced = self._reduce(obj)
            if reduced is not None:
                self.apply(reduced[0], None if event_type == "DELETED" else reduced[1])

    def _reduce(self, obj: Any) -> tuple[str, T] | None:
        """The object's key and reduced state; None (logged) for one that cannot be read."""
        try:
            return self._key_of(obj), self._transform(obj)
        except Exception as error:  # one malformed object must not stop the cache
            log.warning("ignoring a %s the cache cannot read: %r", self.what, error)
            return None

    def apply(self, key: str, state: T | None) -> None:
        """Record an object's new state (None: gone) and tell every listener."""
        old = self._objects.pop(key, None) if state is None else self._objects.get(key)
        if state is not None:
            self._objects[key] = state
        if old is None and state is None:
            return
        for listener in self._listeners:
            try:
                listener(key, old, state)
            except Exception:
                log.exception("%s listener failed for %s", self.what, key)
