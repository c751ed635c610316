"""Act: write the state, then evict the planned pods one by one, and record each.

A dry run only says what was planned: nothing is evicted or written. Otherwise this
round's debounce counts are written to the state first (a run that cannot write it
evicts nothing), then each planned pod, in order:

- a pod this process already evicted (by UID) is skipped;
- calls are spaced by ``evictionsPerSecond``, and leadership is checked before each;
- the eviction is re-checked against the live caches and the configuration and policy
  in force (a scale-up may have taken the destination's room, a reload may have
  tightened a rule);
- the ``policy/v1`` Eviction API is the only way a pod leaves: a 429 (its
  PodDisruptionBudget) skips the pod, and ``max_consecutive_errors`` API errors in a
  row end the run, never a retry loop;
- each eviction reserves its room on the destination for the rest of the run, is
  written to the state before the next one (a run that cannot write it stops), and
  gets an Event, for humans, naming the node, the metric, the values and the
  destination.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from app.descheduler.decide import Decision
from app.descheduler.gather import View
from app.descheduler.hindsight import add_eviction
from app.descheduler.report import RunReport, RunResult, run_log
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube import (
    HELD_HOT_REASON,
    DeschedulerState,
    EvictionNotice,
    EvictionOutcome,
    KubeClient,
    StateStore,
    describe_api_error,
    evict_pod,
    record_eviction,
    record_node_event,
    record_outcomes,
)
from app.objects import EvictionRecord, MoveRecord, Resources
from app.policy import Policy
from app.rebalance import (
    ClusterView,
    DeschedulerConfig,
    EvictionPlan,
    PlannedEviction,
    SkipCode,
    recheck,
    state_window_s,
)
from app.runtime import InForce

log = run_log


class Leading(Protocol):
    """Whether this replica may act now: it holds the Lease, or runs without one."""

    @property
    def is_leader(self) -> bool: ...


class EvictionPacer:
    """Spaces eviction calls ``1 / per_second`` apart."""

    def __init__(self, per_second: float, monotonic: Callable[[], float] = time.monotonic):
        self.per_second = per_second
        self._monotonic = monotonic
        self._next_s = -float("inf")

    async def wait(self) -> None:
        delay_s = self._next_s - self._monotonic()
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        self._next_s = self._monotonic() + 1.0 / self.per_second


def describe_eviction(eviction: PlannedEviction) -> str:
    """The Event message: the node, the metric and values, the pod's usage, the destination."""
    values = ", ".join(f"{name} {value:.3f}" for name, value in eviction.metric_values.items())
    usage = eviction.usage
    if eviction.drain:
        return (
            f"Evicted by loadaware descheduler: node {eviction.source} is drained for the "
            f"node autoscaler to remove (consolidation); this pod uses cpu "
            f"{usage.cpu_cores:.3f} cores and memory {usage.memory_bytes / 2**20:.0f} MiB "
            f"(from {eviction.usage_from}); room was reserved on node {eviction.destination}. "
            f"{eviction.reason}"
        )
    return (
        f"Evicted by loadaware descheduler: node {eviction.source} is hot on real usage "
        f"({values}); this pod uses cpu {usage.cpu_cores:.3f} cores and memory "
        f"{usage.memory_bytes / 2**20:.0f} MiB (from {eviction.usage_from}); room was "
        f"reserved on node {eviction.destination}. {eviction.reason}"
    )


def preview(the_plan: EvictionPlan) -> RunReport:
    """A dry run's report: what was planned, with nothing evicted or written."""
    message = (
        f"dry run: {len(the_plan.evictions)} evictions planned, none made; "
        + "; ".join(the_plan.notes)
    ).rstrip("; ")
    return RunReport(RunResult.OK, message, plan=the_plan, dry_run=True)


def moves_again(
    record: EvictionRecord, state: DeschedulerState, run_started_s: float, return_cooldown_s: float
) -> bool:
    """Whether ``record``'s workload already had a pod evicted by an earlier run within
    ``returnCooldown``: a workload moved again and again is thrashing. Pods of one
    workload evicted together in this run are one move, not a repeat."""
    return record.workload is not None and any(
        r.workload == record.workload
        and r.evicted_at_s < run_started_s
        and record.evicted_at_s - r.evicted_at_s < return_cooldown_s
        for r in state.evictions.values()
    )


