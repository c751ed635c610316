"""What the API server says: nodes by shape, and workloads with their pods' demand.

Every pod belongs to one workload: its controller (a ReplicaSet's pods to the
ReplicaSet's Deployment, when it has one), a Job, a DaemonSet, a StatefulSet; a pod
with no controller is its own workload (kind ``Pod``), and so is a pod whose controller
is something else (an operator's custom resource): the replay never evicts those, as
the descheduler does not evict what it cannot see replaced.

A workload's demand is its pod template's, by the one pod-demand rule
(``app.objects.demand``, through ``app.kube.pods.pod_info``: init containers, sidecars
and overhead included); a bare pod's is its own. Priority is its pods' (admission
resolves ``priorityClassName`` into ``spec.priority``).

The pods of the past are not in the API server any more; ``workload_of_pod`` finds a
pod's workload by name (a ReplicaSet's pod is ``<replicaset>-<suffix>``, a
StatefulSet's ``<statefulset>-<ordinal>``, ...), the longest known controller name
first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.kube import label_selector, pod_from_mapping, pod_info
from app.objects import Resources, parse_quantity
from app.rebalance import NODE_HINT_VALUES, POD_HINT_VALUES, hints_of

# Labels that name one node, not a shape: left out when nodes are grouped.
NODE_SPECIFIC_LABELS = ("kubernetes.io/hostname",)
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


@dataclass(frozen=True, slots=True)
class CapturedNode:
    name: str
    cpu: float
    memory: float
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...]
    internal_ip: str | None = None  # a series may name its node by it (as the annotator reads)
    # The annotations the descheduler honours on a Node (Karpenter's opt-out), only.
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[Any, ...]:
        labels = tuple(
            sorted(
                (k, v)
                for k, v in self.labels.items()
                if k not in NODE_SPECIFIC_LABELS and v != self.name
            )
        )
        taints = tuple(tuple(sorted(t.items())) for t in self.taints)
        annotations = tuple(sorted(self.annotations.items()))
        return (self.cpu, self.memory, labels, taints, annotations)


@dataclass
class CapturedWorkload:
    """One workload of the scenario; ``key`` is its unique scenario name."""

    key: str
    namespace: str
    kind: str  # Deployment, StatefulSet, ReplicaSet, DaemonSet, Job or Pod
    name: str
    requests: Resources
    limits: Resources
    priority: int
    labels: Mapping[str, str]  # the template's (PDBs select by them)
    replicas: int  # wanted now (spec), or its pods
    pdb: tuple[int | None, int | None] | None = None  # (minAvailable, maxUnavailable)
    pods: dict[str, str] = field(default_factory=dict)  # pod name -> node ("" unbound), now
    # The opt-outs and ordering hints the descheduler reads (``POD_HINT_VALUES``): its
    # template's, and any one of its pods carries now (set on a live pod, it counts).
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass
class Catalog:
    nodes: list[CapturedNode]
    workloads: dict[str, CapturedWorkload]  # by key
    # namespace -> controller or pod name -> workload key, for series of past pods.
    names: dict[str, dict[str, str]]
    pods: int = 0  # pods read, for the summary

    def workload_of_pod(self, namespace: str, pod: str) -> str | None:
        known = self.names.get(namespace)
        if not known:
            return None
        if pod in known:  # a bare pod, or a pod the API server still has
            return known[pod]
        prefix = pod
        while "-" in prefix:
            prefix = prefix.rsplit("-", 1)[0]
            if prefix in known:
                return known[prefix]
        return None

    @property
    def namespaces(self) -> list[str]:
        return sorted({w.namespace for w in self.workloads.values()})

    def pods_in(self, namespace: str) -> int:
        return sum(len(w.pods) for w in self.workloads.values() if w.namespace == namespace)


def node_of(node: Any) -> CapturedNode:
    allocatable = (node.status.allocatable if node.status else None) or {}
    taints = tuple(
        {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v}
        for t in ((node.spec.taints if node.spec else None) or [])
    )
    addresses = (node.status.addresses if node.status else None) or []
    internal_ip = next((a.address for a in addresses if a.type == "InternalIP"), None)
    return CapturedNode(
        name=node.metadata.name,
        cpu=parse_quantity(allocatable.get("cpu", "0")),
        memory=parse_quantity(allocatable.get("memory", "0")),
        labels=dict(node.metadata.labels or {}),
        taints=taints,
        internal_ip=internal_ip or None,
        annotations=hints_of(node.metadata.annotations or {}, NODE_HINT_VALUES),
    )


_NOT_A_NAME = re.compile(r"[^a-z0-9-]+")


def scenario_name(namespace: str, name: str, taken: set[str], kind: str) -> str:
    """A unique workload name the scenario accepts (lowercase, digits and '-')."""
    base = _NOT_A_NAME.sub("-", f"{namespace}-{name}".lower()).strip("-") or "workload"
    for candidate in (base, f"{base}-{kind.lower()}"):
        if candidate not in taken:
            return candidate
    n = 2
    while f"{base}-{kind.lower()}-{n}" in taken:
        n += 1
    return f"{base}-{kind.lower()}-{n}"


def _template_pod(namespace: str, template: Any) -> Any:
    """A Pod made of a controller's template, for the pod-demand rule."""
    spec = template.spec if template is not None else None
    meta = template.metadata if template is not None else None
    metadata = {"name": "template", "namespace": namespace,
                "labels": dict((meta.labels if meta else None) or {}),
                "annotations": dict((meta.annotations if meta else None) or {})}  # fmt: skip
    body: dict[str, Any] = {"metadata": metadata, "spec": spec.to_dict() if spec else {}}
    body["spec"].setdefault("containers", [])
    return pod_from_mapping(body, f"the pod template of {namespace}")


