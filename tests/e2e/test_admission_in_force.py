"""Issue 42, points 2 and 6, on a real kube-apiserver.

- ``loadaware-document-writers`` (in the base): only the annotator writes
  loadaware-workload-usage and only the descheduler loadaware-descheduler-state, whoever
  else RBAC lets write ConfigMaps in loadaware's namespace (the admin included).
- The annotator's start check (``app.kube.admission``) finds the shipped policies in
  force, and says so when a binding is gone or only warns.

Requests go as the admin, or as a component's ServiceAccount by impersonation with the
group system:masters (so that RBAC lets the request reach admission, which judges the
user name).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import yaml

from app.kube import make_client
from app.kube.admission import WRITER_POLICIES, admission_problems
from app.kube.permissions import WRITER_POLICY_NAMES
from tests.e2e import test_node_annotation_policy as policy_tests
from tests.e2e.harness import REPO, ControlPlane, wait_until
from tests.e2e.test_node_annotation_policy import (
    ANNOTATOR,
    DENIED,
    POLICY_PATHS,
    Api,
    shipped_policy,
)

DOCUMENT_POLICY = (
    REPO / "deploy" / "components" / "annotator-admission-policy" / "document-writers.yaml"
)
DESCHEDULER = "system:serviceaccount:loadaware:loadaware-descheduler"
BASE = "/apis/admissionregistration.k8s.io/v1"
CONFIGMAPS = "/api/v1/namespaces/loadaware/configmaps?dryRun=All"


api = policy_tests.api  # the fixture: the admin's (or an impersonated) plain requests


def as_(user: str) -> tuple[str, list[str]]:
    return (user, ["system:masters", "system:authenticated"])


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "loadaware"}, "data": {"x": "1"}}  # fmt: skip


@contextlib.contextmanager
def document_policy(api: Api) -> Iterator[list[dict[str, Any]]]:
    documents = [d for d in yaml.safe_load_all(DOCUMENT_POLICY.read_text()) if d]
    created = api.send("POST", "/api/v1/namespaces", {"metadata": {"name": "loadaware"}})
    assert created.status_code in (201, 409), created.text
    try:
        for document in documents:
            api.send("POST", f"{BASE}/{POLICY_PATHS[document['kind']]}", document)
        wait_until(
            lambda: api.send("POST", CONFIGMAPS, config_map("loadaware-workload-usage"))
            .status_code == DENIED,
            30,
            "the document policy to be enforced",
        )
        yield documents
    finally:
        for document in documents:
            name = document["metadata"]["name"]
            api.send("DELETE", f"{BASE}/{POLICY_PATHS[document['kind']]}/{name}", None)
        wait_until(
            lambda: api.send("POST", CONFIGMAPS, config_map("loadaware-workload-usage"))
            .status_code == 201,
            30,
            "the document policy to be gone",
        )


def test_only_its_owner_may_write_a_loadaware_document(api: Api) -> None:
    with document_policy(api):
        usage, state = config_map("loadaware-workload-usage"), config_map(
            "loadaware-descheduler-state"
        )
        assert api.send("POST", CONFIGMAPS, usage, as_(ANNOTATOR)).status_code == 201
        assert api.send("POST", CONFIGMAPS, state, as_(DESCHEDULER)).status_code == 201
        for document, intruder in ((usage, DESCHEDULER), (state, ANNOTATOR), (usage, None)):
            user = as_(intruder) if intruder else None
            answer = api.send("POST", CONFIGMAPS, document, user)
            assert answer.status_code == DENIED, (document["metadata"]["name"], intruder)
            assert "only the loadaware" in answer.text
        # Other ConfigMaps of the namespace are not the policy's business.
        assert api.send("POST", CONFIGMAPS, config_map("other"), None).status_code == 201


def problems(cluster: ControlPlane) -> list[str]:
    async def check() -> list[str]:
        client = make_client(str(cluster.kubeconfig))
        try:
            return await admission_problems(client, ANNOTATOR)
        finally:
            await client.close()

    return asyncio.run(check())


def test_the_annotator_s_start_check_sees_the_policies_in_force_and_a_binding_gone(
    cluster: ControlPlane, api: Api
) -> None:
    assert set(WRITER_POLICIES) == set(WRITER_POLICY_NAMES)  # what its Role lets it read
    missing = problems(cluster)
    assert len(missing) == len(WRITER_POLICIES)
    assert all("is not installed" in line for line in missing)
    with shipped_policy(cluster, api), document_policy(api) as documents:
        assert problems(cluster) == []
        (binding,) = [d for d in documents if d["kind"] == "ValidatingAdmissionPolicyBinding"]
        name = binding["metadata"]["name"]
        path = f"{BASE}/validatingadmissionpolicybindings/{name}"
        warn_only = {"spec": {"validationActions": ["Warn"]}}
        patched = api.send("PATCH", path, warn_only, None, {
            "Content-Type": "application/merge-patch+json"})  # fmt: skip
        assert patched.status_code == 200, patched.text
        (line,) = problems(cluster)
        assert f"binding {name} does not Deny" in line
        assert "loadaware-workload-usage" in line  # what is open
        api.send("DELETE", path, None)
        (line,) = problems(cluster)
        assert f"ValidatingAdmissionPolicyBinding {name} is missing" in line
        api.send("POST", f"{BASE}/validatingadmissionpolicybindings", binding)
