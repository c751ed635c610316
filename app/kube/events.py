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
    at = datetime.fromtimestamp(record.evicted_at_s, tz=UTC)
    return Event(
        metadata=ObjectMeta(
            # As client-go names them: the object's name and a hex timestamp.
            name=f"{name}.{time.time_ns():x}",
            namespace=namespace,
            annotations=record_annotations(record),
        ),
        involvedObject=ObjectReference(
            apiVersion="v1", kind="Pod", namespace=namespace, name=name, uid=record.uid
        ),
        reason=REASON,
        message=notice.message,
        type="Normal",
        action="Evict",
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


def node_event(node: str, reason: str, message: str, reporting_instance: str) -> Event:
    """A Warning Event on a Node, for ``kubectl describe node``."""
    now = datetime.now(tz=UTC)
    text = message.encode()[:MESSAGE_BYTES].decode(errors="ignore")
    return Event(
        metadata=ObjectMeta(name=f"{node}.{time.time_ns():x}", namespace=NODE_EVENT_NAMESPACE),
        involvedObject=ObjectReference(apiVersion="v1", kind="Node", name=node),
        reason=reason,
        message=text,
        type="Warning",
        action="Plan",
        count=1,
        firstTimestamp=now,
        lastTimestamp=now,
        source=EventSource(component=COMPONENT),
        reportingComponent=COMPONENT,
        reportingInstance=reporting_instance,
    )


async def record_node_event(
    client: AsyncClient, node: str, reason: str, message: str, reporting_instance: str
) -> bool:
    """Create a Node Event; False (logged) when the API server refuses it."""
    try:
        await client.create(node_event(node, reason, message, reporting_instance))
    except Exception as error:  # an Event must never stop the run
        log.error(
            "could not record the %s Event on node %s (%s); the descheduler needs 'create' "
            "on events in the %s namespace",
            reason,
            node,
            error,
            NODE_EVENT_NAMESPACE,
        )
        return False
    return True
