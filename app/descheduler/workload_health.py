"""Read the throttling and OOM kills of the workloads whose moves are due for judging.

``hindsight.health_window`` says, per move, which pods speak for its workloads before
and after, and over which window; this reads their counts from cAdvisor
(``app/prom/pod_health.py``): for each round whose moves are due, two instant queries
at the move (before) and two now (after), for every pod of those moves at once. A run
judges the moves of at most ``MAX_ROUNDS`` rounds this way (usually one: the moves of
one run settle together); older ones are judged on usage alone. Prometheus' errors and
absent counters leave the counts unknown; they never stop the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from app.descheduler.hindsight import HealthWindow, WorkloadHealth, health_window
from app.objects import EvictionRecord, MoveRecord
from app.prom import InstantQuery, read_pod_health
from app.rebalance import ClusterView, DeschedulerConfig

log = logging.getLogger(__name__)

MAX_ROUNDS = 4


async def read_workload_health(
    source: InstantQuery,
    due: Sequence[MoveRecord],
    records: Iterable[EvictionRecord],
    cluster: ClusterView,
    config: DeschedulerConfig,
    now_s: float,
) -> dict[str, WorkloadHealth]:
    """By move key, the workloads' throttling and OOM kills before and after."""
    records = list(records)
    windows: dict[str, HealthWindow] = {}
    for move in due:
        window = health_window(move, records, cluster, config, now_s)
        if window is not None:
            windows[move.key] = window
    by_round: dict[float, list[str]] = {}
    for key, window in windows.items():
        by_round.setdefault(window.before_at_s, []).append(key)
    found: dict[str, WorkloadHealth] = {}
    for round_s in sorted(by_round)[-MAX_ROUNDS:]:
        keys = by_round[round_s]
        window_s = windows[keys[0]].window_s
        before_pods = {k: v for key in keys for k, v in windows[key].before.items()}
        after_pods = {k: v for key in keys for k, v in windows[key].after.items()}
        before, after = await asyncio.gather(
            read_pod_health(source, window_s, round_s, before_pods),
            read_pod_health(source, window_s, now_s, after_pods),
        )
        for problem in sorted(set(before.problems + after.problems)):
            log.info("throttling and OOM kills not known for the judgement: %s", problem)
        for key in keys:
            window = windows[key]
            found[key] = WorkloadHealth(
                throttled_before=before.throttled(window.before),
                throttled_after=after.throttled(window.after),
                oom_before=before.oom_killed(window.before),
                oom_after=after.oom_killed(window.after),
            )
    return found
