"""The captured cluster as a scenario document (``app/simulate/scenario.py``'s schema).

Nodes are grouped by shape (allocatable, labels but the node's own, taints), each group
naming its nodes. Each workload with usage in the range starts as it was: the pods
that reported at the first point, bound to the nodes they ran on (``placement``), with
their measured spread; its replica count follows kube-state-metrics where present, and
the number of its pods that reported otherwise. ``observed`` keeps the per-node usage
for the fidelity check. ``--anonymize`` replaces every name with a keyed hash
(``Names``), in the descheduler configuration too, and drops its free text.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from app.capture.catalog import INSTANCE_TYPE, CapturedNode, Catalog
from app.capture.history import NodeHistory, UsageHistory

SIMULATION_STEP = "30s"


def rounded(value: float) -> float:
    """Four significant digits: the file stays small, the error stays far below a point."""
    return float(f"{value:.4g}")


def exact(value: float) -> float | int:
    """Requests, limits and allocatable as they are: placement decides by them."""
    return int(value) if float(value).is_integer() else value


def _series(values: npt.NDArray[np.float64]) -> list[float]:
    return [rounded(float(v)) for v in values]


KEY_BYTES = 32  # a random key of a capture; a key file must hold at least this many


@dataclass(frozen=True)
class Names:
    """Every name that goes into the file; with ``anonymous``, a keyed hash of it.

    ``h`` + 16 hex digits of HMAC-SHA-256 under ``key``: a random key per capture
    unless one is given (``--anonymize-key FILE``, for the same names in every capture
    made with that file). Without the key no dictionary or search over likely names
    (IP addresses, zones, instance types, common workloads) finds one back, and the
    same name gives unrelated hashes in two captures (issue 42, point 4: the unkeyed
    SHA-256 prefix gave a node name with an IP in it back in half a second)."""

    anonymous: bool = False
    key: bytes = field(default_factory=lambda: secrets.token_bytes(KEY_BYTES), repr=False)

    def __call__(self, name: str) -> str:
        if not self.anonymous or not name:
            return name
        return "h" + hmac.new(self.key, name.encode(), hashlib.sha256).hexdigest()[:16]

    def labels(self, labels: Mapping[str, Any]) -> dict[str, str]:
        """A label map with keys and values mapped as the nodes' labels are."""
        return {self(str(k)): self(str(v)) for k, v in labels.items()}


_NOT_A_NAME = re.compile(r"[^a-z0-9-]+")


def _group_name(node: CapturedNode, index: int) -> str:
    kind = _NOT_A_NAME.sub("-", node.labels.get(INSTANCE_TYPE, "").lower()).strip("-")
    return f"{kind or 'shape'}-{index}"


def node_groups(nodes: list[CapturedNode], names: Names) -> list[dict[str, Any]]:
    shapes: dict[tuple[Any, ...], list[CapturedNode]] = {}
    for node in nodes:
        shapes.setdefault(node.shape, []).append(node)
    groups = []
    for index, members in enumerate(shapes.values()):
        first = members[0]
        group: dict[str, Any] = {
            "name": names(_group_name(first, index)),
            "count": len(members),
            "cpu": exact(first.cpu),
            "memory": exact(first.memory),
            "names": [names(n.name) for n in members],
        }
        labels = names.labels({
            k: v
            for k, v in first.labels.items()
            if k not in ("kubernetes.io/hostname",) and v != first.name
        })
        if labels:
            group["labels"] = labels
        if first.annotations:  # fixed keys and values (``hints_of``): nothing to hide
            group["annotations"] = dict(first.annotations)
        if first.taints:
            group["taints"] = [
                {k: (v if k == "effect" else names(v)) for k, v in t.items()} for t in first.taints
            ]
        groups.append(group)
    return groups


def _changes(counts: npt.NDArray[np.float64], step_s: float) -> list[dict[str, Any]]:
    found = []
    last = counts[0]
    for point in range(1, len(counts)):
        if counts[point] != last:
            last = counts[point]
            found.append({"at": f"{point * step_s:g}s", "replicas": int(last)})
    return found


