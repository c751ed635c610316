"""The descheduler's Events: one on each evicted pod, the record for humans; and one on
a Node the planner leaves hot because pods above their requests stay on it (they cannot
be evicted, or go nowhere) (reason ``LoadAwareHeldHot``, ``node_event``).

Each Event (core/v1, reason ``LoadAwareDescheduled``) says in its message, for the
operator running ``kubectl describe pod`` or ``kubectl get events``, which node was
hot on which metric, the values, the pod's usage and the destination the plan
reserved room on. Its annotations carry the same facts in machine-readable form, for
tools. The descheduler never reads Events back: anyone who may create an Event in a
namespace could forge one (docs/security.md, attack 3). Its memory lives in its own
ConfigMap (``app/kube/state.py``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from lightkube import AsyncClient
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event

from app.objects import EvictionRecord

__all__ = [
    "HELD_HOT_REASON",
    "EvictionNotice",
    "record_eviction",
    "record_node_event",
    "record_outcomes",
]

log = logging.getLogger(__name__)

REASON = "LoadAwareDescheduled"
HELD_HOT_REASON = "LoadAwareHeldHot"
# Kubernetes' own bound for an Event's note (events.k8s.io/v1): a longer message is cut.
MESSAGE_BYTES = 1024
# Node Events live in the default namespace, as the kubelet's do.
NODE_EVENT_NAMESPACE = "default"
COMPONENT = "loadaware-descheduler"
_PREFIX = "descheduler.loadaware.io/"
SOURCE_NODE = _PREFIX + "source-node"
DESTINATION_NODE = _PREFIX + "destination-node"
CPU_CORES = _PREFIX + "usage-cpu-cores"
MEMORY_BYTES = _PREFIX + "usage-memory-bytes"
EVICTED_AT = _PREFIX + "evicted-at"
WORKLOAD = _PREFIX + "workload"
POD_UID = _PREFIX + "pod-uid"


@dataclass(frozen=True, slots=True)
class EvictionNotice:
    """What an eviction Event says: the record, and the sentence for humans."""

    record: EvictionRecord
    message: str


def record_annotations(record: EvictionRecord) -> dict[str, str]:
    annotations = {
        SOURCE_NODE: record.node,
        CPU_CORES: f"{record.usage.cpu_cores:.6g}",
        MEMORY_BYTES: f"{record.usage.memory_bytes:.0f}",
        EVICTED_AT: _iso(record.evicted_at_s),
        POD_UID: record.uid,
    }
    if record.destination:
        annotations[DESTINATION_NODE] = record.destination
    if record.workload:
        annotations[WORKLOAD] = record.workload
    return annotations


def _iso(at_s: float) -> str:
    return datetime.fromtimestamp(at_s, tz=UTC).isoformat(timespec="milliseconds")


def eviction_event(notice: EvictionNotice, reporting_instance: str) -> Event:
    record = notice.record
    namespace, _, name = record.pod_key.partition("/")
    uid = record.uid
    pod = ObjectReference(apiVersion="v1", kind="Pod", namespace=namespace, name=name, uid=uid)
    return _event(
        pod,
        namespace,
        (REASON, notice.message, "Normal", "Evict"),
        datetime.fromtimestamp(record.evicted_at_s, tz=UTC),
        reporting_instance,
        record_annotations(record),
    )


def _event(
    involved: ObjectReference,
    namespace: str,
    what: tuple[str, str, str, str],
    at: datetime,
    reporting_instance: str,
    annotations: dict[str, str] | None = None,
) -> Event:
    """An Event by loadaware's descheduler on ``involved``; ``what`` is its reason,
    message, type and action."""
    reason, message, kind, action = what
    return Event(
        metadata=ObjectMeta(
            # As client-go names them: the object's name and a hex timestamp.
            name=f"{involved.name}.{time.time_ns():x}",
            namespace=namespace,
            annotations=annotations,
        ),
        involvedObject=involved,
        reason=reason,
        message=message,
        type=kind,
        action=action,
        count=1,
        firstTimestamp=at,
        lastTimestamp=at,
        source=EventSource(component=COMPONENT),
        reportingComponent=COMPONENT,
        reportingInstance=reporting_instance,
    )


async def record_eviction(
    client: AsyncClient, notice: EvictionNotice, reporting_instance: str
) -> bool:
    """Create the Event; False (logged) when the API server refuses it.

    A lost Event loses that eviction's history: a later run may then move one pod too
    many from the node until its metrics catch up, which the next run corrects.
    """
    what = f"the eviction Event for pod {notice.record.pod_key}"
    event = eviction_event(notice, reporting_instance)
    return await _create(client, event, what, "the pod's namespace")


async def _create(client: AsyncClient, event: Event, what: str, where: str) -> bool:
    """Create an Event; False (logged, naming ``what`` and ``where``) when refused."""
    try:
        await client.create(event)
    except Exception as error:  # an Event must never stop the run
        log.error(
            "could not record %s (%s); the descheduler needs 'create' on events in %s",
            what,
            error,
            where,
        )
        return False
    return True


def node_event(node: str, reason: str, message: str, reporting_instance: str) -> Event:
    """A Warning Event on a Node, for ``kubectl describe node``."""
    text = message.encode()[:MESSAGE_BYTES].decode(errors="ignore")
    return _event(
        ObjectReference(apiVersion="v1", kind="Node", name=node),
        NODE_EVENT_NAMESPACE,
        (reason, text, "Warning", "Plan"),
        datetime.now(tz=UTC),
        reporting_instance,
    )


async def record_node_event(
    client: AsyncClient, node: str, reason: str, message: str, reporting_instance: str
) -> bool:
    """Create a Node Event; False (logged) when the API server refuses it."""
    event = node_event(node, reason, message, reporting_instance)
    where = f"the {NODE_EVENT_NAMESPACE} namespace"
    return await _create(client, event, f"the {reason} Event on node {node}", where)


OUTCOME_REASON = "LoadAwareEvictionOutcome"
# The API group of the workload kinds the descheduler evicts from; another kind (a
# custom resource) is named without one.
_API_VERSIONS = {
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "ReplicationController": "v1",
}


def outcome_event(workload: str, message: str, reporting_instance: str, at_s: float) -> Event:
    """One Event on a workload (``namespace/Kind/name``): its evictions judged this run."""
    namespace, kind, name = workload.split("/", 2)
    involved = ObjectReference(
        apiVersion=_API_VERSIONS.get(kind), kind=kind, namespace=namespace, name=name
    )
    text = message.encode()[:MESSAGE_BYTES].decode(errors="ignore")
    return _event(
        involved,
        namespace,
        (OUTCOME_REASON, text, "Normal", "Judge"),
        datetime.fromtimestamp(at_s, tz=UTC),
        reporting_instance,
    )


async def record_outcomes(
    client: AsyncClient, workload: str, message: str, reporting_instance: str, at_s: float
) -> bool:
    """Create a workload's outcome Event; False (logged) when the API server refuses it."""
    event = outcome_event(workload, message, reporting_instance, at_s)
    namespace = workload.split("/", 1)[0]
    where = f"the {namespace} namespace"
    return await _create(client, event, f"the eviction outcome Event for {workload}", where)
