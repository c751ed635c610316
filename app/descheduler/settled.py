"""Judging the moves whose ``settleTime`` has passed, at the start of each run, between
gathering the view and deciding on it: the workloads' throttling and OOM kills read
for them (``workload_health.py``), the pure judgement (``hindsight.py``), then what is
done with it: kept in the memory (written with the run's first save), counted, logged,
and told on each workload in one Event."""

from __future__ import annotations

import dataclasses

from app.descheduler.act import Evictor
from app.descheduler.gather import View
from app.descheduler.hindsight import due_moves, judge_due
from app.descheduler.report import run_log
from app.descheduler.telemetry import DeschedulerMetrics
from app.descheduler.workload_health import read_workload_health
from app.policy import Policy
from app.prom import InstantQuery
from app.rebalance import DeschedulerConfig

log = run_log


class SettledMoves:
    """Judges each run's settled moves (module doc)."""

    def __init__(
        self, source: InstantQuery, telemetry: DeschedulerMetrics, evictor: Evictor
    ) -> None:
        self._source = source
        self._telemetry = telemetry
        self._evictor = evictor

    async def judge(
        self, view: View, config: DeschedulerConfig, policy: Policy, *, dry_run: bool
    ) -> View:
        """The view with the moves whose settleTime has passed judged: it plans with
        them, so a move judged now backs off at once. A dry run counts and tells
        nothing (it keeps no memory: it would count them again each run)."""
        records = list(view.state.evictions.values())
        due = due_moves(view.state.moves, config, view.now_s)
        health = (
            await read_workload_health(self._source, due, records, view.cluster, config, view.now_s)
            if due
            else {}
        )
        judged = judge_due(
            view.state.moves, records, view.cluster, config, policy, view.now_s, health
        )
        if not dry_run:
            self._telemetry.record_judged(judged)
        for move in judged:
            view.state.moves[move.key] = move
            log.info(
                "%d eviction(s) from %s settleTime ago: %s (%s)",
                move.pods,
                move.source,
                move.outcome,
                move.reason,
            )
        if not judged:
            return view
        if not dry_run:
            await self._evictor.tell_outcomes(judged, view.now_s)
        moves = tuple(view.state.moves.values())
        return dataclasses.replace(view, cluster=dataclasses.replace(view.cluster, moves=moves))
