"""``loadaware explain`` answers, as text for a person and as JSON for tools.

The text fits a screen: the pod's nodes are ranked (``app.explain.pod.ranked``) and
only the first ``top`` shown, with a line that says how many more ``--all`` shows.
JSON always holds every node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.explain.node import NodeConsolidation, NodeExplanation
from app.explain.pod import NodeVerdict, PodExplanation
from app.load import HOT_VALUE_PENALTY_PER_UNIT, MAX_EXTENDER_SCORE, MetricReading
from app.objects import Resources, printable
from app.rebalance import ASSUMES, PlannedEviction

# An Event's message is free text that anyone allowed to create Events in the pod's
# namespace can write (docs/security.md, "loadaware explain"): shown bounded, and with
# control characters (terminal escape sequences, line breaks) replaced.
MAX_MESSAGE = 2000


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _metric_label(metric: str) -> str:
    """A short column header: crane's names lose their ``usage_``."""
    return metric.replace("usage_", "")


def watched_predicate(verdict: NodeVerdict) -> str | None:
    """The predicate a node is refused on, else the fresh one nearest its limit."""
    refused = verdict.refused
    if refused is not None:
        return refused.metric
    nearest: tuple[float, str] | None = None
    for metric, limit in verdict.limits.items():
        reading = verdict.reading(metric)
        if reading is None or not reading.is_fresh or reading.usage_fraction is None:
            continue
        ratio = reading.usage_fraction / limit
        if nearest is None or ratio > nearest[0]:
            nearest = (ratio, metric)
    return None if nearest is None else nearest[1]


def _verdict_text(verdict: NodeVerdict, preferred: str | None, bound_to: str | None) -> str:
    marks = []
    if verdict.node == bound_to:
        marks.append("runs here")
    if verdict.node == preferred:
        marks.append("preferred")
    if verdict.not_offered is not None:
        marks.append(f"kube-scheduler: {verdict.not_offered}")
    refused = verdict.refused
    text = f"refused: {refused.metric}" if refused is not None else "passes"
    if verdict.short_of_room:
        text = "refused: no room for the pod's estimated usage under its class's limits"
    if verdict.exempt and verdict.load.overloads:
        text = "passes (DaemonSet pod)"
    return f"{text} ({'; '.join(marks)})" if marks else text


def _pod_row(verdict: NodeVerdict, preferred: str | None, bound_to: str | None) -> tuple[str, ...]:
    metric = watched_predicate(verdict)
    reading = verdict.reading(metric) if metric is not None else None
    load = verdict.load
    values: tuple[str, ...] = ("-", "-", "-", "-", "-")
    if metric is not None and reading is not None:
        values = (
            metric,
            _fraction(reading.measured_fraction),
            f"+{reading.unsampled_fraction:.3f}",
            _fraction(reading.usage_fraction),
            f"{verdict.limits[metric]:g}",
        )
    hot = str(load.hot_value) if load.hot_value_fresh else "-"
    return (
        verdict.node,
        _verdict_text(verdict, preferred, bound_to),
        *values,
        str(verdict.recent_pods),
        str(load.load_score),
        hot,
        f"{load.extender_score}/{MAX_EXTENDER_SCORE}",
    )


