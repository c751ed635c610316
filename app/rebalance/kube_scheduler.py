"""Where a request-based kube-scheduler puts an evicted pod's replacement. Pure.

The default profile as ``app.load.default_profile`` has it: the filters (NodeResourcesFit
by requests, and the node and inter-pod rules of ``fit`` and ``placement``), then
LeastAllocated + BalancedAllocation + 3 x TaintToleration + 2 x PodTopologySpread (the
system default's, for a pod with no constraint of its own that a ReplicaSet,
StatefulSet or ReplicationController owns: its owner's other pods per node and per
``topology.kubernetes.io/zone``) + 2 x NodeAffinity (the preferred terms' weights).
The replacement is placed after the eviction: the pod's requests are gone from its
source, and the replacements this plan already predicted are on the nodes predicted for
them. kube-scheduler picks at random among the nodes with the best total, so the answer
is all of them.

What it leaves out: a pod's own ``ScheduleAnyway`` spread constraints (a pod with
constraints of its own is not spread by the system default, and is scored without it),
Services' selectors in the system default, preferred inter-pod affinity, image locality,
``percentageOfNodesToScore`` and a custom profile. Pods pending beside a replacement
are not placed here (their order in kube-scheduler's queue is not known); ``choices``
says where each would go, and the plan counts them on a landing node
(``replacement_scheduler.PendingPods``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from app.load import (
    MAX_NODE_SCORE,
    SPREAD_OWNER_KINDS,
    SYSTEM_DEFAULT_SPREAD,
    TAINT_TOLERATION_WEIGHT,
    ZONE_KEY,
    fits_requests,
    node_affinity_scores,
    non_zero_requests,
    profile_scores,
    resource_scores,
    spread_term,
    taint_toleration_scores,
    topology_spread_scores,
)
from app.objects import NodeInfo, PodInfo
from app.rebalance.destinations import FINISHED_PHASES
from app.rebalance.placement import Placements
from app.rebalance.rule_masks import RuleMasks, node_rules_key

_Bools = np.ndarray[Any, np.dtype[np.bool_]]
_Ints = np.ndarray[Any, np.dtype[np.int64]]
_Floats = np.ndarray[Any, np.dtype[np.float64]]
_OwnerKey = tuple[str, str, str]  # namespace, kind, name


def _counted(pod: PodInfo) -> bool:
    """Pods whose requests kube-scheduler counts on their node (terminating included:
    they hold their requests until they are gone)."""
    return pod.node_name is not None and pod.phase not in FINISHED_PHASES


def _spread_owner(pod: PodInfo) -> _OwnerKey | None:
    """The owner whose pods the system-default topology spread counts with ``pod``'s
    (None: the pod is not spread by it: constraints of its own, or no such owner).
    kube-scheduler counts the pods its owner's selector matches; the planner, the pods
    of the same owner."""
    owner = pod.owner
    if owner is None or owner.kind not in SPREAD_OWNER_KINDS or pod.spread or pod.own_spread:
        return None
    return (pod.namespace, owner.kind, owner.name)


class RequestScheduler:
    """kube-scheduler's choice for a replacement, over the nodes of one plan."""

    def __init__(
        self, nodes: Sequence[NodeInfo], pods: Iterable[PodInfo], placements: Placements
    ) -> None:
        self._nodes = list(nodes)
        self._index = {node.name: i for i, node in enumerate(self._nodes)}
        self._placements = placements
        self._allocatable_cpu = np.array([n.allocatable.cpu_cores for n in self._nodes])
        self._allocatable_memory = np.array([n.allocatable.memory_bytes for n in self._nodes])
        # Summed as floats, pod by pod in order: the same sums as adding each pod to
        # arrays of zeros (``_add``), without four numpy scalar updates per pod.
        sums = [[0.0] * len(self._nodes) for _ in range(4)]
        requested_cpu, requested_memory, scored_cpu, scored_memory = sums
        # Per owner, its pods per node that the topology spread counts (not terminating).
        owned: dict[_OwnerKey, list[float]] = {}
        for pod in pods:
            index = self._index.get(pod.node_name or "")
            if index is not None and _counted(pod) and not pod.terminating:
                owner = _spread_owner(pod)
                if owner is not None:
                    owned.setdefault(owner, [0.0] * len(self._nodes))[index] += 1
            if index is not None and _counted(pod):
                cpu, memory = pod.requests.cpu_cores, pod.requests.memory_bytes
                score_cpu, score_memory = non_zero_requests(cpu, memory)
                requested_cpu[index] += cpu
                requested_memory[index] += memory
                scored_cpu[index] += score_cpu
                scored_memory[index] += score_memory
        self._requested_cpu = np.array(requested_cpu, dtype=np.float64)
        self._requested_memory = np.array(requested_memory, dtype=np.float64)
        self._scored_cpu = np.array(scored_cpu, dtype=np.float64)
        self._scored_memory = np.array(scored_memory, dtype=np.float64)
        self._owned = {owner: np.array(counts) for owner, counts in owned.items()}
        zones = [node.labels.get(ZONE_KEY) for node in self._nodes]
        zone_index = {zone: i for i, zone in enumerate(sorted({z for z in zones if z}))}
        self._zone = np.array([zone_index.get(z or "", -1) for z in zones], dtype=np.int64)
        self._zoned = bool(zone_index)
        self._hostname = np.arange(len(self._nodes), dtype=np.int64)
        self._masks = RuleMasks(self._nodes)
        # The filter and resource scores per (source, requests), for the requests as they
        # stand: a plan asks them of every pod on a source, most of them alike, and moves
        # few. ``_version`` changes with the requests (a move, or a last bit that taking
        # a pod off and back on did not restore), which drops them.
        self._version = 0
        self._kept_version = 0
        self._kept: dict[tuple[int | None, float, float], tuple[_Bools, _Ints]] = {}
        # The best score and nodes (by index, and their names in order) before the
        # inter-pod rules, per (source, requests, node rules, tolerations):
        # ``best_nodes``.
        self._choices: dict[tuple[Any, ...], tuple[int, list[int], list[str]]] = {}

    def _add(self, pod: PodInfo, index: int, sign: float) -> None:
        cpu, memory = pod.requests.cpu_cores, pod.requests.memory_bytes
        score_cpu, score_memory = non_zero_requests(cpu, memory)
        self._requested_cpu[index] += sign * cpu
        self._requested_memory[index] += sign * memory
        self._scored_cpu[index] += sign * score_cpu
        self._scored_memory[index] += sign * score_memory

    def move(self, pod: PodInfo, source: str, destination: str) -> None:
        """The plan evicts ``pod`` from ``source`` and its replacement lands on
        ``destination``: the next prediction counts it there."""
        self._version += 1
        self._add(pod, self._index[source], -1.0)
        self._add(pod, self._index[destination], 1.0)
        owner = _spread_owner(pod)
        counts = self._owned.get(owner) if owner is not None and not pod.terminating else None
        if counts is not None:
            counts[self._index[source]] -= 1
            counts[self._index[destination]] += 1

    def unmove(self, pod: PodInfo, source: str, destination: str) -> None:
        self.move(pod, destination, source)

    @property
    def version(self) -> int:
        """Changes whenever the requests the scores read change (a move, ``unmove``)."""
        return self._version

    def best_nodes(self, pod: PodInfo, source: str | None) -> tuple[list[str], int]:
        """The nodes kube-scheduler would choose among for ``pod``'s replacement, with
        ``pod`` gone from ``source``, by name; and their total score. ([] and 0 when no
        node would take it: the replacement would stay Pending.) ``source`` None: a
        pending pod, on no node yet."""
        here = None if source is None else self._index[source]
        fits, resources = self._fit_and_scores(pod, here)  # first: it may drop the choices
        rules = node_rules_key(pod)
        # Before the inter-pod rules, the choice follows from the kept filter and scores,
        # the node rules and the taints alone: kept with the filter and scores (dropped
        # with them), for the next pod alike.
        owner = _spread_owner(pod)
        key = (here, pod.requests.cpu_cores, pod.requests.memory_bytes, rules,
               tuple(pod.tolerations), owner, pod.terminating,
               pod.preferred_node_affinity)  # fmt: skip
        spread = self._spread_scorer(pod, owner, here, rules)
        preferred = self._masks.preferred_weights(pod)
        choice = self._choices.get(key)
        if choice is None:
            admitted = self._masks.admitted(pod, rules)
            untolerated = self._masks.untolerated(pod)
            best, chosen = _choose(fits & admitted, resources, untolerated, spread, preferred)
            names = sorted(self._nodes[i].name for i in chosen)
            choice = self._choices[key] = (best, chosen, names)
        best, chosen, names = choice
        if not self._placements.may_refuse(pod):
            return list(names), best  # no inter-pod rule can refuse one of them
        feasible: _Bools | None = None
        # The inter-pod rules are asked of the best nodes only, and again after any
        # of them refuses: one pass per refusal, not one call per node.
        while chosen:
            refused = [
                i for i in chosen if self._placements.refusal(pod, self._nodes[i]) is not None
            ]
            if not refused:
                return sorted(self._nodes[i].name for i in chosen), best
            if feasible is None:
                feasible = fits & self._masks.admitted(pod, rules)
            feasible[refused] = False
            untolerated = self._masks.untolerated(pod)
            best, chosen = _choose(feasible, resources, untolerated, spread, preferred)
        return [], 0

    def _spread_scorer(
        self, pod: PodInfo, owner: _OwnerKey | None, here: int | None, rules: tuple[Any, ...]
    ) -> Callable[[_Bools], _Ints] | None:
        """PodTopologySpread's scores of the system default for ``pod``'s replacement
        over the feasible nodes it is given, with ``pod`` gone from node ``here``;
        None where the system default does not spread the pod."""
        counts = self._owned.get(owner) if owner is not None else None
        if counts is None:
            return None
        counted = self._masks.selected(pod, rules)  # nodeAffinityPolicy Honor: whose pods count
        hostname, zone, zoned = self._hostname, self._zone, self._zoned

        def scores(feasible: _Bools) -> _Ints:
            on_node: _Floats = counts.copy()
            if here is not None and not pod.terminating:
                on_node[here] -= 1  # itself, evicted
            terms = []
            for key, max_skew in SYSTEM_DEFAULT_SPREAD:
                if key == ZONE_KEY:
                    if not zoned:
                        continue
                    per_node, labelled, domains = spread_term(zone, on_node, counted, feasible)
                else:
                    per_node, labelled, domains = spread_term(
                        hostname, on_node, counted, feasible, hostname=True
                    )
                terms.append((per_node, labelled, max_skew, domains))
            return topology_spread_scores(terms, feasible)

        return scores

    def _fit_and_scores(self, pod: PodInfo, here: int | None) -> tuple[_Bools, _Ints]:
        """NodeResourcesFit and LeastAllocated + BalancedAllocation for ``pod``, with it
        gone from node ``here`` (None: on no node; read-only: kept for the next pod
        alike)."""
        if self._kept_version != self._version:
            self._kept.clear()
            self._choices.clear()
            self._kept_version = self._version
        cpu, memory = pod.requests.cpu_cores, pod.requests.memory_bytes
        key = (here, cpu, memory)
        kept = self._kept.get(key)
        if kept is not None:
            # Kept at this version: taking these requests off ``here`` and back on
            # restored its requests exactly then (or the version would have moved), and
            # they are the same numbers now, so doing it again would change nothing.
            return kept
        if here is None:
            kept = self._kept[key] = _requests_fit_and_scores(self._arrays(), cpu, memory)
            return kept
        before = self._state(here)
        self._add(pod, here, -1.0)
        try:
            kept = self._kept[key] = _requests_fit_and_scores(self._arrays(), cpu, memory)
        finally:
            self._add(pod, here, 1.0)
            if self._state(here) != before:  # the requests are not quite what they were
                self._version += 1
        return kept

    def _arrays(self) -> tuple[_Floats, ...]:
        return (self._allocatable_cpu, self._allocatable_memory, self._requested_cpu,
                self._requested_memory, self._scored_cpu, self._scored_memory)  # fmt: skip

    def _state(self, index: int) -> tuple[float, float, float, float]:
        return (
            float(self._requested_cpu[index]),
            float(self._requested_memory[index]),
            float(self._scored_cpu[index]),
            float(self._scored_memory[index]),
        )


