"""The ``loadaware`` policy's burst estimate: ``app.load.estimate`` over the simulated pods.

For each node, the pods bound to it less than the policy's ``estimation.maxAge`` ago
are handed to the production ``node_unsampled`` (``unsampled_after`` where the load
filter has measured the node already), which keeps those bound after the node's
freshest sample, estimates them and returns the ``unsampled`` fractions that
``evaluate_node`` adds to the node's readings - the same pure functions the
extender's reserve calls. Where the annotator publishes each workload's observed
per-pod usage (``cluster.workload_usage``, loadaware), a pod's estimate is raised to
its workload's, as the extender raises it; a new publication re-evaluates every node
with recent pods. The raise is bounded as the extender bounds it (``app.load.estimate``,
"Bounds"): a workload's usage counts once measured on ``MIN_MEASURED_PODS`` pods (the
publication's), and in binding order a pod takes a raise only while fewer of its
workload's pods hold one than were measured; a publication hands them out again
(``bounded_raises``). A pod holding no raise is estimated no higher than its
workload's published usage (``app.load.lowering``, "Lowered to what is measured").
A simulated pod starts as it is bound, so no grace ends, and a
raise is held until ``maxAge`` even by a pod evicted sooner (the extender lets go at
once: the simulator is the stricter).

One difference from the extender, on purpose: the extender also *reserves* a pod's
estimate on the node it scored best, because kube-scheduler binds a pod before the
extender's pod watch shows it. In the simulator binding is instant and this view is
the cluster's own, so it never lags and no reservation is needed.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.load import (
    Evidence,
    PlacedPod,
    bounded_raises,
    estimate_pod_usage,
    estimate_with_evidence,
    holds_raise,
    lowering,
    node_unsampled,
    unsampled_after,
    with_workload_usage,
)
from app.objects import Resources
from app.policy import pod_classes

if TYPE_CHECKING:
    from app.simulate.cluster import ClusterState

# A node's recent pods, and each one's estimate there (``PodEstimates``), in one order.
NodePods = tuple[list[PlacedPod], list[Resources]]


class RecentBindings:
    """The pods bound within ``maxAge``, per node as (slot, bound at), with a heap of
    when each ages out; and their wave, one per workload, for the soft-taint rule."""

    def __init__(
        self,
        cluster: ClusterState,
        requests: list[Resources],
        limits: list[Resources],
        max_age_s: float,
    ) -> None:
        self._cluster = cluster
        self._requests = requests
        self._limits = limits
        self._max_age_s = max_age_s
        self.by_node: dict[int, list[tuple[int, float]]] = {}  # node -> (slot, bound at)
        self._expiries: list[tuple[float, int]] = []  # (bound at + maxAge, node), a heap
        self._pruned = 0
        # ``wave``'s last answer: what it was read from, from when and until when.
        self._recent_kept: (
            tuple[tuple[int, int, int, int, int], float, float, list[PlacedPod]] | None
        ) = None

    def add(self, node: int, pod: tuple[int, float]) -> None:
        """``pod`` (slot, bound at) was just bound to ``node``."""
        self.by_node.setdefault(node, []).append(pod)
        heapq.heappush(self._expiries, (pod[1] + self._max_age_s, node))

    def prune(self, t_s: float) -> dict[int, list[tuple[int, float]]]:
        """Per node with a pod that aged out by ``t_s``, in the order of their first
        expiry, the pods that did (none: one that left already)."""
        expired: dict[int, None] = {}  # pruned once each, in the order of their 1st expiry
        while self._expiries and self._expiries[0][0] <= t_s:
            expired[heapq.heappop(self._expiries)[1]] = None
            self._pruned += 1
        aged_out: dict[int, list[tuple[int, float]]] = {}
        for node in expired:
            recent = self.by_node.get(node, [])
            kept = [(s, at) for s, at in recent if t_s < at + self._max_age_s]
            aged_out[node] = [key for key in recent if t_s >= key[1] + self._max_age_s]
            if kept:
                self.by_node[node] = kept
            else:
                self.by_node.pop(node, None)
        return aged_out

    def wave(self, t_s: float) -> list[PlacedPod]:
        """The pods bound within ``maxAge``, one per workload: a workload's pods are
        alike (what they declare, and what its pods are observed to use), and the
        soft-taint rule looks at the kinds of pod (``wave_of``)."""
        cluster = self._cluster
        run, published = cluster.run, cluster.workload_usage
        key = (
            len(run.placements),
            len(run.evictions),
            len(run.deletions),
            published.version if published is not None else 0,
            self._pruned,
        )
        # The same until a record or a pruning changes what it reads, or the clock
        # reaches the earliest expiry still in the heap: every pod kept in ``by_node``
        # expires no sooner (its own entry is still there), so until then each passes
        # the age test below as it did.
        kept = self._recent_kept
        if kept is not None and kept[0] == key and kept[1] <= t_s < kept[2]:
            return list(kept[3])
        pods = self._one_per_workload(t_s)
        valid_until_s = self._expiries[0][0] if self._expiries else math.inf
        self._recent_kept = (key, t_s, valid_until_s, pods)
        return list(pods)

    def _one_per_workload(self, t_s: float) -> list[PlacedPod]:
        cluster = self._cluster
        latest: dict[int, float] = {}  # workload -> its latest binding still counted
        # ``item``: a Python number, which compares faster than a numpy scalar.
        node_of, bound_at = cluster.node_of, cluster.bound_at_s
        workload_of = cluster.usage.workload_of
        for node, recent in self.by_node.items():
            for slot, bound_at_s in recent:
                if (
                    t_s < bound_at_s + self._max_age_s
                    and node_of.item(slot) == node
                    and bound_at.item(slot) == bound_at_s
                ):
                    workload = workload_of.item(slot)
                    latest[workload] = max(bound_at_s, latest.get(workload, bound_at_s))
        epoch_s = cluster.pipeline.epoch_s
        published = cluster.workload_usage
        return [
            PlacedPod(
                self._requests[w],
                self._limits[w],
                epoch_s + bound_at_s,
                observed=published.observed(w) if published is not None else None,
            )
            for w, bound_at_s in latest.items()
        ]


class BurstEstimate:
    """``UnsampledUsage`` for the load filter, from the cluster's recent bindings."""

    def __init__(self, cluster: ClusterState) -> None:
        self._cluster = cluster
        workloads = cluster.scenario.workloads
        self._requests = [w.pod_requests_and_limits[0] for w in workloads]
        self._limits = [w.pod_requests_and_limits[1] for w in workloads]
        self._max_age_s = cluster.policy.spec.estimation.max_age_s
        self._recent = RecentBindings(cluster, self._requests, self._limits, self._max_age_s)
        self._placements_seen = 0
        self._evictions_seen = 0
        self._deletions_seen = 0
        # A node's recent pods (``_pods_on``) are kept until one of them is bound,
        # evicted, deleted or ages out there (its stamp then moves), or a new publication
        # of the workloads' usage makes new PlacedPods; only once every binding, eviction
        # and deletion so far has been seen (``changed_nodes``).
        self._node_stamps: dict[int, int] = {}
        self._pods_kept: dict[int, tuple[tuple[int, int], NodePods]] = {}
        self._usage_version = 0  # of the workload usage published (cluster.workload_usage)
        # Each recent pod as the estimate takes it, by (slot, bound at), made once per
        # change of what its workload's published usage does to the estimate rather
        # than for every look at its node.
        self._placed: dict[tuple[int, float], PlacedPod] = {}
        self._placed_version = 0
        self._observed = RaisingUsage(cluster, self._requests, self._limits)
        self._raises = RaisesHeld(cluster, self._observed, self._requests, self._limits)
        # Per node, the last ``unsampled_after`` answer with ``partly_sampled`` (the soft
        # taints ask every sync): the sample it was of, the pods, the instant it stops
        # holding, and the answer.
        self._answers: dict[int, tuple[float | None, list[PlacedPod], float, dict[str, float]]] = {}
        self._allocatable = _allocatables(cluster)
        self._made = PodEstimates(cluster, self._observed, self._allocatable, self._raises.holds)

    def unsampled(
        self, node: int, t_s: float, partly_sampled: bool = False
    ) -> dict[str, float] | None:
        """What ``evaluate_node`` takes as ``unsampled`` for the node at ``t_s`` (None:
        no recent pod on it); ``partly_sampled``: the soft-taint rule's count."""
        pods = self._pods_on(node)[0]
        if not pods:
            return None
        cluster = self._cluster
        now_s = cluster.pipeline.epoch_s + t_s
        annotations = cluster.pipeline.annotations(node)
        return node_unsampled(
            pods, annotations, self._allocatable[node], cluster.policy, now_s, partly_sampled
        )

    def unsampled_after(
        self, node: int, t_s: float, sample_at_s: float | None, partly_sampled: bool = False
    ) -> dict[str, float] | None:
        """``unsampled`` for a node measured already (``sample_at_s``: its freshest
        sample, ``Measurement.freshest_sample_s``)."""
        pods, estimates = self._pods_on(node)
        if not pods:
            return None
        cluster = self._cluster
        now_s = cluster.pipeline.epoch_s + t_s
        allocatable, policy = self._allocatable[node], cluster.policy
        if sample_at_s is None:  # no fresh sample: no pod counts (``counts``)
            return {}
        if not partly_sampled:  # the load filter asks after a change: rarely the same
            return unsampled_after(pods, sample_at_s, allocatable, policy, now_s, False, estimates)
        kept = self._answers.get(node)
        if kept is not None and kept[0] == sample_at_s and kept[1] == pods and now_s < kept[2]:
            return kept[3]
        answer = unsampled_after(
            pods, sample_at_s, allocatable, policy, now_s, partly_sampled, estimates
        )
        # The same pods and sample give the same answer until one of them ages out of
        # maxAge (``counts``: the one input that moves with the clock alone).
        ages_out_s = min(
            (at_s for pod in pods if now_s < (at_s := pod.bound_at_s + self._max_age_s)),
            default=math.inf,
        )
        self._answers[node] = (sample_at_s, pods, ages_out_s, answer)
        return answer  # read only, as the callers take it (``UnsampledUsage``)

    def _pods_on(self, node: int) -> NodePods:
        """The node's pods bound within ``maxAge``, still bound there, and their estimates."""
        cluster = self._cluster
        version = self._observed.follow()
        if version != self._placed_version:
            self._placed, self._placed_version = {}, version
        run = cluster.run
        caught_up = (
            len(run.placements) == self._placements_seen
            and len(run.evictions) == self._evictions_seen
            and len(run.deletions) == self._deletions_seen
        )
        stamp = (version, self._node_stamps.get(node, 0))
        kept = self._pods_kept.get(node)
        if caught_up and kept is not None and kept[0] == stamp:
            return kept[1]
        made = self._still_bound(node, self._recent.by_node.get(node, ()))
        if caught_up:
            self._pods_kept[node] = (stamp, made)
        return made

    def recent_pods(self, t_s: float) -> list[PlacedPod]:
        """The pods bound within ``maxAge``, one per workload (``RecentBindings.wave``)."""
        return self._recent.wave(t_s)

    def changed_nodes(self, t_s: float) -> set[int]:
        """Nodes with new bindings or evictions, and nodes whose recent pods aged out.

        Called before every scheduling decision, so age-outs come from a heap of
        expiry times: the cost is the work done, not the number of recent pods.
        """
        cluster = self._cluster
        run = cluster.run
        changed: set[int] = set()
        grown: dict[int, list[tuple[int, float]]] = {}  # node -> the pods bound there since
        # Called for every pod: a record list is sliced only when it has grown.
        if len(run.placements) > self._placements_seen:
            recent = self._recent
            for placement in run.placements[self._placements_seen :]:
                node, pod = placement.node, (placement.slot, placement.t_s)
                self._raises.decide(placement.slot, placement.t_s)
                recent.add(node, pod)
                changed.add(node)
                grown.setdefault(node, []).append(pod)
            self._placements_seen = len(run.placements)
        # The nodes whose recent pods are made again (``_pods_on``); a deletion changes
        # them too, though (as before) it is not among the nodes reported.
        remade: set[int] = set()
        if len(run.deletions) > self._deletions_seen:
            remade.update(deletion.node for deletion in run.deletions[self._deletions_seen :])
            self._deletions_seen = len(run.deletions)
        if len(run.evictions) > self._evictions_seen:
            for eviction in run.evictions[self._evictions_seen :]:
                changed.add(eviction.node)
                remade.add(eviction.node)
            self._evictions_seen = len(run.evictions)
        published = cluster.workload_usage
        if published is not None and published.version != self._usage_version:
            self._usage_version = published.version
            changed.update(self._recent.by_node)  # their pods' estimates may have changed
            self._observed.follow()  # what changes the estimates changes the stamps
            self._raises.hand_out(t_s, self._recent.by_node)
        for node, aged in self._recent.prune(t_s).items():
            for key in aged:
                self._placed.pop(key, None)
                self._raises.holds.pop(key, None)
            changed.add(node)
            remade.add(node)
        for node in remade:
            self._node_stamps[node] = self._node_stamps.get(node, 0) + 1
        for node, bound in grown.items():
            if node not in remade:
                self._grow(node, bound)
        return changed

    def _grow(self, node: int, bound: list[tuple[int, float]]) -> None:
        """The node's kept recent pods with those just bound there added, as making them
        again would list them: last, in binding order, where still bound there (an
        eviction or deletion since has a record, which remakes them). A new list: the
        kept answers compare against the old one."""
        version = self._observed.version
        stamp = (version, self._node_stamps.get(node, 0))
        kept = self._pods_kept.get(node)
        if kept is None or kept[0] != stamp or version != self._placed_version:
            self._node_stamps[node] = stamp[1] + 1
            return
        (pods, estimates), (new_pods, new_estimates) = kept[1], self._still_bound(node, bound)
        self._pods_kept[node] = (stamp, ([*pods, *new_pods], [*estimates, *new_estimates]))

    def _still_bound(self, node: int, bindings: Iterable[tuple[int, float]]) -> NodePods:
        """The pods of ``bindings`` (slot, bound at) still bound to ``node``, in order,
        and their estimates there."""
        placed, made = self._placed, self._made
        node_of, bound_at = self._cluster.node_of, self._cluster.bound_at_s
        pods, estimates = [], []
        for slot, bound_at_s in bindings:
            if node_of.item(slot) != node or bound_at.item(slot) != bound_at_s:
                continue
            pod = placed.get((slot, bound_at_s))
            if pod is None:
                pod = placed[slot, bound_at_s] = made.placed_pod(slot, bound_at_s)
            pods.append(pod)
            estimates.append(made.estimate(slot, node, bound_at_s))
        return pods, estimates


