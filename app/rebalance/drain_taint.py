"""The drain taint: loadaware's own ``NoSchedule`` taint on a node that consolidation
drains, and what it says. Pure.

While consolidation empties a node for the node autoscaler to remove, nothing may land
on it, or the drain would never end (the replacements of its own pods first, since
kube-scheduler scores an emptied node highest by requests). The descheduler puts
``loadaware.io/draining=<start>:NoSchedule`` on the node before its first eviction
and takes it off when it gives the drain up (``consolidation.plan_consolidation``'s
``abandoned``). The taint is the drain's whole state: a restarted descheduler, a new
leader or a ``--once`` run finds the nodes being drained, and since when, on the
Nodes themselves, with no memory to lose or keep in step.

The value is the drain's start, in whole Unix seconds (a taint value is a label value:
at most 63 characters of ``[A-Za-z0-9_.-]``). A value that is not such a number (someone
else wrote the key) reads as a drain begun at time 0, so the descheduler gives it up at
its next run and takes the taint off: a node is never held out of service by a taint
loadaware cannot account for. A start in the future reads as now.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.objects import NodeInfo, Taint

__all__ = ["DRAIN_TAINT_KEY", "drain_taint", "draining_nodes"]

DRAIN_TAINT_KEY = "loadaware.io/draining"
DRAIN_TAINT_EFFECT = "NoSchedule"


def drain_taint(started_s: float) -> Taint:
    """The taint that marks a drain begun at ``started_s`` (Unix seconds)."""
    return Taint(DRAIN_TAINT_KEY, str(int(started_s)), DRAIN_TAINT_EFFECT)


def drain_started_s(node: NodeInfo, now_s: float) -> float | None:
    """When the drain of ``node`` began; None when it carries no drain taint."""
    for taint in node.taints:
        if taint.key != DRAIN_TAINT_KEY:
            continue
        value = taint.value or ""
        if not (value.isascii() and value.isdigit() and len(value) <= 12):
            return 0.0
        return min(float(value), now_s)
    return None


def draining_nodes(nodes: Iterable[NodeInfo], now_s: float) -> dict[str, float]:
    """The nodes carrying the drain taint, with the start of each drain."""
    started = {}
    for node in nodes:
        at_s = drain_started_s(node, now_s)
        if at_s is not None:
            started[node.name] = at_s
    return started
