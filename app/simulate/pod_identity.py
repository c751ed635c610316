"""Who the simulated pods are, as the API server would have them: their namespace, the
ReplicaSet a Deployment's pods are owned by, and the workload key (``workload_key``)
that the descheduler's eviction records and the annotator's pod watch both give a pod.
Shared by the simulated descheduler's pods (``app.simulate.descheduling``) and the
soft-taint guard's bindings (``app.simulate.drained``, through the cluster)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.objects import OwnerRef, workload_key

if TYPE_CHECKING:
    from app.simulate.scenario import Workload

__all__ = ["NAMESPACE", "TEMPLATE_HASH", "owner_of", "workload_key_of"]

NAMESPACE = "default"
TEMPLATE_HASH = "sim"


def owner_of(kind: str, workload: str) -> OwnerRef | None:
    """A Deployment's pods are owned by its ReplicaSet; a bare pod by nothing."""
    if kind == "Deployment":
        return OwnerRef("ReplicaSet", f"{workload}-{TEMPLATE_HASH}", workload)
    return None if kind == "Pod" else OwnerRef(kind, workload, workload)


def workload_key_of(workload: Workload) -> str | None:
    """The ``workload_key`` of ``workload``'s pods, as the simulated descheduler makes them."""
    labels = {**workload.labels, "app": workload.name, "pod-template-hash": TEMPLATE_HASH}
    return workload_key(NAMESPACE, owner_of(workload.kind, workload.name), labels)
