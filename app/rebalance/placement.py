"""Would kube-scheduler's inter-pod rules let a pod's replacement onto a node: required
pod anti-affinity (the pod's own, and other pods' against it), required pod affinity,
and topology spread constraints with ``whenUnsatisfiable: DoNotSchedule``.

The replacement is judged as the scheduler will judge it: after the pod itself is gone
(evicted), with the pods this plan already moved counted on their destinations. The
node rules (selector, node affinity, taints) are in ``fit``.

Pods without such constraints cost nothing here: pods are indexed by namespace only on
the first pod that needs it, and the pods with anti-affinity once per plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.objects.nodes import NodeInfo
from app.objects.pods import PodAffinityTerm, PodInfo, SpreadConstraint
from app.rebalance.fit import selector_refusal, untolerated_taint


@dataclass(frozen=True, slots=True)
class _Placed:
    pod: PodInfo
    node: str


def _counted(pod: PodInfo) -> bool:
    """Pods the scheduler counts: bound, not terminating, not finished."""
    return (
        pod.node_name is not None
        and not pod.terminating
        and pod.phase not in ("Succeeded", "Failed")
    )


def _in_namespaces(pod: PodInfo, namespaces: tuple[str, ...] | None) -> bool:
    return namespaces is None or pod.namespace in namespaces


class Placements:
    """Where every pod is during a plan, with the plan's moves applied."""

    def __init__(self, nodes: Mapping[str, NodeInfo], pods: Iterable[PodInfo]) -> None:
        self._nodes = nodes
        self._pods = [p for p in pods if _counted(p)]
        self._moved: dict[str, str] = {}  # pod key -> destination
        self._by_namespace: dict[str, list[PodInfo]] | None = None
        self._with_anti_affinity: list[PodInfo] | None = None

    def move(self, pod: PodInfo, destination: str) -> None:
        self._moved[pod.key] = destination

    def _node_of(self, pod: PodInfo) -> str | None:
        return self._moved.get(pod.key, pod.node_name)

    def _others(self, pod: PodInfo, namespaces: tuple[str, ...] | None) -> Iterable[_Placed]:
        """Every counted pod but ``pod`` itself (it is gone when its replacement is
        placed), in ``namespaces``, with the node it is on after the plan's moves."""
        if namespaces is None:
            candidates: Iterable[PodInfo] = self._pods
        else:
            index = self._namespace_index()
            candidates = (p for ns in namespaces for p in index.get(ns, ()))
        for other in candidates:
            if other.key == pod.key:
                continue
            node = self._node_of(other)
            if node is not None:
                yield _Placed(other, node)

    def _namespace_index(self) -> dict[str, list[PodInfo]]:
        if self._by_namespace is None:
            self._by_namespace = {}
            for p in self._pods:
                self._by_namespace.setdefault(p.namespace, []).append(p)
        return self._by_namespace

    def _anti_affinity_holders(self) -> list[PodInfo]:
        if self._with_anti_affinity is None:
            self._with_anti_affinity = [p for p in self._pods if p.pod_anti_affinity]
        return self._with_anti_affinity

    def _domain(self, node: str, key: str) -> str | None:
        info = self._nodes.get(node)
        return None if info is None else info.labels.get(key)

    def refusal(self, pod: PodInfo, node: NodeInfo) -> str | None:
        """None when the scheduler's inter-pod rules admit the pod's replacement on
        ``node``; else why not."""
        for term in pod.pod_anti_affinity:
            blocker = self._term_match(pod, term, node)
            if blocker is not None:
                return f"pod anti-affinity: {blocker} is in its {term.topology_key} domain"
        for holder in self._anti_affinity_holders():
            if holder.key == pod.key:
                continue
            for term in holder.pod_anti_affinity:
                if not _in_namespaces(pod, term.namespaces) or not term.selector.matches(
                    pod.labels
                ):
                    continue
                where = self._node_of(holder)
                value = node.labels.get(term.topology_key)
                if (
                    where is not None
                    and value is not None
                    and self._domain(where, term.topology_key) == value
                ):
                    return f"{holder.key}'s pod anti-affinity keeps it out of that domain"
        for term in pod.pod_affinity:
            refused = self._affinity_refusal(pod, term, node)
            if refused is not None:
                return refused
        for constraint in pod.spread:
            refused = self._spread_refusal(pod, constraint, node)
            if refused is not None:
                return refused
        return None

    def _term_match(self, pod: PodInfo, term: PodAffinityTerm, node: NodeInfo) -> str | None:
        """A pod matching ``term`` in ``node``'s domain, or None."""
        value = node.labels.get(term.topology_key)
        if value is None:
            return None
        for other in self._others(pod, term.namespaces):
            if (
                term.selector.matches(other.pod.labels)
                and self._domain(other.node, term.topology_key) == value
            ):
                return other.pod.key
        return None

    def _affinity_refusal(self, pod: PodInfo, term: PodAffinityTerm, node: NodeInfo) -> str | None:
        if node.labels.get(term.topology_key) is None:
            return f"pod affinity: the node has no {term.topology_key} label"
        if self._term_match(pod, term, node) is not None:
            return None
        others = self._others(pod, term.namespaces)
        anywhere = any(term.selector.matches(o.pod.labels) for o in others)
        itself = _in_namespaces(pod, term.namespaces) and term.selector.matches(pod.labels)
        if not anywhere and itself:
            return None  # kube-scheduler: the first pod of a group that matches itself
        return f"pod affinity: no matching pod in its {term.topology_key} domain"

    def _eligible(self, pod: PodInfo, constraint: SpreadConstraint, node: NodeInfo) -> bool:
        """Whether a node's pods count towards the spread (kube-scheduler's policies)."""
        if any(c.topology_key not in node.labels for c in pod.spread):
            return False
        if constraint.honor_node_affinity and selector_refusal(pod, node) is not None:
            return False
        return not (constraint.honor_node_taints and untolerated_taint(pod, node) is not None)

    def _spread_refusal(
        self, pod: PodInfo, constraint: SpreadConstraint, node: NodeInfo
    ) -> str | None:
        key = constraint.topology_key
        value = node.labels.get(key)
        if value is None:
            return f"topology spread: the node has no {key} label"
        counts: dict[str, int] = {}
        for info in self._nodes.values():
            if self._eligible(pod, constraint, info):
                counts.setdefault(info.labels[key], 0)
        for other in self._others(pod, (pod.namespace,)):
            domain = self._domain(other.node, key)
            if domain in counts and constraint.selector.matches(other.pod.labels):
                counts[domain] += 1
        if not counts:
            return None
        self_match = 1 if constraint.selector.matches(pod.labels) else 0
        lowest = min(counts.values())
        if constraint.min_domains is not None and len(counts) < constraint.min_domains:
            lowest = 0
        skew = counts.get(value, 0) + self_match - lowest
        if skew > constraint.max_skew:
            return (
                f"topology spread on {key}: skew would be {skew}, above maxSkew "
                f"{constraint.max_skew}"
            )
        return None
