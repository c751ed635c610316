"""The Pod cache shared by every component, and the transforms that feed it.

The cache is fed by list and watch across all namespaces and is generic: each user
passes a ``transform`` that keeps only what it reads of a pod, and listens for
(old, new) changes. Pods are keyed ``namespace/name``. The transforms, each a lightkube
Pod in and a view from ``app.objects.pods`` out: ``pod_placement`` (the annotator:
where a pod is bound), ``scheduled_pod`` (the extender: what to estimate and since
when) and ``pod_info`` (the descheduler: what its rules need). Demand follows
``app.objects.demand`` in all of them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, TypeVar

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod

from app.kube.cache import WatchCache
from app.kube.pdbs import label_selector
from app.objects import (
    CPU,
    MEMORY,
    NO_DEMAND,
    ZERO,
    Demand,
    LabelRequirement,
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PodAffinityTerm,
    PodInfo,
    PodPlacement,
    Resources,
    ScheduledPod,
    SpreadConstraint,
    Toleration,
    container_demand,
    effective_demand,
    requests_and_limits,
    valid_owner,
    workload_key,
)

__all__ = [
    "PodCache",
    "pod_info",
    "pod_key",
    "pod_placement",
    "scheduled_pod",
]

T = TypeVar("T")


def pod_key(pod: Any) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


class PodCache(WatchCache[T]):
    """All pods, reduced by ``transform``. Run ``run()`` as a task."""

    def __init__(
        self,
        client: AsyncClient,
        transform: Callable[[Any], T],
        *,
        while_down: str = "",
        retry_delay_s: float = 1.0,
        max_retry_delay_s: float = 30.0,
    ) -> None:
        super().__init__(
            client,
            Pod,
            transform,
            pod_key,
            what="pod",
            namespace="*",
            while_down=while_down,
            retry_delay_s=retry_delay_s,
            max_retry_delay_s=max_retry_delay_s,
        )


# The kubelet marks the API mirror of a static pod with this annotation, and makes the
# pod's Node its controller. Both are needed: a tenant can write any annotation on its
# own pods (``kubernetes.io/config.source: file`` included, which is only the kubelet's
# note of where it read a pod and proves nothing), and a Node owner it cannot fake
# without the Node's UID, which the garbage collector checks (docs/security.md).
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# The pod annotations loadaware reads: the mirror check above, and the descheduler's
# protection, opt-outs and ordering hints (``app.rebalance.victims``). A pod view keeps
# these and no other, each value at most ``MAX_KEPT_ANNOTATION`` characters (a longer
# one is kept empty: present, and no value that counts). A tenant may put 256 KiB of
# annotations on each of its pods; kept whole in the descheduler's cache, a few
# thousand such pods took it past its memory limit (issue 42, point 2: what one pod
# costs in every cache).
READ_POD_ANNOTATIONS = frozenset({
    MIRROR_ANNOTATION,
    "descheduler.alpha.kubernetes.io/evict",
    "descheduler.alpha.kubernetes.io/prefer-no-eviction",
    "controller.kubernetes.io/pod-deletion-cost",
    "cluster-autoscaler.kubernetes.io/safe-to-evict",
    "karpenter.sh/do-not-disrupt",
})  # fmt: skip
MAX_KEPT_ANNOTATION = 64


def read_annotations(annotations: Mapping[str, str] | None) -> dict[str, str]:
    """Of a pod's annotations, those loadaware reads (``READ_POD_ANNOTATIONS``)."""
    if not annotations:
        return {}
    return {
        key: value if len(value) <= MAX_KEPT_ANNOTATION else ""
        for key in READ_POD_ANNOTATIONS
        if isinstance(value := annotations.get(key), str)
    }


