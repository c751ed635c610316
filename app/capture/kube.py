"""Read what a capture needs from the API server: list only, never a watch or a write.

Each list is paged (``limit``/``continue``), so a 100,000-pod cluster is read in pages
rather than in one answer. A resource the user may not list is one clear error naming
it and the ClusterRole that grants it (docs/simulate.md, "RBAC for capture").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import DaemonSet, Deployment, ReplicaSet, StatefulSet
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget

from app.capture.history import CaptureError

PAGE = 500
CONTROLLERS: Mapping[str, tuple[Any, str]] = {
    "Deployment": (Deployment, "deployments.apps"),
    "ReplicaSet": (ReplicaSet, "replicasets.apps"),
    "StatefulSet": (StatefulSet, "statefulsets.apps"),
    "DaemonSet": (DaemonSet, "daemonsets.apps"),
    "Job": (Job, "jobs.batch"),
}
RBAC_HINT = "grant the read-only ClusterRole in docs/simulate.md ('RBAC for capture')"


@dataclass
class ClusterObjects:
    nodes: list[Any]
    pods: list[Any]
    controllers: dict[str, list[Any]]
    budgets: list[Any]


def _refused(error: ApiError, what: str) -> CaptureError:
    code = error.status.code if error.status else None
    if code == 403:
        return CaptureError(f"cannot list {what}: forbidden for this user; {RBAC_HINT}")
    return CaptureError(f"cannot list {what}: {error.status.message if error.status else error}")


async def _all(client: AsyncClient, kind: Any, what: str, namespaced: bool) -> list[Any]:
    try:
        if namespaced:
            listing = client.list(kind, namespace="*", chunk_size=PAGE)
        else:
            listing = client.list(kind, chunk_size=PAGE)
        return [item async for item in listing]
    except ApiError as error:
        raise _refused(error, what) from None


async def read_cluster(client: AsyncClient) -> ClusterObjects:
    controllers = {
        kind: await _all(client, resource, what, True)
        for kind, (resource, what) in CONTROLLERS.items()
    }
    return ClusterObjects(
        nodes=await _all(client, Node, "nodes", False),
        pods=await _all(client, Pod, "pods", True),
        controllers=controllers,
        budgets=await _all(client, PodDisruptionBudget, "poddisruptionbudgets.policy", True),
    )


async def read_config_map(
    client: AsyncClient, namespace: str, name: str, key: str
) -> str | None:
    """The text under ``key`` of a ConfigMap; None when it is not installed."""
    try:
        config_map = await client.get(ConfigMap, name, namespace=namespace)
    except ApiError as error:
        if error.status and error.status.code == 404:
            return None
        code = error.status.code if error.status else None
        if code == 403:
            raise CaptureError(
                f"cannot read configmap {namespace}/{name}: forbidden for this user; "
                f"{RBAC_HINT}, or pass the file with a flag"
            ) from None
        raise CaptureError(f"cannot read configmap {namespace}/{name}: {error}") from None
    return (config_map.data or {}).get(key)
