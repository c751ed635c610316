"""The harness itself: a real kube-scheduler binds a pod to the only Node."""

from __future__ import annotations

from lightkube.resources.core_v1 import Pod

from tests.e2e.harness import ControlPlane, node_of, pod_object, scheduler_config, wait_until


def test_the_real_scheduler_binds_a_pod_to_the_only_ready_node(
    cluster: ControlPlane, namespace: str
) -> None:
    cluster.make_node("smoke-node", cpu="4", memory="8Gi")
    client = cluster.client()
    client.create(
        pod_object(
            {
                "metadata": {"name": "smoke", "namespace": namespace},
                "spec": {"containers": [{"name": "c", "image": "example.invalid/app"}]},
            }
        )
    )
    with cluster.scheduler(scheduler_config()):
        bound = wait_until(lambda: node_of(client, "smoke", namespace), 120, "the pod to be bound")
    assert bound == "smoke-node"
    assert cluster.kubelet_mark_ready(namespace) == 1
    ready = client.get(Pod, "smoke", namespace=namespace)
    assert ready.status is not None
    assert ready.status.phase == "Running"
