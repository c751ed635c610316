"""Writing to Nodes: loadaware's annotations (one merge patch per node, many nodes at
once) and its soft taint (a read-modify-write of ``spec.taints``).

A JSON merge patch of ``metadata.annotations`` sets exactly the keys it names and
leaves every other annotation alone, so there is no read-modify-write and nothing
for a concurrent writer to conflict with. Answers are handled per node:

* 404: the node was deleted since the node list; nothing to do.
* 409, 429, 5xx and network errors: retried a few times with a short backoff, then
  counted and given up until the next sync (the next sync rewrites everything).
* other 4xx (403 from missing RBAC, 422): not retried; the message says what to fix.

The soft taint cannot be written that way: ``spec.taints`` is a list, which a merge
patch replaces whole, so another writer's taint added between our read and our write
would be lost. ``TaintWriter`` reads the Node, changes only the entry with loadaware's
key, and sends the whole list with the ``resourceVersion`` it read: the API server
applies it only to that version (409 otherwise), and a conflict starts again from a
fresh read. Every other taint stays as it was, in its order.

Every attempt first asks ``may_write``: a replica that loses its lease stops writing
at the next node, not at the end of the sync.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import httpx2
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

from app.kube.api_errors import describe_api_error
from app.objects import Taint

__all__ = [
    "AnnotationPatcher",
    "PatchOutcome",
    "PatchReport",
    "TaintWriter",
]

log = logging.getLogger(__name__)


class PatchOutcome(StrEnum):
    WRITTEN = "written"
    NODE_GONE = "node_gone"  # 404
    CONFLICT = "conflict"  # 409 after retries
    THROTTLED = "throttled"  # 429 after retries
    SERVER_ERROR = "server_error"  # 5xx after retries
    REJECTED = "rejected"  # other 4xx: not retried
    NETWORK_ERROR = "network_error"
    NOT_LEADER = "not_leader"  # skipped: leadership was lost
    UNCHANGED = "unchanged"  # the node already was as asked: nothing sent

    @property
    def is_error(self) -> bool:
        return self not in {
            PatchOutcome.WRITTEN,
            PatchOutcome.NODE_GONE,
            PatchOutcome.NOT_LEADER,
            PatchOutcome.UNCHANGED,
        }


@dataclass
class PatchReport:
    outcomes: dict[str, PatchOutcome] = field(default_factory=dict)  # node -> outcome

    def count(self, outcome: PatchOutcome) -> int:
        return sum(1 for o in self.outcomes.values() if o is outcome)

    @property
    def written(self) -> int:
        return self.count(PatchOutcome.WRITTEN)

    @property
    def errors(self) -> int:
        return sum(1 for o in self.outcomes.values() if o.is_error)

    def summary(self) -> str:
        counts = Counter(o.value for o in self.outcomes.values())
        return ", ".join(f"{n} {name}" for name, n in sorted(counts.items())) or "none"


def annotation_patch(annotations: Mapping[str, str]) -> dict[str, object]:
    return {"metadata": {"annotations": dict(annotations)}}


_RETRIED_STATUSES = {409: PatchOutcome.CONFLICT, 429: PatchOutcome.THROTTLED}


def _classify(status: int) -> tuple[PatchOutcome, bool]:
    """The outcome for an HTTP status, and whether trying again may help."""
    if status == 404:
        return PatchOutcome.NODE_GONE, False
    if status in _RETRIED_STATUSES:
        return _RETRIED_STATUSES[status], True
    if status >= 500:
        return PatchOutcome.SERVER_ERROR, True
    return PatchOutcome.REJECTED, False


class AnnotationPatcher:
    def __init__(
        self,
        client: AsyncClient,
        *,
        concurrency: int = 16,
        may_write: Callable[[], bool] = lambda: True,
        attempts: int = 3,
        first_backoff_s: float = 0.2,
        on_retry: Callable[[PatchOutcome], None] = lambda _outcome: None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"--patch-concurrency must be at least 1, got {concurrency}")
        self._client = client
        self._concurrency = concurrency
        self._may_write = may_write
        self._attempts = attempts
        self._first_backoff_s = first_backoff_s
        self._on_retry = on_retry

    async def patch_nodes(self, patches: Mapping[str, Mapping[str, str]]) -> PatchReport:
        """Send one patch per node, at most ``concurrency`` in flight; never raises for a node."""
        report = PatchReport()
        gate = asyncio.Semaphore(self._concurrency)

        async def one(node: str, annotations: Mapping[str, str]) -> None:
            async with gate:
                report.outcomes[node] = await self._patch_one(node, annotations)

        async with asyncio.TaskGroup() as group:
            for node, annotations in patches.items():
                group.create_task(one(node, annotations))
        return report

    async def _patch_one(self, node: str, annotations: Mapping[str, str]) -> PatchOutcome:
        body = annotation_patch(annotations)

        async def send() -> PatchOutcome:
            await self._client.patch(Node, node, body, patch_type=PatchType.MERGE)
            return PatchOutcome.WRITTEN

        return await _with_retries(
            send,
            node=node,
            what="annotations",
            attempts=self._attempts,
            first_backoff_s=self._first_backoff_s,
            may_write=self._may_write,
            on_retry=self._on_retry,
        )


async def _with_retries(
    send: Callable[[], Awaitable[PatchOutcome]],
    *,
    node: str,
    what: str,
    attempts: int,
    first_backoff_s: float,
    may_write: Callable[[], bool],
    on_retry: Callable[[PatchOutcome], None],
) -> PatchOutcome:
    """Run ``send`` until it answers, retrying what may pass on a second try (module doc)."""
    outcome = PatchOutcome.NETWORK_ERROR
    detail = ""
    for attempt in range(1, attempts + 1):
        if not may_write():
            return PatchOutcome.NOT_LEADER
        try:
            return await send()
        except httpx2.HTTPStatusError as error:
            status = error.response.status_code
            outcome, retry = _classify(status)
            detail = describe_api_error(error)
            if outcome is PatchOutcome.NODE_GONE:
                log.info("node %s is gone (404); skipped its %s", node, what)
                return outcome
            if not retry:
                log.error(
                    "writing the %s of node %s was rejected (%s); not retrying. A 403 means "
                    "the annotator's ServiceAccount lacks a verb on nodes (deploy/base/"
                    "annotator-rbac.yaml); a 422 naming loadaware, that its admission policy "
                    "refused the change",
                    what,
                    node,
                    detail,
                )
                return outcome
        except httpx2.HTTPError as error:
            outcome = PatchOutcome.NETWORK_ERROR
            detail = describe_api_error(error)
        if attempt < attempts:
            on_retry(outcome)
            backoff_s = first_backoff_s * 2 ** (attempt - 1)
            await asyncio.sleep(backoff_s * random.uniform(0.5, 1.0))
    log.warning(
        "writing the %s of node %s failed %d times (%s); giving up until the next round",
        what,
        node,
        attempts,
        detail,
    )
    return outcome


def taint_entry(taint: Taint) -> dict[str, str]:
    entry = {"key": taint.key, "effect": taint.effect}
    if taint.value is not None:
        entry["value"] = taint.value
    return entry


def taints_with(
    current: Sequence[Mapping[str, object]], taint: Taint, present: bool
) -> list[dict[str, object]] | None:
    """``current`` with ``taint`` present or absent, every taint of another key kept as
    it is and where it is; None when ``current`` already is so. Any entry with the
    taint's key but not its value or effect is replaced: the key is loadaware's."""
    ours = [dict(t) for t in current if t.get("key") == taint.key]
    wanted: list[dict[str, object]] = [dict(taint_entry(taint))] if present else []
    if ours == wanted:
        return None
    others = [dict(t) for t in current if t.get("key") != taint.key]
    return others + wanted


def taints_patch(
    resource_version: str | None, taints: Sequence[Mapping[str, object]]
) -> dict[str, object]:
    """The merge patch that sets a Node's taints to ``taints`` (none: the field goes)
    only if the Node is still at ``resource_version``: else the API server answers 409."""
    return {
        "metadata": {"resourceVersion": resource_version},
        "spec": {"taints": [dict(t) for t in taints] or None},
    }


class TaintWriter:
    """Adds or removes one taint on a Node, leaving its other taints alone (module doc)."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        may_write: Callable[[], bool] = lambda: True,
        attempts: int = 4,
        first_backoff_s: float = 0.1,
        on_retry: Callable[[PatchOutcome], None] = lambda _outcome: None,
    ) -> None:
        self._client = client
        self._may_write = may_write
        self._attempts = attempts
        self._first_backoff_s = first_backoff_s
        self._on_retry = on_retry

    async def set_taint(self, node: str, taint: Taint, present: bool) -> PatchOutcome:
        """Make ``node`` carry ``taint`` or not; never raises for the node."""

        async def read_modify_write() -> PatchOutcome:
            current = await self._client.get(Node, node)
            metadata = current.metadata
            version = metadata.resourceVersion if metadata is not None else None
            taints = (current.spec.taints if current.spec is not None else None) or []
            entries = [t.to_dict() for t in taints]
            changed = taints_with(entries, taint, present)
            if changed is None:
                return PatchOutcome.UNCHANGED
            body = taints_patch(version, changed)
            await self._client.patch(Node, node, body, patch_type=PatchType.MERGE)
            return PatchOutcome.WRITTEN

        return await _with_retries(
            read_modify_write,
            node=node,
            what=f"taint {taint.key}",
            attempts=self._attempts,
            first_backoff_s=self._first_backoff_s,
            may_write=self._may_write,
            on_retry=self._on_retry,
        )
