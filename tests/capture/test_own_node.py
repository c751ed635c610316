"""Issue 42, point 6: capture trusted cAdvisor's ``namespace``/``pod`` labels from any
node. A node's kubelet controls what it exports and may publish series for pods on
other nodes; the annotator counts a pod's series only from the pod's own node
(``app/prom/pod_usage.py``), and so does capture now."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from lightkube.resources.core_v1 import Node, Pod

from app.capture.catalog import build_catalog
from app.capture.history import record
from tests.prom.test_hostile_prometheus import POINTS, START_S, STEP_S, FakePrometheus, send, source


def series(pod: str, node: str | None, value: str) -> dict[str, Any]:
    labels = {"namespace": "shop", "pod": pod} | ({"node": node} if node else {})
    return {"metric": labels, "values": [[START_S + i * STEP_S, value] for i in range(POINTS)]}


@pytest.fixture
def fake() -> Iterator[FakePrometheus]:
    server = FakePrometheus()
    yield server
    server.close()


def test_a_pod_s_usage_counts_only_from_its_own_node(fake: FakePrometheus) -> None:
    answer = [
        series("web-0", "n1", "0.25"),  # its own kubelet
        series("web-0", "n2", "50"),  # another node's kubelet, claiming it
        series("web-0", None, "50"),  # a series that names no node
        series("web-0", "10.0.0.1", "0.25"),  # its own node, by InternalIP
        series("web-0-gone", "n3", "1"),  # a pod of the past, first seen on n3 ...
        series("web-0-gone", "n4", "70"),  # ... and claimed by another node
    ]
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": answer}})
    fake.body = lambda handler: send(handler, body.encode())
    pod = Pod.from_dict({
        "metadata": {"name": "web-0", "namespace": "shop"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    })  # fmt: skip
    node = Node.from_dict({
        "metadata": {"name": "n1"},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                   "allocatable": {"cpu": "4", "memory": "16Gi"}},
    })  # fmt: skip
    catalog = build_catalog([node], [pod], {}, [])
    usage, _, _, _ = record(
        source(fake.url), catalog, START_S, START_S + (POINTS - 1) * STEP_S, STEP_S
    )
    cpu = usage.sums[0][usage.index["shop-web-0"]]
    # web-0 twice from its own node (name and address), web-0-gone once from n3.
    assert np.allclose(cpu, 0.25 + 0.25 + 1.0)
    assert usage.wrong_node == {"shop/web-0", "shop/web-0-gone"}
    assert usage.start_pods["shop/web-0"].node == "n1"
