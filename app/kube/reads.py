"""Reading the cluster once, for the commands people run (``explain``, ``capture``):
gets and lists only, never a watch or a write.

Every list is paged (``limit``/``continue``), so a 100,000-pod cluster is read in pages
rather than in one answer. A read the API server refuses, or cannot answer, raises
``ClusterUnreadable`` naming what was read, the server and why (``api_errors``), with
the caller's word on which role grants it when it was forbidden. A ConfigMap loadaware
reads its configuration from (``defaults.POLICY_CONFIGMAP``, ``DESCHEDULER_CONFIGMAP``)
is read one way: absent is not an error (the components then run on their built-in
defaults), its key or its only key is the text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from lightkube import AsyncClient
from lightkube.resources.apps_v1 import DaemonSet, Deployment, ReplicaSet, StatefulSet
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Event, Node
from lightkube.resources.core_v1 import Pod as Pod  # the API's Pod, which the views read
from lightkube.resources.policy_v1 import PodDisruptionBudget

from app.kube.api_errors import ClusterUnreadable, is_refusal, unreadable
from app.kube.defaults import OwnConfig

__all__ = [
    "ClusterReader",
    "Pod",
    "pod_from_mapping",
]

PAGE = 500

# What a reader lists, by the name RBAC gives it (resource.group): the resource, and
# whether it lives in namespaces.
LISTS: Mapping[str, tuple[Any, bool]] = {
    "nodes": (Node, False),
    "pods": (Pod, True),
    "poddisruptionbudgets.policy": (PodDisruptionBudget, True),
    "deployments.apps": (Deployment, True),
    "replicasets.apps": (ReplicaSet, True),
    "statefulsets.apps": (StatefulSet, True),
    "daemonsets.apps": (DaemonSet, True),
    "jobs.batch": (Job, True),
}


class ClusterReader:
    """The reads of one command, through one client; ``forbidden_hint`` says what role
    grants them (added to a 403)."""

    def __init__(self, client: AsyncClient, forbidden_hint: str) -> None:
        self.client = client  # also for the stores of loadaware's own ConfigMaps
        self._hint = forbidden_hint

    @property
    def server(self) -> str:
        return str(self.client.config.cluster.server or "")

    def failure(self, what: str, error: BaseException) -> ClusterUnreadable:
        """The one message for a read of ``what`` ("list nodes") that failed."""
        return unreadable(what, error, self.server, self._hint)

    async def list_all(self, resource: str) -> list[Any]:
        """Every object of ``resource`` (a key of ``LISTS``), in all namespaces."""
        kind, namespaced = LISTS[resource]
        try:
            if namespaced:
                listing = self.client.list(kind, namespace="*", chunk_size=PAGE)
            else:
                listing = self.client.list(kind, chunk_size=PAGE)
            return [item async for item in listing]
        except Exception as error:  # the API's refusals and the transport's errors
            raise self.failure(f"list {resource}", error) from None

    async def pod(self, namespace: str, name: str) -> Pod | None:
        """One pod; None when it does not exist."""
        try:
            return await self.client.get(Pod, name, namespace=namespace)
        except Exception as error:  # the API's refusals and the transport's errors
            if is_refusal(error, 404):
                return None
            raise self.failure(f"read Pod {namespace}/{name}", error) from None

    async def events_of(self, namespace: str, name: str) -> list[Event]:
        """The Events about the object named ``name`` in ``namespace``."""
        try:
            events = self.client.list(
                Event, namespace=namespace, fields={"involvedObject.name": name}
            )
            return [event async for event in events]
        except Exception as error:  # the API's refusals and the transport's errors
            raise self.failure(f"list Events of {namespace}/{name}", error) from None

    async def config_text(self, config: OwnConfig, namespace: str) -> tuple[str, str] | None:
        """(text, where it came from) of one of loadaware's configuration ConfigMaps:
        its key, or its only key; None when the ConfigMap is absent."""
        where = f"ConfigMap {namespace}/{config.name}"
        try:
            stored = await self.client.get(ConfigMap, config.name, namespace=namespace)
        except Exception as error:  # the API's refusals and the transport's errors
            if is_refusal(error, 404):
                return None
            raise self.failure(f"read {where}", error) from None
        data = dict(stored.data or {})
        if config.key in data:
            return data[config.key], f"{where} (key {config.key})"
        if len(data) == 1:
            ((only, text),) = data.items()
            return text, f"{where} (key {only})"
        keys = ", ".join(sorted(data)) or "none"
        raise ClusterUnreadable(f"{where} has no key {config.key!r} (keys: {keys})")

    async def close(self) -> None:
        await self.client.close()


def pod_from_mapping(document: Mapping[str, Any], source: str) -> Pod:
    """A Pod from its manifest as a mapping (a file, a controller's template).

    Raises ValueError naming ``source`` when it is not a Pod."""
    try:
        return cast(Pod, Pod.from_dict(dict(document)))
    except Exception as error:  # the models raise TypeError, ValueError, KeyError
        raise ValueError(f"{source}: not a Pod: {error}") from None
