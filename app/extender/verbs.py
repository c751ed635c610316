"""The extender verbs on kube-scheduler's wire format (k8s.io/kube-scheduler/extender/v1).

Requests are ``ExtenderArgs``: ``{"Pod": {...}, "Nodes": {"items": [...]} | null,
"NodeNames": [...] | null}`` with Go field names as keys. Only what the verdict needs
is read: the pod's owner kinds and, in full-nodes mode, each node's name and
annotations. Whole Node objects are never validated, and the ones that pass are
returned exactly as they arrived.

A node-cache body as kube-scheduler writes it is not parsed whole: the native verdict
index reads the NodeNames array's text itself (making a str of each of 500 names took
most of the parse, as long as the floor's whole request), and of the Pod only the three
fields the filter's exemption reads are parsed (``pod_fields`` checks the rest is JSON);
the whole Pod is parsed only where something reads more of it (a class of pods, the
estimate, a reservation after the answer). Any body in another form, any whose names
are not plain ASCII and any Pod outside ``pod_fields``' subset of JSON is parsed whole,
so both ways accept, refuse and answer exactly the same bodies.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson

from app.extender.classes import reasons_in, short_of_room, without_short
from app.extender.index import pod_fields, split_args
from app.extender.request_pod import request_pod_demand
from app.extender.table import NodeTable
from app.extender.verdicts import NodeEntry
from app.load import estimate_scheduled, is_exempt_from_filter, may_rise
from app.objects import Demand, Resources, requests_and_limits
from app.policy import EstimationPolicy, Policy

log = logging.getLogger(__name__)
_MAX_POD_SHAPES = 1024  # distinct pod shapes whose estimates are kept


class BadRequest(ValueError):
    """The request body is not valid ExtenderArgs; the message says what is wrong."""


@dataclass(slots=True)
class Outcome:
    """What a verb did, for metrics and logs (kept out of the response path)."""

    nodes: int = 0
    unknown_nodes: int = 0
    rejected: Mapping[str, int] = field(default_factory=dict)  # reason → nodes it rejected
    pod: dict[str, Any] | None = None  # the request's Pod, for reservations
    names: list[str] | None = None  # the request's node names, in order
    body: bytes = b""  # or, where they were read as text, the body
    names_at: tuple[int, int] | None = None  # and where their JSON array lies in it
    best_node: str | None = None  # prioritize: the preferred node, alone on top of the answer
    pod_at: tuple[int, int] | None = None  # where the Pod lies in ``body``, not parsed yet

    def request_pod(self) -> dict[str, Any] | None:
        """The request's whole Pod (none before a verb has run), parsed here where the
        verb read only its exemption's fields: after the answer, by a reservation."""
        if self.pod_at is not None:
            self.pod = orjson.loads(memoryview(self.body)[slice(*self.pod_at)])
            self.pod_at = None
        return self.pod

    def node_names(self) -> list[str]:
        """The request's node names, in order (none before a verb has run)."""
        if self.names is None and self.names_at is not None:
            self.names = orjson.loads(memoryview(self.body)[slice(*self.names_at)])
        return self.names or []


class ExtenderArgs(NamedTuple):  # a NamedTuple: a frozen dataclass took 1.2 µs to make
    # The Pod; or, where ``pod_at`` is set, only the fields the filter's exemption reads
    # (``exemption_fields``), the whole Pod lying unparsed at ``pod_at`` in ``body``.
    pod: dict[str, Any]
    node_names: list[str] | None  # nodeCacheCapable mode
    nodes: list[dict[str, Any]] | None  # full-nodes mode: the raw Node objects
    # nodeCacheCapable mode, names unparsed: where the NodeNames array lies in ``body``
    names_at: tuple[int, int] | None = None
    body: bytes = b""
    pod_at: tuple[int, int] | None = None


_new_args = tuple.__new__


