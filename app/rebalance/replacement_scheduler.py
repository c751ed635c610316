"""The scheduler the descheduler works beside (``scheduler`` in its configuration), and
what that changes in a plan: which hot nodes are sources, and where a replacement goes.

An eviction only helps if the scheduler puts the replacement somewhere cooler than the
source. Who decides that differs:

* ``extender``: kube-scheduler calls loadaware's extender, which filters out nodes above
  the policy's limits and lifts the node it prefers; the plan chooses the roomiest
  destination that the extender's own filter admits (``destinations``), as before.
* ``requests``: a kube-scheduler without the extender places by requests. Where it
  would put the replacement is predicted (``kube_scheduler.RequestScheduler``), and a
  pod is evicted only where every node it may choose is a destination that takes the
  pod's real usage; never where the source itself is among them (the scheduler would
  put the pod straight back, or refill the node with it).
* ``soft-taints``: the same prediction, TaintToleration included, and a hot node is a
  source only while it carries loadaware's soft taint (``app.load.taints``): the
  annotator taints hot nodes, so the replacement, and any new pod, goes elsewhere.
  An untainted hot node is ``untainted``, with the reason, and nothing leaves it.
  The taint lasts as long as the gain needs it: the annotator holds it on a node
  above its lower line (a limit less ``releaseMargin``), and the plan stops evicting
  from a source once it is under ``targetThresholds`` (which the agreement check
  holds to the policy's limits), so a cooled source stays warm, tainted, and is not
  refilled by requests; and it taints a node again before the next pod of a wave
  would take it over a limit. An earlier rule also kept every pod whose source would
  be among kube-scheduler's best nodes *without* any taint: it kept nearly every pod
  (a source one pod lighter is always the request-based favourite), so beside soft
  taints the descheduler evicted nothing on small-pods-hot-spot (314 node-minutes
  above the limit against 35 beside the extender); the harm it was added for (one
  fixture's wave refilling a cooled node) no longer occurs without it (issue 40,
  docs/tuning.md).

The mode is configured, not guessed: the descheduler cannot read kube-scheduler's
configuration, and a cluster without a soft taint may have no hot node, or the
feature off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.load import SOFT_TAINT_EFFECT, SOFT_TAINT_KEY
from app.objects import RESOURCES, NodeInfo, PodInfo, Resources, workload_of
from app.rebalance.bound import LimitBound
from app.rebalance.config import ReplacementScheduler
from app.rebalance.destinations import ROUNDING, Destinations
from app.rebalance.kube_scheduler import RequestScheduler
from app.rebalance.outcome import NodeClass, NodeKind, SkipCode
from app.rebalance.placement import Placements
from app.rebalance.view import ClusterView

__all__ = ["ASSUMES"]

# One line per mode: what the plan assumes about the scheduler (render, explain).
ASSUMES: Mapping[ReplacementScheduler, str] = {
    "extender": "kube-scheduler with loadaware's extender: it filters out nodes above the "
    "policy's limits, so a replacement goes to a node the plan reserved room on",
    "soft-taints": "kube-scheduler without the extender, steered by loadaware's soft "
    f"taint ({SOFT_TAINT_KEY}:{SOFT_TAINT_EFFECT}): only tainted hot nodes are sources, "
    "and a pod moves only where the scheduler, the taint scored, would place its "
    "replacement on a destination",
    "requests": "kube-scheduler placing by requests alone: a pod moves only where the "
    "scheduler would place its replacement on a destination, never back on its source",
}


def soft_tainted(node: NodeInfo) -> bool:
    return any(
        taint.key == SOFT_TAINT_KEY and taint.effect == SOFT_TAINT_EFFECT
        for taint in node.taints
    )


def gate_sources(
    classes: Mapping[str, NodeClass], nodes: Mapping[str, NodeInfo], mode: ReplacementScheduler
) -> dict[str, NodeClass]:
    """The node classes with the mode's condition on sources applied: with soft taints,
    a source without the taint becomes ``untainted``."""
    if mode != "soft-taints":
        return dict(classes)
    tainted = sum(1 for node in nodes.values() if soft_tainted(node))
    gated = {}
    for name, node_class in classes.items():
        if node_class.kind is NodeKind.SOURCE and not soft_tainted(nodes[name]):
            if tainted:
                why = (
                    f"not tainted yet ({tainted} of {len(nodes)} nodes carry "
                    f"{SOFT_TAINT_KEY}: it may be over the annotator's taint share, or "
                    "above the policy's limits only since its last sync)"
                )
            else:
                why = (
                    f"not tainted yet (no node carries {SOFT_TAINT_KEY}: are soft taints "
                    "turned on in the annotator?)"
                )
            node_class = dataclasses.replace(
                node_class,
                kind=NodeKind.UNTAINTED,
                reason=f"{node_class.reason}; {why}: a replacement could come back",
            )
        gated[name] = node_class
    return gated


@dataclass(frozen=True, slots=True)
class Landing:
    """Where a replacement would go, or why it must not be evicted."""

    destination: str | None
    code: SkipCode = SkipCode.NO_DESTINATION
    reason: str = ""


class Replacements(Protocol):
    """Where the scheduler puts a pod's replacement, and the room the plan keeps there."""

    def land(self, pod: PodInfo, usage: Resources, source: str, shed: Resources) -> Landing:
        """Where ``pod``'s replacement goes, or why it must stay; ``shed`` is what its
        eviction takes off ``source``'s excess over targetThresholds (cores, bytes)."""
        ...

    def reserve(self, pod: PodInfo, usage: Resources, source: str, destination: str) -> None: ...

    def release(self, pod: PodInfo, usage: Resources, source: str, destination: str) -> None: ...


