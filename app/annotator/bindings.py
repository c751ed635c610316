"""Recent bindings per node, observed from the pod watch, and the hot values they give.

A binding is a pod getting ``spec.nodeName``. Counting each pod UID at most once:

* pods that already have a node at the first list are history, not bindings;
* a pod seen without a node and later seen with one is a binding;
* a pod that first appears in the watch already bound (created with ``nodeName``) is one;
* after a relist (watch expired), pods that were pending and are now bound, and bound
  pods created after the watch broke, are bindings made during the gap.

Memory stays bounded: the watcher remembers UIDs of pending pods only, and binding
times only as long as the longest hot-value ``timeRange``.

All replicas watch pods, so a follower that becomes leader already knows the recent
bindings and its first hot values are right.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod

from app.kube.listwatch import list_then_watch
from app.load.model import hot_value_from_bindings
from app.policy import HotValuePolicy

log = logging.getLogger(__name__)

Clock = Callable[[], float]


class BindingWindows:
    """Binding times per node, kept for the longest hot-value time range."""

    def __init__(self, hot_policy: Sequence[HotValuePolicy]) -> None:
        self._times: dict[str, deque[float]] = {}
        self.set_policy(hot_policy)

    def set_policy(self, hot_policy: Sequence[HotValuePolicy]) -> None:
        """Adopt a reloaded hotValue; bindings already seen keep counting."""
        self._policy = tuple(hot_policy)
        self.keep_s = max((entry.time_range_s for entry in self._policy), default=0.0)

    def record(self, node: str, at_s: float) -> None:
        if self.keep_s <= 0:
            return
        times = self._times.setdefault(node, deque())
        times.append(at_s)
        while times[0] <= at_s - self.keep_s:
            times.popleft()

    def prune(self, now_s: float) -> None:
        cutoff_s = now_s - self.keep_s
        for node in list(self._times):
            times = self._times[node]
            while times and times[0] <= cutoff_s:
                times.popleft()
            if not times:
                del self._times[node]

    def hot_value(self, node: str, now_s: float) -> int:
        return hot_value_from_bindings(self._times.get(node, ()), now_s, self._policy)

    def hot_values(self, now_s: float) -> dict[str, int]:
        """Hot values of the nodes with recent bindings; every other node's is 0."""
        self.prune(now_s)
        return {node: self.hot_value(node, now_s) for node in self._times}

    def binding_count(self) -> int:
        return sum(len(times) for times in self._times.values())


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """The little of a pod that binding detection needs."""

    uid: str
    node_name: str | None
    created_s: float | None = None


def pod_placement(pod: Any) -> PodPlacement:
    metadata = pod.metadata
    created = metadata.creationTimestamp
    return PodPlacement(
        uid=metadata.uid or f"{metadata.namespace}/{metadata.name}",
        node_name=(pod.spec.nodeName if pod.spec else None) or None,
        created_s=created.timestamp() if created is not None else None,
    )


class BindingObserver:
    """Turns pod list and watch events into binding times; pure apart from the clock."""

    def __init__(
        self,
        windows: BindingWindows,
        clock: Clock = time.time,
        on_binding: Callable[[str], None] | None = None,
    ) -> None:
        self.windows = windows
        self._clock = clock
        self._on_binding = on_binding
        self._pending: set[str] = set()
        self._counted: dict[str, float] = {}  # UID -> when counted, for the window only
        self._listed_once = False
        self._last_event_s: float | None = None
        # Followers never publish hot values, so the observer tidies up by itself.
        self._next_tidy_s = -float("inf")
        self.bindings_observed = 0

    def _count(self, pod: PodPlacement) -> bool:
        assert pod.node_name is not None
        self._pending.discard(pod.uid)
        if pod.uid in self._counted:
            return False
        now_s = self._clock()
        self._counted[pod.uid] = now_s
        self.windows.record(pod.node_name, now_s)
        self.bindings_observed += 1
        if self._on_binding is not None:
            self._on_binding(pod.node_name)
        return True

    def observe_list(self, pods: Iterable[PodPlacement]) -> int:
        """A full list; returns the bindings it reveals (none at the first list)."""
        now_s = self._clock()
        gap_started_s = self._last_event_s
        first = not self._listed_once
        self._listed_once = True
        was_pending = self._pending
        self._pending = set()
        found = 0
        for pod in pods:
            if pod.node_name is None:
                self._pending.add(pod.uid)
            elif not first and (
                pod.uid in was_pending
                or (
                    gap_started_s is not None
                    and pod.created_s is not None
                    and pod.created_s >= gap_started_s
                )
            ):
                found += self._count(pod)
        self._last_event_s = now_s
        self._forget_old(now_s)
        return found

    def observe_event(self, event_type: str, pod: PodPlacement) -> bool:
        """One watch event; True when it is a new binding."""
        now_s = self._clock()
        self._last_event_s = now_s
        if now_s >= self._next_tidy_s:
            self.tidy(now_s)
            self._next_tidy_s = now_s + max(1.0, self.windows.keep_s / 4)
        if event_type == "DELETED":
            self._pending.discard(pod.uid)
            return False
        if pod.node_name is None:
            self._pending.add(pod.uid)
            return False
        if event_type == "ADDED" or pod.uid in self._pending:
            return self._count(pod)
        return False

    def _forget_old(self, now_s: float) -> None:
        cutoff_s = now_s - self.windows.keep_s
        for uid in [uid for uid, at_s in self._counted.items() if at_s <= cutoff_s]:
            del self._counted[uid]

    def tidy(self, now_s: float) -> None:
        self._forget_old(now_s)
        self.windows.prune(now_s)


class PodBindingWatch:
    """List + watch all pods, feeding a BindingObserver. Run ``run()`` as a task."""

    def __init__(
        self,
        client: AsyncClient,
        observer: BindingObserver,
        *,
        retry_delay_s: float = 1.0,
        max_retry_delay_s: float = 30.0,
    ) -> None:
        self._client = client
        self.observer = observer
        self._synced = asyncio.Event()
        self._retry_delay_s = retry_delay_s
        self._max_retry_delay_s = max_retry_delay_s

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def run(self) -> None:
        await list_then_watch(
            self._relist,
            self._watch,
            what="pod",
            retry_delay_s=self._retry_delay_s,
            max_retry_delay_s=self._max_retry_delay_s,
            while_down="hot values miss bindings until it recovers",
        )

    async def _relist(self) -> str:
        listing = self._client.list(Pod, namespace="*")
        pods = [pod_placement(pod) async for pod in listing]
        found = self.observer.observe_list(pods)
        if found:
            log.info("relist found %d bindings made while the pod watch was down", found)
        if not self._synced.is_set():
            log.info("pod watch synced: %d pods", len(pods))
            self._synced.set()
        return listing.resourceVersion

    async def _watch(self, resource_version: str) -> None:
        events = self._client.watch(Pod, namespace="*", resource_version=resource_version)
        async for event_type, pod in events:
            if event_type == "BOOKMARK":
                continue
            self.observer.observe_event(event_type, pod_placement(pod))