def render_pod(
    explanation: PodExplanation, policy_source: str, top: int | None, notes: Sequence[str] = ()
) -> str:
    pod = explanation.pod
    verdicts = explanation.verdicts
    where = f"bound to {pod.node_name}" if pod.node_name else "Pending (not bound to a node)"
    lines = [f"pod {pod.key}: {where}"]
    if explanation.pending:
        message = explanation.failed_scheduling
        lines.append(
            f"kube-scheduler's last FailedScheduling: {printable(message, MAX_MESSAGE)}"
            if message
            else "kube-scheduler's last FailedScheduling: none (no such Event for this pod)"
        )
    refused = sum(1 for v in verdicts if not v.passes)
    lines.append(f"policy: {policy_source}")
    if explanation.pod_class is not None:
        lines.append(
            f"class of pods: {explanation.pod_class} (judged by its limits and weights; "
            "`loadaware policy check` shows them)"
        )
    if explanation.preferred is not None:
        best = next(v for v in verdicts if v.node == explanation.preferred)
        tie = f"; tied with {', '.join(explanation.tied)}" if explanation.tied else ""
        room = "" if best.has_room else "; no node has room for the pod under its limits"
        lines.append(
            f"the extender would prefer: {explanation.preferred} "
            f"(score {best.load.extender_score} of 10, answered {best.answered}{tie}{room})"
        )
    else:
        lines.append(
            "the extender would prefer: none (no node it is asked about passes with fresh "
            "data: kube-scheduler's own scores choose)"
        )
    lines.append(f"load filter: {refused} of {len(verdicts)} nodes refused")
    lines.extend(notes)
    shown = list(verdicts if top is None else verdicts[:top])
    header = ("NODE", "VERDICT", "PREDICATE", "MEASURED", "+RECENT", "USED", "LIMIT",
              "RECENT PODS", "LOAD SCORE", "HOT", "SCORE")  # fmt: skip
    rows = [_pod_row(v, explanation.preferred, pod.node_name) for v in shown]
    lines += ["", *_table(header, rows)]
    if len(shown) < len(verdicts):
        lines.append(f"... {len(verdicts) - len(shown)} more nodes (--all shows every node)")
    parts = [part.metric for part in shown[0].parts] if shown else []
    if parts:
        lines += [
            "",
            "score parts: each metric's free share x weight, in points of 100 (* no fresh "
            "data: scored at its limit); each unit of hot value takes 10 points",
        ]
        parts_header = ("NODE", *map(_metric_label, parts), "LOAD SCORE", "HOT", "SCORE")
        parts_rows = [
            (
                v.node,
                *(f"{p.points:.1f}{'*' if p.assumed else ''}" for p in v.parts),
                str(v.load.load_score),
                f"-{v.load.hot_value * HOT_VALUE_PENALTY_PER_UNIT}" if v.load.hot_value else "0",
                f"{v.load.score} -> {v.load.extender_score}/{MAX_EXTENDER_SCORE}",
            )
            for v in shown
        ]
        lines += _table(parts_header, parts_rows)
    return "\n".join(lines) + "\n"


def _reading_json(reading: MetricReading, limit: float | None) -> dict[str, Any]:
    return {
        "metric": reading.metric,
        "freshness": reading.freshness.value,
        "measured": reading.measured_fraction,
        "recent": reading.unsampled_fraction,
        "used": reading.usage_fraction,
        "limit": limit,
    }


def _refused_json(verdict: NodeVerdict) -> dict[str, Any] | None:
    """The failed predicate: measured + recent (the estimate) = used, above the limit."""
    refused = verdict.refused
    if refused is None:
        return None
    reading = verdict.reading(refused.metric)
    recent = reading.unsampled_fraction if reading is not None else 0.0
    return {
        "metric": refused.metric,
        "measured": refused.usage_fraction - recent,
        "recent": recent,
        "used": refused.usage_fraction,
        "limit": refused.limit_fraction,
    }


def verdict_json(verdict: NodeVerdict) -> dict[str, Any]:
    load = verdict.load
    refused = verdict.refused
    return {
        "node": verdict.node,
        "passes": verdict.passes,
        "reason": None if refused is None else refused.reason,
        "refusedBy": _refused_json(verdict),
        "offeredByKubeScheduler": verdict.not_offered is None,
        "notOffered": verdict.not_offered,
        "daemonSetPod": verdict.exempt,
        "recentPods": verdict.recent_pods,
        "metrics": [_reading_json(r, verdict.limits.get(r.metric)) for r in load.readings],
        "scoreParts": [
            {
                "metric": p.metric,
                "weight": p.weight,
                "usage": p.usage_fraction,
                "assumed": p.assumed,
                "points": p.points,
            }
            for p in verdict.parts
        ],
        "loadScore": load.load_score,
        "hotValue": load.hot_value,
        "hotValueFresh": load.hot_value_fresh,
        "score": load.score,
        "extenderScore": load.extender_score,
        "preferable": verdict.preferable,
        "hasRoom": verdict.has_room,
        "answered": verdict.answered,
    }