class PlanChooses:
    """``extender``: the plan sends the replacement to the roomiest destination that the
    extender's filter admits."""

    def __init__(self, destinations: Destinations) -> None:
        self._destinations = destinations

    def land(self, pod: PodInfo, usage: Resources, source: str, shed: Resources) -> Landing:
        destination, why = self._destinations.choose(pod, usage)
        return Landing(destination, SkipCode.NO_DESTINATION, f"no destination: {why}")

    def reserve(self, pod: PodInfo, usage: Resources, source: str, destination: str) -> None:
        self._destinations.reserve(destination, pod, usage)

    def release(self, pod: PodInfo, usage: Resources, source: str, destination: str) -> None:
        self._destinations.release(destination, pod, usage)


class SchedulerChooses:
    """``requests`` and ``soft-taints``: the scheduler places the replacement by
    requests (and taints); the plan only checks where it goes.

    kube-scheduler picks at random among the nodes tied for its best score, often many
    of a cluster's alike nodes. Each must take the pod by the scheduler's rules and the
    plan's (``Destinations.landing``: a destination or neutral node, its requests,
    cooldowns, inter-pod rules). How hot the pod makes it:

    * ``requests`` (``expected=False``): none of them may be pushed past its ceiling
      (``targetThresholds``), now or later: the plan acts only where the landing
      provably stays under it with every pod there at its limit (``bound``: the move
      cannot be undone beside this scheduler);
    * ``soft-taints`` (``expected=True``): on average over the tied nodes, the excess
      the pod would add (``Rules.overshoot``) must be less than what its eviction
      takes off the source (``shed``), resource by resource: a gain in expectation.
      Required of every tied node, one node a pod would take to 66 % among 150 that
      stay cool refused every pod of a 200-node day's tainted sources. While at
      least half of the nodes are hot, no tied node may be made hot: the average is
      then a draw, not a gain (``hot_nearly_everywhere``).

    Both count on a tied node the pods pending now that kube-scheduler would put there
    too (``PendingPods``); the ``requests`` proof by limits (``bound``) does not.
    """

    def __init__(
        self,
        destinations: Destinations,
        classes: Mapping[str, NodeClass],
        nodes: Sequence[NodeInfo],
        pods: Iterable[PodInfo],
        placements: Placements,
        expected: bool = False,
        measured: Mapping[str, Resources] | None = None,
        peers: Mapping[str, Resources] | None = None,
    ) -> None:
        self._destinations = destinations
        self._classes = classes
        self._expected = expected
        pods = list(pods)
        self._scheduler = RequestScheduler(nodes, pods, placements)
        self._bound = None if expected else LimitBound(pods, measured or {})
        self._pending = PendingPods(self._scheduler, pods, peers or {}, shared=expected)
        self._hot_nearly_everywhere = hot_nearly_everywhere(classes) if expected else None

    def land(self, pod: PodInfo, usage: Resources, source: str, shed: Resources) -> Landing:
        best, score = self._scheduler.best_nodes(pod, source)
        if not best:
            return Landing(
                None,
                SkipCode.NO_DESTINATION,
                "no destination: kube-scheduler would find no node for the replacement "
                "(its requests fit nowhere else)",
            )
        named = _named(best)
        if source in best:
            return Landing(
                None,
                SkipCode.BACK_ON_SOURCE,
                f"kube-scheduler would place the replacement back on {source} (best "
                f"score {score} of {named}): evicting it would gain nothing",
            )
        cool: list[str] = []
        hot: list[tuple[str, Resources]] = []
        for name in best:
            node_class = self._classes[name]
            refused: str | None
            if node_class.kind not in (NodeKind.DESTINATION, NodeKind.NEUTRAL):
                refused = f"is {node_class.kind.value} ({node_class.reason}), not a destination"
                past = Resources()
            else:
                refused, past = self._landing(name, pod, usage)
            if refused is None and (past.cpu_cores > 0 or past.memory_bytes > 0):
                if not self._expected:  # requests: every tied node must stay under it
                    refused = self._destinations.refusal_at(name, pod, usage)
                hot.append((name, past))
            elif refused is None:
                if self._bound is not None:  # requests: and stay so, every pod at its limit
                    refused = self._bound.refusal(self._destinations.room(name), pod, usage)
                    if refused is not None:
                        return _unproven(name, score, named, refused)
                cool.append(name)
            if refused is not None:
                return _refused(name, score, named, refused)
        if not hot:
            return Landing(best[0])
        if not cool or not self._expected:
            name = hot[0][0]
            refused = self._destinations.refusal_at(name, pod, usage)
            return _refused(name, score, named, refused or self._pending.heats(name))
        if self._hot_nearly_everywhere is not None:
            return Landing(
                None,
                SkipCode.HOT_LANDING,
                f"no sure gain: kube-scheduler would place the replacement on one of {named} "
                f"(best score {score}), {len(hot)} of which it would take above "
                f"targetThresholds ({hot[0][0]} first), and {self._hot_nearly_everywhere}",
            )
        count = len(best)
        added = Resources(
            sum(p.cpu_cores for _, p in hot) / count, sum(p.memory_bytes for _, p in hot) / count
        )
        worse = [
            r for r in RESOURCES if added.get(r) > 0 and added.get(r) >= shed.get(r) - ROUNDING
        ]
        if worse:
            return Landing(
                None,
                SkipCode.HOT_LANDING,
                f"no gain: kube-scheduler would place the replacement on one of {named} "
                f"(best score {score}), {len(hot)} of which it would take above "
                f"targetThresholds ({hot[0][0]} first): on average more "
                f"{' and '.join(worse)} above the limits than the eviction takes off "
                f"{source}",
            )
        return Landing(cool[0])

    def _landing(self, name: str, pod: PodInfo, usage: Resources) -> tuple[str | None, Resources]:
        """``Destinations.landing`` with the pods pending now that would pick ``name``
        there too (``PendingPods``): the excess the replacement adds over theirs."""
        pending = self._pending.on(name)
        if pending is None:
            return self._destinations.landing(name, pod, usage)
        refused, past = self._destinations.landing(name, pod, usage + pending)
        if refused is not None:
            return refused, past
        _, theirs = self._destinations.landing(name, pod, pending)
        return None, Resources(*(max(0.0, past.get(r) - theirs.get(r)) for r in RESOURCES))

    def reserve(self, pod: PodInfo, usage: Resources, source: str, destination: str) -> None:
        self._destinations.reserve(destination, pod, usage)
        self._scheduler.move(pod, source, destination)
        if self._bound is not None:
            self._bound.send(destination, pod, usage)

    def release(self, pod: PodInfo, usage: Resources, source: str, destination: str) -> None:
        self._destinations.release(destination, pod, usage)
        self._scheduler.unmove(pod, source, destination)
        if self._bound is not None:
            self._bound.take_back(destination, pod)


