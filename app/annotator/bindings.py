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

``RecentPods`` keeps, for the soft-taint estimate, each pod bound within the policy's
``estimation.maxAge``: its requests, limits, the instant its binding was seen, and the
evidence that a scheduler placed it (``app.load.Evidence``): ``BOUND`` for a pod seen
pending and then bound (binding takes ``pods/binding``, which tenants do not have),
``PLACED`` for one first seen already on its node (created with ``spec.nodeName``, or
bound while the watch was down), which the estimate reads from its requests alone
(docs/security.md); and its workload (``app.objects.workload_key``, the owner logic
the extender's reserve uses), so that a round can hand each pod its workload's observed
per-pod usage (``by_node``' ``observed``, the annotator's last published document). A
deleted pod is dropped at once.

All replicas watch pods, so a follower that becomes leader already knows the recent
bindings and its first hot values are right.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from app.load import (
    Evidence,
    PlacedPod,
    bounded_raises,
    estimate_with_evidence,
    hot_value_from_bindings,
    raises_left,
    unsampled_fractions,
)
from app.objects import NodeInfo, PodPlacement, Resources
from app.policy import EstimationPolicy, HotValuePolicy

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


# What one pod of a workload is observed to use (the annotator's published document);
# None: nothing observed.
Observed = Callable[[str | None], Resources | None]


class RecentPods:
    """Pods bound within ``estimation.maxAge``, by UID, for the estimate (module doc)."""

    def __init__(self, estimation: EstimationPolicy) -> None:
        # UID -> (node, pod, its workload)
        self._pods: dict[str, tuple[str, PlacedPod, str | None]] = {}
        self.set_policy(estimation)

    def set_policy(self, estimation: EstimationPolicy) -> None:
        """Adopt a reloaded estimation; an estimate turned off keeps nothing."""
        self._estimation = estimation
        self.keep_s = estimation.max_age_s if estimation.enabled else 0.0
        if self.keep_s <= 0:
            self._pods.clear()

    def record(self, uid: str, node: str, pod: PlacedPod, workload: str | None = None) -> None:
        if self.keep_s > 0:
            self._pods[uid] = (node, pod, workload)

    def forget(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def started(self, uid: str, at_s: float) -> None:
        """A recorded pod's containers were first seen started at ``at_s``."""
        kept = self._pods.get(uid)
        if kept is not None and kept[1].started_at_s is None:
            node, pod, workload = kept
            self._pods[uid] = (node, replace(pod, started_at_s=at_s), workload)

    def prune(self, now_s: float) -> None:
        cutoff_s = now_s - self.keep_s
        for uid in [uid for uid, (_, pod, _) in self._pods.items() if pod.bound_at_s <= cutoff_s]:
            del self._pods[uid]

    def by_node(
        self,
        now_s: float,
        observed: Observed | None = None,
        measured: Mapping[str, int] | None = None,
    ) -> dict[str, list[PlacedPod]]:
        """Each node's pods bound within ``maxAge`` of ``now_s``, each with what one pod
        of its workload is ``observed`` to use where it holds one of the workload's
        raises (``app.load.bounded_raises`` over ``measured``, the pods each workload's
        usage was measured on), else nothing: the requests-based estimate."""
        nodes: dict[str, list[PlacedPod]] = {}
        for node, _workload, pod in self._bounded(now_s, observed, measured):
            nodes.setdefault(node, []).append(pod)
        return nodes

    def raises_left(
        self,
        now_s: float,
        observed: Observed | None = None,
        measured: Mapping[str, int] | None = None,
    ) -> int:
        """How many more pods of the workloads whose pods hold a raise now would take
        one (``app.load.raises_left``, summed): the soft-taint rule's bound on the next
        pod."""
        if observed is None:
            return 0
        bounded = [
            (workload, pod) for _node, workload, pod in self._bounded(now_s, observed, measured)
        ]
        return sum(raises_left(bounded, measured or {}, now_s, self._estimation).values())

    def largest_raises(
        self,
        now_s: float,
        observed: Observed | None,
        measured: Mapping[str, int] | None,
        allocatable: Callable[[str], Resources | None],
    ) -> dict[tuple[str, str], float]:
        """Per (resource, namespace), the largest part of one pod's estimate its
        workload's usage adds (of the pods holding a raise now), as a fraction of its
        node's ``allocatable`` (None: a node not known, left out): what the extender's
        ``loadaware_extender_pod_estimate_raise_max_fraction`` says of its reserve, for
        the soft-taint rule, which runs where no extender does (issue 42, point 1)."""
        if observed is None:
            return {}
        largest: dict[tuple[str, str], float] = {}
        for node, workload, pod in self._bounded(now_s, observed, measured):
            of = allocatable(node)
            if workload is None or pod.observed is None or of is None:
                continue
            args = (pod.requests, pod.limits, pod.evidence, self._estimation, of)
            added = estimate_with_evidence(*args, pod.observed) - estimate_with_evidence(*args)
            namespace = workload.partition("/")[0]
            for resource, fraction in unsampled_fractions((added,), of).items():
                key = (resource, namespace)
                largest[key] = max(largest.get(key, 0.0), min(1.0, fraction))
        return largest

    def _bounded(
        self, now_s: float, observed: Observed | None, measured: Mapping[str, int] | None
    ) -> list[tuple[str, str | None, PlacedPod]]:
        self.prune(now_s)
        pods: list[tuple[str | None, PlacedPod]] = []
        where: list[str] = []
        for node, pod, workload in self._pods.values():
            usage = observed(workload) if observed is not None else None
            pods.append((workload, pod if usage is None else replace(pod, observed=usage)))
            where.append(node)
        if observed is not None:
            bounded = bounded_raises(pods, measured or {}, now_s, self._estimation)
        else:
            bounded = [pod for _, pod in pods]
        return [
            (node, workload, pod)
            for node, (workload, _), pod in zip(where, pods, bounded, strict=True)
        ]

    def __len__(self) -> int:
        return len(self._pods)


class Publication(Protocol):
    """The workload usage this replica last published (``app.annotator.workload_usage``)."""

    def observed(self, now_s: float) -> Observed | None: ...

    def measured(self, now_s: float) -> Mapping[str, int]: ...


@dataclass(frozen=True, slots=True)
class RoundEstimates:
    """What one soft-taint round takes of the recent pods (``round_estimates``)."""

    by_node: dict[str, list[PlacedPod]] | None = None  # None: no estimate kept
    left: int | None = None  # raises left for the next pod; None: nothing observed
    largest_raises: dict[tuple[str, str], float] = field(default_factory=dict)


def round_estimates(
    recent: RecentPods | None,
    usage: Publication | None,
    nodes: Mapping[str, NodeInfo],
    now_s: float,
) -> RoundEstimates:
    """The recent pods as a soft-taint round at ``now_s`` estimates them: each node's,
    each raised to its workload's usage where it holds a raise (``usage``, the
    publication of this replica while fresh, else nothing observed), the raises left
    for the next pod, and the largest raise per (resource, namespace) for the
    near-whole-node alert (``RecentPods.largest_raises``)."""
    if recent is None:
        return RoundEstimates()
    observed = usage.observed(now_s) if usage is not None else None
    measured = usage.measured(now_s) if usage is not None else None

    def allocatable(node: str) -> Resources | None:
        info = nodes.get(node)
        return info.allocatable if info is not None else None

    return RoundEstimates(
        recent.by_node(now_s, observed, measured),
        recent.raises_left(now_s, observed, measured) if observed is not None else None,
        recent.largest_raises(now_s, observed, measured, allocatable),
    )


class PodWatch(Protocol):
    """The pod watch, as far as a reader of bindings needs it: whether it has listed."""

    @property
    def synced(self) -> bool: ...


class BindingObserver:
    """Turns pod cache changes into binding times; pure apart from the clock."""

    def __init__(
        self,
        windows: BindingWindows,
        clock: Clock = time.time,
        on_binding: Callable[[str], None] | None = None,
        *,
        pod_watch: PodWatch | None = None,  # None: listed already
        recent: RecentPods | None = None,
        on_bound: Callable[[float, str | None], None] | None = None,
    ) -> None:
        """``on_bound`` gets each binding's instant and its pod's workload (the soft-taint
        guard's stand-down: ``app.annotator.drained.DrainedNodes.bound``)."""
        self.windows = windows
        self._on_bound = on_bound
        self.recent = recent
        self._clock = clock
        self._on_binding = on_binding
        self._pod_watch = pod_watch
        self._counted: dict[str, float] = {}  # UID -> when counted, for the window only
        # Followers never publish hot values, so the observer tidies up by itself.
        self._next_tidy_s = -float("inf")
        self.bindings_observed = 0

    def on_change(self, _key: str, old: PodPlacement | None, new: PodPlacement | None) -> bool:
        """One change from the pod cache; True when it is a new binding."""
        if self.recent is not None and old is not None and (new is None or new.uid != old.uid):
            self.recent.forget(old.uid)  # deleted, or replaced under its name
        if new is None or new.node_name is None or not self._listed():
            return False
        if old is not None and old.uid == new.uid and old.node_name is not None:
            if self.recent is not None and new.running and not old.running:
                self.recent.started(new.uid, self._clock())
            return False
        now_s = self._clock()
        if now_s >= self._next_tidy_s:
            self.tidy(now_s)
            self._next_tidy_s = now_s + max(1.0, self.windows.keep_s / 4)
        if new.uid in self._counted:
            return False
        self._counted[new.uid] = now_s
        self.windows.record(new.node_name, now_s)
        if self.recent is not None:
            seen_pending = old is not None and old.uid == new.uid
            evidence = Evidence.BOUND if seen_pending else Evidence.PLACED
            started_at_s = now_s if new.running else None
            placed = PlacedPod(new.requests, new.limits, now_s, evidence, None, started_at_s)
            self.recent.record(new.uid, new.node_name, placed, new.workload)
        self.bindings_observed += 1
        if self._on_bound is not None:
            self._on_bound(now_s, new.workload)
        if self._on_binding is not None:
            self._on_binding(new.node_name)
        return True

    def _listed(self) -> bool:
        return self._pod_watch is None or self._pod_watch.synced

    def tidy(self, now_s: float) -> None:
        cutoff_s = now_s - self.windows.keep_s
        for uid in [uid for uid, at_s in self._counted.items() if at_s <= cutoff_s]:
            del self._counted[uid]
        self.windows.prune(now_s)
        if self.recent is not None:
            self.recent.prune(now_s)
