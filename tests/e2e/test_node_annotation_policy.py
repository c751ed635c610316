"""Issue 28, attack 4, on a real kube-apiserver: a kubelet cannot fake its own load.

NodeRestriction lets a kubelet patch its own Node's annotations, and the annotator's
admission policy matched only the annotator. The review's node wrote 0 % stamped 55 s
ahead and went from score 7 to 10. ``loadaware-node-annotation-writers`` (in
deploy/components/annotator-admission-policy) denies loadaware's annotation keys to
every writer but the annotator. Requests are sent as the kubelet (``system:node:n1``
in ``system:nodes``, which the Node authorizer lets patch and create its own Node)
and as the annotator's ServiceAccount, by impersonation.
"""

from __future__ import annotations

import contextlib
import ssl
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml

from app.kube.patching import taints_patch
from app.load.samples import format_usage
from app.load.taints import SOFT_TAINT_EFFECT, SOFT_TAINT_KEY, SOFT_TAINT_VALUE
from app.policy import class_usage_key
from tests.e2e.harness import REPO, TEST_LABEL, ControlPlane, wait_until

COMPONENT = REPO / "deploy" / "components" / "annotator-admission-policy" / "admission-policy.yaml"
ANNOTATOR = "system:serviceaccount:loadaware:loadaware-annotator"
KUBELET = ("system:node:n1", ["system:nodes", "system:authenticated"])
POLICY_PATHS = {
    "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
}
MERGE = {"Content-Type": "application/merge-patch+json"}
DENIED = 422  # a ValidatingAdmissionPolicy's denial: the request is Invalid


