"""The metric loop: while the annotator leads, one sync tick whenever metrics fall due.

It owns what the schedule needs between ticks: each metric's period, its last success
and error (what ``/status`` shows), and the schedule itself, made afresh each time
leading starts so that every metric syncs at once. A policy reload replaces the
periods in place and wakes the loop when a metric falls due sooner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.annotator.schedule import MetricSchedule
from app.annotator.sync import MetricSync, TickReport
from app.kube import NodeCache, PatchOutcome
from app.objects import format_duration

log = logging.getLogger(__name__)


@dataclass
class MetricState:
    period_s: float
    last_success_s: float | None = None
    last_error: str | None = None


def record_tick(
    schedule: MetricSchedule,
    states: Mapping[str, MetricState],
    report: TickReport,
    started_s: float,
    now_s: float,
) -> None:
    """What one sync tick did to each metric's state and schedule: a metric none of
    whose patches reached the API server is retried soon rather than a period later."""
    for outcome in report.metrics:
        state = states.get(outcome.metric)
        if state is None or outcome.metric not in schedule.periods_s:
            continue  # dropped by a policy reload during the tick
        if outcome.error is not None:
            state.last_error = str(outcome.error)
            schedule.record_failure(outcome.metric, time.monotonic())
            continue
        carried = [report.patches.outcomes.get(node) for node in outcome.values]
        if carried and not any(o is PatchOutcome.WRITTEN for o in carried):
            state.last_error = f"no node could be patched ({report.patches.summary()})"
            schedule.record_failure(outcome.metric, time.monotonic())
            continue
        state.last_success_s = now_s
        state.last_error = None
        schedule.record_success(outcome.metric, started_s)


class MetricLoop:
    def __init__(
        self,
        sync: MetricSync,
        nodes: NodeCache,
        periods_s: Mapping[str, float],
        *,
        first_retry_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.sync = sync
        self.nodes = nodes
        self.periods_s = dict(periods_s)
        self.states = {m: MetricState(p) for m, p in self.periods_s.items()}
        self.schedule: MetricSchedule | None = None  # only while leading
        self.ticks = 0  # ticks run (tests wait on it, not on time)
        self._first_retry_s = first_retry_s
        self._clock = clock
        self._wake = asyncio.Event()  # a policy reload changed the schedule

    def set_periods(self, periods_s: Mapping[str, float]) -> None:
        """Adopt a reloaded policy's periods; a metric kept keeps its state."""
        self.periods_s = dict(periods_s)
        self.states = {m: self.states.get(m) or MetricState(p) for m, p in periods_s.items()}
        for metric, state in self.states.items():
            state.period_s = periods_s[metric]
        if self.schedule is not None:
            changed = self.schedule.replace_periods(periods_s, time.monotonic())
            if changed:
                log.info("policy reload: syncing %s now on their new periods", ", ".join(changed))
                self._wake.set()

    def stop_leading(self) -> None:
        self.schedule = None

    async def run(self) -> None:
        schedule = MetricSchedule(
            self.periods_s, start_s=time.monotonic(), first_retry_s=self._first_retry_s
        )
        self.schedule = schedule
        while True:
            started_s = time.monotonic()
            due = schedule.due(started_s)
            if due:
                try:
                    report = await self.sync.run_tick(due, self.nodes.nodes)
                except Exception:
                    # A bug must not stop annotating for good: log it, retry with backoff.
                    log.exception("sync tick for %s failed unexpectedly", ", ".join(due))
                    for metric in due:
                        self.states[metric].last_error = "internal error (see log)"
                        schedule.record_failure(metric, time.monotonic())
                else:
                    self.ticks += 1
                    record_tick(schedule, self.states, report, started_s, self._clock())
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, schedule.next_due_s() - time.monotonic())):
                    await self._wake.wait()

    def details(self) -> dict[str, Any]:
        """Each metric's period, last success and error, and when it syncs next."""
        schedule = self.schedule
        now_mono = time.monotonic()
        return {
            metric: {
                "period": format_duration(state.period_s),
                "last_success": _iso(state.last_success_s),
                "last_error": state.last_error,
                "next_sync_in_s": round(max(0.0, schedule.next_due_of(metric) - now_mono), 1)
                if schedule is not None
                else None,
            }
            for metric, state in self.states.items()
        }


def _iso(at_s: float | None) -> str | None:
    if at_s is None:
        return None
    return datetime.fromtimestamp(at_s, tz=UTC).isoformat(timespec="seconds")
