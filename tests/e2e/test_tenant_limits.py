"""Issue 28, attack 1, on a real kube-apiserver: a tenant's declared limits cannot take
nodes out of scheduling (docs/security.md, "A tenant's declared limits").

The review's reproduction: five cool 8-CPU nodes, the extender in node-cache mode, and
a tenant (who may create Pods in its namespace, nothing more) creating three pods
bound straight to three nodes with ``spec.nodeName``, each requesting 1m CPU with a
100,000-CPU and 1 PiB limit. An ordinary pod then passed the filter on two nodes of
five. Such pods went around kube-scheduler and the extender's filter, so their
limits are no evidence of anything: they count on their requests. A pod that a
binder did place (here the test binds it, as kube-scheduler would) counts on its
limit, but never for more than its node.
"""

from __future__ import annotations

import ssl
from typing import Any, cast

import httpx
import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

from tests.e2e.burst import annotations_at, shared_extender
from tests.e2e.harness import ControlPlane, pod_object, wait_until

NODES = [f"cool-{i}" for i in range(5)]
TENANT = "tenant"
RBAC = "rbac.authorization.k8s.io"


def as_tenant(cluster: ControlPlane, namespace: str) -> Client:
    """The tenant may create and read Pods in its own namespace: no more."""
    api = cluster.client()
    api.create(
        cast(
            Role,
            Role.from_dict(
                {
                    "metadata": {"name": "pods", "namespace": namespace},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "resources": ["pods"],
                            "verbs": ["create", "get", "list"],
                        }
                    ],
                }
            ),
        )
    )
    api.create(
        cast(
            RoleBinding,
            RoleBinding.from_dict(
                {
                    "metadata": {"name": "pods", "namespace": namespace},
                    "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "pods"},
                    "subjects": [{"kind": "User", "name": TENANT, "apiGroup": RBAC}],
                }
            ),
        )
    )
    return Client(config=KubeConfig.from_file(str(cluster.kubeconfig_for(TENANT))))


def huge_pod(name: str, namespace: str, node: str | None) -> Any:
    resources = {"requests": {"cpu": "1m"}, "limits": {"cpu": "100k", "memory": "1Pi"}}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "resources": resources}]
    }
    if node is not None:
        spec["nodeName"] = node
    return pod_object({"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def bind(cluster: ControlPlane, namespace: str, pod: str, node: str) -> None:
    """POST the pods/binding subresource as kube-scheduler does (the answer is a Status,
    which lightkube's typed create cannot read)."""
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    url = f"{cluster.api_url}/api/v1/namespaces/{namespace}/pods/{pod}/binding"
    headers = {"Authorization": f"Bearer {cluster.admin_token}"}
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    with httpx.Client(verify=context, timeout=30) as http:
        http.post(url, json=binding, headers=headers).raise_for_status()


def estimated_pods(http: httpx.Client) -> int:
    """Pods behind the nodes' estimates, as each node's debug view lists them."""
    views = [http.get(f"/debug/nodes/{node}").json() for node in NODES]
    return sum(len(view["estimate"]["pods"]) for view in views)


def passing(http: httpx.Client) -> list[str]:
    """The nodes an ordinary 100m pod passes the filter on."""
    pod = {
        "metadata": {"name": "ordinary", "namespace": "default", "uid": "u-ordinary"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
    }
    answer = http.post("/filter", json={"Pod": pod, "NodeNames": NODES}).json()
    names: list[str] = answer["NodeNames"]
    return names


def test_pods_bound_around_the_scheduler_with_huge_limits_block_no_node(
    cluster: ControlPlane, namespace: str, request: pytest.FixtureRequest
) -> None:
    for name in NODES:
        cluster.make_node(name, cpu="8", memory="32Gi", annotations=annotations_at(0.20))
    tenant = as_tenant(cluster, namespace)
    extender = shared_extender(request, node_cache=True)  # --debug-endpoints
    with httpx.Client(base_url=extender.url, timeout=30) as http:
        assert passing(http) == NODES
        for i, node in enumerate(NODES[:3]):
            tenant.create(huge_pod(f"blocker-{i}", namespace, node))
        wait_until(lambda: estimated_pods(http) == 3, 30, "the extender to see the 3 pods")
        assert passing(http) == NODES
        shown = http.get("/debug/estimates").json()["pods"]
        assert {p["kind"] for p in shown} == {"placed"}
        assert {p["node"] for p in shown} == set(NODES[:3])
        assert all(p["cpu_cores"] < 0.01 for p in shown)  # 1m x 0.85: the request

        # The same pod placed by a binder (the scheduler's way) counts on its limit,
        # and fills its own node, never more.
        tenant.create(huge_pod("bound-huge", namespace, None))
        bind(cluster, namespace, "bound-huge", NODES[4])
        wait_until(lambda: NODES[4] not in passing(http), 30, "the bound pod counted")
        assert passing(http) == NODES[:4]
        top = http.get("/debug/estimates", params={"limit": 1}).json()["pods"][0]
        assert (top["pod"], top["node"], top["kind"]) == (
            f"{namespace}/bound-huge",
            NODES[4],
            "bound",
        )
        assert top["cpu_cores"] == 8.0
        assert top["share"] == {"cpu": 1.0, "memory": 1.0}
