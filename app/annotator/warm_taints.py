"""The warm taint on a real cluster: each soft-taint round, ``loadaware.io/warm`` on the
nodes whose real usage runs far ahead of their requests (``app.load.warm_taint``, the
same rule the simulator runs), kept in step with the Nodes.

* gather: every node of the node cache, its annotations (the readings), its
  allocatable, the policy it is judged by (its node pool's), and the sum of the
  requests of the pods the pod watch sees bound on it (``requested_by_node``: what
  kube-scheduler's NodeResourcesFit counts; a finished pod still in the watch counts
  too, which only makes a node look less far ahead: fewer taints, never more);
* decide: ``judge_warm``, then ``decide_warm_taints`` with the memory of the previous
  round (when each tainted node was last above its line, for the hold);
* act: a node whose taint differs from the decision is written through ``TaintWriter``
  (only the ``loadaware.io/warm`` entry: the RBAC the hot taint has, ``nodes`` get and
  update). A node found carrying the taint without memory of it (a restarted
  annotator, a new leader) is held from now, as the hot taint is.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from app.annotator.telemetry import AnnotatorMetrics
from app.kube import NodeInfo, PatchOutcome, TaintWriter
from app.load import (
    SOFT_TAINT_EFFECT,
    SOFT_TAINT_KEY,
    SOFT_TAINT_VALUE,
    WARM_TAINT_KEY,
    WarmNode,
    WarmTaints,
    WarmTaintSettings,
    decide_warm_taints,
    judge_warm,
)
from app.objects import PodPlacement, Resources, Taint
from app.policy import Policy

log = logging.getLogger(__name__)

WARM_TAINT = Taint(WARM_TAINT_KEY, SOFT_TAINT_VALUE, SOFT_TAINT_EFFECT)
# Writes in flight at once: a round changes few nodes, each a read and a write.
WRITE_CONCURRENCY = 8


class PodSource(Protocol):
    """The pod watch, as far as the rule needs it: whether it has listed, and its pods."""

    @property
    def synced(self) -> bool: ...
    @property
    def objects(self) -> Mapping[str, PodPlacement]: ...


def carries_warm_taint(node: NodeInfo) -> bool:
    return any(taint.key == WARM_TAINT_KEY for taint in node.taints)


def requested_by_node(pods: Iterable[PodPlacement]) -> dict[str, Resources]:
    """The sum of the requests of the pods bound on each node."""
    cpu: dict[str, float] = {}
    memory: dict[str, float] = {}
    for pod in pods:
        if pod.node_name is None:
            continue
        cpu[pod.node_name] = cpu.get(pod.node_name, 0.0) + pod.requests.cpu_cores
        memory[pod.node_name] = memory.get(pod.node_name, 0.0) + pod.requests.memory_bytes
    return {name: Resources(cpu[name], memory[name]) for name in cpu}


def warm_nodes(
    nodes: Mapping[str, NodeInfo], pods: Iterable[PodPlacement], policy: Policy
) -> dict[str, WarmNode]:
    """What the rule reads of each node (module doc: gather)."""
    requested = requested_by_node(pods)
    pools = policy.node_pools
    return {
        name: WarmNode(
            info.annotations,
            info.allocatable,
            requested.get(name, Resources()),
            pools.match(info.labels).judged_by if pools else policy,
        )
        for name, info in nodes.items()
    }


@dataclass
class WarmRound:
    names: tuple[str, ...]
    decided: WarmTaints
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, PatchOutcome] = field(default_factory=dict)

    @property
    def tainted(self) -> frozenset[str]:
        return frozenset(n for n, t in zip(self.names, self.decided.tainted, strict=True) if t)


class WarmTaintKeeper:
    def __init__(
        self,
        writer: TaintWriter,
        settings: WarmTaintSettings | None = None,
        *,
        telemetry: AnnotatorMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or WarmTaintSettings()
        self._writer = writer
        self._telemetry = telemetry
        self._clock = clock
        self._warm_at_s: dict[str, float] = {}  # tainted node -> last instant above its line
        self._judged: frozenset[str] = frozenset()  # the nodes the last round decided

    def forget(self) -> None:
        """Leadership lost: whoever leads next judges from the cluster, not from us."""
        self._warm_at_s.clear()
        self._judged = frozenset()

    async def run_round(
        self,
        nodes: Mapping[str, NodeInfo],
        pods: Iterable[PodPlacement],
        policy: Policy,
        hot: frozenset[str] = frozenset(),
    ) -> WarmRound:
        """One round; ``hot``: the nodes the hot taint's round just tainted (they carry
        this taint too, ``decide_warm_taints``)."""
        now_s = self._clock()
        names = tuple(nodes)
        metrics, judged = judge_warm(warm_nodes(nodes, pods, policy), policy, now_s)
        memory = np.array([self._memory(name, nodes[name], now_s) for name in names])
        hot_now = np.array([name in hot for name in names], dtype=np.bool_)
        decided = decide_warm_taints(judged, metrics, memory, now_s, self.settings, hot_now)
        report = WarmRound(names, decided)
        changes = {
            name: bool(decided.tainted[i])
            for i, name in enumerate(names)
            if bool(decided.tainted[i]) != carries_warm_taint(nodes[name])
        }
        outcomes = await self._write(changes)
        kept = {
            name: float(decided.warm_at_s[i]) for i, name in enumerate(names) if decided.tainted[i]
        }
        for name, outcome in outcomes.items():
            present = changes[name]
            reason = decided.reasons[names.index(name)]
            if outcome is PatchOutcome.WRITTEN:
                (report.added if present else report.removed).append(name)
                log.info(
                    "warm taint %s node %s: %s", "put on" if present else "taken off", name, reason
                )
            elif outcome.is_error:
                report.failed[name] = outcome
                if present:  # what the node carries is what it carried
                    kept.pop(name, None)
                log.warning(
                    "warm taint on node %s: could not %s it (%s); trying again next round",
                    name,
                    "put" if present else "take",
                    outcome.value,
                )
        self._warm_at_s = kept
        self._judged = frozenset(names)
        return report

    def _memory(self, name: str, node: NodeInfo, now_s: float) -> float:
        """When the node was last above its line, if it carries the taint for the rule:
        NaN if not (nor for being hot, ``decide_warm_taints``' memory); ``now_s`` for a
        taint found on a node no round of this replica decided (held from now)."""
        if name in self._judged:
            return self._warm_at_s.get(name, math.nan)
        return now_s if carries_warm_taint(node) else math.nan

    async def remove_all(self, nodes: Mapping[str, NodeInfo]) -> int:
        """Take the warm taint off every node that carries it; returns how many."""
        carrying = {name: False for name, info in nodes.items() if carries_warm_taint(info)}
        outcomes = await self._write(carrying)
        return sum(1 for outcome in outcomes.values() if outcome is PatchOutcome.WRITTEN)

    async def _write(self, changes: Mapping[str, bool]) -> dict[str, PatchOutcome]:
        return await write_taints(self._writer, WARM_TAINT, changes, self._telemetry)


async def write_taints(
    writer: TaintWriter,
    taint: Taint,
    changes: Mapping[str, bool],
    telemetry: AnnotatorMetrics,
) -> dict[str, PatchOutcome]:
    """Put ``taint`` on (True) or take it off (False) each node of ``changes``, a few
    at once, counting each patch by the taint's kind (``soft_taint``, ``warm_taint``)."""
    kind = "soft_taint" if taint.key == SOFT_TAINT_KEY else "warm_taint"
    gate = asyncio.Semaphore(WRITE_CONCURRENCY)
    outcomes: dict[str, PatchOutcome] = {}

    async def one(name: str, present: bool) -> None:
        async with gate:
            outcome = await writer.set_taint(name, taint, present)
        outcomes[name] = outcome
        telemetry.patches.labels(kind, outcome.value).inc()
        if outcome.is_error:
            telemetry.patch_errors.labels(kind, outcome.value).inc()

    async with asyncio.TaskGroup() as group:
        for name, present in changes.items():
            group.create_task(one(name, present))
    return outcomes
