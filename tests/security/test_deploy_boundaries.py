"""Issue 42, points 2 and 6: what deploy/ ships around loadaware's own objects.

- The admission policies that keep every writer but the annotator off loadaware's Node
  annotations ship in the base, so every overlay has them (they were in 2 of 10).
- Only the annotator may write loadaware-workload-usage, only the descheduler
  loadaware-descheduler-state (RBAC cannot limit create by name, so each could create
  the other's document first, and so could anyone with ConfigMap writes there).
- The second-scheduler overlay's extender may read loadaware-workload-usage, and no
  binding names an account the overlay removed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.manifests import DEPLOY, Obj, named, of_kind, pod_spec, render
from tests.security.test_admission_policy import Admission

OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if p.is_dir())
POLICIES = {
    "loadaware-annotator-node-annotations",
    "loadaware-node-annotation-writers",
    "loadaware-document-writers",
    "loadaware-descheduler-node-writes",
}
ANNOTATOR = "system:serviceaccount:loadaware:loadaware-annotator"
DESCHEDULER = "system:serviceaccount:loadaware:loadaware-descheduler"
EXTENDER = "system:serviceaccount:loadaware:loadaware-extender"


@pytest.mark.parametrize("overlay", ["<base>", *OVERLAYS])
def test_every_overlay_ships_the_admission_policies_bound_to_deny(overlay: str) -> None:
    objects = render(DEPLOY / "base" if overlay == "<base>" else DEPLOY / "overlays" / overlay)
    shipped = {p["metadata"]["name"] for p in of_kind(objects, "ValidatingAdmissionPolicy")}
    assert shipped == POLICIES
    for name in POLICIES:
        policy = named(objects, "ValidatingAdmissionPolicy", name)
        assert "namespace" not in policy["metadata"]  # cluster-scoped
        assert policy["spec"]["failurePolicy"] == "Fail"
        binding = named(objects, "ValidatingAdmissionPolicyBinding", name)
        assert binding["spec"] == {"policyName": name, "validationActions": ["Deny"]}


def config_map(name: str, namespace: str = "loadaware") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"usage.json": "{}"},
    }


@pytest.fixture(scope="module")
def documents() -> Admission:
    return Admission(
        named(render(DEPLOY / "base"), "ValidatingAdmissionPolicy", "loadaware-document-writers")
    )


@pytest.mark.parametrize(
    ("document", "owner"),
    [("loadaware-workload-usage", ANNOTATOR), ("loadaware-descheduler-state", DESCHEDULER)],
)
def test_only_its_owner_writes_a_loadaware_document(
    documents: Admission, document: str, owner: str
) -> None:
    new = config_map(document)
    for old in (None, config_map(document)):  # create (first write) and update
        assert documents.denials(old, new, owner) == []
        for other in {ANNOTATOR, DESCHEDULER, EXTENDER, "admin", "system:node:n1"} - {owner}:
            assert documents.denials(old, new, other), (document, other)


def test_other_config_maps_are_not_matched(documents: Admission) -> None:
    assert documents.denials(None, config_map("loadaware-policy"), "admin") is None
    assert documents.denials(None, config_map("loadaware-workload-usage", "tenant"), "x") is None


def test_the_second_scheduler_s_extender_reads_workload_usage_and_binds_no_gone_account() -> None:
    objects = render(DEPLOY / "overlays" / "second-scheduler")
    accounts = {
        (a["metadata"]["namespace"], a["metadata"]["name"])
        for a in of_kind(objects, "ServiceAccount")
    }
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        for binding in of_kind(objects, kind):
            for subject in binding.get("subjects", []):
                if subject["kind"] == "ServiceAccount":
                    assert (subject["namespace"], subject["name"]) in accounts, binding
    spec = pod_spec(named(objects, "Deployment", "loadaware-scheduler"))
    account = spec["serviceAccountName"]
    assert any(c["name"] == "extender" for c in spec["containers"])
    readers = [
        b
        for b in of_kind(objects, "RoleBinding")
        if any(s.get("name") == account for s in b.get("subjects", []))
    ]
    roles = {r["metadata"]["name"]: r for r in of_kind(objects, "Role")}
    grants = [
        rule
        for b in readers
        if b["roleRef"]["name"] in roles
        for rule in roles[b["roleRef"]["name"]]["rules"]
        if "configmaps" in rule["resources"] and "get" in rule["verbs"]
    ]
    assert any("loadaware-workload-usage" in rule.get("resourceNames", []) for rule in grants)


# -- the annotator's start check (app/kube/admission.py) ---------------------------------


def test_the_shipped_policies_pass_the_annotator_s_start_check() -> None:
    from app.kube.admission import WRITER_POLICIES, policy_problems
    from app.kube.permissions import WRITER_POLICY_NAMES

    assert set(WRITER_POLICIES) == set(WRITER_POLICY_NAMES)
    objects = render(DEPLOY / "base")
    for name in WRITER_POLICIES:
        policy = named(objects, "ValidatingAdmissionPolicy", name)
        binding = named(objects, "ValidatingAdmissionPolicyBinding", name)
        assert policy_problems(name, policy, binding, ANNOTATOR) == []
        # A renamed install guards an identity the annotator does not run as.
        (renamed,) = policy_problems(name, policy, binding, "system:serviceaccount:ops:la")
        assert "does not name this process's user" in renamed


@pytest.mark.parametrize(
    ("change", "finding"),
    [
        (lambda p, b: b["spec"].update(validationActions=["Warn", "Audit"]), "does not Deny"),
        (lambda p, b: b["spec"].update(policyName="other"), "binds 'other'"),
        (lambda p, b: b["spec"].update(matchResources={"objectSelector": {
            "matchLabels": {"x": "y"}}}), "narrowed by matchResources"),
        (lambda p, b: p["spec"].update(failurePolicy="Ignore"), "failurePolicy Ignore"),
        (lambda p, b: p.update(status={"typeChecking": {"expressionWarnings": [{}]}}),
         "type-checking warnings"),
    ],
)
def test_what_keeps_a_policy_from_denying_is_found(change: Any, finding: str) -> None:
    import copy

    from app.kube.admission import policy_problems

    name = "loadaware-node-annotation-writers"
    objects = render(DEPLOY / "base")
    policy = copy.deepcopy(named(objects, "ValidatingAdmissionPolicy", name))
    binding = copy.deepcopy(named(objects, "ValidatingAdmissionPolicyBinding", name))
    change(policy, binding)
    (problem,) = policy_problems(name, policy, binding, ANNOTATOR)
    assert finding in problem
    assert policy_problems(name, None, binding, None) == [
        f"ValidatingAdmissionPolicy {name} is not installed"
    ]
    assert "missing" in policy_problems(name, policy, None, None)[0]


def test_the_annotator_knows_its_user_from_its_service_account_token(tmp_path: Path) -> None:
    import base64
    import json

    from app.kube.admission import own_username

    claims = base64.urlsafe_b64encode(json.dumps({"sub": ANNOTATOR}).encode()).rstrip(b"=")
    token = tmp_path / "token"
    token.write_text(f"eyJhbGciOiJSUzI1NiJ9.{claims.decode()}.c2lnbmF0dXJl")
    assert own_username(token) == ANNOTATOR
    token.write_text("not a token")
    assert own_username(token) is None
    assert own_username(tmp_path / "missing") is None