def whole_pod(args: ExtenderArgs) -> dict[str, Any]:
    """The request's whole Pod: parsed here where ``parse_args`` parsed only its fields."""
    if args.pod_at is None:
        return args.pod
    pod: dict[str, Any] = orjson.loads(memoryview(args.body)[slice(*args.pod_at)])
    return pod


def exemption_fields(body: bytes, spans: tuple[int, int, int, int, int, int]) -> dict[str, Any]:
    """The Pod as ``is_exempt_from_filter`` reads it: metadata.ownerReferences,
    spec.priority and spec.priorityClassName, each where ``pod_fields`` found it (-1:
    not there). tests/extender/test_pod_fields.py holds the rule to reading no more."""
    view = memoryview(body)
    owners_start, owners_end, priority_start, priority_end, class_start, class_end = spans
    metadata: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    if owners_start >= 0:
        metadata["ownerReferences"] = orjson.loads(view[owners_start:owners_end])
    if priority_start >= 0:
        spec["priority"] = orjson.loads(view[priority_start:priority_end])
    if class_start >= 0:
        spec["priorityClassName"] = orjson.loads(view[class_start:class_end])
    return {"metadata": metadata, "spec": spec}


def parse_args(body: bytes) -> ExtenderArgs:
    """The request, from a body as kube-scheduler writes it in node-cache mode with its
    NodeNames left as text for the native index (``split_args``), else parsed whole."""
    spans = (
        split_args(body) if split_args is not None and type(body) is bytes else None
    )
    if spans is not None:
        pod_start, pod_end, names_start, names_end = spans
        fields = pod_fields(body, pod_start, pod_end)
        if fields is not None:  # JSON, as orjson would find it: its three fields alone
            pod = exemption_fields(body, fields)
            names_at, pod_at = (names_start, names_end), (pod_start, pod_end)
            return _new_args(ExtenderArgs, (pod, None, None, names_at, body, pod_at))
        try:
            pod = orjson.loads(memoryview(body)[pod_start:pod_end])
        except orjson.JSONDecodeError:
            pass  # parsed whole below, to say where the body is wrong
        else:
            # Made as the tuple it is: the NamedTuple's own __new__ is Python, 0.3 µs more.
            return _new_args(ExtenderArgs, (pod, None, None, (names_start, names_end), body, None))
    return parse_whole(body)


