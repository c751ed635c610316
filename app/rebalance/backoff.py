"""Back-off: where recent evictions did not help, leave the node or workload alone; pure.

From the judged moves (``app/rebalance/aftermath.py``, kept in the descheduler's
memory): a source whose last ``k`` judged moves in a row did not help (no effect, or
backfired) is left alone for ``interval x 2^(k-1)``, at most ``MAX_BACKOFF_ROUNDS``
intervals, counted from the last judgement; so is a workload whose last ``k`` judged
moves did not help. A helped move ends the streak. A node resumes early when the
situation changed: its usage on the move's resource is now more than
``SITUATION_CHANGE`` away from what it was when the last move was made (a load that
changed shape, or a freed destination that cooled it). One wasted round per node, then
growing pauses: the descheduler keeps trying, rarely, where it is not helping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.objects import MoveRecord

__all__ = ["MAX_BACKOFF_ROUNDS", "SITUATION_CHANGE", "BackOff", "back_off"]

MAX_BACKOFF_ROUNDS = 16
SITUATION_CHANGE = 0.10  # usage fraction


@dataclass(frozen=True, slots=True)
class BackOff:
    """Why each node and workload is left alone this round (empty: none is)."""

    nodes: Mapping[str, str] = field(default_factory=dict)
    workloads: Mapping[str, str] = field(default_factory=dict)


def _streak(moves: list[MoveRecord]) -> list[MoveRecord]:
    """The newest judged moves that did not help, newest first, until one that did."""
    streak = []
    for move in sorted(moves, key=lambda m: m.judged_at_s or 0.0, reverse=True):
        if move.outcome == "helped":
            break
        streak.append(move)
    return streak


def _until_s(streak: list[MoveRecord], interval_s: float) -> float:
    rounds: int = min(2 ** (len(streak) - 1), MAX_BACKOFF_ROUNDS)
    return (streak[0].judged_at_s or 0.0) + rounds * interval_s


def _why(streak: list[MoveRecord], until_s: float, now_s: float) -> str:
    last = streak[0]
    return (
        f"backed off {until_s - now_s:.0f}s more: its last {len(streak)} judged move(s) "
        f"did not help (last: {last.outcome} from {last.source}, {last.reason})"
    )[:300]


def back_off(
    moves: Iterable[MoveRecord],
    now_s: float,
    interval_s: float,
    usage_now: Mapping[str, Mapping[str, float]],
) -> BackOff:
    """The nodes and workloads to leave alone at ``now_s``; ``usage_now``: each node's
    usage fraction per resource this round (a node missing from it does not resume)."""
    by_node: dict[str, list[MoveRecord]] = {}
    by_workload: dict[str, list[MoveRecord]] = {}
    for move in moves:
        if move.outcome is None:
            continue
        by_node.setdefault(move.source, []).append(move)
        for workload in move.workloads:
            by_workload.setdefault(workload, []).append(move)
    nodes: dict[str, str] = {}
    for node, node_moves in by_node.items():
        streak = _streak(node_moves)
        if not streak:
            continue
        until_s = _until_s(streak, interval_s)
        now_usage = usage_now.get(node, {}).get(streak[0].resource)
        changed = (
            now_usage is not None and abs(now_usage - streak[0].source_before) > SITUATION_CHANGE
        )
        if now_s < until_s and not changed:
            nodes[node] = _why(streak, until_s, now_s)
    workloads: dict[str, str] = {}
    for workload, workload_moves in by_workload.items():
        streak = _streak(workload_moves)
        if streak and now_s < (until_s := _until_s(streak, interval_s)):
            workloads[workload] = _why(streak, until_s, now_s)
    return BackOff(nodes, workloads)