# The share of the nodes with a reading above targetThresholds from which a cluster is
# hot nearly everywhere: a tie with a hot landing is then no gain (``hot_nearly_everywhere``).
HOT_NEARLY_EVERYWHERE = 0.5


def hot_nearly_everywhere(classes: Mapping[str, NodeClass]) -> str | None:
    """Why, beside soft taints, a tie that the replacement would make hot on any of its
    nodes is not a gain this round; None while most nodes are cool.

    The gain in expectation (``SchedulerChooses``) counts on cool nodes to take the
    replacements that land on them and on a round to come to cool the one that lands
    hot. With at least half of the nodes read above ``targetThresholds`` neither holds:
    a hot landing stays hot, or its pod is evicted again onto another warm node, and
    what each seed gets is the draw. big-batch-beside-services (issue 40), seeds 3 and
    10: an ``etl`` pod moved at 300-315 minutes, with 7 and 8 of 12 nodes hot, off a
    node at 88-94 % to one of three or four tied nodes; kube-scheduler chose one it took to
    about 90 %, and each run throttled 2.5-3.1 CPU-minutes more than without the
    descheduler."""
    read = [c for c in classes.values() if c.kind not in (NodeKind.NO_DATA, NodeKind.EXCLUDED)]
    hot = sum(1 for c in read if c.hot)
    if not read or hot < HOT_NEARLY_EVERYWHERE * len(read):
        return None
    return (
        f"{hot} of the {len(read)} nodes with a reading are above targetThresholds: "
        "with the cluster hot nearly everywhere, a replacement that lands hot stays so"
    )


