"""The extender verbs on kube-scheduler's wire format (k8s.io/kube-scheduler/extender/v1).

Requests are ``ExtenderArgs``: ``{"Pod": {...}, "Nodes": {"items": [...]} | null,
"NodeNames": [...] | null}`` with Go field names as keys. Only what the verdict needs
is read: the pod's owner kinds and, in full-nodes mode, each node's name and
annotations. Whole Node objects are never validated, and the ones that pass are
returned exactly as they arrived.
"""

from __future__ import annotations

import time
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
    rejected_by_metric: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: Mapping[str, Any]
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
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BadRequest('"NodeNames" must be a list of node names')
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

    def __init__(self, table: NodeTable, clock: Callable[[], float] = time.time) -> None:
        self._table = table
        self._clock = clock

    def _entries_from_request(self, nodes: list[dict[str, Any]]) -> list[NodeEntry]:
        upsert = self._table.upsert
        return [upsert(node["metadata"]["name"], _annotations(node)) for node in nodes]

    def filter(self, args: ExtenderArgs, outcome: Outcome) -> bytes:
        now_s = self._clock()
        exempt = is_exempt_from_filter(args.pod)
        failed: dict[str, str] = {}
        rejected = outcome.rejected_by_metric
        if args.node_names is not None:
            passed_names: list[str] = []
            outcome.nodes = len(args.node_names)
            for name in args.node_names:
                entry = self._table.lookup(name, now_s)
                if entry is None:
                    outcome.unknown_nodes += 1
                    passed_names.append(name)
                elif entry.reason is None or exempt:
                    passed_names.append(name)
                else:
                    failed[name] = entry.reason
                    metric = entry.load.overloads[0].metric
                    rejected[metric] = rejected.get(metric, 0) + 1
            return orjson.dumps(
                {
                    "NodeNames": passed_names,
                    "FailedNodes": {},
                    # Preemption cannot lower measured load within this cycle, so these
                    # nodes are marked unresolvable and no victims are killed for nothing.
                    "FailedAndUnresolvableNodes": failed,
                    "Error": "",
                }
            )
        assert args.nodes is not None
        outcome.nodes = len(args.nodes)
        passed_nodes = []
        entries = self._entries_from_request(args.nodes)
        for node, entry in zip(args.nodes, entries, strict=True):
            if entry.reason is None or exempt:
                passed_nodes.append(node)
            else:
                failed[entry.name] = entry.reason
                metric = entry.load.overloads[0].metric
                rejected[metric] = rejected.get(metric, 0) + 1
        return orjson.dumps(
            {
                "Nodes": {"metadata": {}, "items": passed_nodes},
                "NodeNames": None,
                "FailedNodes": {},
                "FailedAndUnresolvableNodes": failed,
                "Error": "",
            }
        )

    def prioritize(self, args: ExtenderArgs, outcome: Outcome) -> bytes:
        now_s = self._clock()
        pieces: list[bytes] = []
        if args.node_names is not None:
            outcome.nodes = len(args.node_names)
            for name in args.node_names:
                entry = self._table.lookup(name, now_s)
                if entry is None:
                    outcome.unknown_nodes += 1
                    pieces.append(self._table.unknown_score_json(name))
                else:
                    pieces.append(entry.score_json)
        else:
            assert args.nodes is not None
            outcome.nodes = len(args.nodes)
            pieces = [e.score_json for e in self._entries_from_request(args.nodes)]
        return b"[" + b",".join(pieces) + b"]"
