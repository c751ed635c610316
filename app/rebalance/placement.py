"""Would kube-scheduler's inter-pod rules let a pod's replacement onto a node: required
pod anti-affinity (the pod's own, and other pods' against it), required pod affinity,
and topology spread constraints with ``whenUnsatisfiable: DoNotSchedule``.

The replacement is judged as the scheduler will judge it: after the pod itself is gone
(evicted), with the pods this plan already moved counted on their destinations. The
node rules (selector, node affinity, taints) are in ``fit``.

Pods without such constraints cost nothing here: pods are indexed by namespace only on
the first pod that needs it, and the pods with anti-affinity once per plan. For a pod
that has them, each rule is reduced to topology domains in one pass over the pods it
reads, and then asked of every candidate node by lookup: a pod whose terms select
every namespace (as anyone who may create pods can write) costs one pass, not one per
node. The plan's moves start the passes again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.objects import NodeInfo, PodAffinityTerm, PodInfo, SpreadConstraint
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
        self._memo: dict[tuple[Any, ...], Any] = {}  # one pass per pod and rule, per move

    def move(self, pod: PodInfo, destination: str) -> None:
        self._moved[pod.key] = destination
        self._memo.clear()

    def unmove(self, pod: PodInfo) -> None:
        self._moved.pop(pod.key, None)
        self._memo.clear()

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

    def may_refuse(self, pod: PodInfo) -> bool:
        """Whether any inter-pod rule applies to the pod's replacement: a rule of its
        own, or some pod's anti-affinity that could keep it out. When none does,
        ``refusal`` admits it on every node."""
        return bool(pod.pod_anti_affinity or pod.pod_affinity or pod.spread) or bool(
            self._anti_affinity_holders()
        )

    def refusal(self, pod: PodInfo, node: NodeInfo) -> str | None:
        """None when the scheduler's inter-pod rules admit the pod's replacement on
        ``node``; else why not."""
        if not self.may_refuse(pod):
            return None
        for term in pod.pod_anti_affinity:
            blocker = self._term_match(pod, term, node)
            if blocker is not None:
                return f"pod anti-affinity: {blocker} is in its {term.topology_key} domain"
        held, keys = self._held_against(pod)
        for key in keys:
            holder_key = held.get((key, node.labels.get(key, "")))
            if holder_key is not None and key in node.labels:
                return f"{holder_key}'s pod anti-affinity keeps it out of that domain"
        for term in pod.pod_affinity:
            refused = self._affinity_refusal(pod, term, node)
            if refused is not None:
                return refused
        for constraint in pod.spread:
            refused = self._spread_refusal(pod, constraint, node)
            if refused is not None:
                return refused
        return None

    def _held_against(self, pod: PodInfo) -> tuple[dict[tuple[str, str], str], set[str]]:
        """(topology key, domain) -> a pod whose required anti-affinity keeps ``pod``
        out of that domain; and the topology keys among them."""
        memo_key = ("held", pod.key)
        if memo_key not in self._memo:
            held: dict[tuple[str, str], str] = {}
            for holder in self._anti_affinity_holders():
                where = self._node_of(holder)
                if holder.key == pod.key or where is None:
                    continue
                for term in holder.pod_anti_affinity:
                    if not _in_namespaces(pod, term.namespaces):
                        continue
                    value = self._domain(where, term.topology_key)
                    if value is not None and term.selector.matches(pod.labels):
                        held.setdefault((term.topology_key, value), holder.key)
            self._memo[memo_key] = (held, {key for key, _ in held})
        result: tuple[dict[tuple[str, str], str], set[str]] = self._memo[memo_key]
        return result

    def _matching_domains(self, pod: PodInfo, term: PodAffinityTerm) -> dict[str, str]:
        """Domain of ``term.topology_key`` -> a pod there that matches ``term``."""
        memo_key = ("term", pod.key, id(term))  # terms live as long as their pod
        if memo_key not in self._memo:
            found: dict[str, str] = {}
            for other in self._others(pod, term.namespaces):
                if term.selector.matches(other.pod.labels):
                    value = self._domain(other.node, term.topology_key)
                    if value is not None:
                        found.setdefault(value, other.pod.key)
                    self._memo[("any", pod.key, id(term))] = True
            self._memo[memo_key] = found
        result: dict[str, str] = self._memo[memo_key]
        return result

    def _term_match(self, pod: PodInfo, term: PodAffinityTerm, node: NodeInfo) -> str | None:
        """A pod matching ``term`` in ``node``'s domain, or None."""
        value = node.labels.get(term.topology_key)
        if value is None:
            return None
        return self._matching_domains(pod, term).get(value)

    def _affinity_refusal(self, pod: PodInfo, term: PodAffinityTerm, node: NodeInfo) -> str | None:
        if node.labels.get(term.topology_key) is None:
            return f"pod affinity: the node has no {term.topology_key} label"
        if self._term_match(pod, term, node) is not None:
            return None
        self._matching_domains(pod, term)
        anywhere = ("any", pod.key, id(term)) in self._memo  # a match, with or without a domain
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

    def _spread_counts(self, pod: PodInfo, constraint: SpreadConstraint) -> dict[str, int]:
        """Matching pods per eligible domain, the pod itself gone."""
        memo_key = ("spread", pod.key, id(constraint))
        if memo_key not in self._memo:
            key = constraint.topology_key
            counts: dict[str, int] = {}
            for info in self._nodes.values():
                if self._eligible(pod, constraint, info):
                    counts.setdefault(info.labels[key], 0)
            for other in self._others(pod, (pod.namespace,)):
                domain = self._domain(other.node, key)
                if domain in counts and constraint.selector.matches(other.pod.labels):
                    counts[domain] += 1
            self._memo[memo_key] = counts
        result: dict[str, int] = self._memo[memo_key]
        return result

    def _spread_refusal(
        self, pod: PodInfo, constraint: SpreadConstraint, node: NodeInfo
    ) -> str | None:
        key = constraint.topology_key
        value = node.labels.get(key)
        if value is None:
            return f"topology spread: the node has no {key} label"
        counts = self._spread_counts(pod, constraint)
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