class PendingPods:
    """The pods pending as the plan is made, and the nodes each would pick.

    kube-scheduler places them in the same moments as the plan's replacements, by the
    same rules: a replacement predicted to land on a cool node, and a pending pod that
    picks the same node, may make it hot together (issue 40, big-batch-beside-services:
    an ``api`` replacement and a pending 7-core ``etl`` pod picked the same node, and the
    taints' steering added throttling). Each pending pod counts on the nodes it would
    pick now, the plan's earlier moves included, at its workload's median measured usage
    (``plan.peer_means``; unmeasured, its requests): on each of them whole where the
    landing must be proven (``requests``), shared among them where a gain in expectation
    is enough (``soft-taints``). Which of the two kube-scheduler takes first is not
    known (priority, then queue order): the pending pod is counted either way."""

    def __init__(
        self,
        scheduler: RequestScheduler,
        pods: Iterable[PodInfo],
        peers: Mapping[str, Resources],
        shared: bool,
    ) -> None:
        self._scheduler = scheduler
        self._pods = [
            (pod, peers.get(workload_of(pod) or "", pod.requests))
            for pod in pods
            if pod.node_name is None and pod.phase == "Pending" and not pod.terminating
        ]
        self._shared = shared
        self._version = -1
        self._on: dict[str, Resources] = {}
        self._names: dict[str, list[str]] = {}

    def on(self, name: str) -> Resources | None:
        """The usage of the pending pods that would pick ``name``; None where none would."""
        if not self._pods:
            return None
        if self._version != self._scheduler.version:
            self._on, self._names = {}, {}
            for pod, usage in self._pods:
                best, _ = self._scheduler.best_nodes(pod, None)
                share = usage
                if self._shared and best:  # it lands on one of them
                    share = usage.scaled(1 / len(best), 1 / len(best))
                for node in best:
                    self._on[node] = self._on.get(node, Resources()) + share
                    self._names.setdefault(node, []).append(pod.key)
            self._version = self._scheduler.version
        return self._on.get(name)

    def heats(self, name: str) -> str:
        """Why a landing is hot that the pod alone would not make so (``land``'s reason)."""
        names = self._names.get(name, [])
        if not names:
            return "would be made hot"
        return (
            f"would be made hot with the pending {_named(names)}, which kube-scheduler "
            "would place there too"
        )


