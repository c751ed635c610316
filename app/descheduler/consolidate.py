"""Act on a run's consolidation plan: the drain taint on and off, then the evictions.

The plan (``app.rebalance.plan_consolidation``, made in ``decide``) names the drains
to give up, the nodes whose drain goes on and the nodes to start draining, each pod
with its destination. In order, unless dry-running or the run already failed:

1. every drain given up loses its taint (``loadaware.io/draining``): the node takes
   pods again;
2. a run that cools a hot spot stops there (hot spots first);
3. each new drain gets its taint, through ``app/kube``'s one taint writer (a read,
   then a write conditional on the Node's resourceVersion, every other taint kept);
   its pods are evicted only once the descheduler's own node cache shows the taint,
   so that kube-scheduler, which watches Nodes the same way, does not put their
   replacements back on it. A taint that cannot be written, or is not seen within
   ``taint_seen_timeout_s``, leaves that node's pods where they are this run;
4. the pods of the drains go through the same eviction path as any planned eviction
   (``Evictor.evict_drains``): re-checked against the live caches, paced, the
   PodDisruptionBudgets honoured by the Eviction API, remembered, told in an Event.

What happened is logged, counted (``loadaware_descheduler_consolidation_drains_total``,
``loadaware_descheduler_draining_nodes``, and the evictions under
``loadaware_descheduler_pods_evicted_total``) and added to the run's message.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from app.descheduler.act import Evictor
from app.descheduler.decide import Decision
from app.descheduler.gather import View
from app.descheduler.report import RunReport, RunResult, run_log
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube import NodeCache, PatchOutcome, TaintWriter
from app.objects import Taint
from app.rebalance import (
    DRAIN_TAINT_KEY,
    ConsolidationPlan,
    PlannedEviction,
    drain_taint,
)

log = run_log


def consolidation_summary(the_plan: ConsolidationPlan, *, waits: bool, acted: bool) -> str:
    """One clause for the run's message: the drains started, going on and given up."""
    started = [d.node for d in the_plan.drains if not d.continued]
    going = [d.node for d in the_plan.drains if d.continued]
    pods = sum(len(d.evictions) for d in the_plan.drains)
    parts = []
    verb = "" if acted else "would "
    if the_plan.abandoned:
        parts.append(
            f"{verb}give up {len(the_plan.abandoned)} "
            f"({', '.join(k.node for k in the_plan.abandoned)})"
        )
    if waits and (started or going):
        parts.append("drains wait while hot spots are cooled")
    else:
        if started:
            parts.append(f"{verb}start draining {', '.join(started)}")
        if going:
            parts.append(f"draining {', '.join(going)}")
        if started or going:
            parts.append(f"{pods} pods planned to move")
    if not parts:
        parts.extend(the_plan.notes[-1:] or ["consolidation: nothing to drain"])
        return parts[0]
    return "consolidation: " + ", ".join(parts)


class Consolidator:
    """Carries out consolidation plans (module doc)."""

    def __init__(
        self,
        taints: TaintWriter,
        nodes: NodeCache,
        evictor: Evictor,
        telemetry: DeschedulerMetrics,
        *,
        taint_seen_timeout_s: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._taints = taints
        self._nodes = nodes
        self._evictor = evictor
        self._telemetry = telemetry
        self._taint_seen_timeout_s = taint_seen_timeout_s
        self._monotonic = monotonic

    async def act(
        self, view: View, decision: Decision, report: RunReport, *, dry_run: bool
    ) -> None:
        the_plan = decision.consolidation
        if the_plan is None:
            return
        report.consolidation = the_plan
        draining = sum(1 for d in the_plan.drains if d.continued) + len(the_plan.abandoned)
        self._telemetry.draining_nodes.set(draining)
        waits = decision.drains_wait
        if dry_run or report.result is not RunResult.OK:
            self._say(report, consolidation_summary(the_plan, waits=waits, acted=False))
            return
        for kept in the_plan.abandoned:
            await self._give_up(kept.node, kept.reason)
        evictions: list[PlannedEviction] = []
        if not waits:
            for drain in the_plan.drains:
                if drain.continued or await self._start(drain.node, view.now_s, drain.reason):
                    evictions.extend(drain.evictions)
        if evictions:
            await self._evictor.evict_drains(view, evictions, report)
        self._say(report, consolidation_summary(the_plan, waits=waits, acted=True))

    @staticmethod
    def _say(report: RunReport, clause: str) -> None:
        report.message = f"{report.message}; {clause}" if report.message else clause

    async def _give_up(self, node: str, reason: str) -> None:
        taint = Taint(DRAIN_TAINT_KEY, None, "NoSchedule")  # any value: the key goes
        outcome = await self._taints.set_taint(node, taint, False)
        if outcome is PatchOutcome.NOT_LEADER:
            return
        if outcome.is_error:
            self._telemetry.drains.labels("taint_error").inc()
            log.warning(
                "node %s: giving up its drain (%s), but its taint could not be "
                "removed (%s); the next run tries again",
                node,
                reason,
                outcome.value,
            )
            return
        self._telemetry.drains.labels("abandoned").inc()
        log.info("node %s: drain given up, %s removed: %s", node, DRAIN_TAINT_KEY, reason)

    async def _start(self, node: str, now_s: float, reason: str) -> bool:
        """Taint ``node`` and wait for the cache to show it; False to leave it this run."""
        outcome = await self._taints.set_taint(node, drain_taint(now_s), True)
        if outcome not in (PatchOutcome.WRITTEN, PatchOutcome.UNCHANGED):
            if outcome.is_error:
                self._telemetry.drains.labels("taint_error").inc()
            log.warning(
                "node %s: not drained this run: its drain taint was not written (%s)",
                node,
                outcome.value,
            )
            return False
        self._telemetry.drains.labels("started").inc()
        log.info(
            "node %s: draining for the node autoscaler (%s): tainted %s",
            node,
            reason,
            DRAIN_TAINT_KEY,
        )
        if await self._seen(node):
            return True
        log.warning(
            "node %s: the node cache did not show its drain taint within %gs; its "
            "pods are evicted from the next run on",
            node,
            self._taint_seen_timeout_s,
        )
        return False

    async def _seen(self, node: str) -> bool:
        deadline = self._monotonic() + self._taint_seen_timeout_s
        while True:
            info = self._nodes.nodes.get(node)
            if info is not None and any(t.key == DRAIN_TAINT_KEY for t in info.taints):
                return True
            if self._monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
