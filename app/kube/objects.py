"""The pure views of Kubernetes objects that loadaware reads: nodes and pods.

Plain frozen dataclasses with no client import, so that the planner in
``app/rebalance`` and the simulator build and read them without a cluster. The caches
in ``nodes.py`` and ``pods.py`` turn lightkube models into these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from app.load.resources import Resources

EMPTY_MAP: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str | None
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    annotations: Mapping[str, str]
    internal_ip: str | None
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = field(default_factory=Resources)
    unschedulable: bool = False
    ready: bool = True


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """A pod's controller ownerReference (the first owner when none is marked controller)."""

    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str | None  # None (empty) with operator Exists tolerates every taint
    operator: str  # Equal | Exists
    value: str | None
    effect: str | None  # None tolerates every effect


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """All requirements must hold; ``match_fields`` only knows ``metadata.name``."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the descheduler's rules read of a pod."""

    namespace: str
    name: str
    uid: str
    node_name: str | None
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    ready: bool  # condition Ready == True
    terminating: bool  # metadata.deletionTimestamp is set
    created_s: float | None  # creationTimestamp, unix seconds
    priority: int = 0
    priority_class: str | None = None
    qos: str = "BestEffort"  # BestEffort | Burstable | Guaranteed
    requests: Resources = field(default_factory=Resources)  # what the scheduler reserves
    limits: Resources = field(default_factory=Resources)
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    owner: OwnerRef | None = None
    is_mirror: bool = False  # a mirror of a static pod (kubelet config source is not the API)
    local_storage: bool = False  # an emptyDir or hostPath volume
    uses_pvc: bool = False  # a persistentVolumeClaim or generic ephemeral volume
    node_selector: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    required_node_affinity: tuple[NodeSelectorTerm, ...] = ()  # any term; empty: any node
    tolerations: tuple[Toleration, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
