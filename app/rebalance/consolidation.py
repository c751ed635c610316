"""Consolidation: drain a node that requests **and** real usage show idle, so that the
node autoscaler removes it as it removes any empty node (issue 43).

A node is a candidate when it is Ready and schedulable, no autoscaler opt-out is on it
(``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"``, Karpenter's
``karpenter.sh/do-not-disrupt: "true"``), its real usage has a fresh reading at or below
``consolidation.thresholds`` and its pods' requests are at or below
``consolidation.requestThresholds``, every resource. Candidates are tried the smallest
nodes first (``packing_rooms.size_class``), the least requested first among nodes of one
size: with mixed sizes the nodes left hold the pods in the fewest nodes when the small
ones go, and a node's pods then go to the large nodes that stay. For that, a node's
requests are read against the allocatable of the largest node that stays (its own on
nodes of one size), and while a smaller candidate waits only for the per-workload limits
or a PDB, no larger one is drained in its place. A node is drained only
if **every** pod on it that must move (all but DaemonSet and mirror pods, which go with
the node) may be evicted (no opt-out, no protection, the PDBs and the per-workload
limits of ``RunBudget``) and has a destination: the same ``Rules`` and ``Room``
reservations as the hot-spot planner (``destinations``): its requests free, its real
usage added under the destination's ``targetThresholds`` (a destination never becomes
hot), the extender's load filter passed with the pod's estimate. The largest destination
that takes a pod is chosen, the fullest among those of one size, so pods pack onto used
nodes rather than waking the next idle one, and onto the nodes that stay rather than
filling small nodes past ``requestThresholds`` (which would leave a large node half
empty and undrainable). A drain that would leave the remaining nodes less unrequested
capacity than ``consolidation.minSpare`` is not made: the floor of spare capacity (the
nodes the autoscaler is about to remove, tainted
``DeletionCandidateOfClusterAutoscaler``, ``ToBeDeletedByClusterAutoscaler`` or
``karpenter.sh/disrupted``, are neither counted in it nor candidates nor destinations);
nor one that would leave less unrequested room than the largest rise in demand seen
within the autoscaler's time to bring a node (``rise.py``): the pods of such a rise
would wait for one. All or nothing per node: one pod without a home keeps the whole
node, and nothing of it is evicted. No new drain starts while the node autoscaler is
removing nodes of its own (``removing_on_its_own``): the two would take capacity away at
once, each on a picture the other is changing; consolidation plans on what the
autoscaler leaves, and drains under way go on.

A drain may take several runs: the per-workload limits (``maxMigratingPerWorkload``,
``maxUnavailablePerWorkload``, ``workloadCooldown``) and the PDBs let only some of a
node's pods go at once. The node is then ``draining``: the caller taints it so that
nothing lands there (the simulator's ``SimulatedAutoscaler.cordon``), and each run
evicts those of its pods that may go now and have a destination, until it is empty
for the autoscaler to remove; the caller removes the taint when it gives the drain up.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from app.objects import RESOURCES, NodeInfo, PodInfo, Resources, Taint
from app.policy import Policy
from app.rebalance.classes import classify_all
from app.rebalance.config import DeschedulerConfig
from app.rebalance.destinations import (
    FINISHED_PHASES,
    Destinations,
    Rules,
    nodes_left,
    requested_on,
    room_of,
)
from app.rebalance.measure import NodeUsage, measure_nodes
from app.rebalance.outcome import PlannedEviction, SkipCode
from app.rebalance.packing_rooms import PackingRooms, size_class
from app.rebalance.placement import Placements
from app.rebalance.run_guards import RunBudget
from app.rebalance.usage import UsageSource, pod_usage, usage_sources
from app.rebalance.victims import node_opt_out, opt_out, owned_pod_counts, protection
from app.rebalance.view import ClusterView

__all__ = ["ConsolidationPlan", "KeptNode", "NodeDrain", "plan_consolidation"]

SCALE_DOWN_DISABLED_ANNOTATION = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
# The taints a node autoscaler puts on the nodes it is about to remove: the cluster
# autoscaler's on an unneeded node and on one it deletes, Karpenter's on one it disrupts.
KARPENTER_DISRUPTED = "karpenter.sh/disrupted"
AUTOSCALER_REMOVAL_TAINTS = (
    "DeletionCandidateOfClusterAutoscaler",
    "ToBeDeletedByClusterAutoscaler",
    KARPENTER_DISRUPTED,
)


def removing_on_its_own(
    nodes: list[NodeInfo], draining: Collection[str], now_s: float, fresh_s: float
) -> list[str]:
    """The nodes the node autoscaler is removing on its own: tainted for removal
    (``AUTOSCALER_REMOVAL_TAINTS``), not drained by consolidation, the taint set within
    ``fresh_s`` (``_set_within``)."""
    return [
        node.name
        for node in nodes
        if node.name not in draining
        and any(
            t.key in AUTOSCALER_REMOVAL_TAINTS and _set_within(t, now_s, fresh_s)
            for t in node.taints
        )
    ]


def _set_within(taint: Taint, now_s: float, within_s: float) -> bool:
    """Whether a removal taint was set within ``within_s`` of now: the cluster
    autoscaler's value is the Unix time it set it; Karpenter's ``karpenter.sh/disrupted``
    carries none (counted: it goes with the node). A value that is no time, one further
    than ``within_s`` from now either way, or a cluster autoscaler taint without one is
    not counted: a stray taint cannot hold consolidation for good."""
    if not taint.value:
        return taint.key == KARPENTER_DISRUPTED
    try:
        set_s = float(taint.value)
    except ValueError:
        return False
    return math.isfinite(set_s) and abs(now_s - set_s) <= within_s


def autoscaler_removal(node: NodeInfo) -> str | None:
    """The taint by which the node autoscaler says it is about to remove the node."""
    return next((t.key for t in node.taints if t.key in AUTOSCALER_REMOVAL_TAINTS), None)


@dataclass(frozen=True)
class NodeDrain:
    """One node the plan drains, and where each of its pods goes."""

    node: str
    reason: str
    evictions: tuple[PlannedEviction, ...]
    continued: bool = False  # drained since an earlier run (it carries the drain taint)
    # pods with a destination that may not go this run, and why (PDBs, per-workload limits)
    waiting: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class KeptNode:
    """A candidate the plan does not drain, and why (the first pod or rule that kept it)."""

    node: str
    code: SkipCode | None  # the pod's skip code, or None for a node-level reason
    reason: str


@dataclass
class ConsolidationPlan:
    drains: list[NodeDrain] = field(default_factory=list)
    kept: list[KeptNode] = field(default_factory=list)
    # drains given up: their taint goes, the node takes pods again (``abandon_reason``)
    abandoned: list[KeptNode] = field(default_factory=list)
    # the nodes that are no candidates, and why (node_refusal), for explain
    not_candidates: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def evictions(self) -> list[PlannedEviction]:
        return [e for drain in self.drains for e in drain.evictions]


def goes_with_node(pod: PodInfo) -> bool:
    """Pods that need no new home when their node goes: DaemonSet and mirror pods, and
    finished ones."""
    daemon = pod.owner is not None and pod.owner.kind == "DaemonSet"
    return daemon or pod.is_mirror or pod.phase in FINISHED_PHASES


def node_refusal(
    usage: NodeUsage,
    requested: Resources,
    config: DeschedulerConfig,
    largest: Resources | None = None,
) -> str | None:
    """Why a node is no candidate for consolidation, or None. ``largest``: the
    allocatable of the largest node that stays, per resource; a smaller node's requests
    are measured against it for ``requestThresholds`` (its pods are that small a load for
    the nodes that may take them), so that with mixed sizes a small node full by its
    own measure may still go onto a large one with room (the floors and the
    destinations' limits decide whether it does)."""
    node, settings = usage.node, config.consolidation
    if not node.ready or node.unschedulable:
        return "not Ready or cordoned"
    if node.annotations.get(SCALE_DOWN_DISABLED_ANNOTATION) == "true":
        return f'{SCALE_DOWN_DISABLED_ANNOTATION}: "true" on the node'
    opted = node_opt_out(node.annotations)
    if opted is not None:
        return opted
    if usage.missing is not None:
        return f"no usable usage data: {usage.missing}"
    for resource, percent in settings.thresholds.items():
        fraction = usage.usage_fraction.get(resource)
        if fraction is None:
            return f"no fresh {resource} reading"
        if fraction > percent / 100:
            return f"{resource} usage {fraction:.0%} above consolidation.thresholds {percent:g}%"
    for resource, percent in settings.request_thresholds.items():
        allocatable = max(node.allocatable.get(resource), largest.get(resource) if largest else 0)
        share = requested.get(resource) / allocatable if allocatable > 0 else 1.0
        if share > percent / 100:
            return (
                f"{resource} requests {share:.0%} above consolidation.requestThresholds "
                f"{percent:g}%"
            )
    return None


def plan_consolidation(
    cluster: ClusterView,
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    draining: Collection[str] = (),
    started_s: Mapping[str, float] | None = None,
    pending: Resources | None = None,
    rise: Resources | None = None,
) -> ConsolidationPlan:
    """The nodes to drain this run (``draining``: those whose drain began in an earlier
    run, tainted since; ``started_s``: when each began, where known); pure, and
    deterministic for equal inputs. ``pending``: the requests of the pods waiting for a
    node, counted against the floor of spare capacity (None: the view's pods bound to no
    node, not finished, not being deleted). ``rise``: the rise in demand to keep
    unrequested room for beside ``minSpare`` (``rise.DemandHistory.rise``; None: none).

    A drain in progress is given up (``abandoned``) when it no longer holds: it began
    more than ``consolidation.abandonAfter`` ago (the autoscaler did not take the
    node), an autoscaler opt-out is on the node now, a pod on it must stay (opted out,
    protected), a pod of it has no destination any more, or the nodes left fall below
    ``consolidation.minSpare`` with its pods on them (a scale-up needs it back)."""
    result = ConsolidationPlan()
    if not config.consolidation.enabled:
        result.notes.append("consolidation: off (consolidation.enabled)")
        return result
    nodes = [cluster.nodes[name] for name in sorted(cluster.nodes)]
    usages = measure_nodes(nodes, config, policy, now_s, cluster.recent_evictions)
    classes = classify_all(usages, config, {})
    pods_by_node: dict[str, list[PodInfo]] = {node.name: [] for node in nodes}
    waiting: list[PodInfo] = []
    for pod in cluster.pods.values():
        if pod.node_name in pods_by_node:
            pods_by_node[pod.node_name].append(pod)
        elif not pod.node_name and not pod.terminating:
            waiting.append(pod)
    if pending is None:
        pending = requested_on(waiting)
    requested = {name: requested_on(pods) for name, pods in pods_by_node.items()}
    # Nodes the autoscaler is about to remove: no candidates, no destinations, and no
    # room the floor may count on (they go whatever consolidation does).
    removing = {n.name: key for n in nodes if (key := autoscaler_removal(n)) is not None}
    staying = [n for n in nodes if n.name not in removing and n.name not in draining
               and n.ready and not n.unschedulable]  # fmt: skip
    largest = Resources(
        max((n.allocatable.cpu_cores for n in staying), default=0.0),
        max((n.allocatable.memory_bytes for n in staying), default=0.0),
    )
    candidates = []
    for node in nodes:
        if node.name in draining:
            continue
        if node.name in removing:
            result.not_candidates[node.name] = (
                f"the node autoscaler is removing it ({removing[node.name]} taint): its room "
                "is not counted on"
            )
            continue
        refused = node_refusal(usages[node.name], requested[node.name], config, largest)
        if refused is None:
            candidates.append(node)
        else:
            result.not_candidates[node.name] = refused
    going = [cluster.nodes[name] for name in sorted(draining) if name in cluster.nodes]
    if not candidates and not going:
        result.notes.append("consolidation: no node is underused by requests and real usage")
        return result
    candidates.sort(
        key=lambda n: (size_class(n), _request_share(n, requested[n.name]), n.name)
    )
    rules = Rules(
        config,
        policy,
        now_s,
        Placements(cluster.nodes, cluster.pods.values()),
        nodes_left(cluster.recent_evictions, now_s, config.return_cooldown),
    )
    rooms = [
        room_of(usages[n.name], classes[n.name].high_fraction, pods_by_node[n.name], config,
                policy, now_s)
        for n in nodes
        if n.ready and not n.unschedulable and classes[n.name].usage_fraction
        and n.name not in draining and n.name not in removing
    ]  # fmt: skip
    schedulable = {
        n.name: n
        for n in nodes
        if n.ready and not n.unschedulable and n.name not in draining and n.name not in removing
    }
    drain = _Drainer(
        config,
        now_s,
        usage_sources(cluster.pod_usage, policy.spec.estimation),
        PackingRooms(
            config,
            Destinations(rooms, rules),
            rooms,
            schedulable,
            rules,
            pending,
            rise or Resources(),
        ),
        RunBudget(config, cluster.pods.values(), cluster.budgets, cluster.recent_evictions, now_s),
        owned_pod_counts(cluster.pods.values()),
    )
    for node in going:  # what may go now of the nodes being drained
        begun_s = (started_s or {}).get(node.name)
        outcome_of_drain = drain.continue_node(node, pods_by_node[node.name], begun_s)
        if isinstance(outcome_of_drain, KeptNode):
            result.abandoned.append(outcome_of_drain)
        else:
            result.drains.append(outcome_of_drain)
    started = 0
    tried = tried_this_run(candidates, config.consolidation.max_candidates_per_run,
                           int(now_s // config.interval))  # fmt: skip
    own = removing_on_its_own(nodes, draining, now_s, config.consolidation.abandon_after)
    if own and tried:
        some = f"{', '.join(own[:3])}{', ...' if len(own) > 3 else ''}"
        result.notes.append(
            f"consolidation: the node autoscaler is removing {len(own)} node(s) of its own "
            f"({some}): no new drain until "
            "it has (drains under way go on)"
        )
        why = f"waits while the node autoscaler removes nodes of its own ({some})"
        result.kept.extend(KeptNode(node.name, None, why) for node in tried)
        return result
    if len(tried) < len(candidates):
        result.notes.append(
            f"consolidation: {len(tried)} of {len(candidates)} candidates tried this run "
            f"(maxCandidatesPerRun; the first in order, then a window that moves each run)"
        )
    held: NodeInfo | None = None  # a candidate whose pods may not go yet
    for node in tried:
        if started >= config.consolidation.max_nodes_per_run:
            result.notes.append(
                f"consolidation: stopped at maxNodesPerRun "
                f"({config.consolidation.max_nodes_per_run})"
            )
            break
        if node.name in drain.received:
            result.kept.append(KeptNode(node.name, None, "receives pods of a node drained now"))
            continue
        if held is not None and size_class(node) > size_class(held):
            # The smaller node goes first (the order's reason); it only waits for the
            # per-workload limits or PDBs, so no larger node is drained in its place.
            result.kept.append(
                KeptNode(node.name, None, f"waits for the smaller {held.name} to drain first")
            )
            continue
        outcome = drain.try_node(node, pods_by_node[node.name])
        if isinstance(outcome, KeptNode):
            result.kept.append(outcome)
            if outcome.reason == _NOT_NOW and held is None:
                held = node
        else:
            result.drains.append(outcome)
            started += 1
    if not started and not result.drains:
        result.notes.append("consolidation: no underused node can be freed safely")
    return result


_NOT_NOW = "no pod of it may go now (per-workload limits, PDBs)"


def tried_this_run(candidates: list[NodeInfo], most: int, run: int) -> list[NodeInfo]:
    """The candidates a run tries, at most ``most`` (a bound on a run's work): the least
    requested half, then a window over the others that moves by its size each run
    (``run``: the run's number, its start over the interval), so that every candidate
    is tried within a few runs and none is left out for good."""
    if len(candidates) <= most:
        return candidates
    first = (most + 1) // 2
    rest = candidates[first:]
    size = most - first
    start = (run * size) % len(rest)
    window = (rest + rest)[start : start + size]
    return candidates[:first] + window


def _moving(pods: list[PodInfo]) -> list[PodInfo]:
    """The pods that need a new home, the largest first (the hardest to place)."""
    return sorted(
        (p for p in pods if not goes_with_node(p)),
        key=lambda p: (-p.requests.cpu_cores, -p.requests.memory_bytes, p.key),
    )


def _request_share(node: NodeInfo, requested: Resources) -> float:
    shares = [
        requested.get(r) / node.allocatable.get(r) for r in RESOURCES if node.allocatable.get(r)
    ]
    return max(shares, default=1.0)


@dataclass
class _Drainer:
    """One consolidation pass's state: the rooms reserved, the limits taken."""

    config: DeschedulerConfig
    now_s: float
    sources: tuple[UsageSource, ...]
    rooms: PackingRooms
    budget: RunBudget
    owned: Mapping[str, int]
    received: set[str] = field(default_factory=set)

    def continue_node(
        self, node: NodeInfo, pods: list[PodInfo], started_s: float | None = None
    ) -> NodeDrain | KeptNode:
        """The pods of a node being drained that may go now, each with a destination;
        or why the drain is given up (``plan_consolidation``'s doc)."""
        settings = self.config.consolidation
        if started_s is not None and self.now_s - started_s > settings.abandon_after:
            return KeptNode(
                node.name,
                None,
                f"not removed by the node autoscaler within consolidation.abandonAfter "
                f"({settings.abandon_after:g}s) of the drain's start",
            )
        if node.annotations.get(SCALE_DOWN_DISABLED_ANNOTATION) == "true":
            return KeptNode(node.name, None, f'{SCALE_DOWN_DISABLED_ANNOTATION}: "true" now')
        opted = node_opt_out(node.annotations)
        if opted is not None:
            return KeptNode(node.name, SkipCode.OPTED_OUT, f"{opted} now")
        moving = _moving(pods)
        placed = self._place_within_floor(node, moving, requested_on(moving))
        if isinstance(placed, KeptNode):
            return placed
        chosen, waiting = placed
        self.received.update(destination for _, destination, _, _ in chosen)
        reason = "draining since an earlier run" if moving else "empty: left to the autoscaler"
        return self._drain(node.name, reason, chosen, continued=True, waiting=waiting)

    def try_node(self, node: NodeInfo, pods: list[PodInfo]) -> NodeDrain | KeptNode:
        moving = _moving(pods)
        if not moving:
            return KeptNode(node.name, None, "only pods that go with the node: nothing to drain")
        placed = self._place_within_floor(node, moving)
        if isinstance(placed, KeptNode):
            return placed
        chosen, waiting = placed
        if not chosen:
            return KeptNode(node.name, None, _NOT_NOW)
        self.rooms.leave(node.name)
        self.received.update(destination for _, destination, _, _ in chosen)
        reason = "underused by requests and real usage; every pod has a destination"
        return self._drain(node.name, reason, chosen, waiting=waiting)

    def _place_within_floor(
        self, node: NodeInfo, moving: list[PodInfo], still_to_place: Resources | None = None
    ) -> tuple[list[tuple[PodInfo, str, Resources, str]], list[tuple[str, str]]] | KeptNode:
        """``_place``, for a node whose drain keeps the floor of spare capacity
        (``still_to_place``: as ``spare_refusal``'s ``moving``); else what keeps it."""
        spare = self.rooms.spare_refusal(node, still_to_place)
        if spare is not None:
            return KeptNode(node.name, None, spare)
        return self._place(node, moving)

    def _place(
        self, node: NodeInfo, moving: list[PodInfo]
    ) -> tuple[list[tuple[PodInfo, str, Resources, str]], list[tuple[str, str]]] | KeptNode:
        """A destination for every pod that must move, or what keeps the node (then
        nothing stays reserved). The pods that may go now (PDBs, per-workload limits)
        keep their room and take their budget; the others are listed, with why, and
        their room is not held past this run."""
        for pod in moving:  # what keeps the node whatever the placement, before placing
            why = self._forever(pod, node)
            if why is not None:
                return KeptNode(node.name, why[0], f"{pod.key}: {why[1]}")
        chosen: list[tuple[PodInfo, str, Resources, str]] = []
        later: list[tuple[PodInfo, str, Resources]] = []
        waiting: list[tuple[str, str]] = []
        kept: KeptNode | None = None
        for pod in moving:
            amount, origin = pod_usage(pod, self.sources)
            destination, refused = self.rooms.fullest_taking(pod, amount, node.name)
            if destination is None:
                kept = KeptNode(node.name, SkipCode.NO_DESTINATION, f"{pod.key}: {refused}")
                break
            self.rooms.reserve(destination, pod, amount)
            not_now = self.budget.why_not(pod, node.name)
            if not_now is None:
                self.budget.take(pod, node.name)
                chosen.append((pod, destination, amount, origin))
            else:
                later.append((pod, destination, amount))
                waiting.append((pod.key, not_now[1]))
        for pod, destination, amount in later:
            self.rooms.release(destination, pod, amount)
        if kept is not None:
            for pod, destination, amount, _ in reversed(chosen):
                self.rooms.release(destination, pod, amount)
                self.budget.give_back(pod, node.name)
            return kept
        return chosen, waiting

    def _drain(
        self,
        node: str,
        reason: str,
        chosen: list[tuple[PodInfo, str, Resources, str]],
        *,
        continued: bool = False,
        waiting: list[tuple[str, str]] | None = None,
    ) -> NodeDrain:
        return NodeDrain(
            node,
            reason,
            continued=continued,
            waiting=tuple(waiting or ()),
            evictions=tuple(
                PlannedEviction(
                    pod=pod,
                    source=node,
                    destination=destination,
                    usage=amount,
                    usage_from=origin,
                    metric_values={},
                    reason=f"consolidation: {reason}",
                    destination_ceiling=dict(self.rooms.destinations.room(destination).ceiling),
                    drain=True,
                )
                for pod, destination, amount, origin in chosen
            ),
        )

    def _forever(self, pod: PodInfo, node: NodeInfo) -> tuple[SkipCode, str] | None:
        """What keeps the pod on its node whatever the run: an opt-out, a protection."""
        opted = opt_out(pod, node.annotations)
        if opted is not None:
            return SkipCode.OPTED_OUT, opted
        protected = protection(pod, self.config, self.now_s, self.owned)
        if protected is not None:
            return SkipCode.PROTECTED, protected
        return None
