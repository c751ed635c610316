"""The extender's answer on kube-scheduler's wire: which node is lifted alone to the top.

kube-scheduler takes an extender's 0..10 integer scores, multiplies them by
``weight * 10``, adds them to its own plugins' scores and picks at random among equal
totals. The extender reserves a pod's estimate on the node it expects the pod to get,
so that node must win: the answer puts one *preferred* node alone on top.

* A node **can be preferred** when it passes the filter and its score rests on fresh
  data (at least one fresh reading). The preferred node is the first node, in the
  order the request lists them, with the highest 0..10 score among those that can be
  preferred and have **room for the pod**: the pod's estimate (``app.load.estimate``)
  added to the node's fresh readings keeps every predicate at or below its limit
  (``limit_room``). Where none has room, it is the first with the highest score among
  all that can be preferred: the pod goes to one of them anyway, and the reservation
  must be where it goes.
* It is answered ``min(score + 1, 10)``; every other node ``min(score, 9)``, and at
  most the preferred node's own score (a node without room, or without data, may
  score higher): the top of the answer is always unique.
* Where no node can be preferred, there is no lift: every node is answered
  ``min(score, 9)`` and kube-scheduler's own plugins choose. A node without fresh
  data scores what its missing metrics are assumed to be, the same for every such
  node, and an estimate reserved on it counts for nothing (the estimate is added to
  fresh readings only); lifting one of them would only override kube-scheduler's
  request-based spreading with the request's order (on a new cluster, or while the
  metrics pipeline is down, a burst would go where the list happens to start).
* Room for the pod, because the score alone cannot say it: crane's score sums the free
  fraction of every metric, so a node at 59 % CPU and 17 % memory outranks one at 30 %
  of both, and a CPU-heavy pod lifted onto it takes it over the CPU limit, where it
  stays (the filter judges a node as it is, never with the pod). A node without room
  is still answered its plain score and may still be chosen by kube-scheduler, but it
  is never the one the extender pushes the pod to.

This module is the rule's one reference. The extender's Python fallback index
(``app/extender/index.py``) and the simulator's placement call ``preferred_position``
and ``host_priorities`` as they are; the native verdict index
(``app/extender/_verdict_index.c``), the one second body kept for speed, is held to
them on random inputs (``tests/extender/test_index.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from app.load.model import MAX_EXTENDER_SCORE, Freshness, NodeLoad
from app.policy import Policy

__all__ = [
    "PLAIN_MAX_SCORE",
    "can_be_preferred",
    "has_room",
    "host_priorities",
    "host_priorities_and_preferred",
    "limit_room",
    "plain_priority",
    "preferred_position",
    "preferred_priority",
]

# Every node but the preferred one answers at most this.
PLAIN_MAX_SCORE = MAX_EXTENDER_SCORE - 1


def can_be_preferred(load: NodeLoad) -> bool:
    """The node passes the filter and its score rests on at least one fresh reading."""
    if load.overloads:
        return False
    fresh = Freshness.FRESH
    return any(reading.freshness is fresh for reading in load.readings)


def limit_room(load: NodeLoad, policy: Policy) -> dict[str, float]:
    """Per resource, the usage (a fraction of allocatable) that can still be added to the
    node's fresh readings before a predicate rejects it. A resource without a fresh
    reading that has a limit is left out: no limit applies to it."""
    limits = _limits_of(policy)
    resources = policy.metric_resources
    rooms: dict[str, float] = {}
    for reading in load.readings:
        limit = limits.get(reading.metric)
        usage = reading.usage_fraction
        if limit is None or usage is None or reading.freshness is not Freshness.FRESH:
            continue
        resource = resources.get(reading.metric)
        if resource is None:
            continue
        room = limit - usage if usage < limit else 0.0
        if room < rooms.get(resource, math.inf):
            rooms[resource] = room
    return rooms


# One policy is in force at a time: its limits by metric, built once, not per node.
_limits_cache: list[tuple[Policy, dict[str, float]]] = []


def _limits_of(policy: Policy) -> dict[str, float]:
    if _limits_cache and _limits_cache[0][0] is policy:
        return _limits_cache[0][1]
    limits = dict(policy.limits)
    _limits_cache[:] = [(policy, limits)]
    return limits


def has_room(rooms: Mapping[str, float], pod_usage: Mapping[str, float]) -> bool:
    """The pod's usage fits in every resource's room (same units on both sides)."""
    return all(amount <= rooms.get(resource, math.inf) for resource, amount in pod_usage.items())


def plain_priority(extender_score: int) -> int:
    """What a node that is not the preferred one is answered."""
    return min(extender_score, PLAIN_MAX_SCORE)


def preferred_priority(extender_score: int) -> int:
    """What the preferred node is answered: one point above its score, at most 10."""
    return min(extender_score + 1, MAX_EXTENDER_SCORE)


def preferred_position(
    scores: Sequence[int], preferable: Sequence[bool], roomy: Sequence[bool]
) -> int:
    """Where the preferred node is in the request's order, or -1 when none can be.
    ``roomy``: each node has room for the pod (``has_room``)."""
    # Built-ins over whole lists (the simulator asks this for every pod, of 1,000 nodes).
    triples = zip(scores, preferable, roomy, strict=True)
    candidates = [s if can and room else -1 for s, can, room in triples]
    top = max(candidates, default=-1)
    if top < 0:
        candidates = [s if can else -1 for s, can in zip(scores, preferable, strict=True)]
        top = max(candidates, default=-1)
    return candidates.index(top) if top >= 0 else -1


def host_priorities(
    scores: Sequence[int], preferable: Sequence[bool], roomy: Sequence[bool]
) -> list[int]:
    """The integer scores answered to kube-scheduler, in the request's order."""
    return host_priorities_and_preferred(scores, preferable, roomy)[0]


def host_priorities_and_preferred(
    scores: Sequence[int], preferable: Sequence[bool], roomy: Sequence[bool]
) -> tuple[list[int], int]:
    """``host_priorities``, and ``preferred_position`` (-1: no node is lifted)."""
    best = preferred_position(scores, preferable, roomy)
    # plain_priority, capped at the preferred node's own: written out for speed.
    cap = PLAIN_MAX_SCORE if best < 0 else plain_priority(scores[best])
    answer = [s if s < cap else cap for s in scores]
    if best >= 0:
        answer[best] = preferred_priority(scores[best])
    return answer, best
