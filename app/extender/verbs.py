"""The extender verbs on kube-scheduler's wire format (k8s.io/kube-scheduler/extender/v1).

Requests are ``ExtenderArgs``: ``{"Pod": {...}, "Nodes": {"items": [...]} | null,
"NodeNames": [...] | null}`` with Go field names as keys. Only what the verdict needs
is read: the pod's owner kinds and, in full-nodes mode, each node's name and
annotations. Whole Node objects are never validated, and the ones that pass are
returned exactly as they arrived.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.extender.table import NodeEntry, NodeTable
from app.load.model import is_exempt_from_filter


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
    best_node: str | None = None  # prioritize: the one passing node that clearly scores best


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: dict[str, Any]
    node_names: list[str] | None  # nodeCacheCapable mode
    nodes: list[dict[str, Any]] | None  # full-nodes mode: the raw Node objects


def parse_args(body: bytes) -> ExtenderArgs:
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


def _annotations(node: dict[str, Any]) -> Mapping[str, str]:
    annotations: dict[str, Any] | None = node["metadata"].get("annotations")
    if not annotations:
        return {}
    # Non-string values are garbage that the load model would read as unreadable anyway.
    return {k: v for k, v in annotations.items() if isinstance(v, str)}


class Verbs:
    """filter and prioritize over a NodeTable; each returns the response body bytes."""

    def __init__(
        self,
        table: NodeTable,
        clock: Callable[[], float] = time.time,
        *,
        remember_request_nodes: bool = True,
    ) -> None:
        """``remember_request_nodes=False`` judges full Node objects without adding them
        to ``table`` (the demo, whose cluster stays as built)."""
        self._table = table
        self._clock = clock
        self._remember_request_nodes = remember_request_nodes

    def _entries_from_request(
        self, nodes: list[dict[str, Any]]
    ) -> tuple[NodeTable, list[NodeEntry]]:
        """The table that now holds the request's nodes, and their entries."""
        table = self._table
        if not self._remember_request_nodes:
            table = NodeTable(table.policy, self._clock)
        table.refresh(self._clock())
        upsert = table.upsert
        return table, [upsert(node["metadata"]["name"], _annotations(node)) for node in nodes]

    def filter(self, args: ExtenderArgs, outcome: Outcome) -> bytes:
        outcome.pod = args.pod
        exempt = is_exempt_from_filter(args.pod)
        if args.node_names is None:
            assert args.nodes is not None
            return self._filter_nodes(args.nodes, exempt, outcome)
        outcome.nodes = len(args.node_names)
        outcome.names = args.node_names
        self._table.refresh(self._clock())
        try:
            body, outcome.rejected = self._table.index.filter(args.node_names, exempt)
        except (TypeError, ValueError) as error:
            raise BadRequest(f'"NodeNames" must be a list of node names: {error}') from None
        return body

    def _filter_nodes(self, nodes: list[dict[str, Any]], exempt: bool, outcome: Outcome) -> bytes:
        outcome.nodes = len(nodes)
        _, entries = self._entries_from_request(nodes)
        outcome.names = [entry.name for entry in entries]
        failed: dict[str, str] = {}
        passed_nodes = nodes
        if not exempt and any(entry.reason for entry in entries):
            passed_nodes = []
            for node, entry in zip(nodes, entries, strict=True):
                if entry.reason is None:
                    passed_nodes.append(node)
                else:
                    failed[entry.name] = entry.reason
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
        outcome.pod = args.pod
        table = self._table
        if args.node_names is None:
            assert args.nodes is not None
            outcome.nodes = len(args.nodes)
            table, entries = self._entries_from_request(args.nodes)
            names = [entry.name for entry in entries]
        else:
            outcome.nodes = len(args.node_names)
            self._table.refresh(self._clock())
            names = args.node_names
        outcome.names = names
        try:
            # Unknown names (node cache still syncing, or no node cache at all) score as
            # nodes without data.
            body, outcome.unknown_nodes, best = table.index.prioritize(names)
        except (TypeError, ValueError) as error:
            raise BadRequest(f'"NodeNames" must be a list of node names: {error}') from None
        if best >= 0:
            outcome.best_node = names[best]
        return body
