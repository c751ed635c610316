"""The descheduler's Events: one on each evicted pod, the record for humans.

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

log = logging.getLogger(__name__)

REASON = "LoadAwareDescheduled"
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
    involved = ObjectReference(
        apiVersion="v1", kind="Pod", namespace=namespace, name=name, uid=record.uid
    )
    return _event(
        involved, REASON, "Evict", notice.message, record.evicted_at_s, reporting_instance,
        record_annotations(record),
    )  # fmt: skip


def _event(
    involved: ObjectReference,
    reason: str,
    action: str,
    message: str,
    at_s: float,
    reporting_instance: str,
    annotations: dict[str, str] | None = None,
) -> Event:
    """A Normal Event of the descheduler's on ``involved``, at ``at_s``."""
    at = datetime.fromtimestamp(at_s, tz=UTC)
    return Event(
        metadata=ObjectMeta(
            # As client-go names them: the object's name and a hex timestamp.
            name=f"{involved.name}.{time.time_ns():x}",
            namespace=involved.namespace,
            annotations=annotations,
        ),
        involvedObject=involved,
        reason=reason,
        message=message,
        type="Normal",
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
    try:
        await client.create(eviction_event(notice, reporting_instance))
    except Exception as error:  # an Event must never stop the run
        log.error(
            "could not record the eviction Event for pod %s (%s); the descheduler needs "
            "'create' on events in the pod's namespace",
            notice.record.pod_key,
            error,
        )
        return False
    return True


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
    return _event(involved, OUTCOME_REASON, "Judge", message[:1024], at_s, reporting_instance)


async def record_outcomes(
    client: AsyncClient, workload: str, message: str, reporting_instance: str, at_s: float
) -> bool:
    """Create a workload's outcome Event; False (logged) when the API server refuses it."""
    try:
        await client.create(outcome_event(workload, message, reporting_instance, at_s))
    except Exception as error:  # an Event must never stop the run
        log.error(
            "could not record the eviction outcome Event for %s (%s); the descheduler "
            "needs 'create' on events in the workload's namespace",
            workload,
            error,
        )
        return False
    return True