class Api:
    """The API server over plain HTTP, as the admin or as whoever it impersonates."""

    def __init__(self, cluster: ControlPlane) -> None:
        context = ssl.create_default_context(cafile=str(cluster.ca_file))
        self.http = httpx.Client(
            base_url=cluster.api_url,
            verify=context,
            headers={"Authorization": f"Bearer {cluster.admin_token}"},
            timeout=30,
        )

    def send(
        self,
        method: str,
        path: str,
        body: Any,
        user: tuple[str, list[str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        extra: list[tuple[str, str]] = list((headers or {}).items())
        if user is not None:
            extra.append(("Impersonate-User", user[0]))
            extra += [("Impersonate-Group", group) for group in user[1]]
        return self.http.request(method, path, json=body, headers=extra)

    def patch_node(
        self, name: str, annotations: dict[str, Any], user: tuple[str, list[str]] | None
    ) -> httpx.Response:
        body = {"metadata": {"annotations": annotations}}
        return self.send("PATCH", f"/api/v1/nodes/{name}", body, user, MERGE)


def fake_idle() -> dict[str, str]:
    """What the review's kubelet wrote: 0 % usage, stamped 55 s in the future."""
    return {"cpu_usage_avg_5m": format_usage(0.0, time.time() + 55)}


@pytest.fixture
def api(cluster: ControlPlane) -> Iterator[Api]:
    client = Api(cluster)
    try:
        yield client
    finally:
        client.http.close()


@contextlib.contextmanager
def shipped_policy(cluster: ControlPlane, api: Api) -> Iterator[None]:
    """The shipped component's policies and bindings, installed, then removed again
    (other tests write these annotations as the admin)."""
    documents = [d for d in yaml.safe_load_all(COMPONENT.read_text()) if d]
    base = "/apis/admissionregistration.k8s.io/v1"
    try:
        for document in documents:
            path = f"{base}/{POLICY_PATHS[document['kind']]}"
            api.send("POST", path, document).raise_for_status()
        cluster.make_node("probe", annotations={})
        wait_until(
            lambda: api.patch_node("probe", fake_idle(), None).status_code == DENIED,
            30,
            "the policy to be enforced",
        )
        yield
    finally:
        for document in documents:
            name = document["metadata"]["name"]
            api.send("DELETE", f"{base}/{POLICY_PATHS[document['kind']]}/{name}", None)
        cluster.make_node("after", annotations={})
        wait_until(
            lambda: api.patch_node("after", fake_idle(), None).status_code == 200,
            30,
            "the policy to be gone",
        )


def test_a_kubelet_cannot_write_its_own_load(cluster: ControlPlane, api: Api) -> None:
    cluster.make_node("n1", annotations={"cpu_usage_avg_5m": format_usage(0.5, time.time())})
    with shipped_policy(cluster, api):
        kubelet_is_refused(api)


def kubelet_is_refused(api: Api) -> None:
    denied = api.patch_node("n1", fake_idle(), KUBELET)
    assert denied.status_code == DENIED, denied.text
    assert "only the loadaware annotator may add, change or remove" in denied.text
    assert api.patch_node("n1", {"cpu_usage_avg_5m": None}, KUBELET).status_code == DENIED
    # Its other annotations are its own, as before.
    assert api.patch_node("n1", {"example.com/kubelet": "1"}, KUBELET).status_code == 200
    # Registering a Node that already carries a loadaware key is refused too.
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1-again", "labels": {TEST_LABEL: "true"},
                     "annotations": {"node_hot_value": "0,2030-01-01T00:00:00Z"}},
    }  # fmt: skip
    created = api.send("POST", "/api/v1/nodes", node, ("system:node:n1-again", KUBELET[1]))
    assert created.status_code == DENIED, created.text
    # The usage by class of pods (issue 45) is the annotator's alone too.
    production = class_usage_key("production", "cpu")
    faked = api.patch_node("n1", {production: format_usage(0.0, time.time())}, KUBELET)
    assert faked.status_code == DENIED, faked.text


def test_the_annotator_still_writes_loadaware_s_keys(cluster: ControlPlane, api: Api) -> None:
    cluster.make_node("n1", annotations={"cpu_usage_avg_5m": format_usage(0.5, time.time())})
    cluster.grant(REPO / "deploy" / "base" / "annotator-rbac.yaml", ANNOTATOR)
    with shipped_policy(cluster, api):
        annotator_is_allowed(api)


def annotator_is_allowed(api: Api) -> None:
    fresh = {"cpu_usage_avg_5m": format_usage(0.4, time.time()), "node_hot_value": "1,x"}
    answer = api.patch_node("n1", fresh, (ANNOTATOR, ["system:serviceaccounts"]))
    assert answer.status_code == 200, answer.text
    by_class = {class_usage_key("production", "cpu"): format_usage(0.3, time.time())}
    answer = api.patch_node("n1", by_class, (ANNOTATOR, ["system:serviceaccounts"]))
    assert answer.status_code == 200, answer.text
    # And the annotator's own policy still keeps it to those keys.
    other = api.patch_node("n1", {"example.com/x": "1"}, (ANNOTATOR, ["system:serviceaccounts"]))
    assert other.status_code == DENIED, other.text


# -- issue 30: the soft taint is the annotator's, and nothing else of the spec ---------

SOFT = {"key": SOFT_TAINT_KEY, "value": SOFT_TAINT_VALUE, "effect": SOFT_TAINT_EFFECT}
GPU = {"key": "example.com/gpu", "value": "a100", "effect": "NoSchedule"}
AS_ANNOTATOR = (ANNOTATOR, ["system:serviceaccounts", "system:authenticated"])
# Every NodeSpec field the annotator's policy compares besides taints
# (deploy/components/annotator-admission-policy/admission-policy.yaml).
NODE_SPEC_FIELDS = {"podCIDR", "podCIDRs", "providerID", "unschedulable", "externalID",
                    "configSource", "taints"}  # fmt: skip


def node_body(api: Api, name: str) -> dict[str, Any]:
    answer = api.send("GET", f"/api/v1/nodes/{name}", None)
    answer.raise_for_status()
    body: dict[str, Any] = answer.json()
    return body


def set_taints(
    api: Api, name: str, taints: list[dict[str, str]], user: tuple[str, list[str]] | None
) -> httpx.Response:
    """What the annotator's TaintWriter sends: the whole list, at the version just read."""
    version = node_body(api, name)["metadata"]["resourceVersion"]
    body = taints_patch(version, taints)
    return api.send("PATCH", f"/api/v1/nodes/{name}", body, user, MERGE)


def taints_of(api: Api, name: str) -> list[dict[str, Any]]:
    return list(node_body(api, name).get("spec", {}).get("taints") or [])


def test_the_policy_compares_every_field_of_the_api_server_s_node_spec(api: Api) -> None:
    """A NodeSpec field added by a later Kubernetes would be one the policy lets the
    annotator change: this fails first."""
    answer = api.send("GET", "/openapi/v3/api/v1", None)
    answer.raise_for_status()
    spec = answer.json()["components"]["schemas"]["io.k8s.api.core.v1.NodeSpec"]
    # v1.36 serves its schemas in kube-openapi's own shape unless asked otherwise.
    properties = spec.get("properties") or spec["SchemaProps"]["properties"]
    assert set(properties) == NODE_SPEC_FIELDS
    text = COMPONENT.read_text()
    for field in NODE_SPEC_FIELDS - {"taints"}:
        assert f"object.spec.{field}" in text, field


def test_the_annotator_may_change_only_its_soft_taint(cluster: ControlPlane, api: Api) -> None:
    cluster.make_node("n1", annotations={}, taints=[GPU])
    cluster.grant(REPO / "deploy" / "base" / "annotator-rbac.yaml", ANNOTATOR)
    # The write is conditional on the version read: a stale one is a conflict.
    stale = node_body(api, "n1")["metadata"]["resourceVersion"]
    api.patch_node("n1", {"example.com/touch": "1"}, None).raise_for_status()
    body = taints_patch(stale, [GPU, SOFT])
    conflict = api.send("PATCH", "/api/v1/nodes/n1", body, None, MERGE)
    assert conflict.status_code == 409, conflict.text
    with shipped_policy(cluster, api):
        added = set_taints(api, "n1", [GPU, SOFT], AS_ANNOTATOR)
        assert added.status_code == 200, added.text
        assert taints_of(api, "n1") == [GPU, SOFT]
        refused: dict[str, list[dict[str, str]]] = {
            "another taint added": [GPU, SOFT, {"key": "x", "effect": "NoSchedule"}],
            "another taint removed": [SOFT],
            "another taint changed": [{**GPU, "value": "h100"}, SOFT],
            "its taint as NoSchedule": [GPU, {**SOFT, "effect": "NoSchedule"}],
            "its taint with another value": [GPU, {**SOFT, "value": "yes"}],
        }
        for case, taints in refused.items():
            answer = set_taints(api, "n1", taints, AS_ANNOTATOR)
            assert answer.status_code == DENIED, (case, answer.text)
        cordon = api.send(
            "PATCH", "/api/v1/nodes/n1", {"spec": {"unschedulable": True}}, AS_ANNOTATOR, MERGE
        )
        assert cordon.status_code == DENIED, cordon.text
        assert "may not change a Node's spec but its own taint" in cordon.text
        label = api.send(
            "PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"x": "1"}}}, AS_ANNOTATOR, MERGE
        )
        assert label.status_code == DENIED, label.text
        status = api.send(
            "PATCH",
            "/api/v1/nodes/n1/status",
            {"status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}},
            AS_ANNOTATOR,
            MERGE,
        )
        assert status.status_code in (DENIED, 403), status.text  # RBAC has no nodes/status
        # No one else may touch loadaware's taint: not the kubelet, not an admin. (This
        # API server runs without NodeRestriction, which would refuse the kubelet any
        # taint change on update by itself: the refusal here is the policy's alone.)
        for user in (KUBELET, None):
            answer = set_taints(api, "n1", [GPU], user)
            assert answer.status_code == DENIED, (user, answer.text)
            assert "may add, change or remove the taint loadaware.io/hot" in answer.text
        assert taints_of(api, "n1") == [GPU, SOFT]
        # ...while their own taints stay theirs.
        assert set_taints(api, "n1", [SOFT], None).status_code == 200
        removed = set_taints(api, "n1", [], AS_ANNOTATOR)
        assert removed.status_code == 200, removed.text
        assert taints_of(api, "n1") == []
        # A kubelet registering its Node with loadaware's taint is refused too.
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n2", "labels": {TEST_LABEL: "true"}},
            "spec": {"taints": [SOFT]},
        }
        created = api.send("POST", "/api/v1/nodes", node, ("system:node:n2", KUBELET[1]))
        assert created.status_code == DENIED, created.text
