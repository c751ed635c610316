"""One node table per class of pods (``app/policy/classes.py``), kept beside the main one.

A pod of a class is judged by its class's policy, over the node's annotations with the
class usages read in (``app.load.class_annotations``). Each class gets a ``NodeTable``
of its own, with its own verdict index, that the main table tells of every change
(``table.Followers``): a node's annotations, a binding or reservation on it, the
clock. So a request for a pod of a class is answered whole by its class's index, as
fast as any other, and a policy without classes keeps no table here and costs a
request one check (``NodeTable.table_for``).

The tables share the main table's reserve: a reservation or binding is the same usage
whoever judges the node. While classes follow, the annotations they read of each node
are kept here, bounded, so that a reloaded policy with other classes is built from them
at once; a reload that brings classes in starts from the node cache's (``known``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from app.extender.index import new_verdict_index
from app.extender.reserve import Reserve
from app.extender.table import NodeTable
from app.load import HOT_VALUE_KEY, class_annotations, pod_class
from app.policy import CLASS_USAGE_KEY_PREFIX, MAX_CLASSES, PodClasses, Policy, pod_classes

# Two keys per class at most are kept of a node's class-usage annotations.
MAX_CLASS_KEYS = 2 * MAX_CLASSES

# A node as the node cache knows it: its annotations and its labels (for node pools).
KnownNode = tuple[Mapping[str, str], Mapping[str, str]]


def class_usage_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The node's class-usage annotations, at most ``MAX_CLASS_KEYS`` of them."""
    found: dict[str, str] = {}
    for key, value in annotations.items():
        if key.startswith(CLASS_USAGE_KEY_PREFIX) and isinstance(value, str):
            found[key] = value
            if len(found) >= MAX_CLASS_KEYS:
                break
    return found