def _allocatables(cluster: ClusterState) -> list[Resources]:
    """Each node's allocatable, by index."""
    return [
        Resources(cpu, memory)
        for cpu, memory in zip(
            cluster.allocatable_cpu.tolist(), cluster.allocatable_memory.tolist(), strict=True
        )
    ]


class RaisesHeld:
    """Which recent pods hold one of their workload's raises, by (slot, bound at), and
    per workload when the raises held end (module doc; ``app.load.bounded_raises``)."""

    def __init__(
        self,
        cluster: ClusterState,
        observed: RaisingUsage,
        requests: list[Resources],
        limits: list[Resources],
    ) -> None:
        self._cluster = cluster
        self._observed = observed
        self._requests, self._limits = requests, limits
        self._max_age_s = cluster.policy.spec.estimation.max_age_s
        self.holds: dict[tuple[int, float], bool] = {}
        self._ends: dict[int, list[float]] = {}

    def decide(self, slot: int, bound_at_s: float) -> None:
        """Whether the pod just bound in ``slot`` takes one of its workload's raises:
        while fewer of its workload's pods hold one than were measured (module doc)."""
        cluster = self._cluster
        workload = cluster.usage.workload_of.item(slot)
        published = cluster.workload_usage
        if published is None or self._observed.of(workload) is None:
            return
        ends = [end_s for end_s in self._ends.get(workload, ()) if end_s > bound_at_s]
        if len(ends) < published.pods.item(workload):
            ends.append(bound_at_s + self._max_age_s)
            self.holds[slot, bound_at_s] = True
        self._ends[workload] = ends

    def hand_out(self, t_s: float, recent_of: dict[int, list[tuple[int, float]]]) -> None:
        """After a publication: the raises handed out again in binding order to the
        pods bound within ``maxAge`` (``bounded_raises``, as the extender's reestimate)."""
        cluster = self._cluster
        published = cluster.workload_usage
        assert published is not None
        workload_of, epoch_s = cluster.usage.workload_of, cluster.pipeline.epoch_s
        keys = sorted(
            (bound_at_s, slot)
            for recent in recent_of.values()
            for slot, bound_at_s in recent
            if t_s < bound_at_s + self._max_age_s
        )
        members: list[tuple[str | None, PlacedPod]] = []
        for bound_at_s, slot in keys:
            workload = workload_of.item(slot)
            placed = PlacedPod(
                self._requests[workload],
                self._limits[workload],
                epoch_s + bound_at_s,
                observed=self._observed.of(workload),
            )
            members.append((str(workload), placed))
        measured = {str(w): int(n) for w, n in enumerate(published.pods.tolist())}
        now_s = epoch_s + t_s
        settings = cluster.policy.spec.estimation
        holds: dict[tuple[int, float], bool] = {}
        ends: dict[int, list[float]] = {}
        for (bound_at_s, slot), pod in zip(
            keys, bounded_raises(members, measured, now_s, settings), strict=True
        ):
            if holds_raise(pod, settings):
                holds[slot, bound_at_s] = True
                ends.setdefault(workload_of.item(slot), []).append(bound_at_s + self._max_age_s)
        if holds != self.holds:
            self.holds.clear()
            self.holds.update(holds)
            self._observed.version += 1  # every estimate resting on a raise is made again
        self._ends = ends


