"""The descheduler's Events: one on each evicted pod, read back as eviction history.

Each Event (core/v1, reason ``LoadAwareDescheduled``) says in its message, for the
operator running ``kubectl describe pod`` or ``kubectl get events``, which node was
hot on which metric, the values, the pod's usage and the destination the plan
reserved room on. Its annotations carry the same facts in machine-readable form, so
that ``list_recent_evictions`` can rebuild the history after a restart, on another
replica after a leader change, or in the next ``--once`` run: convergence (usage the
samples do not show yet) and workload cooldowns live in the cluster, not in memory.

Events expire (kube-apiserver's ``--event-ttl``, 1 h by default), which bounds how far
back the history reaches; settle times and cooldowns must stay below it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event

from app.load.resources import Resources
from app.rebalance.view import EvictionRecord

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


def record_from_event(pod_key: str, annotations: Mapping[str, str]) -> EvictionRecord | None:
    """The record an Event's annotations describe; None for an Event missing them."""
    try:
        return EvictionRecord(
            pod_key=pod_key,
            uid=annotations[POD_UID],
            node=annotations[SOURCE_NODE],
            destination=annotations.get(DESTINATION_NODE) or None,
            usage=Resources(float(annotations[CPU_CORES]), float(annotations[MEMORY_BYTES])),
            evicted_at_s=datetime.fromisoformat(annotations[EVICTED_AT]).timestamp(),
            workload=annotations.get(WORKLOAD) or None,
        )
    except (KeyError, ValueError):
        return None


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


async def list_recent_evictions(client: AsyncClient, since_s: float) -> list[EvictionRecord]:
    """Every eviction recorded by a descheduler Event at or after ``since_s``, oldest first.

    Raises what the client raises: without its history the run must not evict.
    """
    records: list[EvictionRecord] = []
    events = client.list(Event, namespace="*", fields={"reason": REASON})
    async for event in events:
        record = _record_of(event)
        if record is not None and record.evicted_at_s >= since_s:
            records.append(record)
    records.sort(key=lambda r: r.evicted_at_s)
    return records


def _record_of(event: Any) -> EvictionRecord | None:
    involved = event.involvedObject
    metadata = event.metadata
    if involved is None or metadata is None or involved.kind != "Pod":
        return None
    record = record_from_event(
        f"{involved.namespace}/{involved.name}", dict(metadata.annotations or {})
    )
    if record is None:
        log.warning(
            "ignoring %s Event %s/%s: its %s* annotations are missing or unreadable",
            REASON,
            metadata.namespace,
            metadata.name,
            _PREFIX,
        )
    return record
