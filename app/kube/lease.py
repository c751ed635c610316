"""A ``coordination.k8s.io/v1`` Lease as the leader election reads and writes it.

The election's rules live in ``app.runtime.leader_election``; here is only the API: read
the Lease (None when there is none), create it, replace it under the resourceVersion it
was read with. A write another replica made first (409) is None, not an error; every
other failure raises ``LeaseUnavailable``, with one line saying why (``api_errors``) and
whether the request reached an API server at all.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from app.kube.api_errors import (
    describe_api_error,
    is_api_error,
    is_refusal,
    status_code,
    unreachable,
)

__all__ = [
    "LeaseRecord",
    "LeaseStore",
    "LeaseUnavailable",
    "ReadLease",
]


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What a Lease says: who holds it, for how long, since when."""

    holder: str | None = None
    duration_s: int | None = None
    acquired: datetime | None = None
    renewed: datetime | None = None
    transitions: int | None = None


@dataclass(frozen=True, slots=True)
class ReadLease:
    """A Lease as read: its record, and the object a replace writes back (with its
    resourceVersion, so that a replica that wrote in between wins)."""

    record: LeaseRecord
    stored: Any = field(repr=False, compare=False)


class LeaseUnavailable(Exception):
    """A Lease request failed; the message says why. ``unreachable``: it reached no API
    server (worth trying again at once); ``code``: the API server's status, if any."""

    def __init__(self, message: str, unreachable: bool, code: int | None) -> None:
        super().__init__(message)
        self.unreachable = unreachable
        self.code = code


def _record(lease: Any) -> LeaseRecord:
    spec = lease.spec or LeaseSpec()
    return LeaseRecord(
        holder=spec.holderIdentity or None,
        duration_s=spec.leaseDurationSeconds,
        acquired=spec.acquireTime,
        renewed=spec.renewTime,
        transitions=spec.leaseTransitions,
    )


def _spec(record: LeaseRecord) -> LeaseSpec:
    return LeaseSpec(
        holderIdentity=record.holder,
        leaseDurationSeconds=record.duration_s,
        acquireTime=record.acquired,
        renewTime=record.renewed,
        leaseTransitions=record.transitions,
    )


def _unavailable(error: BaseException, server: str) -> LeaseUnavailable:
    return LeaseUnavailable(
        describe_api_error(error, server), unreachable(error), status_code(error)
    )


class LeaseStore:
    """One Lease, ``namespace``/``name``, through ``client``."""

    def __init__(self, client: AsyncClient, namespace: str, name: str) -> None:
        self._client = client
        self.namespace = namespace
        self.name = name

    async def read(self) -> ReadLease | None:
        """The Lease; None when there is none."""
        return await self._answer(self._client.get(Lease, self.name, namespace=self.namespace), 404)

    async def create(self, record: LeaseRecord) -> ReadLease | None:
        """The Lease created with ``record``; None when another replica created it first."""
        lease = Lease(
            metadata=ObjectMeta(name=self.name, namespace=self.namespace), spec=_spec(record)
        )
        return await self._answer(self._client.create(lease), 409)

    async def replace(self, read: ReadLease, record: LeaseRecord) -> ReadLease | None:
        """The Lease ``read`` rewritten with ``record``; None when another replica wrote
        it since it was read."""
        read.stored.spec = _spec(record)
        return await self._answer(self._client.replace(read.stored), 409)

    async def _answer(self, call: Awaitable[Any], none_on: int) -> ReadLease | None:
        """The Lease a request answers with; None when the API server refuses it with
        ``none_on`` (404 to a read: there is none; 409 to a write: another replica wrote
        first)."""
        try:
            lease = await call
        except Exception as error:
            if is_refusal(error, none_on):
                return None
            if is_api_error(error):
                raise _unavailable(error, str(self._client.config.cluster.server or "")) from None
            raise
        return ReadLease(_record(lease), lease)
