"""A wave of an under-requested workload through the real kube-scheduler v1.36 and the
extender (issue 27): its pods request 100m, set no limit and use 0.7 core each.

Estimated from the request (85m, about 1 % of a node) every pod of the wave sees the
cool node as coolest, and the wave piles onto it. With the annotator's document saying
what one of the workload's pods uses, the extender estimates each pod just placed, and
each one it reserves, at 0.7 core (9 % of a node): the cool node is no longer coolest
after a few, and the wave spreads. The workload is a real Job, so the pods carry the
controller reference the controller-manager writes, and the extender reads the
ConfigMap through the API server (``--workload-usage-namespace``). A Job, because
kube-scheduler's system-default topology spreading (its ``PodTopologySpread``
``defaultConstraints``) already spreads the pods of a ReplicaSet or StatefulSet by
hostname, whatever the extender says; a Job's pods (or any workload's, where a cluster
sets ``defaultingType: List``) only the load tells apart.
"""

from __future__ import annotations

import json
import time
from typing import Any, cast

from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap

from app.kube import WORKLOAD_USAGE_NAME
from app.kube.workload_usage import USAGE_KEY
from tests.e2e.burst import loadaware_scheduler, make_nodes, settle
from tests.e2e.harness import ControlPlane

REPLICAS = 8
NODES = {"cool": 0.10, **{f"warm-{i}": 0.40 for i in range(4)}}


def job(namespace: str) -> Job:
    template: dict[str, Any] = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "app",
                    "image": "example.invalid/app",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }
    body = {
        "metadata": {"name": "cpusvc", "namespace": namespace},
        "spec": {"parallelism": REPLICAS, "completions": REPLICAS, "template": template},
    }
    return cast(Job, Job.from_dict(body))


def publish(client: Client, namespace: str, cores: float) -> None:
    """What the annotator's leader writes (here by the admin, in the test's namespace)."""
    document = {
        "version": 1,
        "publishedAt": time.time(),
        "workloads": {f"{namespace}/Job/cpusvc": [cores, 512 * 2**20, REPLICAS]},
    }
    client.create(
        ConfigMap(
            metadata=ObjectMeta(name=WORKLOAD_USAGE_NAME, namespace=namespace),
            data={USAGE_KEY: json.dumps(document)},
        )
    )


def wave(cluster: ControlPlane, namespace: str, *extender_args: str) -> dict[str, int]:
    make_nodes(cluster, NODES)
    client = cluster.client()
    args = ("--workload-usage-namespace", namespace, "--workload-usage-refresh", "1s")
    with loadaware_scheduler(
        cluster, node_cache_capable=True, extender_args=(*args, *extender_args)
    ):
        time.sleep(2.0)  # the extender's first read of the ConfigMap
        client.create(job(namespace))
        outcome = settle(client, namespace, expected_bound=REPLICAS, pods=REPLICAS)
    return dict(outcome.placed)


def test_a_wave_spreads_when_its_workloads_usage_is_published(
    cluster: ControlPlane, namespace: str
) -> None:
    publish(cluster.client(), namespace, 0.7)
    placed = wave(cluster, namespace)
    assert sum(placed.values()) == REPLICAS
    # 0.10 + 4 x 0.0875 = 0.45: past four pods the cool node is as warm as the others.
    assert placed.get("cool", 0) <= 5, placed
    assert len(placed) >= 3, placed


def test_without_it_the_wave_piles_onto_the_cool_node(
    cluster: ControlPlane, namespace: str
) -> None:
    """The same wave and document with the extender's --no-workload-usage: each pod is
    estimated at 85m and the cool node stays coolest (what issue 27 measured)."""
    publish(cluster.client(), namespace, 0.7)
    placed = wave(cluster, namespace, "--no-workload-usage")
    assert placed.get("cool", 0) >= 7, placed
