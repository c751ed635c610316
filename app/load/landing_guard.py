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
round. The guard is bounded by its own conditions, not by the rule's share cap
(``SoftTaintSettings.max_share``; with it, two-peaks-two-groups still missed the 1.25x
bar on seeds 2, 6, 9 and 13, docs/tuning.md):

* at least one node judged stays cool with the pod, untainted, for it to land on;
* it taints at most ``GUARD_MAX_SHARE`` of the nodes (three quarters): more, and it
  guards none, so that whatever a tenant makes the descheduler move, the guard alone
  leaves a quarter of the cluster to land on (docs/security.md). Half was too tight:
  on two-peaks-two-groups seed 9 the guard wanted 21 of the 40 nodes at group b's
  peak, stood down, and the seed went from 841 to 972 node-minutes above the limits;
  three quarters gives every seed what the guard with no share gives;
* it stands down while a pod that is not a replacement was bound within
  ``ARRIVAL_WINDOW_S`` (``other_arrivals``): a new pod (a wave, a scale-up) is steered
  by the taints too, and onto the few nodes left it made them hot (mixed-waves seeds
  2 and 3: 297 and 324 node-minutes above beside the guard, 278 and 187 with the
  stand-down; big-batch-beside-services' etl wave). A replacement is told by its
  workload (``app.objects.workload_key``, its owner): each pod of a workload the
  descheduler evicted within ``GUARD_WINDOW_S`` makes the next pod of that workload
  bound after it a replacement, one for one; a pod bound beyond those (a scale-up of
  the same Deployment), or a bare pod, is an arrival. Owner alone is not enough: on
  mixed-waves a wave of a workload the descheduler had moved one pod of counted as
  replacements, and seed 2 went from 297 to 414 node-minutes. The eviction instant is
  the descheduler's clock, the binding's the annotator's (when its pod watch saw it):
  a replacement seen bound before its eviction's instant (clocks apart by more than
  the seconds a ReplicaSet takes) counts as an arrival, and the guard stands down,
  the safe side;
* its taints are its own, not the rule's memory (``decide_soft_taints``): a node
  guarded no more loses the taint at the next round, and with no eviction in the
  window (the descheduler off, or beside the extender) nothing changes.

The evictions are the descheduler's own record (``EvictionRecord``), as for
``app.load.drained``: the annotator reads them from the descheduler's state ConfigMap,
the simulator from its descheduler. Both call ``guard_landings``.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.load.drained import FUTURE_SLACK_S, Measured, judged_with
from app.load.taints import Heat
from app.objects import EvictionRecord, Resources

__all__ = [
    "ARRIVAL_WINDOW_S",
    "GUARD_MAX_SHARE",
    "GUARD_WINDOW_S",
    "guard_landings",
    "largest_moved",
    "other_arrivals",
]

# How long after an eviction its replacements count as still to come: the descheduler
# moves a peak's pods over an hour or more, a round every few minutes. 15 minutes left
# the guard off between most rounds of two-peaks-two-groups' afternoon (docs/tuning.md).
GUARD_WINDOW_S = 3600.0
# How long a pod bound that is not a replacement holds the guard down (module doc).
ARRIVAL_WINDOW_S = 600.0
# The share of the nodes the guard may taint, at most (module doc, docs/security.md).
GUARD_MAX_SHARE = 0.75


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


def other_arrivals(
    bindings: Iterable[tuple[float, str | None]],
    records: Iterable[EvictionRecord],
    now_s: float,
) -> bool:
    """Whether a pod bound within ``ARRIVAL_WINDOW_S`` before ``now_s`` is not a
    replacement (module doc). ``bindings``: each pod bound within ``GUARD_WINDOW_S``,
    its binding instant and workload; ``records``: the descheduler's evictions. Each
    eviction within ``GUARD_WINDOW_S`` makes the next binding of its workload after it
    a replacement, one binding per eviction; any other binding, or a bare pod's, is an
    arrival."""
    events: list[tuple[float, int, str | None]] = []  # (instant, 0: eviction 1: binding, workload)
    for record in records:
        at_s = record.evicted_at_s
        if record.workload is not None and now_s - GUARD_WINDOW_S <= at_s <= now_s + FUTURE_SLACK_S:
            events.append((at_s, 0, record.workload))
    for bound_at_s, workload in bindings:
        if now_s - GUARD_WINDOW_S <= bound_at_s <= now_s + FUTURE_SLACK_S:
            events.append((bound_at_s, 1, workload))
    credits: dict[str, int] = {}
    for at_s, kind, workload in sorted(events, key=lambda event: event[:2]):
        if workload is not None and kind == 0:
            credits[workload] = credits.get(workload, 0) + 1
        elif workload is not None and credits.get(workload, 0) > 0:
            credits[workload] -= 1
        elif at_s >= now_s - ARRIVAL_WINDOW_S:
            return True
    return False


def guard_landings(
    moved: Resources | None,
    untainted: Iterable[str],
    measured: Measured,
    release_margin: float,
    nodes: int,
    why: dict[str, str] | None = None,
) -> set[str]:
    """Of the nodes the rule left ``untainted``, those that ``moved`` (``largest_moved``)
    would take above a lower line, while at least one of them stays cool with it and
    they are at most ``GUARD_MAX_SHARE`` of the cluster's ``nodes``; else none (module
    doc). ``why``, if given, gets each node guarded and the reading it would reach (for
    logs)."""
    if moved is None or (moved.cpu_cores <= 0 and moved.memory_bytes <= 0):
        return set()
    guarded: dict[str, str] = {}
    cool = False
    for name in untainted:
        heat = judged_with(measured, name, moved, release_margin)
        if heat is None:
            continue
        if heat.heat is Heat.COOL:
            cool = True
        elif heat.heat is not Heat.UNKNOWN:
            guarded[name] = heat.describe()
    if not cool or len(guarded) > int(nodes * GUARD_MAX_SHARE):
        return set()
    if why is not None:
        why.update(
            (name, f"with the largest pod the descheduler moved within the hour: {reading}")
            for name, reading in guarded.items()
        )
    return set(guarded)