def parse_whole(body: bytes) -> ExtenderArgs:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise BadRequest(f"body is not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise BadRequest("body must be a JSON object (ExtenderArgs)")
    pod = document.get("Pod")
    if not isinstance(pod, dict):
        raise BadRequest('"Pod" must be a Pod object')
    names = document.get("NodeNames")
    nodes_list = document.get("Nodes")
    if names is not None:
        if not isinstance(names, list):
            raise BadRequest('"NodeNames" must be a list of node names')
        # Each name's type is checked by the verdict index, in the same pass that
        # answers: a pass of its own costs the scheduling cycle time per name.
        return ExtenderArgs(pod, names, None)
    if nodes_list is None:
        raise BadRequest('request has neither "NodeNames" nor "Nodes"')
    items = nodes_list.get("items") if isinstance(nodes_list, dict) else None
    if not isinstance(items, list):
        raise BadRequest('"Nodes" must be a NodeList with an "items" list')
    for index, node in enumerate(items):
        metadata = node.get("metadata") if isinstance(node, dict) else None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not isinstance(name, str):
            raise BadRequest(f'"Nodes.items[{index}]" has no metadata.name')
        annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
        if annotations is not None and not isinstance(annotations, dict):
            raise BadRequest(f'"Nodes.items[{index}].metadata.annotations" must be an object')
    return ExtenderArgs(pod, None, items)


def _with_labels(
    nodes: list[dict[str, Any]], table: NodeTable
) -> Iterator[tuple[str, dict[str, Any], Mapping[str, str] | None]]:
    """Each node's name, the node, and its labels for its pool: None where they are
    those the table holds already (most requests: nothing to read again)."""
    get = table.get
    for node in nodes:
        metadata = node["metadata"]
        name = metadata["name"]
        known = get(name)
        same = known is not None and metadata.get("labels", {}) == known.labels
        yield name, node, None if same else _labels(node)


def _labels(node: dict[str, Any]) -> Mapping[str, str]:
    """A full Node's labels, for its node pool (app/policy/pools.py): the string ones."""
    labels: dict[str, Any] | None = node["metadata"].get("labels")
    if not labels or not isinstance(labels, dict):
        return {}
    return {
        k: v
        for k, v in labels.items()
        if isinstance(k, str) and isinstance(v, str) and len(v) <= MAX_ANNOTATION_VALUE
    }


def _annotations(node: dict[str, Any]) -> Mapping[str, str]:
    annotations: dict[str, Any] | None = node["metadata"].get("annotations")
    if not annotations:
        return {}
    # Non-string and overlong values are garbage that the load model would read as
    # unreadable anyway; dropping them here keeps them out of the table.
    return {
        k: v
        for k, v in annotations.items()
        if isinstance(v, str) and len(v) <= MAX_ANNOTATION_VALUE
    }


class RequestNodes(Enum):
    """What full Node objects in a request (``nodeCacheCapable: false``) may do."""

    STORE = "store"
    """Full-nodes mode (no node cache): the requests are the only source of annotations,
    so they update the table, bounded to ``MAX_NODES`` names and forgotten after an hour
    unseen."""
    BY_NAME = "by-name"
    """Node cache on: the table holds the API server's data and nothing else. Each node
    in a request is judged by the table's entry for its name, as a NodeNames request
    would be, and the request's annotations are ignored (an unknown name passes and
    scores as a node without data)."""
    APART = "apart"
    """The demo: the request's nodes are judged in a table of their own, then dropped."""


# Kubernetes supports 5,000 nodes per cluster: no request from kube-scheduler brings more
# than this, and full-nodes mode keeps no more names than this.
MAX_NODES = 15_000
# Annotation values loadaware reads are short ("0.63012,2023-10-17T15:04:32Z"); a longer
# one is garbage, read as no data and not kept.
MAX_ANNOTATION_VALUE = 64


class Verbs:
    """filter and prioritize over a NodeTable; each returns the response body bytes."""

    def __init__(
        self,
        table: NodeTable,
        clock: Callable[[], float] = time.time,
        *,
        request_nodes: RequestNodes = RequestNodes.STORE,
        workloads: Callable[[], Mapping[str, Resources]] | None = None,
        workload_of_pod: Callable[[str], str | None] | None = None,
        raise_left: Callable[[str], bool] | None = None,
    ) -> None:
        self._table = table
        self._clock = clock
        self._request_nodes = request_nodes
        # by pod shape, and (shape, workload) for a pod whose workload's usage is published
        self._estimates: dict[Demand | tuple[Demand, str], tuple[float, float]] = {}
        self._estimates_policy: Policy | None = None
        # What each workload's pods are observed to use (app.extender.workload_usage),
        # and the workload of a pod the pod cache holds, by namespace/name.
        self.workloads = workloads or _no_workloads
        self.workload_of_pod = workload_of_pod or _no_workload
        # Whether a pod of the workload placed now would take one of its raises (the
        # reserve's bounds, app.load.estimate "Bounds"); none without a reserve.
        self.raise_left = raise_left or _no_raise
        self._estimates_workloads: Mapping[str, Resources] = _NO_WORKLOADS
        self._rising: dict[Demand, bool] = {}  # whether the shape's estimate can be raised

    def _entries_from_request(
        self, nodes: list[dict[str, Any]]
    ) -> tuple[NodeTable, list[NodeEntry]]:
        """The table that now holds the request's nodes, and their entries."""
        if len(nodes) > MAX_NODES:
            raise BadRequest(f'"Nodes.items" holds {len(nodes)} nodes; at most {MAX_NODES}')
        table = self._table
        if self._request_nodes is RequestNodes.APART:
            table = NodeTable(table.policy, self._clock)
        table.refresh(self._clock())
        upsert = table.upsert
        if table.policy.spec.node_pools:  # the labels count only for a node's pool
            entries = [upsert(name, _annotations(node), labels) for name, node, labels in
                       _with_labels(nodes, table)]  # fmt: skip
        else:
            entries = [upsert(node["metadata"]["name"], _annotations(node)) for node in nodes]
        excess = len(table) - MAX_NODES
        if excess > 0:
            forgotten = table.forget_least_recently_seen(excess)
            log.warning(
                "full-nodes mode keeps at most %d nodes: forgot the %d seen least recently",
                MAX_NODES,
                forgotten,
            )
        return table, entries

    def filter(self, args: ExtenderArgs, outcome: Outcome) -> bytes:
        args = _reading(args, outcome, self._table.has_classes)  # a class reads the Pod
        exempt = is_exempt_from_filter(args.pod)
        if args.names_at is not None:
            self._table.refresh(self._clock())
            judged = self._table.table_for(args.pod)  # its class's, if the policy has classes
            # A class's pod, or one offered nodes of a node pool, is judged with its own
            # estimate added: on the parsed names.
            if not judged.estimate_filters or exempt:
                answered = judged.index.filter_text(args.body, *args.names_at, exempt)
                if answered is not None and _yielding(self._table, args.pod, answered[1:]) is None:
                    body, outcome.rejected, outcome.nodes = answered
                    outcome.names_at = args.names_at
                    return body
            # Names out of the plain form, or no native index: the body as parsed whole
            # decides all (a key written twice reads as its last, not as split_args' first).
            return self.filter(parse_whole(args.body), outcome)
        if args.node_names is None:
            assert args.nodes is not None
            return self._filter_nodes(args.nodes, exempt, outcome, args.pod)
        outcome.nodes = len(args.node_names)
        outcome.names = args.node_names
        self._table.refresh(self._clock())
        table = self._table.table_for(args.pod)  # its class's, if the policy has classes
        names, pod = args.node_names, args.pod
        short = self._short_of_room
        body, outcome.rejected = _filter_names(table, names, pod, exempt, short)
        yielding = None if exempt else _yielding(self._table, pod, (outcome.rejected, len(names)))
        if yielding is not None:  # no node passes: without the class's own-usage limits
            body, outcome.rejected = _filter_names(yielding, names, pod, exempt, short)
        return body

    def _short_of_room(
        self, table: NodeTable, names: list[str], pod: dict[str, Any]
    ) -> dict[str, str]:
        """The nodes ``table`` passes that the pod's estimate does not fit, a class's or
        a node pool's (``classes.short_of_room``); none without an estimate."""
        try:
            cpu, memory = self._pod_estimate(pod, self._table)
        except (TypeError, ValueError):
            return {}  # an unreadable pod is estimated at nothing, as prioritize reads it
        if cpu <= 0 and memory <= 0:
            return {}
        return short_of_room(table, names, cpu, memory)

    def _reasons(
        self, nodes: list[dict[str, Any]], pod: dict[str, Any]
    ) -> tuple[list[str], list[str | None]]:
        """The request's node names and each one's filter reason (None: it passes) for
        ``pod`` (its class's reasons, if the policy has classes)."""
        if self._request_nodes is RequestNodes.BY_NAME:
            if len(nodes) > MAX_NODES:
                raise BadRequest(f'"Nodes.items" holds {len(nodes)} nodes; at most {MAX_NODES}')
            self._table.refresh(self._clock())
            table = self._table
            judged = table.table_for(pod)
            names = [node["metadata"]["name"] for node in nodes]
        else:
            table, entries = self._entries_from_request(nodes)
            names = [entry.name for entry in entries]
            judged = table.table_for(pod)
            if judged is table and not table.estimate_filters:
                return names, [entry.reason for entry in entries]
        short = self._short_of_room(judged, names, pod) if judged.estimate_filters else {}
        reasons = reasons_in(judged, names, short)
        yielding = _yielding(table, pod, (Counter(filter(None, reasons)), len(names)))
        if yielding is not None:  # no node passes: see ``filter``
            reasons = reasons_in(yielding, names, self._short_of_room(yielding, names, pod))
        return names, reasons

    def _filter_nodes(
        self, nodes: list[dict[str, Any]], exempt: bool, outcome: Outcome, pod: dict[str, Any]
    ) -> bytes:
        outcome.nodes = len(nodes)
        names, reasons = self._reasons(nodes, pod)
        outcome.names = names
        failed: dict[str, str] = {}
        passed_nodes = nodes
        if not exempt and any(reasons):
            passed_nodes = []
            for node, name, reason in zip(nodes, names, reasons, strict=True):
                if reason is None:
                    passed_nodes.append(node)
                else:
                    failed[name] = reason
            outcome.rejected = Counter(failed.values())
        return orjson.dumps(
            {
                "Nodes": {"metadata": {}, "items": passed_nodes},
                "NodeNames": None,
                "FailedNodes": {},
                # Preemption cannot lower measured load within this cycle, so these
                # nodes are marked unresolvable and no victims are killed for nothing.
                "FailedAndUnresolvableNodes": failed,
                "Error": "",
            }
        )

    def prioritize(self, args: ExtenderArgs, outcome: Outcome) -> bytes:
        table = self._table
        args = _reading(args, outcome, table.has_classes or _estimates_pods(table))
        if args.names_at is not None:
            table.refresh(self._clock())
            try:
                cpu, memory = self._pod_estimate(args.pod, table)
            except (TypeError, ValueError) as error:
                raise BadRequest(f'"NodeNames" must be a list of node names: {error}') from None
            judged = table.table_for(args.pod)  # its class's, if the policy has classes
            answered = judged.index.prioritize_text(args.body, *args.names_at, cpu, memory)
            if answered is not None:
                body, outcome.unknown_nodes, outcome.best_node, outcome.nodes = answered
                outcome.names_at = args.names_at
                return body
            # As in filter: the body as parsed whole decides all.
            return self.prioritize(parse_whole(args.body), outcome)
        if args.node_names is None:
            assert args.nodes is not None
            outcome.nodes = len(args.nodes)
            if self._request_nodes is RequestNodes.BY_NAME:
                names, _ = self._reasons(args.nodes, args.pod)
            else:
                table, entries = self._entries_from_request(args.nodes)
                names = [entry.name for entry in entries]
        else:
            outcome.nodes = len(args.node_names)
            self._table.refresh(self._clock())
            names = args.node_names
        outcome.names = names
        judged = table.table_for(args.pod)  # its class's, if the policy has classes
        try:
            # Unknown names (node cache still syncing, or no node cache at all) score as
            # nodes without data.
            cpu, memory = self._pod_estimate(args.pod, table)
            body, outcome.unknown_nodes, best = judged.index.prioritize(names, cpu, memory)
        except (TypeError, ValueError) as error:
            raise BadRequest(f'"NodeNames" must be a list of node names: {error}') from None
        if best >= 0:
            outcome.best_node = names[best]
        return body

    def _pod_estimate(self, pod: dict[str, Any], table: NodeTable) -> tuple[float, float]:
        """The pod's estimated usage (cores, bytes), which the preferred node must have
        room for (app/load/prioritize.py); 0 without estimation or a readable pod. Pods come
        in few shapes: each shape's estimate is kept until the policy changes."""
        if not _estimates_pods(table):
            return 0.0, 0.0
        policy = table.policy
        settings = policy.spec.estimation
        try:
            demand = request_pod_demand(pod)
        except ValueError:
            return 0.0, 0.0  # the reservation refuses this pod too (service.py)
        if policy is not self._estimates_policy:
            self._estimates_policy = policy
            self._estimates.clear()
            self._rising.clear()
        found = self._estimates.get(demand)
        if found is None:
            found = self._estimate(demand, settings, None, demand)
        workloads = self.workloads()
        # Only a shape that can be raised (a resource without a limit, with the default
        # factors) looks its workload up, and only while some usage is published.
        if not workloads or not self._may_rise(demand, settings):
            return found
        if workloads is not self._estimates_workloads:  # a new document: estimate anew
            self._estimates_workloads = workloads
            self._estimates = {demand: found}
        workload = self.workload_of_pod(_pod_key(pod))
        observed = workloads.get(workload) if workload is not None else None
        if observed is None or workload is None or not self.raise_left(workload):
            return found
        key = (demand, workload)
        raised = self._estimates.get(key)
        return raised if raised is not None else self._estimate(demand, settings, observed, key)

    def _may_rise(self, demand: Demand, settings: EstimationPolicy) -> bool:
        rising = self._rising.get(demand)
        if rising is None:
            rising = self._rising[demand] = may_rise(*requests_and_limits(demand), settings)
        return rising

    def _estimate(
        self,
        demand: Demand,
        settings: EstimationPolicy,
        observed: Resources | None,
        key: Demand | tuple[Demand, str],
    ) -> tuple[float, float]:
        usage = estimate_scheduled(*requests_and_limits(demand), settings, observed)
        estimate = (usage.cpu_cores, usage.memory_bytes)
        if len(self._estimates) >= _MAX_POD_SHAPES:
            self._estimates.clear()  # a flood of shapes costs a recompute, never memory
            self._rising.clear()
        self._estimates[key] = estimate
        return estimate


def _reading(args: ExtenderArgs, outcome: Outcome, whole: bool) -> ExtenderArgs:
    """``args`` with the whole Pod where ``whole`` (something reads more of it than the
    exemption's fields), and the Pod noted in ``outcome``: left unparsed, for a
    reservation to parse after the answer, where the verb reads only those fields."""
    if args.pod_at is not None and whole:
        args = args._replace(pod=whole_pod(args), pod_at=None)
    outcome.pod = None if args.pod_at is not None else args.pod
    outcome.pod_at, outcome.body = args.pod_at, args.body
    return args


def _estimates_pods(table: NodeTable) -> bool:
    """Whether a request's Pod is estimated (``Verbs._pod_estimate``): only then is more
    of it read than the filter's exemption fields."""
    return table.policy.spec.estimation.enabled and table.judges_room


def _no_workloads() -> Mapping[str, Resources]:
    return _NO_WORKLOADS


def _no_workload(_pod: str) -> str | None:
    return None


def _no_raise(_workload: str) -> bool:
    return False


def _pod_key(pod: dict[str, Any]) -> str:
    """namespace/name of a request's Pod ("" when unreadable: no workload)."""
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict):
        return ""
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"


