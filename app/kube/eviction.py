"""Evicting a pod through the ``policy/v1`` Eviction subresource, and nothing else.

An eviction, unlike a DELETE, asks the API server to honour the pod's
PodDisruptionBudget: it answers 201 when the pod is being evicted and 429 when a
budget has no disruption left. The call carries the pod's UID as a precondition, so
a pod recreated under the same name (a StatefulSet's, say) is never evicted in its
place. Answers become outcomes; nothing here retries, so a failing API server costs
one call per planned pod, never a tight loop:

* 201 (or 200): evicted;
* 429: blocked by a PodDisruptionBudget; skip the pod and go on;
* 404, or 409 from the UID precondition: the pod planned for is gone already;
* anything else (403 from missing RBAC, 500, a network error): an error, logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

import httpx2
from lightkube import AsyncClient
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta, Preconditions
from lightkube.resources.core_v1 import PodEviction

from app.kube.api_errors import describe_api_error

__all__ = [
    "EvictionOutcome",
    "evict_pod",
]

log = logging.getLogger(__name__)


class EvictionOutcome(StrEnum):
    EVICTED = "evicted"
    BLOCKED_BY_PDB = "blocked_by_pdb"
    GONE = "gone"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class EvictionResult:
    outcome: EvictionOutcome
    detail: str = ""  # the API server's message, for logs and Events


def eviction_body(namespace: str, name: str, uid: str | None) -> PodEviction:
    preconditions = Preconditions(uid=uid) if uid else None
    return PodEviction(
        apiVersion="policy/v1",
        kind="Eviction",
        metadata=ObjectMeta(name=name, namespace=namespace),
        deleteOptions=DeleteOptions(preconditions=preconditions) if preconditions else None,
    )


def classify(status: int) -> EvictionOutcome:
    if status in (200, 201):
        return EvictionOutcome.EVICTED
    if status == 429:
        return EvictionOutcome.BLOCKED_BY_PDB
    if status in (404, 409):
        return EvictionOutcome.GONE
    return EvictionOutcome.ERROR


async def evict_pod(
    client: AsyncClient, namespace: str, name: str, uid: str | None = None
) -> EvictionResult:
    """POST one Eviction; never raises for an API or network error."""
    try:
        await client.create(eviction_body(namespace, name, uid), name=name, namespace=namespace)
    except httpx2.HTTPStatusError as error:
        status = error.response.status_code
        outcome = classify(status)
        detail = describe_api_error(error)
        if outcome is EvictionOutcome.ERROR:
            hint = (
                "; the descheduler's ServiceAccount needs 'create' on pods/eviction"
                if status == 403
                else ""
            )
            log.error("evicting pod %s/%s failed (%s)%s", namespace, name, detail, hint)
        return EvictionResult(outcome, detail)
    except httpx2.HTTPError as error:
        detail = describe_api_error(error)
        log.error("evicting pod %s/%s failed (%s)", namespace, name, detail)
        return EvictionResult(EvictionOutcome.ERROR, detail)
    return EvictionResult(EvictionOutcome.EVICTED)