def _named(nodes: Sequence[str], shown: int = 5) -> str:
    """Nodes by name, the first ``shown`` and how many more: a tie may be hundreds."""
    if len(nodes) <= shown:
        return ", ".join(nodes)
    return f"{', '.join(nodes[:shown])} and {len(nodes) - shown} more"


def _refused(name: str, score: int, named: str, refused: str) -> Landing:
    return Landing(
        None,
        SkipCode.NO_DESTINATION,
        f"no destination: kube-scheduler would place the replacement on {name} (best "
        f"score {score} of {named}), which {refused}",
    )


def _unproven(name: str, score: int, named: str, refused: str) -> Landing:
    return Landing(
        None,
        SkipCode.UNPROVEN_LANDING,
        f"not provably cool: kube-scheduler would place the replacement on {name} (best "
        f"score {score} of {named}), where {refused}; beside a scheduler that places by "
        "requests a move that heats its landing later cannot be undone",
    )


def replacements_for(
    mode: ReplacementScheduler,
    destinations: Destinations,
    classes: Mapping[str, NodeClass],
    nodes: Sequence[NodeInfo],
    pods: Iterable[PodInfo],
    placements: Placements,
    measured: Mapping[str, Resources] | None = None,
    peers: Mapping[str, Resources] | None = None,
) -> Replacements:
    """How the plan learns where a replacement lands; ``measured`` is each pod's
    measured usage (``ClusterView.pod_usage``), which the ``requests`` proof reads;
    ``peers`` each workload's median usage, at which a pending pod counts."""
    if mode == "extender":
        return PlanChooses(destinations)
    return SchedulerChooses(
        destinations, classes, nodes, pods, placements, expected=mode == "soft-taints",
        measured=measured, peers=peers,
    )  # fmt: skip


def live_refusal(
    pod: PodInfo, source: str, cluster_now: ClusterView, mode: ReplacementScheduler
) -> str | None:
    """Just before an eviction, against the live caches: None when the scheduler beside
    still sends the replacement away from ``source``; else why not. (With soft taints
    the annotator may have removed the taint; by requests the source may have become a
    best choice, a scale-down elsewhere, say.) Where it lands is not judged again:
    replacements of this run's earlier evictions may still be pending, unseen."""
    if mode == "extender":
        return None
    nodes, pods = cluster_now.nodes, list(cluster_now.pods.values())
    node = nodes.get(source)
    if node is None:
        return f"source {source} is gone"
    if mode == "soft-taints" and not soft_tainted(node):
        return f"{source} no longer carries {SOFT_TAINT_KEY}"
    ordered = [nodes[name] for name in sorted(nodes)]
    best, score = RequestScheduler(ordered, pods, Placements(nodes, pods)).best_nodes(
        pod, source
    )
    if source in best:
        return f"kube-scheduler would now place the replacement back on {source} (score {score})"
    return None
