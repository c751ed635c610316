"""Hindsight: what each run's evictions did, ``settleTime`` later; pure.

A run that evicts remembers, per source, a pending move (``MoveRecord``): the source's
usage as the run measured it, what the evicted pods used, what the source's other pods
used, and the destination the plan reserved room on (``add_eviction``). Each later run
judges the moves whose ``settleTime`` has passed (``judge_due``) with the planner's
judgement (``app/rebalance/aftermath.py``), on what the run sees:

- the source's usage now, from its annotation (a move waits while it is not fresh);
- the pods on the source now that were bound there before the move (what they use
  now, against what the others used then): pods that left or changed are taken out;
- each evicted pod's replacement: the first pod of its workload created after the
  eviction; one back on the source counts against the move, one elsewhere gives the
  node it landed on, whose usage before is known when it is the destination the plan
  chose;
- the other pods bound on the source since: added back, as another cause;
- the throttling and OOM kills of the move's workloads, before against after, when
  the caller read them (``health_window`` says which pods over which window: the
  evicted pods and the workloads' pods then, the workloads' pods now, each over the
  time since the move, at most an hour; ``app/prom/pod_health.py`` reads them from
  cAdvisor). Unknown counts leave the judgement to the usage alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from app.load import Freshness, read_fraction
from app.objects import EvictionRecord, MoveRecord, PodInfo, Resources, workload_of
from app.policy import Policy
from app.rebalance import (
    ClusterView,
    DeschedulerConfig,
    EvictionPlan,
    Measured,
    Planned,
    PlannedEviction,
    judge,
    judged_move,
)

# The window the workloads' throttling and OOM kills are compared over: the time since
# the move, before it and after it, at most an hour; under a minute (about four
# scrapes) increase() has nothing to say, and they are not read.
MIN_WINDOW_S = 60.0
MAX_WINDOW_S = 3600.0


def _amount(usage: Resources, resource: str) -> float:
    return usage.get(resource)


def _usage_of(pod: PodInfo, cluster: ClusterView) -> Resources:
    return cluster.pod_usage.get(pod.key) or pod.requests


def _placed_s(pod: PodInfo) -> float:
    placed = pod.bound_at_s if pod.bound_at_s is not None else pod.created_s
    return placed if placed is not None else 0.0


def _share(amount: float, allocatable: float) -> float:
    return amount / allocatable if allocatable > 0 else 0.0


def add_eviction(
    moves: dict[str, MoveRecord],
    eviction: PlannedEviction,
    plan: EvictionPlan,
    cluster: ClusterView,
    round_s: float,
) -> MoveRecord | None:
    """Add an eviction made in the run started at ``round_s`` to its source's move;
    None when the source is not in the plan's classes (nothing to judge it on)."""
    source = cluster.nodes.get(eviction.source)
    source_class = plan.node_classes.get(eviction.source)
    if source is None or source_class is None:
        return None
    key = MoveRecord(eviction.source, round_s, "cpu", 0, 0, 0, "", 1, ()).key
    held = moves.get(key)
    workload = workload_of(eviction.pod)
    if held is None:
        shares = {
            r: _share(_amount(eviction.usage, r), source.allocatable.get(r))
            for r in source_class.usage_fraction
        }
        if not shares:
            return None
        resource = max(shares, key=lambda r: shares[r])
        allocatable = source.allocatable.get(resource)
        on_source = sum(
            _amount(_usage_of(p, cluster), resource)
            for p in cluster.pods.values()
            if p.node_name == eviction.source
        )
        dest = plan.node_classes.get(eviction.destination)
        held = MoveRecord(
            eviction.source,
            round_s,
            resource,
            source_class.usage_fraction[resource],
            0.0,
            _share(on_source, allocatable),
            eviction.destination,
            0,
            (),
            dest.usage_fraction.get(resource) if dest is not None else None,
            dest.high_fraction.get(resource) if dest is not None else None,
        )
    moved = _share(_amount(eviction.usage, held.resource), source.allocatable.get(held.resource))
    workloads = held.workloads
    if workload is not None and workload not in workloads and len(workloads) < 8:
        workloads = (*workloads, workload)
    held = replace(
        held,
        moved=held.moved + moved,
        others_before=max(0.0, held.others_before - moved),
        pods=held.pods + 1,
        workloads=workloads,
    )
    moves[key] = held
    return held


@dataclass(frozen=True, slots=True)
class HealthWindow:
    """Whose throttling and OOM kills speak for a move's workloads, over which window:
    ``before`` ends at the move, ``after`` now; pod key -> the names of its node."""

    window_s: float
    before_at_s: float
    before: Mapping[str, tuple[str, ...]]
    after: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class WorkloadHealth:
    """The move's workloads' throttled periods and OOM kills, before and after; None:
    not known (the counters are not scraped, or a query failed)."""

    throttled_before: int | None = None
    throttled_after: int | None = None
    oom_before: int | None = None
    oom_after: int | None = None


def due_moves(
    moves: Mapping[str, MoveRecord], config: DeschedulerConfig, now_s: float
) -> list[MoveRecord]:
    """The pending moves whose ``settleTime`` has passed, oldest first."""
    due = [
        m for m in moves.values() if m.outcome is None and m.round_s + config.settle_time <= now_s
    ]
    return sorted(due, key=lambda m: m.round_s)


