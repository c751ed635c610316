"""The descheduler's shipped RBAC on a real kube-apiserver (docs/security.md, attacks 3
and 4): Nodes it may only get and patch (consolidation's drain taint, bounded by an
admission policy), no reading of Events, and its memory ConfigMap its own to read and
write."""

from __future__ import annotations

import json

import pytest
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Event, Node
from lightkube.types import PatchType

from app.kube import state
from tests.e2e.harness import REPO, ControlPlane

USER = "loadaware-descheduler"


def as_descheduler(cluster: ControlPlane) -> Client:
    cluster.grant(REPO / "deploy" / "base" / "descheduler-rbac.yaml", USER)
    return Client(config=KubeConfig.from_file(str(cluster.kubeconfig_for(USER))))


def refused(call: object) -> int:
    assert callable(call)
    with pytest.raises(ApiError) as caught:
        call()
    return int(caught.value.status.code or 0)


def test_the_descheduler_cannot_delete_or_replace_nodes_or_read_events(
    cluster: ControlPlane,
) -> None:
    # It may get and patch Nodes, for consolidation's drain taint; what a patch may
    # change is the admission policy's to say (tests/e2e/test_consolidation.py).
    cluster.make_node("n1", cpu="4", memory="8Gi")
    client = as_descheduler(cluster)
    assert [n.metadata.name for n in client.list(Node) if n.metadata] == ["n1"]
    node = client.get(Node, "n1")
    patch = {"spec": {"taints": [{"key": "loadaware.io/draining", "value": "1",
                                  "effect": "NoSchedule"}]}}  # fmt: skip
    client.patch(Node, "n1", patch, patch_type=PatchType.MERGE, dry_run=True)
    assert refused(lambda: client.replace(node, dry_run=True)) == 403
    assert refused(lambda: client.delete(Node, "n1")) == 403
    assert refused(lambda: list(client.list(Event, namespace="*"))) == 403


def test_the_descheduler_owns_its_memory_configmap(cluster: ControlPlane) -> None:
    client = as_descheduler(cluster)
    memory = ConfigMap(
        metadata=ObjectMeta(name=state.DEFAULT_NAME, namespace="loadaware"),
        data={state.STATE_KEY: json.dumps({"version": 1, "evictions": [], "hotRounds": {}})},
    )
    try:
        created = client.create(memory)
        assert created.metadata is not None
        stored = client.get(ConfigMap, state.DEFAULT_NAME, namespace="loadaware")
        assert stored.data == memory.data
        client.replace(stored)
        # Its Role is for its own namespace only.
        elsewhere = ConfigMap(metadata=ObjectMeta(name="x", namespace="default"), data={})
        assert refused(lambda: client.create(elsewhere)) == 403
    finally:
        cluster.client().delete(ConfigMap, state.DEFAULT_NAME, namespace="loadaware")