class ClassTables:
    """The tables of the classes of the policy in force (``table.Followers``)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        reserve: Reserve | None = None,
        implementation: str | None = None,
        known: Callable[[], Mapping[str, KnownNode]] | None = None,
    ) -> None:
        self._clock = clock
        # The annotations and labels of every node known (the node cache's), for a
        # policy that brings classes in: the tables are told of no node while no class
        # follows.
        self._known = known
        self._reserve = reserve
        self._implementation = implementation
        self._classes: PodClasses | None = None
        self.tables: dict[str, NodeTable] = {}
        # Per class with limits on its own usage, its table without them
        # (``PodClasses.yielding``): where its own table passes no node of a request.
        self.yielding: dict[str, NodeTable] = {}
        self._every: tuple[NodeTable, ...] = ()  # both, told every change
        self.active = False
        # Per node, the annotations the class tables read: the main table's own keys
        # and the class usages (the main table keeps only its own); and its labels,
        # which put it in a node pool.
        self._annotations: dict[str, Mapping[str, str]] = {}
        self._labels: dict[str, Mapping[str, str]] = {}
        self._policy_keys: tuple[str, ...] = (HOT_VALUE_KEY,)

    def table_for(self, pod: Mapping[str, Any]) -> NodeTable | None:
        classes = self._classes
        if classes is None:
            return None
        name = pod_class(pod, classes)
        return None if name is None else self.tables.get(name)

    def yielding_for(self, pod: Mapping[str, Any]) -> NodeTable | None:
        classes = self._classes
        if classes is None or not self.yielding:
            return None
        name = pod_class(pod, classes)
        return None if name is None else self.yielding.get(name)

    def set_policy(self, policy: Policy) -> None:
        """Build each class's table under ``policy`` from the nodes known, then adopt
        them; with no classes, none."""
        classes = pod_classes(policy)
        if classes and not self.active and self._known is not None:
            self._policy_keys = (*policy.metrics, HOT_VALUE_KEY)
            known = self._known()
            self._annotations = {name: self._kept(a) for name, (a, _) in known.items()}
            self._labels = {name: labels for name, (_, labels) in known.items()}
        elif not classes:
            self._annotations = {}
            self._labels = {}
        tables = {name: self._table(p, classes) for name, p in classes.policies.items()}
        yielding = {name: self._table(p, classes) for name, p in classes.yielding.items()}
        self._classes = classes if classes else None
        self._policy_keys = (*policy.metrics, HOT_VALUE_KEY)
        self.tables = tables
        self.yielding = yielding
        self._every = (*tables.values(), *yielding.values())
        self.active = bool(tables)

    def _table(self, class_policy: Policy, classes: PodClasses) -> NodeTable:
        index = new_verdict_index(self._implementation)
        # A node passes a class's pod only where the pod's estimate fits its room too
        # (``short_of_room``); the estimate is known with the reserve alone.
        every = self._reserve is not None
        table = NodeTable(class_policy, self._clock, index, self._reserve, None, every)
        for node, kept in self._annotations.items():
            table.upsert(node, class_annotations(kept, classes), self._labels.get(node))
        return table

    def _kept(self, annotations: Mapping[str, str]) -> dict[str, str]:
        kept = class_usage_annotations(annotations)
        kept.update({k: v for k in self._policy_keys if (v := annotations.get(k)) is not None})
        return kept

    def upsert(
        self, name: str, annotations: Mapping[str, str], labels: Mapping[str, str] | None
    ) -> None:
        kept = self._annotations[name] = self._kept(annotations)
        if labels is not None:
            self._labels[name] = labels
        if self._classes is None:
            return
        translated = class_annotations(kept, self._classes)
        for table in self._every:
            table.upsert(name, translated, labels)

    def recompute(self, name: str) -> None:
        for table in self._every:
            table.recompute(name)

    def remove(self, name: str) -> None:
        self._annotations.pop(name, None)
        self._labels.pop(name, None)
        for table in self._every:
            table.remove(name)

    def add_reserved(self, name: str, cpu: float, memory: float, expires_at_s: float) -> None:
        for table in self._every:
            table.add_reserved(name, cpu, memory, expires_at_s)

    def refresh(self, now_s: float) -> None:
        for table in self._every:
            table.refresh(now_s)

    def expire_estimates(self, now_s: float) -> None:
        for table in self._every:
            table.expire_estimates(now_s)


# The filter's reason for a node whose usage passes a class's limits, or its node
# pool's, but not with the pod's own estimated usage added (``short_of_room``).
NO_ROOM_REASON = "no room for the pod's estimated usage under its class's limits"
NO_POOL_ROOM_REASON = "no room for the pod's estimated usage under its node pool's limits"


def short_of_room(table: NodeTable, names: list[str], cpu: float, memory: float) -> dict[str, str]:
    """Of ``names``, the nodes ``table`` passes whose room under the limits cannot take
    a pod estimated at ``cpu`` cores and ``memory`` bytes (``app.load.has_room``), each
    with its filter reason: every node of a class's table, and in any table a node in a
    node pool (a pool is loadaware's own: a node in none is judged by its usage before
    the pod, as crane judges it). A node unknown, or without a limit, has room."""
    short: dict[str, str] = {}
    every = table.estimate_every_node
    for name in names:
        entry = table.get(name)
        if entry is None or entry.reason is not None:
            continue
        pooled = entry.pool is not None and entry.pool.pool is not None
        if not (every or pooled):
            continue
        cpu_room, memory_room = entry.rooms()
        if cpu > cpu_room or memory > memory_room:
            short[name] = NO_ROOM_REASON if every else NO_POOL_ROOM_REASON
    return short


def without_short(
    body: bytes, rejected: Mapping[str, int], short: Mapping[str, str]
) -> tuple[bytes, dict[str, int]]:
    """A filter answer (``body``, and how many each reason rejected) with the ``short``
    nodes moved from the passing names to the failed ones."""
    answer = orjson.loads(body)
    answer["NodeNames"] = [n for n in answer["NodeNames"] if n not in short]
    answer["FailedAndUnresolvableNodes"].update(short)
    counted = Counter(rejected)
    counted.update(short.values())
    return orjson.dumps(answer), dict(counted)


def reasons_in(table: NodeTable, names: list[str], short: Mapping[str, str]) -> list[str | None]:
    """Each name's filter reason in ``table``, or its ``short`` reason where it passes."""
    get = table.index.get
    reasons = [None if (v := get(name)) is None else v[1] for name in names]
    if not short:
        return reasons
    return [
        short.get(name) if reason is None else reason
        for name, reason in zip(names, reasons, strict=True)
    ]


def rules_without_estimate(policy: Policy, has_estimate: bool) -> str | None:
    """What an extender without the burst estimate (no pod cache: ``--no-node-cache`` or
    ``--no-pod-cache``) judges differently under ``policy``, for the log; None when
    nothing: no classes and no node pools, or the estimate is known. Each class's and
    each pool's limits still hold on the nodes' usage (the class usages included); only
    the pod's own estimate is not added (a node passes as crane judges it)."""
    if has_estimate or not policy.spec.estimation.enabled:
        return None
    named = [
        kind
        for kind, present in (
            ("classes", bool(pod_classes(policy))),
            ("node pools", bool(policy.spec.node_pools)),
        )
        if present
    ]
    if not named:
        return None
    return (
        f"the policy has {' and '.join(named)}, but without the pod cache (--no-node-cache "
        "or --no-pod-cache) no pod's estimate is known: their limits are judged on each "
        "node's usage before the pod, not with it (docs/tuning.md, 'Classes of pods'); "
        "run with the node and pod caches for the rule with the pod"
    )
