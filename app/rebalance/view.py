"""What the planner is given: a snapshot of the cluster, built by the caller's caches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.kube.objects import NodeInfo, PodInfo
from app.load.resources import Resources


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One ``matchExpressions`` entry of a label selector."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes semantics; an empty selector matches every pod (as in a PDB)."""
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        return all(_holds(requirement, labels) for requirement in self.match_expressions)


def _holds(requirement: LabelRequirement, labels: Mapping[str, str]) -> bool:
    present = requirement.key in labels
    if requirement.operator == "In":
        return present and labels[requirement.key] in requirement.values
    if requirement.operator == "NotIn":
        return not present or labels[requirement.key] not in requirement.values
    if requirement.operator == "Exists":
        return present
    if requirement.operator == "DoesNotExist":
        return not present
    return False  # an operator we do not know matches nothing: the safe side for a PDB


@dataclass(frozen=True, slots=True)
class PodDisruptionBudgetView:
    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int  # status.disruptionsAllowed


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """An eviction the descheduler made (rebuilt from its own Events after a restart)."""

    pod_key: str
    uid: str
    node: str  # the source it was evicted from
    destination: str | None  # the node the plan reserved room on
    usage: Resources  # the usage moved
    evicted_at_s: float
    workload: str | None  # see ``workload_of``; None for a bare pod


@dataclass(frozen=True, slots=True)
class ClusterView:
    nodes: Mapping[str, NodeInfo]
    pods: Mapping[str, PodInfo]  # key "namespace/name"
    pod_usage: Mapping[str, Resources]  # real usage by pod key; missing: requests stand in
    budgets: Sequence[PodDisruptionBudgetView] = ()
    recent_evictions: Sequence[EvictionRecord] = ()


def workload_of(pod: PodInfo) -> str | None:
    """The workload a pod belongs to, for cooldowns: ``namespace/Kind/name``.

    A ReplicaSet named ``<deployment>-<pod-template-hash>`` stands for its Deployment,
    so that a rollout (a new ReplicaSet) does not reset the Deployment's cooldown.
    """
    owner = pod.owner
    if owner is None:
        return None
    template_hash = pod.labels.get("pod-template-hash")
    if owner.kind == "ReplicaSet" and template_hash and owner.name.endswith(f"-{template_hash}"):
        return f"{pod.namespace}/Deployment/{owner.name.removesuffix(f'-{template_hash}')}"
    return f"{pod.namespace}/{owner.kind}/{owner.name}"