def pod_json(
    explanation: PodExplanation, policy_source: str, notes: Sequence[str] = ()
) -> dict[str, Any]:
    pod = explanation.pod
    return {
        "pod": pod.key,
        "node": pod.node_name,
        "pending": explanation.pending,
        "failedScheduling": None
        if explanation.failed_scheduling is None
        else explanation.failed_scheduling[:MAX_MESSAGE],
        "policy": policy_source,
        "class": explanation.pod_class,
        "preferred": explanation.preferred,
        "tied": list(explanation.tied),
        "notes": list(notes),
        "nodes": [verdict_json(v) for v in explanation.verdicts],
    }


def _percent(values: Mapping[str, float]) -> str:
    return " ".join(f"{r}={v:.0%}" for r, v in values.items()) or "-"


def _usage(usage: Resources) -> str:
    return f"cpu={usage.cpu_cores:.3g} mem={usage.memory_bytes / 2**20:.0f}Mi"


def _moves(evictions: Sequence[PlannedEviction], other_end: str) -> list[str]:
    rows = [
        (e.pod.key, e.destination if other_end == "TO" else e.source, _usage(e.usage),
         e.usage_from, e.reason)
        for e in evictions
    ]  # fmt: skip
    return _table(("POD", other_end, "USAGE", "USAGE FROM", "WHY"), rows) if rows else []


def render_node(explanation: NodeExplanation, sources: Sequence[str]) -> str:
    node_class = explanation.node_class
    lines = [f"node {explanation.node}: {explanation.role}"]
    lines.append(f"why: {node_class.kind.value}, {node_class.reason}")
    lines.append(f"scheduler: {explanation.scheduler}: {ASSUMES[explanation.scheduler]}")
    lines.append(
        f"usage {_percent(node_class.usage_fraction)}; a destination at or below "
        f"{_percent(node_class.low_fraction)}; hot above {_percent(node_class.high_fraction)}"
    )
    if node_class.hot:
        lines.append(
            f"hot rounds: {node_class.hot_rounds} in a row, this one included "
            f"(consecutiveHotRounds {explanation.consecutive_hot_rounds})"
        )
    pools = explanation.pools
    if pools is not None:
        lines.append(
            "node pool: policy "
            + pools.described(pools.policy, pools.policy_overlap, "policy's own limits")
            + "; descheduler configuration "
            + pools.described(
                pools.configuration, pools.configuration_overlap, "configuration's own thresholds"
            )
        )
    if explanation.opt_out is not None:
        lines.append(f"opted out: {explanation.opt_out}")
    if explanation.held_hot is not None:
        lines.append(f"held hot: {explanation.held_hot.reason}")
    lines.extend(sources)
    lines += ["", f"would move off it ({len(explanation.moved_off)}):"]
    lines += _moves(explanation.moved_off, "TO")
    lines += ["", f"would skip ({len(explanation.skipped)}):"]
    skipped = [(s.pod_key, s.code.value, s.reason) for s in explanation.skipped]
    if skipped:
        lines += _table(("POD", "CODE", "WHY"), skipped)
    elif node_class.kind.value != "source" and explanation.pods_on_node:
        lines.append(
            f"  none: its {explanation.pods_on_node} pods are not considered, since it is "
            "not a source"
        )
    if explanation.sent_here:
        lines += ["", f"would receive ({len(explanation.sent_here)}):"]
        lines += _moves(explanation.sent_here, "FROM")
    if explanation.notes:
        lines += ["", "the plan's notes (whole cluster):", *(f"- {n}" for n in explanation.notes)]
    lines += _consolidation_lines(explanation.consolidation)
    return "\n".join(lines) + "\n"