def _controller(pod: Any) -> tuple[str, str] | None:
    for owner in pod.metadata.ownerReferences or []:
        if owner.controller:
            return owner.kind, owner.name
    owners = pod.metadata.ownerReferences or []
    return (owners[0].kind, owners[0].name) if owners else None


def _scaled(value: Any, replicas: int) -> int:
    """A PDB's int-or-percent against the replicas (rounded up, as the controller does)."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(float(value[:-1]) / 100 * replicas)
    return int(value)


def build_catalog(
    nodes: Iterable[Any],
    pods: Iterable[Any],
    controllers: Mapping[str, Iterable[Any]],
    budgets: Iterable[Any],
) -> Catalog:
    """The catalog from the API's objects; ``controllers`` by kind (Deployment,
    ReplicaSet, StatefulSet, DaemonSet, Job)."""
    captured_nodes = sorted((node_of(n) for n in nodes), key=lambda n: n.name)
    objects: dict[tuple[str, str, str], Any] = {}
    for kind, items in controllers.items():
        for item in items:
            objects[(kind, item.metadata.namespace, item.metadata.name)] = item
    # A ReplicaSet owned by a Deployment stands for the Deployment.
    deployment_of: dict[tuple[str, str], str] = {}
    for (kind, namespace, name), item in objects.items():
        if kind == "ReplicaSet":
            owner = _controller(item)
            if owner is not None and owner[0] == "Deployment":
                deployment_of[(namespace, name)] = owner[1]
    workloads: dict[str, CapturedWorkload] = {}
    by_object: dict[tuple[str, str, str], str] = {}
    names: dict[str, dict[str, str]] = {}

    def add(kind: str, namespace: str, name: str, item: Any, pod: Any | None) -> str:
        found = by_object.get((kind, namespace, name))
        if found is not None:
            return found
        source = pod if item is None else _template_pod(namespace, item.spec.template)
        info = pod_info(source)
        key = scenario_name(namespace, name, set(workloads), kind)
        replicas = _wanted_replicas(kind, item)
        workloads[key] = CapturedWorkload(
            key=key, namespace=namespace, kind=kind, name=name,
            requests=info.requests, limits=info.limits, priority=info.priority,
            labels=dict(info.labels), replicas=replicas,
            annotations=hints_of(info.annotations, POD_HINT_VALUES),
        )  # fmt: skip
        by_object[(kind, namespace, name)] = key
        names.setdefault(namespace, {})[name] = key
        return key

    for kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        for (k, namespace, name), item in sorted(objects.items()):
            if k == kind:
                add(kind, namespace, name, item, None)
    for (k, namespace, name), item in sorted(objects.items()):
        if k == "ReplicaSet":
            deployment = deployment_of.get((namespace, name))
            if deployment is not None and ("Deployment", namespace, deployment) in by_object:
                names.setdefault(namespace, {})[name] = by_object[
                    ("Deployment", namespace, deployment)
                ]
            else:
                add("ReplicaSet", namespace, name, item, None)
    count = 0
    for pod in sorted(pods, key=lambda p: (p.metadata.namespace, p.metadata.name)):
        phase = pod.status.phase if pod.status else None
        if phase in ("Succeeded", "Failed") or pod.metadata.deletionTimestamp is not None:
            continue
        count += 1
        namespace, name = pod.metadata.namespace, pod.metadata.name
        owner = _controller(pod)
        key: str | None = None
        if owner is not None:
            kind, owner_name = owner
            if kind == "ReplicaSet" and (namespace, owner_name) in deployment_of:
                kind, owner_name = "Deployment", deployment_of[(namespace, owner_name)]
            key = by_object.get((kind, namespace, owner_name))
        if key is None:  # bare, or a controller the catalog does not know: its own
            key = add("Pod", namespace, name, None, pod)
            workloads[key].priority = pod_info(pod).priority
        workload = workloads[key]
        workload.pods[name] = (pod.spec.nodeName if pod.spec else None) or ""
        workload.annotations.update(hints_of(pod.metadata.annotations or {}, POD_HINT_VALUES))
        workload.priority = max(workload.priority, (pod.spec.priority if pod.spec else 0) or 0)
        names.setdefault(namespace, {})[name] = key
    for workload in workloads.values():
        workload.replicas = max(workload.replicas, len(workload.pods))
    _attach_budgets(workloads, budgets)
    return Catalog(captured_nodes, workloads, names, count)


def _wanted_replicas(kind: str, item: Any) -> int:
    if item is None:
        return 1
    spec, status = item.spec, item.status
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return int(spec.replicas if spec.replicas is not None else 1)
    if kind == "DaemonSet":
        return int((status.desiredNumberScheduled if status else 0) or 0)
    return int(spec.parallelism if spec.parallelism is not None else 1)  # Job


def _attach_budgets(workloads: Mapping[str, CapturedWorkload], budgets: Iterable[Any]) -> None:
    for pdb in budgets:
        selector = label_selector(pdb.spec.selector if pdb.spec else None)
        for workload in workloads.values():
            if workload.namespace != pdb.metadata.namespace:
                continue
            if not selector.matches(workload.labels):
                continue
            spec = pdb.spec
            if spec.minAvailable is not None:
                workload.pdb = (_scaled(spec.minAvailable, workload.replicas), None)
            elif spec.maxUnavailable is not None:
                workload.pdb = (None, _scaled(spec.maxUnavailable, workload.replicas))
