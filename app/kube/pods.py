"""The Pod cache shared by every component, fed by list and watch across all namespaces.

It is generic: each user passes a ``transform`` that keeps only what it reads of a
pod (the annotator: where a pod is bound; the descheduler: what eviction rules need),
and listens for (old, new) changes. Pods are keyed ``namespace/name``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod

from app.kube.cache import WatchCache

T = TypeVar("T")


def pod_key(pod: Any) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


class PodCache(WatchCache[T]):
    """All pods, reduced by ``transform``. Run ``run()`` as a task."""

    def __init__(
        self,
        client: AsyncClient,
        transform: Callable[[Any], T],
        *,
        while_down: str = "",
        retry_delay_s: float = 1.0,
        max_retry_delay_s: float = 30.0,
    ) -> None:
        super().__init__(
            client,
            Pod,
            transform,
            pod_key,
            what="pod",
            namespace="*",
            while_down=while_down,
            retry_delay_s=retry_delay_s,
            max_retry_delay_s=max_retry_delay_s,
        )
