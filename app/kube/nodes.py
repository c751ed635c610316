"""A Node cache fed by list and watch, shared by the extender and the annotator.

It keeps only what loadaware reads (name, annotations, InternalIP), relists when the
watch expires (410 Gone) or breaks, and tells listeners about every change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Node

from app.kube.listwatch import list_then_watch

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    annotations: Mapping[str, str]
    internal_ip: str | None


NodeListener = Callable[[str, NodeInfo | None], None]
"""Called with a node's name and its new state, or None when the node is gone."""


def node_info(node: Any) -> NodeInfo:
    metadata = node.metadata
    addresses = (node.status.addresses if node.status else None) or []
    internal_ip = next((a.address for a in addresses if a.type == "InternalIP"), None)
    return NodeInfo(
        name=metadata.name,
        annotations=MappingProxyType(dict(metadata.annotations or {})),
        internal_ip=internal_ip,
    )


class NodeCache:
    """All Nodes, kept current by list + watch. Run ``run()`` as a task."""

    def __init__(
        self, client: AsyncClient, *, retry_delay_s: float = 1.0, max_retry_delay_s: float = 30.0
    ) -> None:
        self._client = client
        self._nodes: dict[str, NodeInfo] = {}
        self._listeners: list[NodeListener] = []
        self._synced = asyncio.Event()
        self._retry_delay_s = retry_delay_s
        self._max_retry_delay_s = max_retry_delay_s
        self.last_heard_s: float | None = None  # monotonic time of the last list or event

    @property
    def nodes(self) -> Mapping[str, NodeInfo]:
        return MappingProxyType(self._nodes)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def add_listener(self, listener: NodeListener) -> None:
        self._listeners.append(listener)

    def age_s(self) -> float | None:
        """Seconds since the API server was last heard from, or None before the first list."""
        return None if self.last_heard_s is None else time.monotonic() - self.last_heard_s

    async def run(self) -> None:
        await list_then_watch(
            self._relist,
            self._watch,
            what="node",
            retry_delay_s=self._retry_delay_s,
            max_retry_delay_s=self._max_retry_delay_s,
        )

    async def _relist(self) -> str:
        listing = self._client.list(Node)
        fresh: dict[str, NodeInfo] = {}
        async for node in listing:
            info = node_info(node)
            fresh[info.name] = info
        resource_version = listing.resourceVersion
        gone = self._nodes.keys() - fresh.keys()
        for name in gone:
            self._apply(name, None)
        for name, info in fresh.items():
            if self._nodes.get(name) != info:
                self._apply(name, info)
        self.last_heard_s = time.monotonic()
        if not self._synced.is_set():
            log.info("node cache synced: %d nodes", len(self._nodes))
        self._synced.set()
        return resource_version

    async def _watch(self, resource_version: str) -> None:
        async for event_type, node in self._client.watch(Node, resource_version=resource_version):
            self.last_heard_s = time.monotonic()
            if event_type == "BOOKMARK":
                continue
            info = node_info(node)
            self._apply(info.name, None if event_type == "DELETED" else info)

    def _apply(self, name: str, info: NodeInfo | None) -> None:
        if info is None:
            self._nodes.pop(name, None)
        else:
            self._nodes[name] = info
        for listener in self._listeners:
            try:
                listener(name, info)
            except Exception:
                log.exception("node listener failed for node %s", name)