def pod_info(pod: Any) -> PodInfo:
    """The descheduler's view of a lightkube Pod; every missing field has a safe default."""
    metadata = pod.metadata
    spec = pod.spec
    status = pod.status
    annotations = read_annotations(metadata.annotations)
    containers = list(spec.containers or []) if spec else []
    init_containers = list(spec.initContainers or []) if spec else []
    requests, limits = _demand(containers, init_containers, spec.overhead if spec else None)
    owner = _controller_of(metadata.ownerReferences or [])
    volumes = list(spec.volumes or []) if spec else []
    namespace = metadata.namespace or "default"
    labels = dict(metadata.labels or {})
    affinity = spec.affinity if spec else None
    return PodInfo(
        namespace=namespace,
        name=metadata.name,
        uid=metadata.uid or "",
        node_name=(spec.nodeName if spec else None) or None,
        phase=(status.phase if status else None) or "Unknown",
        ready=_condition_true(status, "Ready"),
        terminating=metadata.deletionTimestamp is not None,
        created_s=_unix_s(metadata.creationTimestamp),
        priority=(spec.priority if spec else None) or 0,
        priority_class=(spec.priorityClassName if spec else None) or None,
        qos=(status.qosClass if status else None) or _qos_of([*containers, *init_containers]),
        requests=requests,
        limits=limits,
        labels=MappingProxyType(labels),
        annotations=MappingProxyType(annotations),
        owner=owner,
        is_mirror=MIRROR_ANNOTATION in annotations and owner is not None and owner.kind == "Node",
        local_storage=any(v.emptyDir is not None or v.hostPath is not None for v in volumes),
        uses_pvc=any(
            v.persistentVolumeClaim is not None or v.ephemeral is not None for v in volumes
        ),
        node_selector=MappingProxyType(dict((spec.nodeSelector if spec else None) or {})),
        required_node_affinity=_required_terms(affinity),
        tolerations=tuple(
            Toleration(t.key or None, t.operator or "Equal", t.value, t.effect or None)
            for t in ((spec.tolerations if spec else None) or [])
        ),
        pod_affinity=_pod_terms(affinity.podAffinity if affinity else None, namespace, labels),
        pod_anti_affinity=_pod_terms(
            affinity.podAntiAffinity if affinity else None, namespace, labels
        ),
        spread=_spread((spec.topologySpreadConstraints if spec else None) or [], labels),
        bound_at_s=_bound_at_s(status),
        preferred_node_affinity=_preferred_terms(affinity),
        own_spread=bool(spec.topologySpreadConstraints if spec else None),
    )


def _bound_at_s(status: Any) -> float | None:
    for condition in (status.conditions if status else None) or []:
        if condition.type == "PodScheduled" and condition.status == "True":
            return _unix_s(condition.lastTransitionTime)
    return None


def _with_label_keys(
    selector: LabelSelector,
    labels: dict[str, str],
    match_keys: Any,
    mismatch_keys: Any = None,
) -> LabelSelector:
    """``matchLabelKeys`` (key In [the pod's value]) and ``mismatchLabelKeys`` (NotIn)
    merged into a selector, as kube-scheduler does; keys the pod lacks are ignored."""
    extra = [
        LabelRequirement(key, "In", (labels[key],)) for key in match_keys or () if key in labels
    ]
    extra += [
        LabelRequirement(key, "NotIn", (labels[key],))
        for key in mismatch_keys or ()
        if key in labels
    ]
    if not extra:
        return selector
    return LabelSelector(selector.match_labels, (*selector.match_expressions, *extra))


def _pod_terms(
    affinity: Any, namespace: str, labels: dict[str, str]
) -> tuple[PodAffinityTerm, ...]:
    """The required terms of a podAffinity or podAntiAffinity."""
    required = affinity.requiredDuringSchedulingIgnoredDuringExecution if affinity else None
    terms = []
    for term in required or []:
        namespaces: tuple[str, ...] | None = tuple(term.namespaces or ()) or (namespace,)
        if term.namespaceSelector is not None:
            namespaces = None  # {} is every namespace; labels we cannot resolve read as all
        selector = _with_label_keys(
            label_selector(term.labelSelector),
            labels,
            term.matchLabelKeys,
            term.mismatchLabelKeys,
        )
        terms.append(PodAffinityTerm(selector, term.topologyKey, namespaces))
    return tuple(terms)


