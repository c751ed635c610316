"""Could the scheduler place this pod on this node: node selector, required node
affinity, taints, and the node being Ready and schedulable (kube-scheduler's rules).

The inter-pod rules (pod affinity, anti-affinity, topology spread) are in
``placement``. Volume zones are not checked: pods with PersistentVolumeClaims are not
evicted by default (``ignorePvcPods``).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.objects import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    Taint,
    Toleration,
)

__all__ = ["fit_refusal"]

# Taint effects that keep a pod off a node; PreferNoSchedule is only a preference.
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect is not None and toleration.effect != taint.effect:
        return False
    if toleration.key is None:
        return toleration.operator == "Exists"
    if toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return (toleration.value or "") == (taint.value or "")


def untolerated_taint(pod: PodInfo, node: NodeInfo) -> Taint | None:
    for taint in node.taints:
        if taint.effect in BLOCKING_EFFECTS and not any(
            tolerates(t, taint) for t in pod.tolerations
        ):
            return taint
    return None


def requirement_holds(requirement: NodeSelectorRequirement, value: str | None) -> bool:
    operator = requirement.operator
    if operator == "In":
        return value is not None and value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        return _compares(operator, value, requirement.values)
    return False


def _compares(operator: str, value: str | None, values: tuple[str, ...]) -> bool:
    if value is None or len(values) != 1:
        return False
    try:
        have, bound = int(value), int(values[0])
    except ValueError:
        return False
    return have > bound if operator == "Gt" else have < bound


def term_matches(term: NodeSelectorTerm, node: NodeInfo) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False  # an empty term matches no node (kube-scheduler)
    fields: Mapping[str, str] = {"metadata.name": node.name}
    labels_hold = all(
        requirement_holds(r, node.labels.get(r.key)) for r in term.match_expressions
    )
    return labels_hold and all(requirement_holds(r, fields.get(r.key)) for r in term.match_fields)


def selector_refusal(pod: PodInfo, node: NodeInfo) -> str | None:
    """None when the pod's node selector and required node affinity admit the node."""
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return "node selector does not match"
    terms = pod.required_node_affinity
    if terms and not any(term_matches(term, node) for term in terms):
        return "required node affinity does not match"
    return None


def fit_refusal(pod: PodInfo, node: NodeInfo) -> str | None:
    """None when the pod may run on the node by the scheduler's node rules; else why not."""
    if not node.ready:
        return "node is not Ready"
    if node.unschedulable:
        return "node is unschedulable (cordoned)"
    unselected = selector_refusal(pod, node)
    if unselected is not None:
        return unselected
    taint = untolerated_taint(pod, node)
    if taint is not None:
        return f"taint {taint.key}={taint.value or ''}:{taint.effect} is not tolerated"
    return None
