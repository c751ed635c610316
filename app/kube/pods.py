"""The Pod cache shared by every component, fed by list and watch across all namespaces.

It is generic: each user passes a ``transform`` that keeps only what it reads of a
pod (the annotator: where a pod is bound; the descheduler: what eviction rules need),
and listens for (old, new) changes. Pods are keyed ``namespace/name``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from types import MappingProxyType
from typing import Any, TypeVar

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod

from app.kube.cache import WatchCache
from app.objects.pods import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PodInfo,
    Toleration,
)
from app.objects.resources import CPU, MEMORY, ZERO, Resources

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


# The kubelet marks the API mirror of a static pod with this annotation; the config
# source annotation names where the kubelet read the pod ("api" for ordinary pods).
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"


def pod_info(pod: Any) -> PodInfo:
    """The descheduler's view of a lightkube Pod; every missing field has a safe default."""
    metadata = pod.metadata
    spec = pod.spec
    status = pod.status
    annotations = dict(metadata.annotations or {})
    containers = list(spec.containers or []) if spec else []
    init_containers = list(spec.initContainers or []) if spec else []
    overhead = _resources_of(spec.overhead if spec else None)
    requests = _effective(containers, init_containers, "requests") + overhead
    limits = _effective(containers, init_containers, "limits") + overhead
    volumes = list(spec.volumes or []) if spec else []
    return PodInfo(
        namespace=metadata.namespace or "default",
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
        labels=MappingProxyType(dict(metadata.labels or {})),
        annotations=MappingProxyType(annotations),
        owner=_controller_of(metadata.ownerReferences or []),
        is_mirror=MIRROR_ANNOTATION in annotations
        or annotations.get(CONFIG_SOURCE_ANNOTATION, "api") != "api",
        local_storage=any(v.emptyDir is not None or v.hostPath is not None for v in volumes),
        uses_pvc=any(
            v.persistentVolumeClaim is not None or v.ephemeral is not None for v in volumes
        ),
        node_selector=MappingProxyType(dict((spec.nodeSelector if spec else None) or {})),
        required_node_affinity=_required_terms(spec.affinity if spec else None),
        tolerations=tuple(
            Toleration(t.key or None, t.operator or "Equal", t.value, t.effect or None)
            for t in ((spec.tolerations if spec else None) or [])
        ),
    )


def _resources_of(amounts: Any) -> Resources:
    try:
        return Resources.of(amounts)
    except ValueError:
        # The API server validates quantities; a value it let through that we cannot
        # read counts as nothing rather than breaking the whole cache.
        return ZERO


def _container_amounts(container: Any, which: str) -> Resources:
    resources = container.resources
    return _resources_of(getattr(resources, which, None) if resources else None)


def _effective(containers: list[Any], init_containers: list[Any], which: str) -> Resources:
    """kube-scheduler's effective pod request (or limit): the larger of the running phase
    (app containers plus every sidecar, an init container with restartPolicy Always)
    and the init phase (each regular init container plus the sidecars listed before it;
    each sidecar with those before it)."""
    running = ZERO
    for container in containers:
        running += _container_amounts(container, which)
    sidecars = peak = ZERO
    for container in init_containers:
        amounts = _container_amounts(container, which)
        if container.restartPolicy == "Always":  # a sidecar runs alongside the app
            running += amounts
            sidecars += amounts
            phase = sidecars
        else:
            phase = amounts + sidecars
        peak = Resources(
            max(peak.cpu_cores, phase.cpu_cores), max(peak.memory_bytes, phase.memory_bytes)
        )
    return Resources(
        max(running.cpu_cores, peak.cpu_cores),
        max(running.memory_bytes, peak.memory_bytes),
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
        if not {CPU, MEMORY} <= limits.keys() or _resources_of(
            limits | requests
        ) != _resources_of(limits):
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
    if not owners:
        return None
    chosen = next((o for o in owners if o.controller), owners[0])
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


def _requirements(items: Any) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(
        NodeSelectorRequirement(r.key, r.operator, tuple(r.values or ())) for r in items or []
    )
