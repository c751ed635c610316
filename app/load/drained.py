"""Soft taints on drained nodes: a tainted node the descheduler evicted from keeps its
taint while the largest pod that left would take it back over a limit. Pure.

Beside a stock kube-scheduler (``scheduler: soft-taints``) the descheduler relies on a
drained source staying warm and tainted (``app/rebalance/replacement_scheduler.py``).
That fails when one pod is larger than the band between the taint's lower line and
``targetThresholds``: one eviction takes the source below the lower line, the rule of
``app.load.taints`` drops its taint once it has been cool for ``min_hold_s``, and
kube-scheduler, scoring by requests, then sends every replacement back to the node it
just left, the emptiest by requests. The planner predicts that and refuses the other
hot sources' pods (``no_destination``), which stay above the limits: on
two-peaks-two-groups, 5,695 source-minutes over seeds 1-20 (docs/tuning.md).

So before the rule decides (``decide_soft_taints``), each tainted node that pods were
evicted from within ``DRAINED_WINDOW_S`` is judged with the largest of them back on
it (its fresh readings plus that pod's usage, per resource the largest, as fractions
of its allocatable, added as the estimate is): hot so, its memory is renewed to now,
so it is held as a warm tainted node is. The rule then still bounds the taints by its
share. A node not tainted is never tainted by this; a node cool even with that pod
back loses its taint as before.

The evictions are the descheduler's own record (``EvictionRecord``: its source, the
usage it moved, when): the annotator reads them from the descheduler's state
ConfigMap, which only the descheduler may write (docs/security.md), the simulator
from its descheduler. Both call ``hold_drained``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from app.load.estimate import unsampled_fractions
from app.load.model import Measurement
from app.load.taints import Heat, NodeHeat, judge_measured
from app.objects import EvictionRecord, Resources
from app.policy import Policy

__all__ = [
    "DRAINED_WINDOW_S",
    "Measured",
    "hold_drained",
    "judged_with",
    "largest_left",
    "recent_evictions",
]

# How long after an eviction its source is held: a day's peak lasts hours, and the
# replacements it refuses come at the next peak's rounds. 6 hours measured best of
# 2 and 6 on two-peaks-two-groups (docs/tuning.md).
DRAINED_WINDOW_S = 6 * 3600.0
# Clocks disagree a little; a record dated further ahead is not trusted.
FUTURE_SLACK_S = 60.0

# What a node is judged from: its Measurement now, the policy that judges it, its
# allocatable; None: the node is unknown (gone), so not held.
Measured = Callable[[str], tuple[Measurement, Policy, Resources] | None]


def recent_evictions(
    kept: Mapping[str, EvictionRecord],
    read: Iterable[EvictionRecord],
    now_s: float,
    window_s: float = DRAINED_WINDOW_S,
) -> dict[str, EvictionRecord]:
    """``kept`` (by pod UID) with ``read`` added, less those outside the window: older
    than ``window_s`` or dated more than ``FUTURE_SLACK_S`` ahead of ``now_s``. The
    descheduler's state keeps its evictions for its own window (about an hour), so a
    reader that holds for longer remembers them itself."""
    merged = dict(kept)
    for record in read:
        merged.setdefault(record.uid, record)
    return {
        uid: record
        for uid, record in merged.items()
        if now_s - window_s <= record.evicted_at_s <= now_s + FUTURE_SLACK_S
    }


def largest_left(records: Iterable[EvictionRecord]) -> dict[str, Resources]:
    """Per source node, the largest usage of the pods evicted from it, per resource."""
    largest: dict[str, Resources] = {}
    for record in records:
        usage = Resources(max(0.0, record.usage.cpu_cores), max(0.0, record.usage.memory_bytes))
        was = largest.get(record.node)
        if was is not None:
            usage = Resources(
                max(was.cpu_cores, usage.cpu_cores), max(was.memory_bytes, usage.memory_bytes)
            )
        largest[record.node] = usage
    return largest


def judged_with(
    measured: Measured, name: str, pod: Resources, release_margin: float
) -> NodeHeat | None:
    """Node ``name`` judged by the soft-taint rule with ``pod`` added to its fresh
    readings; None: no reading of it, or nothing to add (no allocatable)."""
    node = measured(name)
    if node is None:
        return None
    measurement, policy, allocatable = node
    added = unsampled_fractions((pod,), allocatable)
    if not added:
        return None
    return judge_measured(measurement, policy, release_margin, added)


def hold_drained(
    warm_at_s: Mapping[str, float],
    largest: Mapping[str, Resources],
    measured: Measured,
    now_s: float,
    release_margin: float,
    why: dict[str, str] | None = None,
) -> dict[str, float]:
    """The rule's memory (``decide_soft_taints``' ``warm_at_s``) with each tainted node
    that the largest pod evicted from it (``largest``, from ``largest_left``) would take
    back over a limit renewed to ``now_s`` (module doc). Other nodes are as they were.
    ``why``, if given, gets each node held and the reading it would reach (for logs)."""
    held = dict(warm_at_s)
    for name in warm_at_s:
        left = largest.get(name)
        if left is None:
            continue
        heat = judged_with(measured, name, left, release_margin)
        if heat is not None and heat.heat is Heat.HOT:
            held[name] = now_s
            if why is not None:
                why[name] = f"with the largest pod evicted from it back: {heat.describe()}"
    return held