def _node_names(cluster: ClusterView, node: str) -> tuple[str, ...]:
    info = cluster.nodes.get(node)
    return (node, info.internal_ip) if info is not None and info.internal_ip else (node,)


def health_window(
    move: MoveRecord,
    records: Iterable[EvictionRecord],
    cluster: ClusterView,
    config: DeschedulerConfig,
    now_s: float,
) -> HealthWindow | None:
    """The pods and window to read the move's workloads' health over; None when the
    move evicted no workload's pods, or less than ``MIN_WINDOW_S`` has passed."""
    window_s = min(now_s - move.round_s, MAX_WINDOW_S)
    workloads = set(move.workloads)
    if window_s < MIN_WINDOW_S or not workloads:
        return None
    before: dict[str, tuple[str, ...]] = {}
    after: dict[str, tuple[str, ...]] = {}
    for record in records:
        if (
            record.node == move.source
            and record.workload in workloads
            and move.round_s <= record.evicted_at_s < move.round_s + config.interval
        ):
            before[record.pod_key] = _node_names(cluster, record.node)
    for pod in cluster.pods.values():
        if pod.node_name is None or workload_of(pod) not in workloads:
            continue
        names = _node_names(cluster, pod.node_name)
        after[pod.key] = names
        if _placed_s(pod) < move.round_s:
            before[pod.key] = names
    return HealthWindow(window_s, move.round_s, before, after)


def judge_due(
    moves: Mapping[str, MoveRecord],
    records: Iterable[EvictionRecord],
    cluster: ClusterView,
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    health: Mapping[str, WorkloadHealth] | None = None,
) -> list[MoveRecord]:
    """The pending moves whose ``settleTime`` has passed, judged (``health``: by move
    key, the workloads' throttling and OOM kills, where read); a move whose source has
    no fresh usage now, or is gone, waits (it is dropped with the memory later)."""
    due = due_moves(moves, config, now_s)
    if not due:
        return []
    records = list(records)
    claimed: set[str] = set()
    judged = []
    for move in due:
        measured = _measure(move, records, cluster, config, policy, now_s, claimed)
        if measured is None:
            continue
        known = (health or {}).get(move.key)
        if known is not None:
            measured = replace(
                measured,
                throttled_before=known.throttled_before,
                throttled_after=known.throttled_after,
                oom_before=known.oom_before,
                oom_after=known.oom_after,
            )
        planned = Planned(
            move.source,
            move.resource,
            move.source_before,
            move.moved,
            move.destination,
            move.pods,
            move.others_before,
        )
        judgement = judge(planned, measured)
        judged.append(judged_move(move, judgement, now_s))
    return judged


def _fresh_fraction(
    cluster: ClusterView, node: str, metric: str, policy: Policy, now_s: float
) -> float | None:
    info = cluster.nodes.get(node)
    if info is None:
        return None
    freshness, value = read_fraction(
        info.annotations, metric, policy.freshness_window_s(metric), now_s
    )
    return value if freshness is Freshness.FRESH else None


def _measure(
    move: MoveRecord,
    records: list[EvictionRecord],
    cluster: ClusterView,
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    claimed: set[str],
) -> Measured | None:
    metric = config.metrics["cpu" if move.resource == "cpu" else "memory"]
    after = _fresh_fraction(cluster, move.source, metric, policy, now_s)
    source = cluster.nodes.get(move.source)
    if after is None or source is None:
        return None
    allocatable = source.allocatable.get(move.resource)
    evicted = [
        r
        for r in records
        if r.node == move.source and move.round_s <= r.evicted_at_s < move.round_s + config.interval
    ]
    returned, landed_on = 0, None
    for record in evicted:
        replacement = _replacement(record, cluster, claimed)
        if replacement is None:
            continue
        claimed.add(replacement.uid)
        if replacement.node_name == move.source:
            returned += 1
        elif landed_on is None or replacement.node_name == move.destination:
            landed_on = replacement.node_name
    stayed = arrived = 0.0
    for pod in cluster.pods.values():
        if pod.node_name != move.source or pod.uid in claimed:
            continue
        amount = _amount(_usage_of(pod, cluster), move.resource)
        if _placed_s(pod) < move.round_s:
            stayed += amount
        else:
            arrived += amount
    landed_before = landed_high = landed_after = None
    if landed_on is not None and landed_on == move.destination:
        landed_before, landed_high = move.destination_before, move.destination_high
        landed_after = _fresh_fraction(cluster, landed_on, metric, policy, now_s)
    return Measured(
        source_after=after,
        stayed_after=_share(stayed, allocatable),
        arrived=_share(arrived, allocatable),
        returned=returned,
        landed_on=landed_on,
        landed_before=landed_before,
        landed_after=landed_after,
        landed_high=landed_high,
    )


def _replacement(record: EvictionRecord, cluster: ClusterView, claimed: set[str]) -> PodInfo | None:
    if record.workload is None:
        return None
    candidates = [
        p
        for p in cluster.pods.values()
        if p.uid not in claimed
        and p.uid != record.uid
        and p.node_name is not None
        and p.created_s is not None
        and p.created_s >= record.evicted_at_s - 1.0
        and workload_of(p) == record.workload
    ]
    return min(candidates, key=lambda p: (p.created_s or 0.0, p.key), default=None)
