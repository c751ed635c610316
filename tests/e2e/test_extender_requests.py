"""Attack 1 of docs/security.md against the extender process as deployed (cache mode):
big requests full of invented and real nodes leave its table, its verdicts and its
memory as they were."""

from __future__ import annotations

from pathlib import Path

import httpx
import yaml

from tests.e2e.burst import annotations_at
from tests.e2e.harness import REPO, ControlPlane

NODE_NAMES = ("real-a", "real-b")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def memory_limit_mib() -> float:
    """The extender container's memory limit in deploy/base/extender.yaml."""
    for document in yaml.safe_load_all((REPO / "deploy/base/extender.yaml").read_text()):
        if document and document["kind"] == "Deployment":
            limit = document["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
            assert str(limit["memory"]).endswith("Mi")
            return float(str(limit["memory"])[:-2])
    raise AssertionError("no Deployment")


def test_four_megabyte_requests_of_invented_and_hot_nodes_change_nothing(
    cluster: ControlPlane,
) -> None:
    for name in NODE_NAMES:
        cluster.make_node(name, cpu="8", memory="32Gi", annotations=annotations_at(0.20))
    hot = annotations_at(0.95) | {"padding": "x" * 1700}
    items = [{"metadata": {"name": name, "annotations": hot}} for name in NODE_NAMES]
    items += [{"metadata": {"name": f"invented-{i:05d}", "annotations": hot}} for i in range(2000)]
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}}
    body = {"Pod": pod, "Nodes": {"items": items}}
    with cluster.extender() as extender, httpx.Client(base_url=extender.url, timeout=30) as http:
        pid = extender.process.popen.pid
        before = rss_mib(pid)
        for _ in range(5):
            response = http.post("/filter", json=body)
            assert response.status_code == 200
            assert response.json()["FailedAndUnresolvableNodes"] == {}
        answer = http.post("/filter", json={"Pod": pod, "NodeNames": list(NODE_NAMES)}).json()
        after = rss_mib(pid)
    print(f"extender RSS {before:.0f} MiB before, {after:.0f} MiB after five 4 MB requests")
    assert answer["NodeNames"] == list(NODE_NAMES)  # judged as the API server says
    assert after < memory_limit_mib(), f"RSS {before:.0f} MiB -> {after:.0f} MiB"
    assert after - before < 128, f"RSS {before:.0f} MiB -> {after:.0f} MiB"