def _spread(constraints: list[Any], labels: dict[str, str]) -> tuple[SpreadConstraint, ...]:
    return tuple(
        SpreadConstraint(
            max_skew=c.maxSkew,
            topology_key=c.topologyKey,
            selector=_with_label_keys(label_selector(c.labelSelector), labels, c.matchLabelKeys),
            min_domains=c.minDomains,
            honor_node_affinity=(c.nodeAffinityPolicy or "Honor") == "Honor",
            honor_node_taints=(c.nodeTaintsPolicy or "Ignore") == "Honor",
        )
        for c in constraints
        if c.whenUnsatisfiable == "DoNotSchedule"
    )


def _resources_of(amounts: Any) -> Resources:
    try:
        return Resources.of(amounts)
    except ValueError:
        # The API server validates quantities; a value it let through that we cannot
        # read counts as nothing rather than breaking the whole cache.
        return ZERO


def _container_demand(container: Any) -> Demand:
    resources = container.resources
    if resources is None:
        return NO_DEMAND
    return container_demand(_resources_of(resources.requests), _resources_of(resources.limits))


def _demand(
    containers: list[Any], init_containers: list[Any], overhead: Any
) -> tuple[Resources, Resources]:
    """The pod's effective requests and limits (``app.objects.demand``)."""
    extra = _resources_of(overhead)
    return requests_and_limits(
        effective_demand(
            map(_container_demand, containers),
            [(_container_demand(c), c.restartPolicy == "Always") for c in init_containers],
            (extra.cpu_cores, extra.memory_bytes),
        )
    )


def _qos_of(containers: list[Any]) -> str:
    """The QoS class as the kubelet computes it, for pods whose status does not say."""
    any_set = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.resources
        requests = dict((resources.requests if resources else None) or {})
        limits = dict((resources.limits if resources else None) or {})
        any_set = any_set or bool(requests) or bool(limits)
        # A request left out defaults to its limit.
        if not {CPU, MEMORY} <= limits.keys() or _resources_of(limits | requests) != _resources_of(
            limits
        ):
            guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _condition_true(status: Any, kind: str) -> bool:
    conditions = (status.conditions if status else None) or []
    return any(c.type == kind and c.status == "True" for c in conditions)


def _unix_s(moment: Any) -> float | None:
    return moment.timestamp() if isinstance(moment, datetime) else None


def _controller_of(owners: list[Any]) -> OwnerRef | None:
    """The controller reference, the only owner Kubernetes lets act on a pod (it
    recreates it, and a second one is refused). Any other ownerReference is the
    tenant's word: a pod with none marked controller is bare. So is a pod whose
    controller is in no shape Kubernetes gives an object (``valid_owner``: the API
    server checks only that kind and name are non-empty), so that its text goes no
    further than here (issue 42, point 2)."""
    chosen = next((o for o in owners if o.controller), None)
    if chosen is None or not valid_owner(chosen.apiVersion, chosen.kind, chosen.name):
        return None
    return OwnerRef(chosen.kind, chosen.name, chosen.uid)


def _required_terms(affinity: Any) -> tuple[NodeSelectorTerm, ...]:
    node_affinity = affinity.nodeAffinity if affinity else None
    required = (
        node_affinity.requiredDuringSchedulingIgnoredDuringExecution if node_affinity else None
    )
    if required is None:
        return ()
    return tuple(
        NodeSelectorTerm(_requirements(t.matchExpressions), _requirements(t.matchFields))
        for t in required.nodeSelectorTerms or []
    )


