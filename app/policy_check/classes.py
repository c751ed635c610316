"""What ``loadaware policy check`` says of a policy's classes of pods (none: nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.objects import format_duration

if TYPE_CHECKING:
    from app.policy import Policy


def describe_classes(policy: Policy) -> list[str]:
    """One block per class: who is in it, the limits and weights its pods are judged by
    (and the higher classes whose limits hold for them where their pods run), and the
    annotations its class usages are read from."""
    from app.policy import pod_classes

    classes = pod_classes(policy)
    if not classes:
        return []
    lines = ["", "classes of pods (a pod in none is judged by the policy above):"]
    for entry in classes.classes:
        judged = classes.policies[entry.name]
        selector = entry.selector
        who = f"priority {entry.min_priority}..{entry.max_priority}"
        if selector.match_labels or selector.match_expressions:
            terms = [f"{k}={v}" for k, v in selector.match_labels.items()]
            terms += [f"{r.key} {r.operator} {list(r.values)}" for r in selector.match_expressions]
            who += f" and labels {', '.join(terms)}"
        limits = ", ".join(f"{metric} > {limit:g}" for metric, limit in judged.limits) or "none"
        total = sum(p.weight for p in judged.spec.priority) or 1.0
        weights = ", ".join(
            f"{p.name} {p.weight / total:.0%}" for p in judged.spec.priority if p.weight > 0
        )
        own = "its own" if entry.priority else "the policy's"
        lines += [
            f"  {entry.name}: {who}",
            f"    rejects a node above: {limits}",
            f"    scores by ({own} weights): {weights or 'nothing'}",
        ]
        if judged.limits_above is not None:
            above = ", ".join(name for name, _, _ in judged.limits_above.others)
            lines.append(
                f"    where pods of {above} run: their limits on the node's metrics too, "
                "where stricter"
            )
    if classes.annotation_keys:
        window = format_duration(classes.freshness_window_s)
        lines.append(f"class usages (fresh for {window}, written by the annotator):")
        lines += [f"  {metric} <- {key}" for metric, key in classes.annotation_keys.items()]
    return lines
