"""Soft taints on a real cluster: each round, the load model's rule applied to every Node.

The rule (``app.load.taints``) says, from each node's annotations, which nodes carry
loadaware's ``PreferNoSchedule`` taint; this keeps the cluster in step with it:

* a round reads every node from the node cache and judges it with ``judge_node`` at
  the current instant, as the simulator does: its fresh readings plus the estimate of
  the pods bound on it since them (``node_unsampled`` over the pods ``RecentPods``
  kept, within the node's allocatable, each less the share its samples already show)
  plus the next pod of the wave in progress
  (``next_pod`` over ``wave_of`` every pod ``RecentPods`` kept), each pod estimated at
  its workload's usage as this replica last published it
  (``WorkloadUsagePublisher.observed``: fresh, else requests and limits alone), then asks
  ``decide_soft_taints``, with the memory of the previous round (when each tainted
  node was last warm, for the hold);
* before it decides, a tainted node the descheduler evicted from within
  ``DRAINED_WINDOW_S`` is held while the largest pod evicted from it would take it
  back over a limit (``DrainedNodes``: the same ``hold_drained`` as the simulator's,
  over the descheduler's own record of its evictions);
* after it decides, while the descheduler has evicted within ``GUARD_WINDOW_S``, a node
  the rule left untainted that the largest pod it moved would take above a lower line
  is tainted for the round, while some node stays under it, the guard takes at most
  three quarters of the nodes and no pod that is not a replacement was bound in the last 10 minutes
  (``DrainedNodes.guard``: the same ``guard_landings`` and ``other_arrivals`` as the
  simulator's); it is not in the rule's memory, so a node guarded no more loses the
  taint at the next round;
* a node whose taint differs from the decision is written through ``TaintWriter``
  (read, change only loadaware's entry, write with the read ``resourceVersion``);
* the memory lives only as long as this replica leads. A node found carrying the taint
  without memory of it (a restarted annotator, a new leader) is held from now: that can
  only keep a taint longer, never drop one early;
* a node this replica just untainted is not taken for tainted while the cache still
  shows the taint (the watch lags the write by a moment).

With the feature off, ``remove_all`` takes the taint off every node once per
leadership, so that turning soft taints off is a restart of the annotator.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from app.annotator.drained import DrainedNodes
from app.annotator.telemetry import AnnotatorMetrics
from app.annotator.warm_taints import PodSource, WarmTaintKeeper, write_taints
from app.kube import NodeInfo, PatchOutcome, TaintWriter
from app.load import (
    SOFT_TAINT_EFFECT,
    SOFT_TAINT_KEY,
    SOFT_TAINT_VALUE,
    PlacedPod,
    SoftTaints,
    SoftTaintSettings,
    bounded_next_pod_heats,
    decide_soft_taints,
    judge_node,
    next_pod,
    node_unsampled,
    plain_wave,
    wave_of,
)
from app.objects import Resources, Taint, format_duration
from app.policy import Policy, PoolMatch

log = logging.getLogger(__name__)

# A node's allocatable and its policy's limits: what the next pod's estimate depends on.
_Shape = tuple[Resources, tuple[tuple[str, float], ...]]

SOFT_TAINT = Taint(SOFT_TAINT_KEY, SOFT_TAINT_VALUE, SOFT_TAINT_EFFECT)


def carries_soft_taint(node: NodeInfo) -> bool:
    return any(taint.key == SOFT_TAINT_KEY for taint in node.taints)


@dataclass
class RoundReport:
    decided: SoftTaints
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, PatchOutcome] = field(default_factory=dict)


class SoftTaintKeeper:
    def __init__(
        self,
        writer: TaintWriter,
        settings: SoftTaintSettings,
        *,
        telemetry: AnnotatorMetrics,
        clock: Callable[[], float] = time.time,
        drained: DrainedNodes | None = None,
        pods: PodSource | None = None,
    ) -> None:
        """``pods``: the pod watch, whose pods' requests the warm taint reads (after
        each round of the hot one, ``WarmTaintKeeper``); None: no warm taint."""
        self.settings = settings
        self._pods = pods
        self.warm = WarmTaintKeeper(writer, telemetry=telemetry, clock=clock)
        self._drained = drained or DrainedNodes()
        self._writer = writer
        self._telemetry = telemetry
        self._clock = clock
        self._warm_at_s: dict[str, float] = {}  # tainted node -> last warm instant
        self._removing: set[str] = set()  # untainted by us; the cache may still show it
        self._overlapping: set[str] = set()  # nodes logged as in two or more node pools
        self._guarded: set[str] = set()  # tainted by the guard alone (app/load/landing_guard.py)

    def forget(self) -> None:
        """Leadership lost: whoever leads next judges from the cluster, not from us."""
        self._warm_at_s.clear()
        self._removing.clear()
        self.warm.forget()
        self._guarded.clear()

    def previous(self, nodes: Mapping[str, NodeInfo], now_s: float) -> dict[str, float]:
        """The memory the rule gets this round: each node tainted now, with the last
        instant it was warm (now, for a taint found without memory of it)."""
        carried = {name for name, info in nodes.items() if carries_soft_taint(info)}
        self._removing &= carried  # the cache has caught up with the others
        previous = {name: at_s for name, at_s in self._warm_at_s.items() if name in nodes}
        for name in carried - previous.keys() - self._removing - self._guarded:
            previous[name] = now_s
        return previous

    def _pool_policy(self, name: str, match: PoolMatch[Policy]) -> Policy:
        """The policy a node is judged by; a node two pools select is logged once."""
        if not match.overlap:
            self._overlapping.discard(name)
        elif name not in self._overlapping:
            self._overlapping.add(name)
            log.error(
                "node %s is selected by node pools %s of the policy; its soft taint follows "
                "the policy's own limits until one pool selects it",
                name,
                ", ".join(match.overlap),
            )
        return match.judged_by

    async def run_round(
        self,
        nodes: Mapping[str, NodeInfo],
        policy: Policy,
        recent: Mapping[str, Sequence[PlacedPod]] | None = None,
        raises_left: int | None = None,
    ) -> RoundReport:
        """One round; ``recent``: each node's pods bound within ``estimation.maxAge``;
        ``raises_left``: how many more pods of the workloads whose pods hold a raise
        would take one (``RecentPods.raises_left``): at most so many nodes are hot only
        through a next pod at its workload's usage (``bounded_next_pod_heats``); None:
        no bound."""
        now_s = self._clock()
        margin = self.settings.release_margin
        recent = recent or {}
        wave = wave_of((pod for pods in recent.values() for pod in pods), policy, now_s)
        bounded = raises_left is not None and any(pod.observed is not None for pod in wave)
        plain = plain_wave(wave) if bounded else wave
        ahead: dict[_Shape, tuple[dict[str, float], dict[str, float]]] = {}
        heats = {}
        plain_heats = {}
        pools = policy.node_pools
        for name, info in nodes.items():
            pods = recent.get(name)
            node_policy = policy
            if pools:  # the node's pool's limits (app/policy/pools.py)
                node_policy = self._pool_policy(name, pools.match(info.labels))
            unsampled = (
                node_unsampled(
                    pods, info.annotations, info.allocatable, policy, now_s, partly_sampled=True
                )
                if pods
                else None
            )
            shape = (info.allocatable, node_policy.limits)  # what the next pod depends on
            if shape not in ahead:
                raised_next = next_pod(wave, info.allocatable, node_policy)
                plain_next = (
                    next_pod(plain, info.allocatable, node_policy) if bounded else raised_next
                )
                ahead[shape] = (raised_next, plain_next)
            raised_next, plain_next = ahead[shape]
            heats[name] = judge_node(
                info.annotations, node_policy, now_s, margin, unsampled, raised_next
            )
            if bounded:
                plain_heats[name] = judge_node(
                    info.annotations, node_policy, now_s, margin, unsampled, plain_next
                )
        if bounded:
            heats = bounded_next_pod_heats(heats, plain_heats, raises_left or 0)
        previous = await self._drained.hold(
            self.previous(nodes, now_s), nodes, policy, now_s, margin
        )
        decided = decide_soft_taints(heats, previous, now_s, self.settings)
        report = RoundReport(decided)
        untainted = [name for name, d in decided.decisions.items() if not d.tainted]
        guarded = self._drained.guard(untainted, nodes, policy, now_s, margin)
        changes = {}
        for name, decision in decided.decisions.items():
            wanted = decision.tainted or name in guarded
            carried = carries_soft_taint(nodes[name])
            if wanted != carried or (name not in guarded and wanted != (name in previous)):
                changes[name] = wanted
        self._guarded = set(guarded)
        outcomes = await self._write(changes)
        memory = dict(decided.warm_at_s)
        for name, outcome in outcomes.items():
            present = changes[name]
            reason = guarded.get(name) or decided.decisions[name].reason
            if outcome in (PatchOutcome.WRITTEN, PatchOutcome.UNCHANGED):
                if present:
                    self._removing.discard(name)
                else:
                    self._removing.add(name)
                if outcome is PatchOutcome.WRITTEN:
                    (report.added if present else report.removed).append(name)
                    self._telemetry.soft_taint_changes.labels(
                        "added" if present else "removed"
                    ).inc()
                    log.info(
                        "soft taint %s node %s: %s",
                        "put on" if present else "taken off",
                        name,
                        reason,
                    )
            elif outcome not in (PatchOutcome.NODE_GONE, PatchOutcome.NOT_LEADER):
                report.failed[name] = outcome
                # What the node carries is what it carried: keep its memory as it was.
                if present:
                    memory.pop(name, None)
                elif name in previous:
                    memory[name] = previous[name]
                log.warning(
                    "soft taint on node %s: could not %s it (%s); trying again next round (%s)",
                    name,
                    "put" if present else "take",
                    outcome.value,
                    reason,
                )
        self._warm_at_s = memory
        if self._pods is not None and self._pods.synced:  # each node's requests are known
            try:  # a failure of the second taint's round leaves the first one's intact
                placed = self._pods.objects.values()
                await self.warm.run_round(nodes, placed, policy, decided.tainted)
            except Exception:
                log.exception("a warm-taint round failed unexpectedly; retrying next round")
        self._telemetry.soft_tainted_nodes.set(len(memory))
        if report.added or report.removed or report.failed:
            log.info(
                "soft taints: %d of %d nodes tainted (at most %d); %d put on, %d taken off, "
                "%d failed",
                len(memory),
                len(nodes),
                self.settings.cap(len(nodes)),
                len(report.added),
                len(report.removed),
                len(report.failed),
            )
        return report

    async def remove_all(self, nodes: Mapping[str, NodeInfo]) -> int:
        """Take loadaware's taints off every node that carries one; returns how many
        nodes lost the hot one."""
        await self.warm.remove_all(nodes)
        carrying = {name: False for name, info in nodes.items() if carries_soft_taint(info)}
        outcomes = await self._write(carrying)
        removed = sorted(n for n, o in outcomes.items() if o is PatchOutcome.WRITTEN)
        failed = sorted(n for n, o in outcomes.items() if o.is_error)
        self._telemetry.soft_taint_changes.labels("removed").inc(len(removed))
        self._telemetry.soft_tainted_nodes.set(len(failed))
        if carrying:
            left = f"; {len(failed)} failed ({', '.join(failed)})" if failed else ""
            log.info(
                "soft taints are off: took loadaware's taint %s off %d nodes%s",
                SOFT_TAINT_KEY,
                len(removed),
                left,
            )
        else:
            log.info("soft taints are off: no node carries loadaware's taint %s", SOFT_TAINT_KEY)
        return len(removed)

    async def _write(self, changes: Mapping[str, bool]) -> dict[str, PatchOutcome]:
        return await write_taints(self._writer, SOFT_TAINT, changes, self._telemetry)


def limits_any(policy: Policy) -> bool:
    """Whether the policy limits a metric on some node: by its own predicates, or by a
    node pool's (app/policy/pools.py)."""
    return bool(policy.limits) or any(
        match.judged_by.limits for _, _, match in policy.node_pools.pools
    )


def log_settings(settings: SoftTaintSettings | None, interval_s: float, policy: Policy) -> None:
    """Say at start what the annotator does with soft taints, and whether it can."""
    if settings is None:
        log.info("soft taints off: the leader takes loadaware's taint off every node")
        return
    log.info(
        "soft taints on: %s:%s on nodes above a limit, kept while above the limit less "
        "%g and for %s after, on at most %g of the nodes; checked every %s",
        SOFT_TAINT_KEY,
        SOFT_TAINT_EFFECT,
        settings.release_margin,
        format_duration(settings.min_hold_s),
        settings.max_share,
        format_duration(interval_s),
    )
    if not limits_any(policy):
        log.warning(
            "soft taints on, but policy %s limits no metric (no predicate): no node "
            "will be tainted",
            policy.source,
        )
