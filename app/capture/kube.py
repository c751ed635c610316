"""Read what a capture needs from the API server: list only, never a watch or a write
(``app.kube.ClusterReader``, which pages every list).

A resource the user may not list is one clear error naming it and the ClusterRole that
grants it (docs/simulate.md, "RBAC for capture").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.kube import ClusterReader, KubeClient

# The controllers a workload can belong to, by kind: the resource a reader lists.
CONTROLLERS: Mapping[str, str] = {
    "Deployment": "deployments.apps",
    "ReplicaSet": "replicasets.apps",
    "StatefulSet": "statefulsets.apps",
    "DaemonSet": "daemonsets.apps",
    "Job": "jobs.batch",
}
RBAC_HINT = "grant the read-only ClusterRole in docs/simulate.md ('RBAC for capture')"


@dataclass
class ClusterObjects:
    nodes: list[Any]
    pods: list[Any]
    controllers: dict[str, list[Any]]
    budgets: list[Any]


def cluster_reader(client: KubeClient) -> ClusterReader:
    return ClusterReader(client, RBAC_HINT)


async def read_cluster(reader: ClusterReader) -> ClusterObjects:
    controllers = {kind: await reader.list_all(what) for kind, what in CONTROLLERS.items()}
    return ClusterObjects(
        nodes=await reader.list_all("nodes"),
        pods=await reader.list_all("pods"),
        controllers=controllers,
        budgets=await reader.list_all("poddisruptionbudgets.policy"),
    )
