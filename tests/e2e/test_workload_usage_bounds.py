"""Issue 42, point 1, on the real kube-scheduler v1.36 and the real extender: a tenant's
workload is published at 7.5 cores a pod (one "burner" using 7.5 of 8 cores), then a
wave of 10 pods of that workload, each requesting 1m and never starting (a real Job;
the control plane has no kubelet, so no pod ever starts), binds one to a node. Before,
each counted as a whole node and an ordinary pod passed the filter on 0 of 10 nodes
("too high", unresolvable); system-critical pods were locked out too.

Now: a usage measured on fewer than 3 pods raises nothing; no more of the workload's
pods are raised at once than were measured (3 measured: 3 nodes blocked, 7 free); and
system-critical pods pass the load filter on nodes it rejects (docs/security.md)."""

from __future__ import annotations

import json
import time
from typing import Any, cast

import httpx
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap

from app.kube import WORKLOAD_USAGE_NAME
from app.kube.workload_usage import USAGE_KEY
from tests.e2e.burst import LOAD_REASON, loadaware_scheduler, make_nodes, outcome_of, settle
from tests.e2e.harness import ControlPlane, pod_object, wait_until

WAVE = 10
NODES = {f"node-{i}": 0.15 for i in range(WAVE)}


def wave_job(namespace: str) -> Job:
    """The tenant's wave: pods that request 1m, set no limit and never start."""
    template: dict[str, Any] = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "app",
                    "image": "example.invalid/never-pulled",
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }
    body = {
        "metadata": {"name": "wave", "namespace": namespace},
        "spec": {"parallelism": WAVE, "completions": WAVE, "template": template},
    }
    return cast(Job, Job.from_dict(body))


def publish(client: Client, namespace: str, entry: list[float]) -> None:
    """What the annotator's leader writes for the burner's workload."""
    document = {
        "version": 1,
        "publishedAt": time.time(),
        "workloads": {f"{namespace}/Job/wave": entry},
    }
    client.create(
        ConfigMap(
            metadata=ObjectMeta(name=WORKLOAD_USAGE_NAME, namespace=namespace),
            data={USAGE_KEY: json.dumps(document)},
        )
    )


def ordinary_pod(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "example.invalid/app",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
            **spec,
        },
    }


def passing(url: str, namespace: str) -> list[str]:
    """The nodes the running extender's filter lets an ordinary pod onto."""
    body = {"Pod": ordinary_pod("probe", namespace), "NodeNames": sorted(NODES)}
    answer = httpx.post(f"{url}/filter", json=body, timeout=5).json()
    names: list[str] = answer["NodeNames"]
    return names


def wave_then_probe(cluster: ControlPlane, namespace: str, entry: list[float]) -> list[str]:
    """Publish ``entry``, run the wave through kube-scheduler and the extender, and ask
    the extender's filter about an ordinary pod."""
    make_nodes(cluster, NODES)
    client = cluster.client()
    publish(client, namespace, entry)
    args = ("--workload-usage-namespace", namespace, "--workload-usage-refresh", "1s")
    with loadaware_scheduler(cluster, node_cache_capable=True, extender_args=args) as (
        extender,
        _,
    ):
        time.sleep(2.0)  # the extender's first read of the ConfigMap
        client.create(wave_job(namespace))
        settle(client, namespace, expected_bound=WAVE, pods=WAVE)
        # The extender's pod cache has seen every binding once the reserve counts them.
        return wait_until(
            lambda: (names := passing(extender.url, namespace)) is not None and (names,),
            20,
            "the extender's answer",
        )[0]


def test_one_burners_usage_blocks_no_node(cluster: ControlPlane, namespace: str) -> None:
    """The document an annotator wrote for the one burner (no count of measured pods):
    the wave is estimated at its requests, and an ordinary pod passes on every node."""
    names = wave_then_probe(cluster, namespace, [7.5, 1e8])
    assert names == sorted(NODES)


def test_three_measured_pods_block_three_nodes_at_most(
    cluster: ControlPlane, namespace: str
) -> None:
    """Three burners measured: three of the wave hold a raise (7.5 cores each, a node
    apiece), and an ordinary pod still passes on the other seven."""
    names = wave_then_probe(cluster, namespace, [7.5, 1e8, 3])
    assert len(names) == WAVE - 3, names


def test_a_system_critical_pod_is_placed_on_nodes_the_load_filter_rejects(
    cluster: ControlPlane, namespace: str
) -> None:
    """Every node at 90 % CPU: an ordinary pod stays Pending with the load filter's
    reason; a system-cluster-critical one (DNS, the CNI, loadaware's own extender) is
    bound."""
    make_nodes(cluster, {name: 0.90 for name in NODES})
    client = cluster.client()
    with loadaware_scheduler(cluster, node_cache_capable=True):
        client.create(pod_object(ordinary_pod("ordinary", namespace)))
        client.create(
            pod_object(
                ordinary_pod("critical", namespace, priorityClassName="system-cluster-critical")
            )
        )
        outcome = settle(client, namespace, expected_bound=1, pods=2)
    assert outcome.bound == 1, outcome.describe()
    assert LOAD_REASON in outcome.pending["ordinary"], outcome.describe()
    assert "critical" not in outcome_of(client, namespace).pending