def _consolidation_lines(consolidation: NodeConsolidation | None) -> list[str]:
    if consolidation is None:
        return ["", "consolidation: off (consolidation.enabled)"]
    lines = ["", f"consolidation: {consolidation.verdict}: {consolidation.reason}"]
    if consolidation.waits_for_hot_spots and consolidation.moves:
        lines.append("  this run cools a hot spot: drains wait for a run that does not")
    if consolidation.moves:
        lines += ["", f"consolidation would move off it ({len(consolidation.moves)}):"]
        lines += _moves(consolidation.moves, "TO")
    if consolidation.waiting:
        lines += ["", f"consolidation moves in a later run ({len(consolidation.waiting)}):"]
        lines += _table(("POD", "WHY NOT NOW"), list(consolidation.waiting))
    if consolidation.received:
        lines += ["", f"consolidation would send to it ({len(consolidation.received)}):"]
        lines += _moves(consolidation.received, "FROM")
    return lines


def _consolidation_json(consolidation: NodeConsolidation | None) -> dict[str, Any] | None:
    if consolidation is None:
        return None
    return {
        "verdict": consolidation.verdict,
        "reason": consolidation.reason,
        "wouldMove": [_eviction_json(e) for e in consolidation.moves],
        "later": [{"pod": key, "reason": why} for key, why in consolidation.waiting],
        "wouldReceive": [_eviction_json(e) for e in consolidation.received],
        "waitsForHotSpots": consolidation.waits_for_hot_spots,
    }


def _eviction_json(eviction: PlannedEviction) -> dict[str, Any]:
    return {
        "pod": eviction.pod.key,
        "from": eviction.source,
        "to": eviction.destination,
        "usage": {"cpuCores": eviction.usage.cpu_cores, "memoryBytes": eviction.usage.memory_bytes},
        "usageFrom": eviction.usage_from,
        "reason": eviction.reason,
    }


def _held_json(explanation: NodeExplanation) -> dict[str, Any] | None:
    held = explanation.held_hot
    if held is None:
        return None
    return {
        "held": dict(held.held),
        "pods": [
            {"pod": key, "resource": resource, "aboveRequests": amount}
            for key, resource, amount in held.pods
        ],
        "reason": held.reason,
    }


def _pools_json(explanation: NodeExplanation) -> dict[str, Any]:
    """``nodePool``, where the policy or the configuration has node pools."""
    pools = explanation.pools
    if pools is None:
        return {}
    return {
        "nodePool": {
            "policy": pools.policy,
            "policyOverlap": list(pools.policy_overlap),
            "configuration": pools.configuration,
            "configurationOverlap": list(pools.configuration_overlap),
        }
    }


def node_json(explanation: NodeExplanation, sources: Sequence[str]) -> dict[str, Any]:
    node_class = explanation.node_class
    return {
        "node": explanation.node,
        "class": node_class.kind.value,
        "role": explanation.role,
        "reason": node_class.reason,
        "usage": dict(node_class.usage_fraction),
        "destinationAtOrBelow": dict(node_class.low_fraction),
        "hotAbove": dict(node_class.high_fraction),
        "hot": node_class.hot,
        "hotRounds": node_class.hot_rounds,
        "consecutiveHotRounds": explanation.consecutive_hot_rounds,
        "podsOnNode": explanation.pods_on_node,
        "scheduler": explanation.scheduler,
        "wouldMove": [_eviction_json(e) for e in explanation.moved_off],
        "wouldSkip": [
            {"pod": s.pod_key, "code": s.code.value, "reason": s.reason}
            for s in explanation.skipped
        ],
        "wouldReceive": [_eviction_json(e) for e in explanation.sent_here],
        "notes": list(explanation.notes),
        "sources": list(sources),
        **_pools_json(explanation),
        "optedOut": explanation.opt_out,
        "heldHot": _held_json(explanation),
        "consolidation": _consolidation_json(explanation.consolidation),
    }
