"""What ``loadaware report`` makes of what Prometheus said (``report_history`` reads
it): node-minutes above the limits before and after the moves, and restarts per node
and workload; pure.

``minutes_above`` counts, per move, its source's hot points in the ``--window`` before
the move and in the ``--window`` after it (clipped to now), each (node, time) point
once per group (node, workload, all), so moves close together do not count a minute
twice. Restarts are put on each pod's node and workload as the API server has it now.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.objects import MoveRecord, PodInfo, workload_of


@dataclass(frozen=True, slots=True)
class Hot:
    """When each node was above the limits: the times (s) of its hot points."""

    step_s: float
    points: Mapping[str, frozenset[float]]


@dataclass
class History:
    """What Prometheus said, or why it said nothing (``notes``)."""

    hot: Hot | None = None
    restarts: Mapping[str, float] | None = None  # pod key -> restarts over the period
    notes: list[str] = field(default_factory=list)


def _window_points(
    moves: Iterable[MoveRecord], window_s: float, step_s: float, now_s: float
) -> tuple[set[tuple[str, float]], set[tuple[str, float]]]:
    """The (node, time) points within ``window_s`` before and after each move."""
    before: set[tuple[str, float]] = set()
    after: set[tuple[str, float]] = set()
    for move in moves:
        first = math.ceil((move.round_s - window_s) / step_s)
        at = math.ceil(move.round_s / step_s)
        last = math.floor(min(move.round_s + window_s, now_s) / step_s)
        before.update((move.source, k * step_s) for k in range(first, at))
        after.update((move.source, k * step_s) for k in range(at, last + 1))
    return before, after


def minutes_above(
    moves: Iterable[MoveRecord], hot: Hot, window_s: float, now_s: float
) -> dict[str, Any]:
    """Node-minutes above the limits before and after the moves, and of how many."""
    before, after = _window_points(moves, window_s, hot.step_s, now_s)
    minutes = hot.step_s / 60.0

    def above(points: set[tuple[str, float]]) -> float:
        return sum(1 for node, t in points if t in hot.points.get(node, ())) * minutes

    return {
        "before": round(above(before), 1),
        "after": round(above(after), 1),
        "beforeOf": round(len(before) * minutes, 1),
        "afterOf": round(len(after) * minutes, 1),
    }


def restarts_by(
    restarts: Mapping[str, float], pods: Mapping[str, PodInfo]
) -> tuple[int, dict[str, int], dict[str, int]]:
    """Restarts in all, per node and per workload (of the pods the API server has now)."""
    by_node: dict[str, float] = {}
    by_workload: dict[str, float] = {}
    for key, count in restarts.items():
        pod = pods.get(key)
        if pod is None:
            continue
        if pod.node_name:
            by_node[pod.node_name] = by_node.get(pod.node_name, 0.0) + count
        workload = workload_of(pod)
        if workload is not None:
            by_workload[workload] = by_workload.get(workload, 0.0) + count
    return (
        round(sum(restarts.values())),
        {k: round(v) for k, v in by_node.items()},
        {k: round(v) for k, v in by_workload.items()},
    )
