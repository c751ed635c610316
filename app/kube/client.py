"""Building the Kubernetes API client from a kubeconfig or the in-cluster service account."""

from __future__ import annotations

from typing import TypeAlias

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.config.models import Cluster, User

__all__ = [
    "KubeClient",
    "KubeConfigError",
    "make_client",
]

FIELD_MANAGER = "loadaware"

# The API client every part of loadaware is handed: only app/kube calls it.
KubeClient: TypeAlias = AsyncClient


class KubeConfigError(ValueError):
    """No usable client configuration; the message says where it was sought and what to do."""


def make_client(kubeconfig: str | None = None, timeout_s: float = 10.0) -> AsyncClient:
    """A client from ``kubeconfig``, else in-cluster config, $KUBECONFIG or ~/.kube/config.

    Raises KubeConfigError when none of them gives a usable configuration.
    """
    try:
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
    except Exception as error:  # lightkube raises several types for missing or bad files
        where = kubeconfig or "in-cluster config, $KUBECONFIG or ~/.kube/config"
        problem = _kubeconfig_problem(error)
        raise KubeConfigError(
            f"cannot build a Kubernetes client from {where}: {problem}. Pass --kubeconfig "
            "FILE, or run in a pod with a ServiceAccount"
        ) from None
    try:
        # Files the configuration names (certificate-authority, client-certificate) are
        # opened here: a missing one is as much a configuration error as a missing file.
        return AsyncClient(
            config=config, timeout=httpx2.Timeout(timeout_s), field_manager=FIELD_MANAGER
        )
    except Exception as error:  # ssl and OS errors, lightkube's own
        where = kubeconfig or "the in-cluster config, $KUBECONFIG or ~/.kube/config"
        raise KubeConfigError(f"cannot build a Kubernetes client from {where}: {error}") from None


NEEDS = "a kubeconfig needs clusters, users, contexts and a current-context"


def _kubeconfig_problem(error: Exception) -> str:
    """What lightkube's error about a kubeconfig means, in the operator's words."""
    # A missing section comes as a bare KeyError ('clusters'); an empty file or one
    # that is no mapping as an AttributeError or TypeError about None or a list.
    if isinstance(error, KeyError) and error.args:
        return f"{error.args[0]!r} is missing from it ({NEEDS})"
    if isinstance(error, AttributeError | TypeError):
        return f"it is empty or not a kubeconfig ({NEEDS})"
    if isinstance(error, UnicodeDecodeError):
        return "it is not UTF-8 text"
    return str(error)


def client_for_server(url: str, timeout_s: float = 10.0) -> AsyncClient:
    """A client for an API server URL without authentication (tests, `kubectl proxy`)."""
    # KubeConfig.from_server leaves the user unset, which lightkube then refuses.
    config = KubeConfig.from_one(cluster=Cluster(server=url), user=User(), namespace="default")
    return AsyncClient(
        config=config,
        timeout=httpx2.Timeout(timeout_s),
        field_manager=FIELD_MANAGER,
    )
