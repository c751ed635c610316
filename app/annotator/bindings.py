"""Recent bindings per node, observed from the shared pod cache, and the hot values they give.

A binding is a pod getting ``spec.nodeName``. The observer listens to the pod cache's
(old, new) changes and counts each pod UID at most once:

* pods that already have a node when the cache first lists them are history, not
  bindings;
* a pod seen without a node and later with one is a binding, and so is a pod that
  appears already bound (created with ``nodeName``, or bound while the watch was down
  and found by a relist);
* a pod whose UID changed under the same name (a StatefulSet pod recreated) is a new pod.

Memory stays bounded: binding times are kept only as long as the longest hot-value
``timeRange``.

All replicas watch pods, so a follower that becomes leader already knows the recent
bindings and its first hot values are right.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

from app.load import hot_value_from_bindings
from app.objects import PodPlacement
from app.policy import HotValuePolicy

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


class BindingObserver:
    """Turns pod cache changes into binding times; pure apart from the clock."""

    def __init__(
        self,
        windows: BindingWindows,
        clock: Clock = time.time,
        on_binding: Callable[[str], None] | None = None,
        *,
        synced: Callable[[], bool],
    ) -> None:
        self.windows = windows
        self._clock = clock
        self._on_binding = on_binding
        self._synced = synced
        self._counted: dict[str, float] = {}  # UID -> when counted, for the window only
        # Followers never publish hot values, so the observer tidies up by itself.
        self._next_tidy_s = -float("inf")
        self.bindings_observed = 0

    def on_change(self, _key: str, old: PodPlacement | None, new: PodPlacement | None) -> bool:
        """One change from the pod cache; True when it is a new binding."""
        if new is None or new.node_name is None or not self._synced():
            return False
        if old is not None and old.uid == new.uid and old.node_name is not None:
            return False
        now_s = self._clock()
        if now_s >= self._next_tidy_s:
            self.tidy(now_s)
            self._next_tidy_s = now_s + max(1.0, self.windows.keep_s / 4)
        if new.uid in self._counted:
            return False
        self._counted[new.uid] = now_s
        self.windows.record(new.node_name, now_s)
        self.bindings_observed += 1
        if self._on_binding is not None:
            self._on_binding(new.node_name)
        return True

    def tidy(self, now_s: float) -> None:
        cutoff_s = now_s - self.windows.keep_s
        for uid in [uid for uid, at_s in self._counted.items() if at_s <= cutoff_s]:
            del self._counted[uid]
        self.windows.prune(now_s)
