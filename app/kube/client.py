"""Building the Kubernetes API client from a kubeconfig or the in-cluster service account."""

from __future__ import annotations

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.config.models import Cluster, User

FIELD_MANAGER = "loadaware"


def make_client(kubeconfig: str | None = None, timeout_s: float = 10.0) -> AsyncClient:
    """A client from ``kubeconfig``, else in-cluster config, $KUBECONFIG or ~/.kube/config."""
    config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
    return AsyncClient(
        config=config, timeout=httpx2.Timeout(timeout_s), field_manager=FIELD_MANAGER
    )


def client_for_server(url: str, timeout_s: float = 10.0) -> AsyncClient:
    """A client for an API server URL without authentication (tests, `kubectl proxy`)."""
    # KubeConfig.from_server leaves the user unset, which lightkube then refuses.
    config = KubeConfig.from_one(cluster=Cluster(server=url), user=User(), namespace="default")
    return AsyncClient(
        config=config,
        timeout=httpx2.Timeout(timeout_s),
        field_manager=FIELD_MANAGER,
    )