def summarize(the_plan: EvictionPlan, report: RunReport, max_consecutive_errors: int) -> str:
    """A run's message: the outcomes, why it stopped early if it did, the plan's notes."""
    counts: dict[str, int] = {}
    for outcome in report.outcomes.values():
        name = outcome if outcome in set(EvictionOutcome) else "skipped"
        counts[name] = counts.get(name, 0) + 1
    made = ", ".join(f"{n} {name}" for name, n in sorted(counts.items())) or "none"
    text = f"{len(the_plan.evictions)} evictions planned; outcomes: {made}"
    if report.result is RunResult.LEADERSHIP_LOST:
        text += "; leadership lost: stopped before the remaining evictions"
    elif report.result is RunResult.API_ERRORS:
        text += (
            f"; stopped after {max_consecutive_errors} API errors in a row, "
            "the next run starts over"
        )
    elif report.result is RunResult.STATE_NOT_SAVED:
        text += "; " + report.message
    notes = "; ".join(the_plan.notes)
    return f"{text}; {notes}" if notes else text


def outcome_messages(judged: list[MoveRecord]) -> dict[str, str]:
    """Per workload, the sentence for its Event: its moves judged this run, counted by
    outcome, then each move's outcome and reason (cut to fit an Event)."""
    by_workload: dict[str, list[MoveRecord]] = {}
    for move in judged:
        for workload in move.workloads:
            by_workload.setdefault(workload, []).append(move)
    messages = {}
    for workload, moves in sorted(by_workload.items()):
        counts: dict[str, int] = {}
        for move in moves:
            counts[move.outcome or "pending"] = counts.get(move.outcome or "pending", 0) + move.pods
        tally = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
        details = "; ".join(f"from {m.source}: {m.outcome}, {m.reason}" for m in moves)
        messages[workload] = (
            f"loadaware descheduler, settleTime after evicting pods of {workload}: {tally}. "
            f"{details}"
        )[:1024]
    return messages