# TaintToleration's whole score at its weight: what a node with no untolerated taint gets.
_WHOLE_TOLERATION = TAINT_TOLERATION_WEIGHT * MAX_NODE_SCORE


def _choose(
    feasible: _Bools,
    resources: _Ints,
    untolerated: _Ints | None,
    spread: Callable[[_Bools], _Ints] | None = None,
    preferred: _Ints | None = None,
) -> tuple[int, list[int]]:
    """Among the feasible nodes, the best total score and the nodes (by index) that have
    it; 0 and none where no node is feasible."""
    if not feasible.any():
        return 0, []
    spread_scores = spread(feasible) if spread is not None else None
    affinity = node_affinity_scores(preferred, feasible) if preferred is not None else None
    if untolerated is None:
        # No node carries a taint it does not tolerate: TaintToleration gives every
        # feasible node its whole score, the same to all.
        scores = (
            profile_scores(resources, spread=spread_scores, node_affinity=affinity)
            + _WHOLE_TOLERATION * feasible
        )
    else:
        toleration = taint_toleration_scores(untolerated, feasible)
        scores = profile_scores(
            resources, toleration=toleration, spread=spread_scores, node_affinity=affinity
        )
    best = int(scores[feasible].max())
    return best, np.flatnonzero(feasible & (scores == best)).tolist()


def _requests_fit_and_scores(
    arrays: tuple[_Floats, ...], cpu: float, memory: float
) -> tuple[_Bools, _Ints]:
    """NodeResourcesFit and the resource scores for requests of ``cpu`` cores and
    ``memory`` bytes, on ``RequestScheduler._arrays`` (allocatable, requested and
    scored, CPU then memory) as they stand; read-only."""
    (
        allocatable_cpu,
        allocatable_memory,
        requested_cpu,
        requested_memory,
        scored_cpu,
        scored_memory,
    ) = arrays
    fits = fits_requests(
        allocatable_cpu, allocatable_memory, requested_cpu, requested_memory, cpu, memory
    )
    resources = resource_scores(
        allocatable_cpu, allocatable_memory, scored_cpu, scored_memory,
        *non_zero_requests(cpu, memory),
    )  # fmt: skip
    fits.flags.writeable = resources.flags.writeable = False
    return fits, resources