class PodEstimates:
    """A recent pod as the burst estimate takes it (``PlacedPod``), and its estimate on
    its node (``estimate_with_evidence``): the same for every pod of a workload on nodes
    of the same allocatable, so made once per workload and kind of node, until the
    workloads' published usage changes what raises the estimates (``RaisingUsage``).
    Likewise one PlacedPod stands for every pod of a workload bound at the same instant
    (a value: a burst binds hundreds at once)."""

    _MAX_KEPT = 4096  # PlacedPods kept: those of old bindings are asked for no more

    def __init__(
        self,
        cluster: ClusterState,
        observed: RaisingUsage,
        allocatable: list[Resources],
        holds: dict[tuple[int, float], bool],
    ) -> None:
        self._holds = holds  # (slot, bound at) -> holds a raise (``BurstEstimate``)
        workloads = cluster.scenario.workloads
        self._requests = [w.pod_requests_and_limits[0] for w in workloads]
        self._limits = [w.pod_requests_and_limits[1] for w in workloads]
        self._workload_of: list[int] = cluster.usage.workload_of.tolist()
        # Each workload's class of pods, whose usage its pods' estimates count in too.
        classes = pod_classes(cluster.policy)
        self._class_of = [classes.class_of(w.priority, w.labels) for w in workloads]
        self._epoch_s = cluster.pipeline.epoch_s
        self._settings = cluster.policy.spec.estimation
        self._observed = observed
        self._allocatable = allocatable
        kinds: dict[Resources, int] = {}
        self._kind_of = [kinds.setdefault(a, len(kinds)) for a in allocatable]
        # (workload, kind, raised) -> it
        self._estimates: dict[tuple[int, int, bool], Resources] = {}
        self._pods: dict[tuple[int, float, bool], PlacedPod] = {}  # (workload, at, raised)
        self._version = observed.version

    def _follow(self) -> None:
        if self._observed.version != self._version or len(self._pods) > self._MAX_KEPT:
            self._estimates, self._pods = {}, {}
            self._version = self._observed.version

    def placed_pod(self, slot: int, bound_at_s: float) -> PlacedPod:
        self._follow()
        workload = self._workload_of[slot]
        raised = self._holds.get((slot, bound_at_s), False)
        key = (workload, bound_at_s, raised)
        pod = self._pods.get(key)
        if pod is None:
            pod = self._pods[key] = PlacedPod(
                self._requests[workload],
                self._limits[workload],
                self._epoch_s + bound_at_s,
                observed=self._observed.of(workload) if raised else self._observed.lowers(workload),
                pod_class=self._class_of[workload],
            )
        return pod

    def estimate(self, slot: int, node: int, bound_at_s: float) -> Resources:
        """What ``unsampled_after`` would estimate the slot's pod at on ``node``."""
        self._follow()
        workload = self._workload_of[slot]
        raised = self._holds.get((slot, bound_at_s), False)
        key = (workload, self._kind_of[node], raised)
        estimate = self._estimates.get(key)
        if estimate is None:
            estimate = self._estimates[key] = estimate_with_evidence(
                self._requests[workload],
                self._limits[workload],
                Evidence.BOUND,  # as ``placed_pod`` makes it
                self._settings,
                self._allocatable[node],
                self._observed.of(workload) if raised else self._observed.lowers(workload),
            )
        return estimate


