"""The dry-run tables: what a plan, and a consolidation plan, would do and why, for a
person to read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.rebalance.consolidation import ConsolidationPlan
from app.rebalance.outcome import EvictionPlan, NodeKind
from app.rebalance.replacement_scheduler import ASSUMES

__all__ = ["render_consolidation", "render_plan"]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return lines


def _percent(values: Mapping[str, float]) -> str:
    return " ".join(f"{r}={v:.0%}" for r, v in values.items())


def render_plan(plan: EvictionPlan) -> str:
    lines: list[str] = []
    hot_kinds = (NodeKind.SOURCE, NodeKind.DEBOUNCING, NodeKind.UNTAINTED)
    hot = [c for c in plan.node_classes.values() if c.kind in hot_kinds]
    counts = {kind: 0 for kind in NodeKind}
    for node_class in plan.node_classes.values():
        counts[node_class.kind] += 1
    lines.append(f"Scheduler: {plan.scheduler}: {ASSUMES[plan.scheduler]}")
    shown = [k for k in NodeKind if k is not NodeKind.UNTAINTED or plan.scheduler == "soft-taints"]
    lines.append("Nodes: " + ", ".join(f"{counts[k]} {k.value}" for k in shown))
    if hot:
        lines += ["", "Hot nodes:"]
        rows: list[tuple[str, ...]] = [
            (c.node, c.kind.value, _percent(c.usage_fraction), _percent(c.high_fraction), c.reason)
            for c in hot
        ]
        lines += _table(("NODE", "CLASS", "USAGE", "THRESHOLD", "WHY"), rows)
    lines += ["", f"Evictions ({len(plan.evictions)}):"]
    if plan.evictions:
        rows = [
            (e.pod.key, e.source, e.destination,
             f"cpu={e.usage.cpu_cores:.3g} mem={e.usage.memory_bytes / 2**20:.0f}Mi",
             e.usage_from, e.reason)
            for e in plan.evictions
        ]
        lines += _table(("POD", "FROM", "TO", "USAGE", "USAGE FROM", "REASON"), rows)
    lines += ["", f"Skipped ({len(plan.skipped)}):"]
    if plan.skipped:
        lines += _table(("POD", "NODE", "REASON"), [(s.pod_key, s.node, s.reason)
                                                    for s in plan.skipped])
    if plan.notes:
        lines += ["", "Notes:", *(f"- {note}" for note in plan.notes)]
    return "\n".join(lines) + "\n"


def render_consolidation(plan: ConsolidationPlan) -> str:
    """Which nodes consolidation drains and why, where each of their pods goes, the
    candidates it keeps and why, and the drains it gives up."""
    lines = [f"Consolidation: drains ({len(plan.drains)}):"]
    if plan.drains:
        lines += _table(
            ("NODE", "DRAIN", "PODS", "WHY"),
            [
                (d.node, "going on" if d.continued else "starts", str(len(d.evictions)), d.reason)
                for d in plan.drains
            ],
        )
    moves = plan.evictions
    lines += ["", f"Pods to move ({len(moves)}):"]
    if moves:
        lines += _table(
            ("POD", "FROM", "TO", "USAGE", "USAGE FROM"),
            [
                (
                    e.pod.key,
                    e.source,
                    e.destination,
                    f"cpu={e.usage.cpu_cores:.3g} mem={e.usage.memory_bytes / 2**20:.0f}Mi",
                    e.usage_from,
                )
                for e in moves
            ],
        )
    waiting = [(key, d.node, why) for d in plan.drains for key, why in d.waiting]
    if waiting:
        lines += ["", f"Pods that go in a later run ({len(waiting)}):"]
        lines += _table(("POD", "FROM", "WHY NOT NOW"), waiting)
    lines += ["", f"Kept ({len(plan.kept)}):"]
    if plan.kept:
        lines += _table(
            ("NODE", "CODE", "WHY"),
            [(k.node, k.code.value if k.code else "-", k.reason) for k in plan.kept],
        )
    if plan.abandoned:
        lines += ["", f"Drains given up ({len(plan.abandoned)}):"]
        lines += _table(("NODE", "WHY"), [(k.node, k.reason) for k in plan.abandoned])
    if plan.notes:
        lines += ["", "Notes:", *(f"- {note}" for note in plan.notes)]
    return "\n".join(lines) + "\n"
