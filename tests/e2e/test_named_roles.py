"""Issue 28, attack 5, on a real kube-apiserver: the shipped Roles name their objects.

A stolen descheduler token could rewrite ``loadaware-policy`` (the extender and the
annotator reload it live), its own configuration, or hold the annotator's Lease; an
annotator token could hold the descheduler's. With ``resourceNames`` each may read
and write only its own Lease (and the descheduler its memory ConfigMap). ``create``
cannot be limited by name (RBAC authorizes it before the object exists): it stays,
and cannot overwrite an object that exists (docs/security.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from lightkube import AsyncClient, Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap

from app.kube import WorkloadUsageStore
from app.kube.permissions import (
    ANNOTATOR_LEASE,
    DESCHEDULER_LEASE,
    DESCHEDULER_STATE,
    WORKLOAD_USAGE,
)
from app.objects import Resources
from tests.e2e.harness import REPO, ControlPlane

NAMESPACE = "loadaware"


def as_component(cluster: ControlPlane, component: str) -> Client:
    user = f"loadaware-{component}"
    cluster.grant(REPO / "deploy" / "base" / f"{component}-rbac.yaml", user)
    return Client(config=KubeConfig.from_file(str(cluster.kubeconfig_for(user))))


def status_of(call: object) -> int:
    """The HTTP status of a call: 200 when it succeeds."""
    assert callable(call)
    try:
        call()
    except ApiError as error:
        return int(error.status.code or 0)
    return 200


def lease(name: str, holder: str) -> Lease:
    now = datetime.now(UTC)
    spec = LeaseSpec(holderIdentity=holder, leaseDurationSeconds=15, renewTime=now)
    return Lease(metadata=ObjectMeta(name=name, namespace=NAMESPACE), spec=spec)


def config_map(name: str, data: dict[str, str] | None = None) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace=NAMESPACE), data=data or {})


@pytest.fixture
def shared_objects(cluster: ControlPlane) -> Iterator[None]:
    """What the other components keep in loadaware's namespace, made by the admin."""
    admin = cluster.client()
    maps = ["loadaware-policy", "loadaware-descheduler-config", DESCHEDULER_STATE]
    leases = [(ANNOTATOR_LEASE, "annotator-0"), (DESCHEDULER_LEASE, "descheduler-0")]
    as_component(cluster, "annotator")  # creates the namespace with the Roles
    for name in maps:
        admin.create(config_map(name, {"descheduler.yaml": "dryRun: true\n"}))
    for name, holder in leases:
        admin.create(lease(name, holder))
    yield
    for name in maps:
        with contextlib.suppress(ApiError):
            admin.delete(ConfigMap, name, namespace=NAMESPACE)
    for name, _ in leases:
        with contextlib.suppress(ApiError):
            admin.delete(Lease, name, namespace=NAMESPACE)


def test_the_descheduler_may_touch_only_its_own_lease_and_memory(
    cluster: ControlPlane, shared_objects: None
) -> None:
    client = as_component(cluster, "descheduler")
    for name in ("loadaware-policy", "loadaware-descheduler-config"):
        assert status_of(lambda n=name: client.get(ConfigMap, n, namespace=NAMESPACE)) == 403
        rewrite = config_map(name, {"x": "1"})
        assert status_of(lambda r=rewrite: client.replace(r)) == 403
    assert status_of(lambda: client.get(Lease, ANNOTATOR_LEASE, namespace=NAMESPACE)) == 403
    assert status_of(lambda: client.replace(lease(ANNOTATOR_LEASE, "stolen"))) == 403
    # Its own objects: read and written.
    memory = client.get(ConfigMap, DESCHEDULER_STATE, namespace=NAMESPACE)
    memory.data = {"state.json": "{}"}
    assert status_of(lambda: client.replace(memory)) == 200
    own = client.get(Lease, DESCHEDULER_LEASE, namespace=NAMESPACE)
    assert own.spec is not None
    own.spec.holderIdentity = "descheduler-1"
    assert status_of(lambda: client.replace(own)) == 200
    # create is not limited by name, but cannot overwrite what exists.
    assert status_of(lambda: client.create(config_map("loadaware-policy"))) == 409


def test_the_annotator_may_touch_only_its_own_lease(
    cluster: ControlPlane, shared_objects: None
) -> None:
    client = as_component(cluster, "annotator")
    assert status_of(lambda: client.get(Lease, DESCHEDULER_LEASE, namespace=NAMESPACE)) == 403
    assert status_of(lambda: client.replace(lease(DESCHEDULER_LEASE, "stolen"))) == 403
    own = client.get(Lease, ANNOTATOR_LEASE, namespace=NAMESPACE)
    assert own.spec is not None
    own.spec.holderIdentity = "annotator-1"
    assert status_of(lambda: client.replace(own)) == 200
    assert status_of(lambda: client.create(lease(ANNOTATOR_LEASE, "again"))) == 409


def test_the_annotator_writes_the_workload_usage_and_the_extender_only_reads_it(
    cluster: ControlPlane, shared_objects: None
) -> None:
    """The shipped Roles on a real API server, through the code's own store: the
    annotator creates, then replaces, loadaware-workload-usage (and may write no other
    ConfigMap, and read only the descheduler's state besides); the extender reads it by
    name and may neither write it nor read another."""
    annotator = as_component(cluster, "annotator")
    extender = as_component(cluster, "extender")
    users = {"annotator": "loadaware-annotator", "extender": "loadaware-extender"}

    async def publish_and_read() -> tuple[float, float]:
        now_s = time.time()
        async with AsyncClient(
            config=KubeConfig.from_file(str(cluster.kubeconfig_for(users["annotator"])))
        ) as client:
            store = WorkloadUsageStore(client, NAMESPACE)
            await store.publish([("shop/Deployment/web", Resources(0.7, 3e8), 3)], now_s)
            await store.publish([("shop/Deployment/web", Resources(0.8, 3e8), 3)], now_s + 1)
        async with AsyncClient(
            config=KubeConfig.from_file(str(cluster.kubeconfig_for(users["extender"])))
        ) as client:
            read = await WorkloadUsageStore(client, NAMESPACE).read(now_s + 2)
        assert read is not None
        usage, skipped = read
        observed = usage.observed("shop/Deployment/web")
        assert observed is not None
        return observed.cpu_cores, float(skipped)

    try:
        assert asyncio.run(publish_and_read()) == (0.8, 0.0)
        for name in ("loadaware-policy", DESCHEDULER_STATE):
            rewrite = config_map(name, {"x": "1"})
            assert status_of(lambda r=rewrite: annotator.replace(r)) == 403
            # The descheduler's state it reads (its evictions: drained nodes keep their
            # soft taint, app/annotator/drained.py), and writes no more than any other.
            readable = 200 if name == DESCHEDULER_STATE else 403
            read = status_of(lambda n=name: annotator.get(ConfigMap, n, namespace=NAMESPACE))
            assert read == readable
            assert status_of(lambda n=name: extender.get(ConfigMap, n, namespace=NAMESPACE)) == 403
        forged = config_map(WORKLOAD_USAGE, {"usage.json": "{}"})
        assert status_of(lambda: extender.replace(forged)) == 403
        assert status_of(lambda: extender.create(config_map("anything"))) == 403
    finally:
        with contextlib.suppress(ApiError):
            cluster.client().delete(ConfigMap, WORKLOAD_USAGE, namespace=NAMESPACE)
