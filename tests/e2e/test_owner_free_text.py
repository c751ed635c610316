"""Issue 42, point 2, on a real kube-apiserver: an owner reference is tenant free text.

The API server keeps a pod whose controller is ``nothing.example/v1 Widget`` with a
1.1 MB name (it checks only that kind and name are non-empty). Read back through the
real client, the pod is bare in loadaware's views, and the descheduler's state of its
eviction still saves: the ConfigMap the real API server takes is under its 1 MiB.
"""

from __future__ import annotations

from typing import cast

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Pod

from app.kube.pods import pod_info, pod_placement, scheduled_pod
from app.kube.state import STATE_KEY, DeschedulerState, decode, encode
from app.objects import EvictionRecord, Resources
from tests.e2e.harness import ControlPlane

HUGE = "w" * 1_100_000
NOW_S = 1_700_000_000.0


def test_a_megabyte_owner_is_bare_and_its_eviction_still_saves(
    cluster: ControlPlane, namespace: str
) -> None:
    client = cluster.client()
    client.create(cast(Pod, Pod.from_dict({
        "metadata": {"name": "burner", "namespace": namespace, "ownerReferences": [
            {"apiVersion": "nothing.example/v1", "kind": "Widget", "name": HUGE,
             "uid": "0b0e6f5e-0000-4000-8000-000000000001", "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
    })))  # fmt: skip
    stored = client.get(Pod, "burner", namespace=namespace)
    assert stored.metadata is not None
    assert stored.metadata.ownerReferences
    assert stored.metadata.ownerReferences[0].name == HUGE  # the API server kept it
    assert pod_info(stored).owner is None
    assert pod_placement(stored).workload is None
    assert scheduled_pod(stored).workload is None

    # An eviction recorded before the fix named the owner in its workload.
    state = DeschedulerState()
    record = EvictionRecord(f"{namespace}/burner", "uid-1", "n1", "n2", Resources(1, 1),
                            NOW_S, f"{namespace}/Widget/{HUGE}")  # fmt: skip
    state.evictions[record.uid] = record
    text = encode(state, NOW_S - 3600)
    client.create(ConfigMap(
        metadata=ObjectMeta(name="loadaware-descheduler-state", namespace=namespace),
        data={STATE_KEY: text},
    ))  # fmt: skip
    saved = client.get(ConfigMap, "loadaware-descheduler-state", namespace=namespace)
    assert saved.data is not None
    kept, ignored = decode(saved.data[STATE_KEY], NOW_S, NOW_S - 3600)
    assert ignored == []
    assert kept.evictions["uid-1"].workload is None
    assert kept.evictions["uid-1"].node == "n1"