class RaisingUsage:
    """Per workload, its published usage (``cluster.workload_usage``) where that raises
    its pods' estimate, else None; ``version`` counts the changes.

    Where the published usage does not raise the estimate (``with_workload_usage``
    leaves it as it is, whatever the node: ``within_node`` comes after), the estimate is
    the same with it or without it; a publication that raises none (most: a usage
    within 3 times the estimate) then changes no pod of the burst estimate."""

    def __init__(
        self, cluster: ClusterState, requests: list[Resources], limits: list[Resources]
    ) -> None:
        self._cluster = cluster
        self._settings = cluster.policy.spec.estimation
        self._requests, self._limits = requests, limits
        self._observed: list[Resources | None] = [None] * len(requests)
        # Per workload, what of its published usage lowers its pods' estimate
        # (``app.load.lowering``: a pod holding no raise takes that), else None.
        self._lowering: list[Resources | None] = [None] * len(requests)
        self._read = 0  # the publication they were read from
        self.version = 0

    def of(self, workload: int) -> Resources | None:
        return self._observed[workload]

    def lowers(self, workload: int) -> Resources | None:
        return self._lowering[workload]

    def follow(self) -> int:
        """Read a new publication, if there is one; the ``version``."""
        published = self._cluster.workload_usage
        if published is not None and published.version != self._read:
            self._read = published.version
            usage = [published.observed(w) for w in range(len(self._observed))]
            observed = [self._raising(w, u) for w, u in enumerate(usage)]
            lowered = [
                lowering(self._requests[w], self._limits[w], u, self._settings)
                for w, u in enumerate(usage)
            ]
            if observed != self._observed or lowered != self._lowering:
                self._observed, self._lowering = observed, lowered
                self.version += 1
        return self.version

    def _raising(self, workload: int, observed: Resources | None) -> Resources | None:
        if observed is None or not self._settings.workload_usage:
            return None
        requests, limits = self._requests[workload], self._limits[workload]
        estimate = estimate_pod_usage(requests, limits, self._settings)
        return observed if with_workload_usage(estimate, observed, limits) != estimate else None
