"""Every loadaware pod that listens is behind a NetworkPolicy that names who may
connect (issue 28, points 2 and 3): the probes' and metrics ports admit only
Prometheus's namespace (the kubelet's probes come from the node, which a NetworkPolicy
always admits), so no other pod can hold connections against the probes or take a
component's descriptors. The verbs' own rule is checked in test_extender_shapes.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.manifests import Obj, of_kind, pod_templates, render
from tests.deploy.test_kustomize import INSTALLS, by_name

PROMETHEUS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
# The ports that serve only probes and metrics, by container port name.
PROBE_AND_METRICS_PORTS = {"health", "http", "https"}


def selects(policy: Obj, labels: dict[str, str]) -> bool:
    selector: dict[str, str] = policy["spec"]["podSelector"]["matchLabels"]
    return selector.items() <= labels.items()


@pytest.mark.parametrize("directory", INSTALLS, ids=by_name)
def test_every_listening_pod_admits_only_named_peers(directory: Path) -> None:
    objects = render(directory)
    policies = list(of_kind(objects, "NetworkPolicy"))
    listening = 0
    for workload, spec in pod_templates(objects):
        ports = {p["name"] for c in spec["containers"] for p in c.get("ports", [])}
        if not ports:
            continue
        listening += 1
        labels = workload["spec"]["template"]["metadata"]["labels"]
        (policy,) = [p for p in policies if selects(p, labels)]
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        admitted = set()
        for rule in policy["spec"]["ingress"]:
            # A rule without `from` would admit every pod in the cluster.
            assert rule.get("from"), (workload["metadata"]["name"], rule)
            for port in rule["ports"]:
                admitted.add(port["port"])
                if port["port"] in PROBE_AND_METRICS_PORTS:
                    assert rule["from"] == [PROMETHEUS], (workload["metadata"]["name"], rule)
        assert ports <= admitted, (workload["metadata"]["name"], ports, admitted)
    # The extender and the annotator at least (the descheduler as a CronJob listens on
    # nothing; its policy then admits nobody).
    assert listening >= 2
