"""The ConfigMaps loadaware writes for itself: one shape, labelled with its component."""

from __future__ import annotations

from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap


def own_config_map(
    name: str,
    namespace: str,
    component: str,
    data: dict[str, str],
    resource_version: str | None = None,
) -> ConfigMap:
    """A ConfigMap of loadaware's ``component``, optionally guarded by ``resource_version``."""
    return ConfigMap(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            resourceVersion=resource_version,
            labels={
                "app.kubernetes.io/name": "loadaware",
                "app.kubernetes.io/component": component,
            },
        ),
        data=data,
    )


class OwnConfigMapStore:
    """Where one of loadaware's own ConfigMaps lives, and the client that reads and
    writes it; a store says what it keeps there."""

    default_name: str

    def __init__(self, client: AsyncClient, namespace: str, name: str | None = None) -> None:
        self._client = client
        self.namespace = namespace
        self.name = name if name is not None else self.default_name

    @property
    def where(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"
