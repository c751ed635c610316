"""The planning pass: node classes, then victims and their destinations, in order."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.load import PlacedPod
from app.objects import RESOURCES, NodeInfo, PodInfo, Resources, workload_of
from app.policy import Policy
from app.rebalance.agreement import threshold_conflicts
from app.rebalance.arrivals import arriving, wave_ahead
from app.rebalance.attribution import Attribution, PodOnSource
from app.rebalance.backoff import BackOff, back_off
from app.rebalance.class_sources import class_sources
from app.rebalance.classes import classify_all, nothing_to_do
from app.rebalance.config import DeschedulerConfig
from app.rebalance.destinations import (
    ROUNDING,
    Destinations,
    Room,
    Rules,
    nodes_left,
    recent_placed,
    room_of,
)
from app.rebalance.kube_scheduler import RequestScheduler
from app.rebalance.measure import NodeUsage, evaluate, measure_nodes
from app.rebalance.outcome import (
    STOPPED_HELPING,
    EvictionPlan,
    NodeClass,
    NodeKind,
    PlannedEviction,
    SkipCode,
    SkippedPod,
)
from app.rebalance.placement import Placements
from app.rebalance.replacement_scheduler import (
    ASSUMES,
    Replacements,
    gate_sources,
    live_refusal,
    replacements_for,
)
from app.rebalance.run_guards import RunBudget
from app.rebalance.usage import UsageSource, pod_usage, usage_sources
from app.rebalance.victims import opt_out, owned_pod_counts, protection, victim_order
from app.rebalance.view import ClusterView

__all__ = ["PlannerState", "observe_round", "plan", "recheck"]


@dataclass
class PlannerState:
    """What the loop keeps between runs: consecutive rounds each node was seen hot."""

    hot_rounds: dict[str, int] = field(default_factory=dict)


def observe_round(state: PlannerState, classes: Mapping[str, NodeClass]) -> PlannerState:
    """Debounce bookkeeping: the counts to pass to the next ``plan``."""
    return PlannerState({name: c.hot_rounds for name, c in classes.items() if c.hot})


def plan(
    cluster: ClusterView,
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    hot_rounds: Mapping[str, int],
) -> EvictionPlan:
    """One planning pass over a cluster view; pure, and deterministic for equal inputs."""
    nodes = [cluster.nodes[name] for name in sorted(cluster.nodes)]
    usages = measure_nodes(nodes, config, policy, now_s, cluster.recent_evictions)
    classes = classify_all(usages, config, hot_rounds)
    classes = gate_sources(classes, cluster.nodes, config.scheduler)
    pods_by_node: dict[str, list[PodInfo]] = {}
    for pod in cluster.pods.values():
        if pod.node_name is not None:
            pods_by_node.setdefault(pod.node_name, []).append(pod)
    # Where a class of pods is hot, its lower classes move first (class_sources.py).
    class_hot, evictable_below = class_sources(classes, pods_by_node, policy, config)
    classes = {**classes, **class_hot} if class_hot else classes
    notes = threshold_conflicts(config, policy)
    stop = nothing_to_do(classes, config)
    if stop is not None:
        return EvictionPlan(config.scheduler, classes, notes=[*notes, stop])
    backed_off = back_off(
        cluster.moves,
        now_s,
        config.interval,
        {name: c.usage_fraction for name, c in classes.items()},
    )
    rules = _rules(cluster, config, policy, now_s)
    placed = recent_placed(
        cluster.pods.values(), cluster.workload_usage, cluster.workloads_measured, policy, now_s
    )
    sources = _sources_hottest_first(classes)
    peers = peer_means(cluster.pods.values(), cluster.pod_usage)
    wave = _wave_ahead(cluster, config, classes, nodes, rules, peers, now_s)
    if wave is not None:
        result = EvictionPlan(config.scheduler, classes, notes=[*notes, wave])
        for source in sources:
            for pod in pods_by_node.get(source.node, []):
                result.skipped.append(SkippedPod(pod.key, source.node, wave, SkipCode.WAVE_AHEAD))
        result.notes.append(_nothing_moved(result, config))
        return result

    def one_pass(share: bool) -> _Pass:
        """The pass over every source, from a fresh state; ``share``: each source takes
        first the pods of workloads with room to spare for the sources after it
        (``_share_order``)."""
        destinations = Destinations(
            _rooms(usages, classes, pods_by_node, config, policy, now_s, placed), rules
        )
        result = EvictionPlan(scheduler=config.scheduler, node_classes=classes, notes=[*notes])
        pass_ = _Pass(
            config,
            now_s,
            usage_sources(cluster.pod_usage, policy.spec.estimation),
            destinations,
            replacements_for(
                config.scheduler,
                destinations,
                classes,
                nodes,
                cluster.pods.values(),
                rules.placements,
                cluster.pod_usage,
                peers,
            ),
            result,
            RunBudget(
                config, cluster.pods.values(), cluster.budgets, cluster.recent_evictions, now_s
            ),
            owned_pod_counts(cluster.pods.values()),
            backed_off,
            evictable_below,
            peers,
        )
        # Every source counts as left at its whole excess until drained: a pass that
        # stops early (no headroom, the total limit) is not the better for it.
        pass_.left = {s.node: max(_excess(s, s.usage_fraction).values()) for s in sources}
        for index, source in enumerate(sources):
            why = backed_off.nodes.get(source.node)
            if why is not None:
                for pod in pods_by_node.get(source.node, []):
                    pass_.skip_pod(pod, source.node, SkipCode.BACKED_OFF, why)
                result.notes.append(f"{source.node}: {why}")
                continue
            if not destinations.has_headroom():
                result.notes.append("stopped: the destinations' headroom ran out")
                break
            if pass_.budget.exhausted():
                result.notes.append("stopped: maxNoOfPodsToEvictTotal reached")
                break
            if share:
                pass_.later = _workload_counts(sources[index + 1 :], pods_by_node)
            pass_.drain(usages[source.node], source, pods_by_node.get(source.node, []))
        return pass_

    pass_ = one_pass(share=False)
    if pass_.starved and len(sources) > 1:
        # A source left hot because its pods' workloads were used up by the sources
        # drained before it: try again with the workload budget shared, and keep that
        # plan only where it leaves less excess in all (``_Pass.starved``).
        shared = one_pass(share=True)
        if sum(shared.left.values()) < sum(pass_.left.values()) - ROUNDING:
            pass_ = shared
    result = pass_.result
    if sources and all(s.node in backed_off.nodes for s in sources):
        result.notes.append(STOPPED_HELPING)
    if not result.evictions:
        result.notes.append(_nothing_moved(result, config))
    result.notes.extend(_replacements(result, cluster, config, policy, now_s))
    return result


def _wave_ahead(
    cluster: ClusterView,
    config: DeschedulerConfig,
    classes: Mapping[str, NodeClass],
    nodes: list[NodeInfo],
    rules: Rules,
    peers: Mapping[str, Resources],
    now_s: float,
) -> str | None:
    """Beside soft taints, why the plan stands down this round: a wave of pods is
    still arriving that no node kube-scheduler may put its next pod on takes cool
    (``arrivals``); else None."""
    if config.scheduler != "soft-taints":
        return None
    waves = arriving(
        cluster.pods.values(), cluster.recent_evictions, now_s, config.workload_cooldown
    )
    if not waves:
        return None
    scheduler = RequestScheduler(nodes, cluster.pods.values(), rules.placements)
    return wave_ahead(waves, scheduler, classes, cluster.nodes, peers)


def _nothing_moved(result: EvictionPlan, config: DeschedulerConfig) -> str:
    """Why a plan with sources evicts nothing. Beside a stock kube-scheduler that is the
    descheduler standing down: no replacement provably lands elsewhere and stays under
    the limits. Said once per round (a plan note is part of the run's log line), with
    the skip codes that made it."""
    if config.scheduler == "extender":
        return "no pod can be moved: see the skipped pods"
    codes = Counter(skipped.code.value for skipped in result.skipped)
    sources = sum(1 for c in result.node_classes.values() if c.kind is NodeKind.SOURCE)
    counted = ", ".join(f"{code} {count}" for code, count in sorted(codes.items()))
    return (
        f"standing down beside kube-scheduler (scheduler: {config.scheduler}): no pod of "
        f"the {sources} source(s) has a replacement that kube-scheduler would place off "
        f"its source and leave under the limits ({counted or 'no candidate pod'}): "
        "evicting nothing this round"
    )


def _replacements(
    result: EvictionPlan,
    cluster: ClusterView,
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
) -> list[str]:
    """What kube-scheduler may do with the replacements: beside the extender the plan
    reserves room and the scheduler chooses, avoiding the source only while the
    extender filters it out; beside a request-based scheduler the plan predicted where
    they land."""
    if config.scheduler != "extender":
        if not result.evictions:
            return []
        return [f"replacements: placed by {ASSUMES[config.scheduler]}"]
    notes = []
    for source in sorted({e.source for e in result.evictions}):
        load = evaluate(cluster.nodes[source], policy, now_s, {})
        if load.overloaded:
            notes.append(
                f"replacements from {source}: with the loadaware extender kube-scheduler "
                f"filters {source} out while {load.reason}; a scheduler without it places "
                "by requests and may put them back on it"
            )
        else:
            notes.append(
                f"replacements from {source}: it is under the policy's maxLimitPercent, so "
                "even the loadaware extender only scores it lower and a replacement may "
                "return to it; a scheduler without the extender places by requests"
            )
    return notes


def _rules(cluster: ClusterView, config: DeschedulerConfig, policy: Policy, now_s: float) -> Rules:
    """The destination rules over a cluster view: the plan's and the live re-check's."""
    return Rules(
        config,
        policy,
        now_s,
        Placements(cluster.nodes, cluster.pods.values()),
        nodes_left(cluster.recent_evictions, now_s, config.return_cooldown),
        cluster.workload_usage,
        cluster.workloads_measured,
    )


def _rooms(
    usages: Mapping[str, NodeUsage],
    classes: Mapping[str, NodeClass],
    pods_by_node: Mapping[str, list[PodInfo]],
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    placed: Mapping[str, PlacedPod],
) -> list[Room]:
    """Where a replacement may go, and how full it may get.

    Beside the extender the plan chooses the roomiest destination, and keeps it under
    ``thresholds``, so it never becomes the next source. Beside a request-based
    kube-scheduler the scheduler chooses, at random among the nodes tied for its best
    score: often most of the cluster's nodes, some of them neutral (between
    ``thresholds`` and ``targetThresholds``), or destinations a pod takes past
    ``thresholds``. Each of those would refuse every pod under the plan's own ceiling
    (a 200-node day with two peaks: 0 evictions from the tainted sources) where all
    that matters is that the pod's usage does not make its node hot: so there the
    ceiling is ``targetThresholds``, and a neutral Ready, schedulable node is a room
    too. ``SchedulerChooses`` still requires every tied node to take the pod."""
    chooses = config.scheduler == "extender"
    kinds = (NodeKind.DESTINATION,) if chooses else (NodeKind.DESTINATION, NodeKind.NEUTRAL)
    return [
        room_of(
            usages[name],
            c.low_fraction if chooses else c.high_fraction,
            pods_by_node.get(name, ()),
            config,
            policy,
            now_s,
            placed,
        )
        for name, c in classes.items()
        if c.kind in kinds
        and (c.kind is NodeKind.DESTINATION or _schedulable(usages[name]))
    ]


def _schedulable(usage: NodeUsage) -> bool:
    return usage.node.ready and not usage.node.unschedulable


def _excess(node_class: NodeClass, usage: Mapping[str, float]) -> dict[str, float]:
    return {
        r: usage[r] - node_class.high_fraction[r]
        for r in usage
        if usage[r] > node_class.high_fraction[r]
    }


# Of a victim's reading, at most this share is doubted (``reading_doubt``).
SHED_DOUBT = 0.05


def peer_means(pods: Iterable[PodInfo], usage: Mapping[str, Resources]) -> dict[str, Resources]:
    """Per workload, the median measured usage of its pods (those ``usage`` has), per
    resource: what one of its pods reads when nothing sets it apart. The median, not
    the mean: a few pods genuinely apart (idle, or a hot spot's cause) do not move it."""
    readings: dict[str, list[Resources]] = {}
    for pod in pods:
        workload = workload_of(pod)
        measured = usage.get(pod.key)
        if workload is not None and measured is not None:
            readings.setdefault(workload, []).append(measured)
    return {
        workload: Resources(
            statistics.median(r.cpu_cores for r in found),
            statistics.median(r.memory_bytes for r in found),
        )
        for workload, found in readings.items()
    }


def reading_doubt(amount: Resources, peers: Resources | None) -> Resources:
    """How much of a victim's reading its next rate window may not use: what it reads
    above its workload's median (``peer_means``), at most ``SHED_DOUBT`` of it.

    The victims come largest first, and among alike pods the largest in the last
    window are those whose noise ran high: their next window uses less (regression to
    the mean), so the source cools by less than planned. On small-pods-hot-spot a
    source planned to 64.6 % read 65.2 % at the next round (fifteen pods of 0.55 CPU on
    64 cores, 0.6 points short), stayed a source, and took a round of
    consecutiveHotRounds more for one pod: 20 node-minutes above the limit on a base of
    50, on either side of the extender (docs/tuning.md). A pod that reads as its peers
    do is not doubted; one genuinely above them (a hot spot's cause) only by the cap."""
    if peers is None:
        return Resources()
    return Resources(
        *(
            min(max(0.0, amount.get(r) - peers.get(r)), SHED_DOUBT * amount.get(r))
            for r in RESOURCES
        )
    )


def _left_to_shed(
    node_class: NodeClass, current: Mapping[str, float], doubt: Mapping[str, float]
) -> dict[str, float]:
    """What a source has left to shed: its excess over targetThresholds, the doubted
    part of its victims' readings (``reading_doubt``, as fractions) counted as not shed."""
    high = node_class.high_fraction
    return {
        r: current[r] + doubt.get(r, 0.0) - high[r]
        for r in current
        if current[r] + doubt.get(r, 0.0) > high[r]
    }


# A pod that moves more than this many times as much of a resource its node is not hot
# on (as a share of the node) as of one it is hot on is not evicted for that hot spot.
MOSTLY_ELSEWHERE = 2.0


def _heavier_elsewhere(
    amount: Resources, allocatable: Resources, over: Mapping[str, float]
) -> str | None:
    """Why a pod is mostly a resource its node is not hot on, or None.

    Such a pod cools its source by a sliver of what the source must shed, and loads
    wherever kube-scheduler puts its replacement (not always where the plan sent it)
    with what the source did not need to shed: beside loadaware, on a crane-style
    experiment, a 2.5 GiB pod using 0.2 core moved off a CPU-hot 8-core node left the
    node hot and reshuffled memory across the cluster, and the next scale-up waves
    landed on nodes that then throttled (docs/tuning.md)."""
    shares = {
        r: amount.get(r) / allocatable.get(r) for r in RESOURCES if allocatable.get(r) > 0
    }
    hot = max(shares.get(r, 0.0) for r in over)
    heavier = {
        r: share
        for r, share in shares.items()
        if r not in over and share > MOSTLY_ELSEWHERE * hot
    }
    if not heavier:
        return None
    other = max(heavier, key=lambda r: heavier[r])
    return (
        f"mostly {other}: moves {heavier[other]:.1%} of the node's {other}, more than "
        f"{MOSTLY_ELSEWHERE:g} times its {hot:.1%} of the {' or '.join(over)} the node is "
        "hot on"
    )


_Candidate = tuple[PodInfo, Resources, str]  # a pod, its usage and where it was read

# The per-workload limits one run's sources share (``RunBudget``).
_SHARED_LIMITS = (SkipCode.WORKLOAD_LIMIT, SkipCode.WORKLOAD_UNAVAILABLE)


def _share_order(
    candidates: list[_Candidate],
    ranks: list[tuple[Any, ...]],
    budget: RunBudget,
    later: Mapping[str, int],
) -> list[_Candidate]:
    """The victims in the order that shares a scarce workload budget between sources:
    within each rank (``victim_order``'s hints, priority, QoS and deletion cost, kept
    first), next the pod whose workload would have the most evictions left in this run
    over the pods the sources still to drain hold of it, as if each pod before it were
    taken; ties in the plain order.

    On memory-hot-spot (seed 9) three sources needed 8 service pods each, three of
    each of six workloads on every one, and the run allows 4 evictions a workload
    (maxUnavailablePerWorkload 10 % of 40): drained in the plain order, the first two
    left the third one workload with room it had no pods of, and it ended at 65.4 %
    against 65 %, a round of consecutiveHotRounds later to finish (docs/tuning.md,
    issue 40)."""
    room: dict[str, int] = {}
    for pod, _, _ in candidates:
        workload = workload_of(pod)
        if workload is not None and workload not in room:
            room[workload] = budget.workload_room(workload)
    ordered: list[_Candidate] = []
    left = list(zip(ranks, candidates, strict=True))
    while left:
        rank = left[0][0]
        group = [index for index, (r, _) in enumerate(left) if r == rank]

        def slack(index: int) -> int:
            workload = workload_of(left[index][1][0])
            if workload is None:
                return len(candidates)
            return room[workload] - later.get(workload, 0)

        best = max(group, key=lambda index: (slack(index), -index))
        workload = workload_of(left[best][1][0])
        if workload is not None:
            room[workload] -= 1
        ordered.append(left.pop(best)[1])
    return ordered


def _workload_counts(
    sources: Iterable[NodeClass], pods_by_node: Mapping[str, list[PodInfo]]
) -> Counter[str]:
    """How many pods of each workload run on these sources."""
    counts: Counter[str] = Counter()
    for source in sources:
        for pod in pods_by_node.get(source.node, []):
            workload = workload_of(pod)
            if workload is not None:
                counts[workload] += 1
    return counts


def _sources_hottest_first(classes: Mapping[str, NodeClass]) -> list[NodeClass]:
    sources = [c for c in classes.values() if c.kind is NodeKind.SOURCE]
    return sorted(sources, key=lambda c: (-max(_excess(c, c.usage_fraction).values()), c.node))


@dataclass
class _Pass:
    """The mutable state of one planning pass: who is chosen, what room is left."""

    config: DeschedulerConfig
    now_s: float
    sources: tuple[UsageSource, ...]
    destinations: Destinations
    replacements: Replacements
    result: EvictionPlan
    budget: RunBudget
    owned: Mapping[str, int]
    backed_off: BackOff = field(default_factory=BackOff)
    # Node -> the priority from which pods stay where a class of pods is hot.
    evictable_below: Mapping[str, int] = field(default_factory=dict)
    peers: Mapping[str, Resources] = field(default_factory=dict)  # ``peer_means``
    # Sharing a scarce workload budget between sources: the pods of each workload on the
    # sources still to drain (set before each ``drain`` on the sharing pass, else empty),
    # the sources left above targetThresholds with how much (the largest resource's
    # fraction), and those of them that had pods refused by a per-workload limit.
    later: Mapping[str, int] = field(default_factory=dict)
    left: dict[str, float] = field(default_factory=dict)
    starved: set[str] = field(default_factory=set)

    def drain(self, usage: NodeUsage, source: NodeClass, pods: list[PodInfo]) -> None:
        """Evict from one source until it is under its threshold or nothing more can go;
        then judge the gain of the whole set (``_gain_too_small``) and keep all or none."""
        node = usage.node
        start = dict(usage.usage_fraction)
        current = dict(start)
        excess = _excess(source, current)
        hottest = max(excess, key=lambda r: excess[r])
        candidates = []
        on_source = []
        for pod in pods:
            pod_usage_, origin = pod_usage(pod, self.sources)
            on_source.append(PodOnSource(pod, pod_usage_, origin))
            if self._kept(pod, node) is not None:
                continue
            below = self.evictable_below.get(node.name)
            if below is not None and pod.priority >= below:
                stays = f"its class is hot here: only pods below priority {below} move"
                self._skip(pod, node.name, SkipCode.PROTECTED, stays)
                continue
            workload = workload_of(pod)
            why = self.backed_off.workloads.get(workload) if workload is not None else None
            if why is not None:
                self._skip(pod, node.name, SkipCode.BACKED_OFF, f"workload {workload} {why}")
                continue
            candidates.append((pod, pod_usage_, origin))
        attribution = Attribution(node.name, node.allocatable, excess, on_source)
        excess_amount = excess[hottest] * node.allocatable.get(hottest)
        candidates.sort(
            key=lambda c: (
                victim_order(c[0], c[1], hottest, excess_amount, causer=attribution.causer(c[0])),
                c[0].key,
            )
        )
        if self.later:
            candidates = _share_order(
                candidates,
                [
                    victim_order(p, a, hottest, excess_amount, causer=attribution.causer(p))[:4]
                    for p, a, _ in candidates
                ],
                self.budget,
                self.later,
            )
        chosen: list[tuple[PodInfo, str, Resources]] = []
        doubt: dict[str, float] = {}  # of the victims' readings, as fractions of the node
        over = _left_to_shed(source, current, doubt)  # moves with each eviction
        for pod, amount, origin in candidates:
            if not over:
                break
            if self.budget.exhausted() or self.budget.node_full(node.name):
                code, text = self.budget.why_not(pod, node.name) or (
                    SkipCode.EVICTION_LIMIT,
                    "limit reached",
                )
                self._skip(pod, node.name, code, text)
                continue
            if all(amount.get(r) <= 0 for r in over):
                moving = " or ".join(over)
                self._skip(pod, node.name, SkipCode.NOTHING_TO_MOVE, f"uses no {moving} to move")
                continue
            heavier = _heavier_elsewhere(amount, node.allocatable, over)
            if heavier is not None:
                self._skip(pod, node.name, SkipCode.OTHER_RESOURCE, heavier)
                continue
            within = attribution.refusal(pod, tuple(over))
            if within is not None:
                self._skip(pod, node.name, SkipCode.WITHIN_REQUESTS, within)
                continue
            refused = self.budget.why_not(pod, node.name)
            if refused is not None:
                self._skip(pod, node.name, *refused)
                continue
            shed = Resources(
                *(
                    min(amount.get(r), over[r] * node.allocatable.get(r)) if r in over else 0.0
                    for r in RESOURCES
                )
            )
            landing = self.replacements.land(pod, amount, node.name, shed)
            destination = landing.destination
            if destination is None:
                self._skip(pod, node.name, landing.code, landing.reason)
                continue
            before = dict(current)
            for resource in current:
                current[resource] -= amount.get(resource) / node.allocatable.get(resource)
            self._evict(pod, source, destination, amount, origin, before, current, over)
            chosen.append((pod, destination, amount))
            attribution.take(pod, amount)
            workload = workload_of(pod)
            doubted = reading_doubt(amount, self.peers.get(workload) if workload else None)
            for resource in current:
                doubt[resource] = doubt.get(resource, 0.0) + doubted.get(
                    resource
                ) / node.allocatable.get(resource)
            over = _left_to_shed(source, current, doubt)
        small = self._gain_too_small(source, start, current, excess, len(chosen))
        if small is not None:
            self._undo(chosen, node.name, small)
            for pod, _, amount in chosen:
                attribution.give_back(pod, amount)
            current = start
        left = _excess(source, current)
        self.left[node.name] = max(left.values(), default=0.0)
        if left and any(
            s.node == node.name and s.code in _SHARED_LIMITS for s in self.result.skipped
        ):
            self.starved.add(node.name)
        held = attribution.report(left)
        if held is not None:
            self.result.held_hot[node.name] = held
            self.result.notes.append(f"{node.name}: {held.reason}")

    def _kept(self, pod: PodInfo, node: NodeInfo) -> str | None:
        """Why the pod is never evicted (an opt-out or a protection, recorded as its
        skip), or None."""
        opted = opt_out(pod, node.annotations)
        if opted is not None:
            self._skip(pod, node.name, SkipCode.OPTED_OUT, opted)
            return opted
        protected = protection(pod, self.config, self.now_s, self.owned)
        if protected is not None:
            self._skip(pod, node.name, SkipCode.PROTECTED, protected)
        return protected

    def _gain_too_small(
        self,
        source: NodeClass,
        start: Mapping[str, float],
        end: Mapping[str, float],
        hot: Mapping[str, float],
        count: int,
    ) -> str | None:
        """None when the source's planned evictions, as one set, are a lasting gain: the
        source ends at or below targetThresholds, or the set lowers a resource it was hot
        on by at least ``minimumGain`` points. Judged per source, not per pod: on a big
        node full of small pods no single pod gains much, yet a few together do."""
        if count == 0 or not _excess(source, end):
            return None
        gains = {r: start[r] - end[r] for r in hot}
        wanted = self.config.minimum_gain / 100
        if max(gains.values()) >= wanted - ROUNDING:
            return None
        text = ", ".join(f"{self.config.metric_for(r)} -{gains[r]:.1%}" for r in hot)
        return (
            f"gain too small: the {count} eviction(s) the limits and destinations allow "
            f"from {source.node} lower it by {text}, which leaves it above targetThresholds "
            f"and under minimumGain ({self.config.minimum_gain:g} points): evicting none"
        )

    def _undo(self, chosen: list[tuple[PodInfo, str, Resources]], node: str, why: str) -> None:
        """Take back a source's evictions: their room, their share of the limits."""
        undone = {pod.key for pod, _, _ in chosen}
        for pod, destination, amount in reversed(chosen):
            self.replacements.release(pod, amount, node, destination)
            self.budget.give_back(pod, node)
            self._skip(pod, node, SkipCode.GAIN_TOO_SMALL, why)
        self.result.evictions = [e for e in self.result.evictions if e.pod.key not in undone]
        self.result.notes.append(f"{node}: {why}")

    def _evict(
        self,
        pod: PodInfo,
        source: NodeClass,
        destination: str,
        amount: Resources,
        origin: str,
        before: Mapping[str, float],
        after: Mapping[str, float],
        over: Mapping[str, float],
    ) -> None:
        self.replacements.reserve(pod, amount, source.node, destination)
        self.budget.take(pod, source.node)
        metric = self.config.metric_for
        values: dict[str, float] = {}
        for resource in before:
            values[f"{metric(resource)} before"] = before[resource]
            values[f"{metric(resource)} after"] = after[resource]
        reason = ", ".join(
            f"{metric(r)} {before[r]:.0%} > {source.high_fraction[r]:.0%}" for r in over
        )
        self.result.evictions.append(
            PlannedEviction(
                pod=pod,
                source=source.node,
                destination=destination,
                usage=amount,
                usage_from=origin,
                metric_values=values,
                reason=reason,
                destination_ceiling=dict(self.destinations.room(destination).ceiling),
            )
        )

    def _skip(self, pod: PodInfo, node: str, code: SkipCode, reason: str) -> None:
        self.result.skipped.append(SkippedPod(pod.key, node, reason, code))

    skip_pod = _skip


def recheck(
    eviction: PlannedEviction,
    cluster_now: ClusterView,
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    reserved: Mapping[str, Resources],
) -> str | None:
    """None when the eviction is still right against a live view; else why not.

    ``reserved`` is the usage the run already moved onto each node and that
    ``cluster_now.recent_evictions`` does not hold yet (evictions made earlier in this
    run), so a scale-up that took the room, or earlier evictions, stop this one.
    """
    pod = cluster_now.pods.get(eviction.pod.key)
    if pod is None or pod.uid != eviction.pod.uid:
        return "the pod is gone"
    if pod.node_name != eviction.source or pod.terminating:
        return "the pod is no longer running on the source"
    source = cluster_now.nodes.get(eviction.source)
    opted = opt_out(pod, source.annotations if source is not None else {})
    if opted is not None:
        return f"opted out: {opted}"
    # A drained source carries the drain taint (NoSchedule): no scheduler puts the
    # replacement back there, soft taint or not.
    away = None if eviction.drain else live_refusal(pod, eviction.source, cluster_now,
                                                     config.scheduler)  # fmt: skip
    if away is not None:
        return away
    node = cluster_now.nodes.get(eviction.destination)
    if node is None:
        return f"destination {eviction.destination} is gone"
    usages = measure_nodes([node], config, policy, now_s, cluster_now.recent_evictions)
    usage = usages[node.name]
    if usage.missing is not None:
        return f"destination {node.name} has no usable data: {usage.missing}"
    on_node = [p for p in cluster_now.pods.values() if p.node_name == node.name]
    ceiling = eviction.destination_ceiling or dict.fromkeys(usage.usage_fraction, 1.0)
    placed = recent_placed(
        cluster_now.pods.values(),
        cluster_now.workload_usage,
        cluster_now.workloads_measured,
        policy,
        now_s,
    )
    room = room_of(usage, ceiling, on_node, config, policy, now_s, placed)
    moved = reserved.get(node.name, Resources())
    room.add(moved, moved)
    refused = _rules(cluster_now, config, policy, now_s).refusal(pod, eviction.usage, room)
    return None if refused is None else f"destination {node.name}: {refused}"
