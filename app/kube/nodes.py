"""The Node cache shared by every component, fed by list and watch.

It keeps only what loadaware reads of a Node: name, annotations, InternalIP, and the
facts that decide whether a pod could run there (labels, taints, allocatable,
schedulable and Ready).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Node

from app.kube.cache import Listener, WatchCache
from app.objects import NodeInfo, Resources, Taint

__all__ = ["NodeCache", "NodeInfo", "NodeListener", "Taint", "node_info"]


NodeListener = Listener[NodeInfo]


def node_info(node: Any) -> NodeInfo:
    metadata = node.metadata
    spec = node.spec
    status = node.status
    addresses = (status.addresses if status else None) or []
    internal_ip = next((a.address for a in addresses if a.type == "InternalIP"), None)
    conditions = (status.conditions if status else None) or []
    ready = next((c.status == "True" for c in conditions if c.type == "Ready"), False)
    taints = tuple(Taint(t.key, t.value, t.effect) for t in ((spec.taints if spec else None) or []))
    return NodeInfo(
        name=metadata.name,
        annotations=MappingProxyType(dict(metadata.annotations or {})),
        internal_ip=internal_ip,
        labels=MappingProxyType(dict(metadata.labels or {})),
        taints=taints,
        allocatable=Resources.of(status.allocatable if status else None),
        unschedulable=bool(spec.unschedulable) if spec else False,
        ready=ready,
    )


class NodeCache(WatchCache[NodeInfo]):
    """All Nodes, kept current by list + watch. Run ``run()`` as a task."""

    def __init__(
        self, client: AsyncClient, *, retry_delay_s: float = 1.0, max_retry_delay_s: float = 30.0
    ) -> None:
        super().__init__(
            client,
            Node,
            node_info,
            lambda node: str(node.metadata.name),
            what="node",
            retry_delay_s=retry_delay_s,
            max_retry_delay_s=max_retry_delay_s,
        )

    @property
    def nodes(self) -> Mapping[str, NodeInfo]:
        return self.objects
