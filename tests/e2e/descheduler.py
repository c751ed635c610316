"""The descheduler against a real control plane, as its own RBAC user: a run, and the
setup every such test needs (its roles, and, unless a test asks for a fresh install,
a memory ConfigMap that already exists)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any, cast

from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap

from app.descheduler.descheduler import Descheduler, LoopSettings, RunReport
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube import state
from app.policy import Policy, default_policy
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.rebalance.config import DeschedulerConfig
from tests.e2e.harness import REPO, ControlPlane

USER = "loadaware-descheduler"
STATE_NAMESPACE = "loadaware"


@contextlib.contextmanager
def descheduler_allowed(cluster: ControlPlane, *, memory: bool = True) -> Iterator[None]:
    """Grant the shipped descheduler RBAC to USER and, with ``memory``, create its
    (empty) memory; without, the first run makes it, as on a fresh install. The memory
    is deleted afterwards either way."""
    cluster.grant(REPO / "deploy" / "base" / "descheduler-rbac.yaml", USER)
    admin = cluster.client()
    if memory:
        empty = {"version": 1, "evictions": [], "hotRounds": {}}
        admin.create(
            ConfigMap(
                metadata=ObjectMeta(name=state.DEFAULT_NAME, namespace=STATE_NAMESPACE),
                data={state.STATE_KEY: json.dumps(empty)},
            )
        )
    try:
        yield
    finally:
        with contextlib.suppress(ApiError):  # a fresh install's run may have made none
            admin.delete(ConfigMap, state.DEFAULT_NAME, namespace=STATE_NAMESPACE)


def run_once(
    cluster: ControlPlane,
    prometheus_url: str,
    config: DeschedulerConfig,
    telemetry: DeschedulerMetrics | None = None,
    policy: Policy | None = None,
) -> RunReport:
    async def scenario() -> RunReport:
        source = PrometheusSource(PrometheusSettings(url=prometheus_url, timeout_s=5.0))
        client = AsyncClient(config=KubeConfig.from_file(str(cluster.kubeconfig_for(USER))))
        try:
            descheduler = Descheduler(
                config,
                policy or default_policy(),
                client,
                source,
                LoopSettings(sync_timeout_s=30.0, state_namespace=STATE_NAMESPACE),
                telemetry=telemetry,
            )
            return await descheduler.run_once()
        finally:
            await client.close()
            source.close()

    return asyncio.run(scenario())


def deployment(
    namespace: str,
    name: str,
    replicas: int,
    cpu: str = "250m",
    memory: str = "128Mi",
    **spec: Any,
) -> Deployment:
    """``replicas`` pods of ``name`` requesting ``cpu`` and ``memory``; ``spec`` adds to
    the pod spec (affinity, spread, nodeName)."""
    labels = {"app": name}
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": f"example.invalid/{name}",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                    "terminationGracePeriodSeconds": 0,
                    **spec,
                },
            },
        },
    }
    return cast(Deployment, Deployment.from_dict(body))


def pinned_deployment(
    namespace: str, name: str, replicas: int, cpu: str, memory: str, node: str = "hot"
) -> Deployment:
    """Pods pinned to ``node`` with spec.nodeName (no kubelet here runs them anywhere
    else)."""
    return deployment(namespace, name, replicas, cpu, memory, nodeName=node)