def _preferred_terms(affinity: Any) -> tuple[tuple[int, NodeSelectorTerm], ...]:
    """The preferred node affinity's (weight, term) pairs; a weight outside 1..100 (the
    API server refuses it) counts as none."""
    node_affinity = affinity.nodeAffinity if affinity else None
    preferred = (
        node_affinity.preferredDuringSchedulingIgnoredDuringExecution if node_affinity else None
    )
    return tuple(
        (
            int(t.weight),
            NodeSelectorTerm(
                _requirements(t.preference.matchExpressions),
                _requirements(t.preference.matchFields),
            ),
        )
        for t in preferred or []
        if t.preference is not None and isinstance(t.weight, int) and 1 <= t.weight <= 100
    )


def _requirements(items: Any) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(
        NodeSelectorRequirement(r.key, r.operator, tuple(r.values or ())) for r in items or []
    )


def pod_placement(pod: Any) -> PodPlacement:
    """The annotator's view: node and effective demand (unreadable quantities: none)."""
    metadata, spec = pod.metadata, pod.spec
    requests, limits = (
        _demand(spec.containers or [], spec.initContainers or [], spec.overhead)
        if spec
        else (ZERO, ZERO)
    )
    namespace = metadata.namespace or "default"
    status = pod.status
    return PodPlacement(
        uid=metadata.uid or f"{namespace}/{metadata.name}",
        node_name=(spec.nodeName if spec else None) or None,
        requests=requests,
        limits=limits,
        pod=f"{namespace}/{metadata.name}",
        workload=_workload(namespace, metadata),
        running=bool(status and status.phase == "Running") and metadata.deletionTimestamp is None,
        priority=_priority(spec),
        labels=_NO_LABELS if not metadata.labels else MappingProxyType(dict(metadata.labels)),
    )


_NO_LABELS: Mapping[str, str] = MappingProxyType({})


def _priority(spec: Any) -> int | None:
    """``spec.priority`` where it is an integer (the API server sets it from the class)."""
    priority = getattr(spec, "priority", None) if spec else None
    return priority if isinstance(priority, int) and not isinstance(priority, bool) else None


def _workload(namespace: str, metadata: Any) -> str | None:
    """The pod's ``workload_key``, interned: a workload's pods share one string."""
    key = workload_key(
        namespace, _controller_of(metadata.ownerReferences or []), metadata.labels or {}
    )
    return sys.intern(key) if key is not None else None


_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


def scheduled_pod(pod: Any) -> ScheduledPod:
    """What the extender's estimate reads: demand, node, and when it was bound (the
    PodScheduled condition's transition time, else the creation time)."""
    metadata, spec, status = pod.metadata, pod.spec, pod.status
    requests, limits = _demand(spec.containers or [], spec.initContainers or [], spec.overhead)
    bound_at_s = _unix_s(metadata.creationTimestamp)
    for condition in (status.conditions if status else None) or []:
        if condition.type == "PodScheduled" and condition.status == "True":
            bound_at_s = _unix_s(condition.lastTransitionTime) or bound_at_s
    node = spec.nodeName
    return ScheduledPod(
        uid=metadata.uid or "",
        node=sys.intern(node) if node else None,
        requests=requests,
        limits=limits,
        bound_at_s=bound_at_s if bound_at_s is not None else 0.0,
        finished=bool(status and status.phase in _FINISHED_PHASES),
        workload=_workload(metadata.namespace or "default", metadata),
        started_at_s=_started_at_s(status),
    )


def _started_at_s(status: Any) -> float | None:
    """When the pod's first (non-init) container started, as its kubelet reports it
    (``containerStatuses[].state``, or ``lastState`` of one that restarted); None: none
    has. The kubelet writes the status; a tenant cannot (``pods/status``)."""
    earliest: float | None = None
    for container in (status.containerStatuses if status else None) or []:
        for state in (container.state, container.lastState):
            if state is None:
                continue
            for phase in (state.running, state.terminated):
                at_s = _unix_s(phase.startedAt) if phase is not None else None
                if at_s is not None and (earliest is None or at_s < earliest):
                    earliest = at_s
    return earliest
