"""The annotator on a real control plane, with the shipped RBAC, against a real Prometheus.

Nodes carry the InternalIPs of the synthetic node-exporter series (tests/support/
promdata.py). The annotator runs as its own identity with deploy/base/annotator-rbac.yaml
bound to it, so the API server accepts its writes only as far as that RBAC allows. Then
a real kube-scheduler, calling the extender, must place pods by what it wrote.
"""

from __future__ import annotations

import pytest
from lightkube.resources.core_v1 import Node

from app.load.samples import parse_usage
from tests.e2e.burst import outcome_of, scheduler_with_shared_extender
from tests.e2e.harness import REPO, ControlPlane, pod_object, wait_until
from tests.support.prom_fixtures import PromNodeData

# What crane's default policy makes of the fixture's nodes (promdata.default_nodes).
OVER_A_LIMIT = {"node-busy", "node-memhot", "node-cooling"}  # cpu 0.70, mem 0.92, 1h cpu 0.80


def annotations_of(cluster: ControlPlane, name: str) -> dict[str, str]:
    node = cluster.client().get(Node, name)
    return dict(node.metadata.annotations or {}) if node.metadata else {}


@pytest.mark.prometheus
def test_the_annotator_writes_what_the_api_server_accepts_and_the_scheduler_acts_on_it(
    cluster: ControlPlane,
    namespace: str,
    prometheus_node_data: PromNodeData,
    request: pytest.FixtureRequest,
) -> None:
    data = prometheus_node_data
    for spec in data.nodes:
        cluster.make_node(
            spec.name,
            cpu=str(spec.cpus),
            memory="16Gi",
            internal_ip=spec.internal_ip,
            labels={"kubernetes.io/hostname": spec.name},
        )
    cluster.grant(REPO / "deploy" / "base" / "annotator-rbac.yaml", "loadaware-annotator")
    kubeconfig = cluster.kubeconfig_for("loadaware-annotator")
    flags = ("--prometheus-url", data.url, "--no-leader-elect")
    with cluster.loadaware("annotator", *flags, kubeconfig=kubeconfig):
        wait_until(
            lambda: all(
                "cpu_usage_avg_5m" in annotations_of(cluster, spec.name)
                for spec in data.nodes_with_series
            ),
            120,
            "every node with series annotated",
        )
    t = data.query_time()
    for spec in data.nodes_with_series:
        written = annotations_of(cluster, spec.name)
        for metric in ("cpu_usage_avg_5m", "mem_usage_max_avg_1h"):
            sample = parse_usage(written[metric])
            expected = data.expected(spec, metric, t)
            assert sample is not None, written[metric]
            assert expected is not None
            assert sample.value == pytest.approx(expected / 100, abs=0.02), (spec.name, metric)
    assert "cpu_usage_avg_5m" not in annotations_of(cluster, "node-nodata")

    client = cluster.client()
    pods = 6
    for i in range(pods):
        client.create(
            pod_object(
                {
                    "metadata": {"name": f"p-{i}", "namespace": namespace},
                    "spec": {"containers": [{"name": "c", "image": "example.invalid/app"}]},
                }
            )
        )
    with scheduler_with_shared_extender(request, node_cache_capable=True):
        wait_until(lambda: outcome_of(client, namespace).bound == pods, 120, "pods bound")
    outcome = outcome_of(client, namespace)
    assert not set(outcome.placed) & OVER_A_LIMIT, outcome.describe()
