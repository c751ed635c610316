"""deploy/ grants each component exactly the API calls app/kube/permissions.py lists."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from app.annotator import main as annotator_main
from app.descheduler import main as descheduler_main
from app.kube import state
from app.kube.permissions import (
    ANNOTATOR_LEASE,
    DESCHEDULER_LEASE,
    DESCHEDULER_STATE,
    EXPLAIN,
    EXPLAIN_CONFIGMAPS,
    PERMISSIONS,
    Scope,
    grants_of,
    names_of,
    service_account_name,
)
from tests.deploy.manifests import Obj, base, kustomizations, of_kind, pod_templates, render

Grant = tuple[str, str, str, Scope]
NAMESPACE = "loadaware"


def _rules_bound_to(objects: list[Obj], account: str) -> set[Grant]:
    """Every (group, resource, verb, scope) the ServiceAccount is granted in ``objects``."""
    return set(_names_bound_to(objects, account))


def _names_bound_to(objects: list[Obj], account: str) -> dict[Grant, frozenset[str]]:
    """Every grant of the ServiceAccount in ``objects``, with the objects it is limited
    to (resourceNames; empty: every object). A grant in two rules is as wide as both."""
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    granted: dict[Grant, frozenset[str]] = {}
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = binding.get("subjects", [])
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == account and s["namespace"] == NAMESPACE
            for s in subjects
        ):
            continue
        namespace = binding["metadata"].get("namespace")
        ref = binding["roleRef"]
        role_namespace = namespace if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], role_namespace, ref["name"]))
        assert role is not None, f"{binding['metadata']['name']} binds a missing {ref}"
        if binding["kind"] == "ClusterRoleBinding":
            scope = Scope.CLUSTER
        else:
            assert namespace == NAMESPACE, f"{account} is granted rights in namespace {namespace}"
            scope = Scope.OWN_NAMESPACE
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule, rule
            names = frozenset(rule.get("resourceNames", ()))
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        grant = (group, resource, verb, scope)
                        before = granted.get(grant)
                        # Unnamed anywhere means every object.
                        wider = not names or (before is not None and not before)
                        granted[grant] = frozenset() if wider else names | (before or set())
    return granted


@pytest.mark.parametrize("component", sorted(PERMISSIONS))
def test_rbac_grants_exactly_the_listed_api_calls(component: str) -> None:
    granted = _rules_bound_to(base(), service_account_name(component))
    listed = grants_of(component)
    assert not granted - listed, f"{component}: granted but never called (remove from RBAC)"
    assert not listed - granted, f"{component}: called but not granted (add to RBAC)"


@pytest.mark.parametrize("component", sorted(PERMISSIONS))
def test_rbac_names_the_objects_the_code_names(component: str) -> None:
    """Issue 28, attack 5: every get/update in loadaware's namespace is of one named
    object (resourceNames), as PERMISSIONS lists; only create cannot be named."""
    granted = _names_bound_to(base(), service_account_name(component))
    assert granted == names_of(component)
    for (_, resource, verb, scope), names in granted.items():
        if scope is Scope.OWN_NAMESPACE and verb != "create":
            assert names, f"{component} may {verb} every {resource} in {NAMESPACE}"


def test_the_named_objects_are_the_flag_defaults() -> None:
    assert ANNOTATOR_LEASE == annotator_main.DEFAULT_LEASE_NAME
    assert DESCHEDULER_LEASE == descheduler_main.DEFAULT_LEASE_NAME
    assert DESCHEDULER_STATE == state.DEFAULT_NAME


@pytest.mark.parametrize("directory", kustomizations(), ids=lambda d: d.name)
def test_every_loadaware_workload_runs_as_its_components_service_account(
    directory: Path,
) -> None:
    objects = render(directory)
    accounts = {o["metadata"]["name"] for o in of_kind(objects, "ServiceAccount")}
    for _, spec in pod_templates(objects):
        containers = spec["containers"]
        if len(containers) > 1:
            # The extender beside the second scheduler runs under the scheduler's
            # account (system:kube-scheduler lists and watches Nodes and Pods).
            names = sorted(c["name"] for c in containers)
            assert names == ["extender", "kube-scheduler"], names
            assert spec["serviceAccountName"] == "loadaware-scheduler"
            assert spec["serviceAccountName"] in accounts
            continue
        (container,) = containers
        if not container["image"].startswith("loadaware"):
            continue
        component = container["args"][0]
        assert component in PERMISSIONS, f"{component}: add its entry to PERMISSIONS"
        assert spec["serviceAccountName"] == service_account_name(component)
        assert spec["serviceAccountName"] in accounts


def test_every_component_with_permissions_is_deployed() -> None:
    deployed = {
        c["args"][0]
        for _, spec in pod_templates(base())
        for c in spec["containers"]
        if c["image"].startswith("loadaware")
    }
    assert deployed == set(PERMISSIONS)


def test_a_verb_missing_from_a_role_is_seen() -> None:
    objects = copy.deepcopy(base())
    for role in of_kind(objects, "ClusterRole"):
        if role["metadata"]["name"] == "loadaware-annotator":
            role["rules"][0]["verbs"].remove("patch")
            role["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
    granted = _rules_bound_to(objects, service_account_name("annotator"))
    assert grants_of("annotator") - granted == {("", "nodes", "patch", Scope.CLUSTER)}
    assert granted - grants_of("annotator") == {("", "secrets", "get", Scope.CLUSTER)}


def _explain_rules() -> set[Grant]:
    """Every grant of the loadaware-explain roles in the base, whoever they are bound to."""
    granted: set[Grant] = set()
    for role in base():
        if role["kind"] not in ("Role", "ClusterRole"):
            continue
        if role["metadata"]["name"] != "loadaware-explain":
            continue
        scope = Scope.CLUSTER if role["kind"] == "ClusterRole" else Scope.OWN_NAMESPACE
        if scope is Scope.OWN_NAMESPACE:
            assert role["metadata"]["namespace"] == NAMESPACE
        for rule in role["rules"]:
            if "resourceNames" in rule:
                assert rule["resources"] == ["configmaps"], rule
                assert sorted(rule["resourceNames"]) == sorted(EXPLAIN_CONFIGMAPS)
            granted |= {
                (group, resource, verb, scope)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
    return granted


def test_the_explain_roles_grant_exactly_its_reads_and_nothing_that_writes() -> None:
    listed = {grant for permission in EXPLAIN for grant in permission.grants()}
    granted = _explain_rules()
    assert granted == listed
    assert {verb for _, _, verb, _ in granted} <= {"get", "list"}


def test_the_explain_roles_are_bound_to_nobody_by_the_base() -> None:
    """Operators bind them to people; no ServiceAccount of loadaware gets them."""
    for binding in base():
        if binding["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            assert binding["roleRef"]["name"] != "loadaware-explain", binding
