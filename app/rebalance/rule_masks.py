"""What the nodes of one plan say of a pod by their fixed labels and taints, per node,
as kube-scheduler's default profile reads them. Pure.

A node's labels and taints do not change within a plan, and most pods share their node
rules, so each answer is an array over the nodes, made once per distinct set of the
pod's rules and kept for the plan. ``kube_scheduler.RequestScheduler`` combines these
with the requests, which do change as the plan moves pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.objects import NodeInfo, PodInfo
from app.rebalance.fit import fit_refusal, selector_refusal, term_matches, tolerates

__all__ = ["PREFER_NO_SCHEDULE", "RuleMasks", "node_rules_key"]

PREFER_NO_SCHEDULE = "PreferNoSchedule"

_Bools = np.ndarray[Any, np.dtype[np.bool_]]
_Ints = np.ndarray[Any, np.dtype[np.int64]]


def node_rules_key(pod: PodInfo) -> tuple[Any, ...]:
    """The pod's node rules (selector, required affinity, tolerations), as a key."""
    selector: Mapping[str, str] = pod.node_selector
    return (tuple(sorted(selector.items())), pod.required_node_affinity, pod.tolerations)


class RuleMasks:
    """Per node of a plan: the filters of ``fit``, the nodes whose pods a spread counts,
    the preferred affinity weights, the untolerated ``PreferNoSchedule`` taints."""

    def __init__(self, nodes: Sequence[NodeInfo]) -> None:
        self._nodes = nodes
        self._selected: dict[tuple[Any, ...], _Bools] = {}
        self._preferred: dict[tuple[Any, ...], _Ints] = {}
        self._admitted: dict[tuple[Any, ...], _Bools] = {}
        self._untolerated: dict[tuple[Any, ...], _Ints | None] = {}

    def admitted(self, pod: PodInfo, key: tuple[Any, ...]) -> _Bools:
        """Per node, ``fit``'s rules (Ready, schedulable, selector, affinity, blocking
        taints), once per distinct set of the pod's node rules (``key``) in a plan."""
        if key not in self._admitted:
            self._admitted[key] = np.array(
                [fit_refusal(pod, node) is None for node in self._nodes], dtype=np.bool_
            )
        return self._admitted[key]

    def selected(self, pod: PodInfo, key: tuple[Any, ...]) -> _Bools:
        """Per node, whether the pod's selector and required affinity select it: the
        nodes whose pods a topology spread counts (nodeAffinityPolicy Honor)."""
        if key not in self._selected:
            self._selected[key] = np.array(
                [selector_refusal(pod, node) is None for node in self._nodes], dtype=np.bool_
            )
        return self._selected[key]

    def preferred_weights(self, pod: PodInfo) -> _Ints | None:
        """Per node, the weights of the pod's preferred node affinity terms it matches
        (NodeAffinity's score before normalizing); None where the pod has none."""
        terms = pod.preferred_node_affinity
        if not terms:
            return None
        if terms not in self._preferred:
            self._preferred[terms] = np.array(
                [sum(w for w, term in terms if term_matches(term, n)) for n in self._nodes],
                dtype=np.int64,
            )
        return self._preferred[terms]

    def untolerated(self, pod: PodInfo) -> _Ints | None:
        """Per node, the ``PreferNoSchedule`` taints the pod does not tolerate; None
        where that is none on every node."""
        key = tuple(pod.tolerations)
        if key not in self._untolerated:
            counts = np.array(
                [
                    sum(
                        1
                        for taint in node.taints
                        if taint.effect == PREFER_NO_SCHEDULE
                        and not any(tolerates(t, taint) for t in pod.tolerations)
                    )
                    for node in self._nodes
                ],
                dtype=np.int64,
            )
            self._untolerated[key] = counts if counts.any() else None
        return self._untolerated[key]