def workloads(
    catalog: Catalog,
    usage: UsageHistory,
    replicas: Mapping[int, npt.NDArray[np.float64]],
    step_s: float,
    names: Names,
    class_labels: Callable[[Mapping[str, str]], dict[str, str]] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The workloads with usage in the range, and how many had none (left out).
    ``class_labels``: the template labels kept for the policy's class selectors
    (``app/capture/classes.py``; None: none)."""
    known_nodes = {node.name for node in catalog.nodes}
    starts: dict[int, list[tuple[str, Any]]] = {}
    for pod_key, start in sorted(usage.start_pods.items()):
        starts.setdefault(start.workload, []).append((pod_key, start))
    found = []
    silent = 0
    for index, key in enumerate(usage.keys):
        reporting = usage.reporting(index)
        if not reporting.any() and not usage.counts[1][index].any():
            silent += 1
            continue
        workload = catalog.workloads[key]
        pods = starts.get(index, [])
        placed = [p for _, p in pods if p.node in known_nodes]
        unplaced = [p for _, p in pods if p.node not in known_nodes]
        ordered = placed + unplaced
        counts = replicas.get(index)
        if counts is not None and np.isfinite(counts).any():
            counts = np.nan_to_num(_hold(counts), nan=float(len(ordered)))
        else:
            counts = reporting.astype(np.float64)
        at_start = max(len(placed), int(counts[0]))
        document: dict[str, Any] = {
            "name": names(key),
            "kind": workload.kind,
            "replicas": at_start,
            "requests": {"cpu": exact(workload.requests.cpu_cores),
                         "memory": exact(workload.requests.memory_bytes)},
            "limits": {"cpu": exact(workload.limits.cpu_cores),
                       "memory": exact(workload.limits.memory_bytes)},
            "priority": workload.priority,
            "usage": {
                "profile": "history",
                "interval": f"{step_s:g}s",
                "cpu": _series(usage.mean(index, 0)),
                "memory": _series(usage.mean(index, 1)),
                "spread": {
                    "cpu": [_factor(p.usage[0], p.mean[0]) for p in ordered],
                    "memory": [_factor(p.usage[1], p.mean[1]) for p in ordered],
                },
            },
        }  # fmt: skip
        if placed:
            document["placement"] = [names(p.node) for p in placed]
        history = _changes(counts, step_s)
        if history:
            document["replicaHistory"] = history
        kept_labels = class_labels(workload.labels) if class_labels is not None else None
        if kept_labels:
            document["labels"] = kept_labels
        if workload.annotations:  # fixed keys and values (``hints_of``): nothing to hide
            document["annotations"] = dict(sorted(workload.annotations.items()))
        if workload.pdb is not None:
            min_available, max_unavailable = workload.pdb
            document["pdb"] = (
                {"minAvailable": min_available}
                if min_available is not None
                else {"maxUnavailable": max_unavailable}
            )
        found.append(document)
    return found, silent


def _hold(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each gap holds the value before it (the first known value before that)."""
    known = np.flatnonzero(np.isfinite(values))
    if not len(known):
        return values
    where = np.searchsorted(known, np.arange(len(values)), side="right") - 1
    filled: npt.NDArray[np.float64] = values[known[np.maximum(where, 0)]]
    return filled


def _factor(total: float, mean_total: float) -> float:
    return rounded(total / mean_total) if mean_total > 0 else 1.0


def observed(nodes: NodeHistory, catalog: Catalog, step_s: float, names: Names) -> (
    dict[str, Any] | None
):
    recorded = []
    for node in catalog.nodes:
        series = nodes.recorded(node.name)
        if series is not None:
            recorded.append(
                {"name": names(node.name), "cpu": _series(series[0]),
                 "memory": _series(series[1])}
            )  # fmt: skip
    if not recorded:
        return None
    document: dict[str, Any] = {"interval": f"{step_s:g}s", "nodes": recorded}
    count = nodes.counted()
    if count is not None:  # floats, so that dump writes the series as one flow list
        document["nodeCount"] = [float(c) for c in count]
    return document


# Fields of the descheduler configuration that say nothing the replay uses and may
# name the cluster (a PromQL query names its labels, namespaces, a cluster's name):
# dropped from an anonymized file.
FREE_TEXT_FIELDS = ("podUsageQueries", "pod_usage_queries")


def anonymize_descheduler(config: Mapping[str, Any], names: Names) -> dict[str, Any]:
    """The descheduler configuration with every name in it mapped as the rest of the
    file is: the namespaces it may evict from, and its ``nodeSelector`` (a map or
    descheduler's ``key=value,...`` string) as the nodes' labels are, so that the
    replay selects the same nodes; free text (``podUsageQueries``) is dropped."""
    document = dict(config)
    if not names.anonymous:
        return document
    for free in FREE_TEXT_FIELDS:
        document.pop(free, None)
    for field_name in ("evictableNamespaces", "evictable_namespaces"):
        namespaces = document.get(field_name)
        if isinstance(namespaces, Mapping):
            document[field_name] = {
                k: [names(str(n)) for n in v] if isinstance(v, list) else v
                for k, v in namespaces.items()
            }
    for field_name in ("nodeSelector", "node_selector"):
        selector = document.get(field_name)
        if isinstance(selector, str):
            selector = _selector_map(selector)
        if isinstance(selector, Mapping):
            document[field_name] = names.labels(selector)
    return anonymize_node_pools(document, names)


def anonymize_policy(policy: Mapping[str, Any], names: Names) -> dict[str, Any]:
    """The policy with its node pools' names and selectors mapped as the nodes' labels
    are (``anonymize_node_pools``); the rest of a policy names no one."""
    document = dict(policy)
    spec = document.get("spec")
    if names.anonymous and isinstance(spec, Mapping):
        document["spec"] = anonymize_node_pools(spec, names)
    return document


def anonymize_node_pools(section: Mapping[str, Any], names: Names) -> dict[str, Any]:
    """``section`` (a policy's spec, or the descheduler configuration) with each node
    pool's name and ``nodeSelector`` (label keys and values) mapped as the nodes'
    labels are, so that the replay puts the same nodes in the same pools."""
    document = dict(section)
    if not names.anonymous:
        return document
    for field_name in ("nodePools", "node_pools"):
        pools = document.get(field_name)
        if isinstance(pools, list):
            document[field_name] = [_anonymous_pool(pool, names) for pool in pools]
    return document


def _anonymous_pool(pool: Any, names: Names) -> Any:
    if not isinstance(pool, Mapping):
        return pool
    mapped = dict(pool)
    if isinstance(mapped.get("name"), str):
        mapped["name"] = names(mapped["name"])
    for field_name in ("nodeSelector", "node_selector"):
        selector = mapped.get(field_name)
        if isinstance(selector, Mapping):
            mapped[field_name] = _anonymous_selector(selector, names)
    return mapped


def _anonymous_selector(selector: Mapping[str, Any], names: Names) -> dict[str, Any]:
    mapped = dict(selector)
    for field_name in ("matchLabels", "match_labels"):
        labels = mapped.get(field_name)
        if isinstance(labels, Mapping):
            mapped[field_name] = names.labels(labels)
    for field_name in ("matchExpressions", "match_expressions"):
        expressions = mapped.get(field_name)
        if isinstance(expressions, list):
            mapped[field_name] = [
                {
                    **e,
                    "key": names(str(e.get("key", ""))),
                    "values": [names(str(v)) for v in e.get("values") or []],
                }
                if isinstance(e, Mapping)
                else e
                for e in expressions
            ]
    return mapped


def _selector_map(text: str) -> dict[str, str] | str:
    """descheduler's ``key=value,...`` as a map (the form the configuration reads too);
    the text itself when it is not that form (the configuration refuses it)."""
    labels: dict[str, str] = {}
    for term in filter(None, (part.strip() for part in text.split(","))):
        key, equals, value = term.replace("==", "=").partition("=")
        if not equals:
            return text
        labels[key.strip()] = value.strip()
    return labels