class Evictor:
    """Evicts what a plan says, and remembers what this process evicted.

    A pod is never evicted twice by one process (its UID is remembered); across
    processes the state says it was. ``own_records`` keeps this process's evictions
    for the next runs' state, in case writing it failed.
    """

    def __init__(
        self,
        client: KubeClient,
        store: StateStore,
        config: InForce[DeschedulerConfig],
        policy: InForce[Policy],
        refresh: Callable[[ClusterView], ClusterView],
        leadership: Leading,
        telemetry: DeschedulerMetrics,
        clock: Callable[[], float],
        *,
        identity: str,
        max_consecutive_errors: int,
    ) -> None:
        self._client = client
        self._store = store
        # The configuration and policy in force, read at each use: a reload during a run
        # applies from the next eviction's re-check.
        self._config = config
        self._policy = policy
        self._refresh = refresh
        self._leadership = leadership
        self._telemetry = telemetry
        self._clock = clock
        self._identity = identity
        self._max_consecutive_errors = max_consecutive_errors
        self.evicted_uids: set[str] = set()
        self.own_records: dict[str, EvictionRecord] = {}  # by UID
        # Nodes reported held hot, with the pods that held them: a node gets its Event
        # when it becomes held, or is held by other pods, not once a run.
        self.held_reported: dict[str, tuple[str, ...]] = {}

    async def act(self, view: View, decision: Decision, *, dry_run: bool) -> RunReport:
        """Carry out ``decision`` on ``view``; a dry run only previews it."""
        if dry_run:
            return preview(decision.plan)
        report = RunReport(RunResult.OK, plan=decision.plan)
        view.state.hot_rounds = decision.hot_rounds
        if await self._save(view.state, report):
            await self._evict_in_order(view, decision.plan, report)
            report.message = summarize(decision.plan, report, self._max_consecutive_errors)
        await self._report_held(decision.plan)
        return report

    async def evict_drains(
        self, view: View, evictions: list[PlannedEviction], report: RunReport
    ) -> None:
        """Evict the pods of the nodes consolidation drains, as any planned eviction
        (re-checked, paced, PDBs honoured, remembered, told in an Event); their moves
        are not judged by whether the source cooled: emptying it is the point."""
        drains = EvictionPlan(scheduler=self._config.value.scheduler, evictions=evictions)
        await self._evict_in_order(view, drains, report, judge=False)

    async def _report_held(self, the_plan: EvictionPlan) -> None:
        """An Event on each node newly left hot by pods above their requests that cannot
        be evicted (``HeldHot``): the operator's cue to fix those pods, where the
        planner no longer moves their neighbours."""
        held_now = {
            node: tuple(key for key, _, _ in held.pods) for node, held in the_plan.held_hot.items()
        }
        for node, pods in sorted(held_now.items()):
            if self.held_reported.get(node) == pods:
                continue
            reason = the_plan.held_hot[node].reason
            log.warning("node %s: %s", node, reason)
            message = f"loadaware descheduler leaves node {node} hot: {reason}"
            if not await record_node_event(
                self._client, node, HELD_HOT_REASON, message, self._identity
            ):
                self._telemetry.event_errors.inc()
        self.held_reported = held_now

    async def _save(self, state: DeschedulerState, report: RunReport) -> bool:
        """Write the state; on failure end the run (report says why) and return False."""
        now_s = self._clock()
        try:
            await self._store.save(state, now_s, now_s - state_window_s(self._config.value))
        except Exception as error:  # the API client raises HTTP and transport errors
            report.result = RunResult.STATE_NOT_SAVED
            report.message = (
                f"cannot write {self._store.where} ({describe_api_error(error)}): stopping this "
                "run, since an "
                "eviction it does not remember could be repeated; the descheduler needs "
                "'create' and 'update' on configmaps in its namespace"
            )
            return False
        return True

    async def _evict_in_order(
        self, view: View, the_plan: EvictionPlan, report: RunReport, *, judge: bool = True
    ) -> None:
        pacer = EvictionPacer(self._config.value.evictions_per_second)
        reserved: dict[str, Resources] = {}
        errors_in_a_row = 0
        started_s = self._clock()
        for eviction in the_plan.evictions:
            key = eviction.pod.key
            if eviction.pod.uid in self.evicted_uids:
                self._skip(
                    report, key, SkipCode.ALREADY_EVICTED, "already evicted by this descheduler"
                )
                continue
            await pacer.wait()
            if not self._leadership.is_leader:
                report.result = RunResult.LEADERSHIP_LOST
                break
            live = self._refresh(view.cluster)
            config, policy = self._config.value, self._policy.value
            why_not = recheck(eviction, live, config, policy, self._clock(), reserved)
            if why_not is not None:
                self._skip(report, key, SkipCode.RECHECK, f"re-check: {why_not}")
                continue
            result = await evict_pod(
                self._client, eviction.pod.namespace, eviction.pod.name, eviction.pod.uid
            )
            outcome = result.outcome
            self._telemetry.pods_evicted.labels(
                outcome.value, eviction.source, eviction.pod.namespace
            ).inc()
            report.outcomes[key] = outcome.value
            if outcome is EvictionOutcome.ERROR:
                errors_in_a_row += 1
                if errors_in_a_row >= self._max_consecutive_errors:
                    report.result = RunResult.API_ERRORS
                    break
                continue
            errors_in_a_row = 0
            if outcome is EvictionOutcome.BLOCKED_BY_PDB:
                log.info(
                    "pod %s: eviction blocked by its PodDisruptionBudget (%s); skipped",
                    key,
                    result.detail,
                )
            elif outcome is EvictionOutcome.EVICTED:
                if judge:
                    add_eviction(view.state.moves, eviction, the_plan, view.cluster, started_s)
                await self._record(eviction, view.state, reserved, started_s)
                if not await self._save(view.state, report):
                    break

    async def _record(
        self,
        eviction: PlannedEviction,
        state: DeschedulerState,
        reserved: dict[str, Resources],
        run_started_s: float,
    ) -> None:
        """Remember an eviction made, reserve its room, and tell humans with an Event."""
        self.evicted_uids.add(eviction.pod.uid)
        record = eviction.record(self._clock())
        if moves_again(record, state, run_started_s, self._config.value.return_cooldown):
            self._telemetry.repeated_evictions.inc()
        self.own_records[record.uid] = record
        state.evictions[record.uid] = record
        reserved[eviction.destination] = (
            reserved.get(eviction.destination, Resources()) + eviction.usage
        )
        log.info(
            "evicted pod %s from %s (room reserved on %s)",
            record.pod_key,
            eviction.source,
            eviction.destination,
        )
        notice = EvictionNotice(record, describe_eviction(eviction))
        if not await record_eviction(self._client, notice, self._identity):
            self._telemetry.event_errors.inc()

    async def tell_outcomes(self, judged: list[MoveRecord], now_s: float) -> None:
        """One Event per workload on the moves judged this run (``outcome_messages``)."""
        for workload, message in outcome_messages(judged).items():
            if not await record_outcomes(self._client, workload, message, self._identity, now_s):
                self._telemetry.event_errors.inc()

    def _skip(self, report: RunReport, key: str, code: SkipCode, reason: str) -> None:
        report.outcomes[key] = reason
        self._telemetry.pods_skipped.labels(code.value).inc()
        log.info("pod %s not evicted: %s", key, reason)
