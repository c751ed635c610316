"""Which pods may be evicted, and in which order.

The protections follow descheduler's DefaultEvictor. The annotation
``descheduler.alpha.kubernetes.io/evict`` opts a pod in past the *soft* ones (local
storage, PVCs, bare pods, priority, minPodAge, minReplicas), as in descheduler. It
never overrides the hard ones (mirror/static, DaemonSet, terminating, not running,
excluded namespace) nor the run's guards (last Ready replica, PDBs, cooldown,
limits; see ``run_guards``).

``descheduler.alpha.kubernetes.io/prefer-no-eviction`` sorts a pod after every other
candidate: it is evicted only when nothing else brings its node under the threshold.

The autoscalers' opt-outs (``opt_out``) are honoured as they are by cluster-autoscaler
and Karpenter, and never overridden, not even by the evict annotation:
``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`` on a pod, and
``karpenter.sh/do-not-disrupt: "true"`` on a pod or on its node.

The ordering hints a tenant sets on its own pods (prefer-no-eviction, pod-deletion-cost,
and the QoS class its requests and limits give) are ignored for a pod that uses more
than it requests of the resource its node is hot on (``victim_order``'s ``causer``):
as the kubelet's node-pressure eviction ranks such pods first, a pod that makes its node
hot cannot send the planner to its neighbours by asking to go last (docs/security.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from app.objects import PodInfo, Resources
from app.rebalance.config import DeschedulerConfig

__all__ = [
    "DO_NOT_DISRUPT_ANNOTATION",
    "NODE_HINT_VALUES",
    "POD_HINT_VALUES",
    "hints_of",
    "node_opt_out",
]

EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
PREFER_NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT_ANNOTATION = "karpenter.sh/do-not-disrupt"
# What a replay must know of a pod (``loadaware capture`` keeps these; the simulator's
# pods carry them), with the one value that means something, and of a Node.
POD_HINT_VALUES = {
    SAFE_TO_EVICT_ANNOTATION: "false",
    DO_NOT_DISRUPT_ANNOTATION: "true",
    PREFER_NO_EVICTION_ANNOTATION: None,  # any value: its presence counts
}
NODE_HINT_VALUES = {DO_NOT_DISRUPT_ANNOTATION: "true"}
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


def owned_pod_counts(pods: Iterable[PodInfo]) -> Counter[str]:
    """Pods per controller uid that are not finished, for ``minReplicas``."""
    return Counter(
        p.owner.uid for p in pods if p.owner is not None and p.phase not in ("Succeeded", "Failed")
    )


def hard_protection(pod: PodInfo, config: DeschedulerConfig) -> str | None:
    if pod.is_mirror:
        return "mirror or static pod"
    if pod.owner is not None and pod.owner.kind == "DaemonSet":
        return "DaemonSet pod"
    if pod.terminating:
        return "terminating"
    if pod.phase != "Running":
        return f"phase {pod.phase}: uses no node resources to move"
    if not config.evictable_namespaces.allows(pod.namespace):
        return f"namespace {pod.namespace} is not evictable (evictableNamespaces)"
    return None


def soft_protection(
    pod: PodInfo, config: DeschedulerConfig, now_s: float, owned: Mapping[str, int]
) -> str | None:
    if pod.priority >= SYSTEM_CRITICAL_PRIORITY and not config.evict_system_critical_pods:
        return f"system-critical (priority {pod.priority})"
    threshold = config.priority_threshold
    if threshold is not None and pod.priority >= threshold.value:
        return f"priority {pod.priority} >= priorityThreshold {threshold.value}"
    if pod.local_storage and not config.evict_local_storage_pods:
        return "local storage (emptyDir or hostPath); evictLocalStoragePods is off"
    if pod.uses_pvc and config.ignore_pvc_pods:
        return "uses a PersistentVolumeClaim; ignorePvcPods is on"
    if pod.owner is None and not config.evict_bare_pods:
        return "bare pod: nothing would recreate it; evictBarePods is off"
    age_s = now_s - pod.created_s if pod.created_s is not None else 0.0
    if config.min_pod_age > 0 and age_s < config.min_pod_age:
        return f"younger than minPodAge ({config.min_pod_age:g}s)"
    if pod.owner is not None and owned.get(pod.owner.uid, 0) < config.min_replicas:
        return f"its {pod.owner.kind} has fewer than minReplicas ({config.min_replicas}) pods"
    return None


def hints_of(annotations: Mapping[str, str], wanted: Mapping[str, str | None]) -> dict[str, str]:
    """The annotations of ``wanted`` that change what the descheduler does, and only
    those: a value other than the one that counts is dropped (it means nothing), and a
    presence-only key keeps ``"true"`` (never a tenant's free text)."""
    kept = {}
    for key, value in wanted.items():
        found = annotations.get(key)
        if found is not None and (value is None or found == value):
            kept[key] = "true" if value is None else value
    return kept


def opt_out(pod: PodInfo, node_annotations: Mapping[str, str]) -> str | None:
    """Why an autoscaler's opt-out keeps this pod where it is, or None. The values are
    the autoscalers' own: cluster-autoscaler reads exactly ``"false"``, Karpenter exactly
    ``"true"``, so a pod either of them would leave alone is left alone here too."""
    if pod.annotations.get(SAFE_TO_EVICT_ANNOTATION) == "false":
        return f'{SAFE_TO_EVICT_ANNOTATION}: "false" on the pod'
    if pod.annotations.get(DO_NOT_DISRUPT_ANNOTATION) == "true":
        return f'{DO_NOT_DISRUPT_ANNOTATION}: "true" on the pod'
    if node_opt_out(node_annotations) is not None:
        return f'{DO_NOT_DISRUPT_ANNOTATION}: "true" on its node'
    return None


def node_opt_out(node_annotations: Mapping[str, str]) -> str | None:
    """Why no pod leaves this node (Karpenter's opt-out on the Node), or None."""
    if node_annotations.get(DO_NOT_DISRUPT_ANNOTATION) == "true":
        return f'{DO_NOT_DISRUPT_ANNOTATION}: "true" on the node: none of its pods is evicted'
    return None


def protection(
    pod: PodInfo, config: DeschedulerConfig, now_s: float, owned: Mapping[str, int]
) -> str | None:
    """Why a pod must never be evicted, or None."""
    hard = hard_protection(pod, config)
    if hard is not None:
        return hard
    if pod.annotations.get(EVICT_ANNOTATION) is not None:
        return None
    return soft_protection(pod, config, now_s, owned)


def deletion_cost(pod: PodInfo) -> int:
    try:
        return int(pod.annotations.get(DELETION_COST_ANNOTATION, "0"))
    except ValueError:
        return 0


def victim_order(
    pod: PodInfo, usage: Resources, resource: str, excess: float, *, causer: bool = False
) -> tuple[bool, int, int, int, tuple[int, float], float]:
    """Sort key: prefer-no-eviction last, then priority, QoS, deletion cost, how well the
    pod's usage of the most-over ``resource`` covers the ``excess`` (the smallest pod that
    covers it alone, else the largest), youngest first.

    For a ``causer`` (a pod using more than it requests of a resource its node is hot
    on, ``attribution``) the tenant's hints count for nothing: no prefer-no-eviction,
    the QoS rank of BestEffort, no deletion cost."""
    amount = usage.get(resource)
    coverage = (0, amount) if amount >= excess else (1, -amount)
    return (
        not causer and PREFER_NO_EVICTION_ANNOTATION in pod.annotations,
        pod.priority,
        0 if causer else QOS_RANK.get(pod.qos, 1),
        0 if causer else deletion_cost(pod),
        coverage,
        -(pod.created_s or 0.0),
    )