_NO_WORKLOADS: Mapping[str, Resources] = MappingProxyType({})


def _filter_names(
    table: NodeTable,
    names: list[str],
    pod: dict[str, Any],
    exempt: bool,
    short_of_room: Callable[[NodeTable, list[str], dict[str, Any]], dict[str, str]],
) -> tuple[bytes, dict[str, int]]:
    """``table``'s filter answer for ``names`` (and how many each reason rejected), with
    the nodes short of room for the pod's estimate failed where the table judges it."""
    try:
        body, rejected = table.index.filter(names, exempt)
    except (TypeError, ValueError) as error:
        raise BadRequest(f'"NodeNames" must be a list of node names: {error}') from None
    if table.estimate_filters and not exempt:  # a class's, a pool's: the estimate too
        short = short_of_room(table, names, pod)
        if short:
            body, rejected = without_short(body, rejected, short)
    return body, rejected


def _yielding(
    table: NodeTable, pod: dict[str, Any], answered: tuple[Mapping[Any, int], int]
) -> NodeTable | None:
    """Where a filter answer (how many each reason rejected, of how many nodes) passed
    none of its nodes, the table the pod is judged by again: its class's without the
    limits on its own usage (``NodeTable.yielding_for``); None: some node passed, or
    the pod's class has no such limit (or no class)."""
    rejected, nodes = answered
    if nodes <= 0 or sum(rejected.values()) < nodes:
        return None
    return table.yielding_for(pod)
