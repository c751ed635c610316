"""A pod as loadaware reads it: the pure views the pod caches in ``app/kube`` produce
(``PodInfo`` for the descheduler, ``ScheduledPod`` for the extender's estimate,
``PodPlacement`` for the annotator's bindings), and the workload a pod belongs to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.objects.maps import EMPTY_MAP
from app.objects.resources import Resources
from app.objects.selectors import LabelSelector
from app.objects.tenant_text import valid_owner

__all__ = [
    "TEMPLATE_HASH_LABEL",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "OwnerRef",
    "PodAffinityTerm",
    "PodInfo",
    "PodPlacement",
    "ScheduledPod",
    "SpreadConstraint",
    "Toleration",
    "workload_key",
    "workload_of",
]


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """A pod's controller ownerReference (``controller: true``); other owners are ignored."""

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
class PodAffinityTerm:
    """A required inter-pod (anti-)affinity term: pods matching ``selector`` in
    ``namespaces`` (None: every namespace, as a ``namespaceSelector`` the planner cannot
    resolve without namespace labels is read) on a node in the same ``topology_key``
    domain. ``matchLabelKeys`` are already merged into the selector."""

    selector: LabelSelector
    topology_key: str
    namespaces: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topology spread constraint with ``whenUnsatisfiable: DoNotSchedule`` (the only
    kind that can keep a pod off a node); ``matchLabelKeys`` merged into the selector."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int | None = None
    honor_node_affinity: bool = True  # nodeAffinityPolicy: Honor (the default)
    honor_node_taints: bool = False  # nodeTaintsPolicy: Ignore (the default)


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
    is_mirror: bool = False  # a static pod's mirror: the mirror annotation and a Node controller
    local_storage: bool = False  # an emptyDir or hostPath volume
    uses_pvc: bool = False  # a persistentVolumeClaim or generic ephemeral volume
    node_selector: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    required_node_affinity: tuple[NodeSelectorTerm, ...] = ()  # any term; empty: any node
    tolerations: tuple[Toleration, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()  # required terms
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()  # required terms
    spread: tuple[SpreadConstraint, ...] = ()  # DoNotSchedule constraints
    bound_at_s: float | None = None  # PodScheduled's transition time, when known
    # Preferred node affinity: (weight, term) pairs, which NodeAffinity scores.
    preferred_node_affinity: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    # Any topologySpreadConstraints of its own (ScheduleAnyway too): kube-scheduler
    # then applies no system-default spreading to the pod.
    own_spread: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ScheduledPod:
    """What the extender's estimate reads of a pod, and when it was placed."""

    uid: str
    node: str | None  # None until bound
    requests: Resources
    limits: Resources
    bound_at_s: float  # PodScheduled's transition time, else creation time
    finished: bool  # Succeeded or Failed: no longer uses anything
    workload: str | None = None  # workload_key: whose observed usage its estimate may take
    started_at_s: float | None = None  # its first container's start (kubelet); None: not yet


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """The little of a pod that binding detection and the annotator's estimate need:
    its node, and its effective requests and limits (tenant input: the estimate caps
    them at the node, ``app.load.estimate``)."""

    uid: str
    node_name: str | None
    requests: Resources = field(default_factory=Resources)
    limits: Resources = field(default_factory=Resources)
    # For the workload usage the annotator publishes (app/kube/workload_usage.py):
    pod: str = ""  # namespace/name
    workload: str | None = None  # workload_key
    running: bool = False  # phase Running and not terminating
    # For the usage by class of pods (app/policy/classes.py): spec.priority, the API
    # server's word, and the labels a class selector reads.
    priority: int | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP, compare=False)


# The label a Deployment's ReplicaSet puts on its pods: the one label ``workload_key`` reads.
TEMPLATE_HASH_LABEL = "pod-template-hash"


def workload_of(pod: PodInfo) -> str | None:
    """The workload a pod belongs to, for cooldowns: ``workload_key``."""
    return workload_key(pod.namespace, pod.owner, pod.labels)


def workload_key(namespace: str, owner: OwnerRef | None, labels: Mapping[str, str]) -> str | None:
    """The workload of a pod in ``namespace`` with this controller: ``namespace/Kind/name``
    (None: a bare pod).

    A ReplicaSet named ``<deployment>-<pod-template-hash>`` stands for its Deployment,
    so that a rollout (a new ReplicaSet) does not reset the Deployment's cooldown, nor
    start its observed usage afresh. The namespace is the pod's own: whatever a tenant
    writes in its ownerReferences or labels names a workload of its own namespace. An
    owner whose kind or name Kubernetes would not give an object (``valid_owner``: a
    1 MB name, control characters) makes no key: the pod counts as bare.
    """
    if owner is None or not valid_owner(None, owner.kind, owner.name):
        return None
    template_hash = labels.get(TEMPLATE_HASH_LABEL)
    if owner.kind == "ReplicaSet" and template_hash and owner.name.endswith(f"-{template_hash}"):
        return f"{namespace}/Deployment/{owner.name.removesuffix(f'-{template_hash}')}"
    return f"{namespace}/{owner.kind}/{owner.name}"
