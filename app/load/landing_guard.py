"""Soft taints ahead of the descheduler's replacements: while it is moving pods, a node
that the largest pod it moved would take above the taint's lower line is tainted, so
long as some node stays under that line with it. Pure.

Beside the extender a replacement goes to the roomiest node by load. Beside a stock
kube-scheduler (``scheduler: soft-taints``) it goes to the node with the fewest
requests among the untainted ones, and the plan only checks that the landing stays
under ``targetThresholds`` on its readings now (``app/rebalance/replacement_scheduler.py``).
A node whose pods use far more than they request looks emptiest by requests and may
sit just under the line: on two-peaks-two-groups, group b's pods moved at its peak
(13-15h) landed on group a's batch-pod nodes (a 4-core batch pod on a 500m request,
with 2-core spikes), read 56-62 % on their 5-minute means for the rest of the day and
spiked above the limit on one step of ten: 188-309 node-minutes a seed that no reading
shows (docs/tuning.md), where beside the extender the same pods went to group a's
coolest nodes. The descheduler only predicts kube-scheduler's choice; what moves it is
a taint.

So, while the descheduler has evicted within ``GUARD_WINDOW_S``, the annotator judges
each node the rule left untainted with the largest of those pods on it (per resource,
its usage at the eviction, as the descheduler recorded it: ``largest_moved``), as it
judges a node with the next pod of a wave (``judge_measured``): not cool so (above the
lower line of a limit, its limit less ``release_margin``), it is tainted for this
round. Only while at least one node judged stays cool with the pod, and while the
rule's share cap (``SoftTaintSettings.max_share``) holds them all with the nodes the
rule taints: else the taints would steer every pod, a wave's too, onto the few nodes
left (big-batch-beside-services, a cluster hot nearly everywhere while 7-core batch
pods arrive: 658 throttled CPU-minutes became 1,253 on seed 1 without the cap), and a
guard on part of them would steer the pods onto the rest. The guard is not the rule's memory
(``decide_soft_taints``): a node guarded no more loses the taint at the next round. With
no eviction in the window (the descheduler off, or beside the extender) nothing changes.

The evictions are the descheduler's own record (``EvictionRecord``), as for
``app.load.drained``: the annotator reads them from the descheduler's state ConfigMap,
the simulator from its descheduler. Both call ``guard_landings``.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.load.drained import FUTURE_SLACK_S, Measured
from app.load.estimate import unsampled_fractions
from app.load.taints import Heat, judge_measured
from app.objects import EvictionRecord, Resources

__all__ = ["GUARD_WINDOW_S", "guard_landings", "largest_moved"]

# How long after an eviction its replacements count as still to come: the descheduler
# moves a peak's pods over an hour or more, a round every few minutes. 15 minutes left
# the guard off between most rounds of two-peaks-two-groups' afternoon (docs/tuning.md).
GUARD_WINDOW_S = 3600.0


def largest_moved(
    records: Iterable[EvictionRecord], now_s: float, window_s: float = GUARD_WINDOW_S
) -> Resources | None:
    """The largest usage, per resource, of the pods evicted within ``window_s`` before
    ``now_s`` (a record dated more than ``FUTURE_SLACK_S`` ahead is not trusted); None:
    none was."""
    largest: Resources | None = None
    for record in records:
        if not now_s - window_s <= record.evicted_at_s <= now_s + FUTURE_SLACK_S:
            continue
        usage = Resources(max(0.0, record.usage.cpu_cores), max(0.0, record.usage.memory_bytes))
        if largest is not None:
            usage = Resources(
                max(largest.cpu_cores, usage.cpu_cores),
                max(largest.memory_bytes, usage.memory_bytes),
            )
        largest = usage
    return largest


def guard_landings(
    moved: Resources | None,
    untainted: Iterable[str],
    measured: Measured,
    release_margin: float,
    room: int,
    why: dict[str, str] | None = None,
) -> set[str]:
    """Of the nodes the rule left ``untainted``, those that ``moved`` (``largest_moved``)
    would take above a lower line, while at least one of them stays cool with it and
    they are at most ``room`` (the rule's share cap less the nodes it taints); else none
    (module doc). ``why``, if given, gets each node guarded and the reading it would
    reach (for logs)."""
    if moved is None or (moved.cpu_cores <= 0 and moved.memory_bytes <= 0) or room <= 0:
        return set()
    guarded: dict[str, str] = {}
    cool = False
    for name in untainted:
        node = measured(name)
        if node is None:
            continue
        measurement, policy, allocatable = node
        added = unsampled_fractions((moved,), allocatable)
        if not added:
            continue
        heat = judge_measured(measurement, policy, release_margin, added)
        if heat.heat is Heat.COOL:
            cool = True
        elif heat.heat is not Heat.UNKNOWN:
            guarded[name] = heat.describe()
    if not cool or len(guarded) > room:
        return set()
    if why is not None:
        why.update(
            (name, f"with the largest pod the descheduler moved within the hour: {reading}")
            for name, reading in guarded.items()
        )
    return set(guarded)
