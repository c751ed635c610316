"""Every Kubernetes API call each component makes: the one list RBAC is checked against.

``deploy/`` grants each component's ServiceAccount exactly these permissions, no more
and no fewer (``tests/deploy/test_rbac.py`` compares both ways), and the tests drive
each component against the fake API server and check that every request it sends is
covered here and every entry here is used. A new API call is therefore a change in
three places that cannot drift: the code, this list and the component's RBAC.

Adding a component: one more entry in ``PERMISSIONS`` keyed by its subcommand, whose
ServiceAccount in ``deploy/`` is named ``loadaware-<subcommand>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from app.kube.defaults import (
    ANNOTATOR_LEASE_NAME,
    DESCHEDULER_CONFIGMAP,
    DESCHEDULER_LEASE_NAME,
    POLICY_CONFIGMAP,
    STATE_NAME,
    WORKLOAD_USAGE_NAME,
)


class Scope(Enum):
    """Where a permission is granted."""

    CLUSTER = "cluster"
    """A ClusterRole bound by a ClusterRoleBinding: the resource in every namespace."""
    OWN_NAMESPACE = "own-namespace"
    """A Role and RoleBinding in loadaware's own namespace only."""


@dataclass(frozen=True, slots=True)
class Permission:
    """One RBAC rule: ``verbs`` on ``resource`` (``"pods/eviction"`` for a subresource),
    on the objects ``names`` only when there are any (RBAC ``resourceNames``)."""

    api_group: str  # "" is the core group
    resource: str
    verbs: frozenset[str]
    scope: Scope
    why: str
    names: frozenset[str] = frozenset()

    def grants(self) -> set[tuple[str, str, str, Scope]]:
        return {(self.api_group, self.resource, verb, self.scope) for verb in self.verbs}


def _permission(
    api_group: str,
    resource: str,
    verbs: str,
    why: str,
    scope: Scope = Scope.CLUSTER,
    names: tuple[str, ...] = (),
) -> Permission:
    return Permission(api_group, resource, frozenset(verbs.split()), scope, why, frozenset(names))


# RBAC can name the objects of get, update and patch (resourceNames), but not of create:
# the API server authorizes a create before the object, and its name, exists. So each
# object a component keeps in its own namespace is two rules: get and update of that
# one object, and create of its kind (docs/security.md, "Roles name their objects").


def _leader_lease(name: str) -> tuple[Permission, Permission]:
    return (
        _permission(
            "coordination.k8s.io",
            "leases",
            "get update",
            f"leader election on its Lease {name} (--lease-name) in its own namespace",
            Scope.OWN_NAMESPACE,
            (name,),
        ),
        _permission(
            "coordination.k8s.io",
            "leases",
            "create",
            "the Lease on first start (create cannot be limited by name)",
            Scope.OWN_NAMESPACE,
        ),
    )


_NODE_CACHE = _permission(
    "", "nodes", "list watch", "the node cache (app/kube/nodes.py) lists and watches Nodes"
)


# The objects named in the shipped Roles: the defaults of --lease-name and --state-name
# (a test holds them equal). Another name needs the Role changed to match.
ANNOTATOR_LEASE = ANNOTATOR_LEASE_NAME
DESCHEDULER_LEASE = DESCHEDULER_LEASE_NAME
DESCHEDULER_STATE = STATE_NAME
WORKLOAD_USAGE = WORKLOAD_USAGE_NAME
# app/kube/admission.py's WRITER_POLICIES (a test holds them equal).
WRITER_POLICY_NAMES = ("loadaware-node-annotation-writers", "loadaware-document-writers")

PERMISSIONS: Mapping[str, tuple[Permission, ...]] = {
    "extender": (
        _NODE_CACHE,
        _permission(
            "", "pods", "list watch", "the pod cache for burst-aware estimation (--pod-cache)"
        ),
        _permission(
            "",
            "configmaps",
            "get",
            f"the annotator's {WORKLOAD_USAGE} (--workload-usage-name): what each "
            "workload's pods use, for the estimate of a pod just bound",
            Scope.OWN_NAMESPACE,
            (WORKLOAD_USAGE,),
        ),
    ),
    "annotator": (
        _NODE_CACHE,
        _permission(
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies",
            "get",
            "at first leading, whether the policies that keep loadaware's annotations and "
            "documents to loadaware are installed (app/kube/admission.py)",
            names=WRITER_POLICY_NAMES,
        ),
        _permission(
            "admissionregistration.k8s.io",
            "validatingadmissionpolicybindings",
            "get",
            "at first leading, whether those policies are bound to Deny",
            names=WRITER_POLICY_NAMES,
        ),
        _permission(
            "", "nodes", "patch", "one merge patch per node writes loadaware's annotations"
        ),
        _permission(
            "",
            "nodes",
            "get",
            "--soft-taints: a Node is read just before its taints are rewritten, for the "
            "resourceVersion the write is conditional on (app/kube/patching.py)",
        ),
        _permission("", "pods", "list watch", "bindings are seen on a pod watch (the hot value)"),
        _permission(
            "",
            "configmaps",
            "update",
            "each workload's observed per-pod usage, in one ConfigMap "
            f"{WORKLOAD_USAGE} (--workload-usage-name) that only it may write "
            "(app/kube/workload_usage.py)",
            Scope.OWN_NAMESPACE,
            (WORKLOAD_USAGE,),
        ),
        _permission(
            "",
            "configmaps",
            "create",
            "its workload-usage ConfigMap on first start (create cannot be limited by name)",
            Scope.OWN_NAMESPACE,
        ),
        _permission(
            "",
            "configmaps",
            "get",
            f"--soft-taints: the descheduler's {DESCHEDULER_STATE} "
            "(--descheduler-state-name), which only the descheduler may write: its recent "
            "evictions, so that a drained node keeps its taint (app/annotator/drained.py)",
            Scope.OWN_NAMESPACE,
            (DESCHEDULER_STATE,),
        ),
        *_leader_lease(ANNOTATOR_LEASE),
    ),
    "descheduler": (
        _NODE_CACHE,
        _permission(
            "",
            "nodes",
            "get patch",
            "consolidation (off by default): loadaware's drain taint loadaware.io/draining "
            "on a node it drains, and off when it gives the drain up; a read just before "
            "each write, for the resourceVersion the write is conditional on "
            "(app/kube/patching.py). An admission policy lets it change nothing else "
            "on a Node",
        ),
        _permission("", "pods", "list watch", "the pod cache (app/kube/pods.py): victims and room"),
        _permission(
            "",
            "pods/eviction",
            "create",
            "the policy/v1 Eviction subresource, the only way it removes a pod",
        ),
        _permission(
            "policy",
            "poddisruptionbudgets",
            "list watch",
            "the PDB cache (app/kube/pdbs.py): the planner respects budgets before the 429",
        ),
        _permission(
            "",
            "events",
            "create",
            "an Event on each evicted pod, for humans (never read back)",
        ),
        _permission(
            "",
            "configmaps",
            "get update",
            "its memory, recent evictions and debounce rounds, in one ConfigMap "
            f"{DESCHEDULER_STATE} (--state-name) that only it may write (app/kube/state.py)",
            Scope.OWN_NAMESPACE,
            (DESCHEDULER_STATE,),
        ),
        _permission(
            "",
            "configmaps",
            "create",
            "its memory ConfigMap on first start (create cannot be limited by name)",
            Scope.OWN_NAMESPACE,
        ),
        _permission(
            "",
            "configmaps",
            "get",
            f"the annotator's {WORKLOAD_USAGE}: what each workload's pods use, so that a "
            "destination counts the pods bound there as the extender's estimate does",
            Scope.OWN_NAMESPACE,
            (WORKLOAD_USAGE,),
        ),
        *_leader_lease(DESCHEDULER_LEASE),
    ),
}
"""Per component (its ``loadaware`` subcommand), the API calls it makes."""


def grants_of(component: str) -> set[tuple[str, str, str, Scope]]:
    """``(api_group, resource, verb, scope)`` for every call ``component`` makes."""
    return {grant for permission in PERMISSIONS[component] for grant in permission.grants()}


def names_of(component: str) -> dict[tuple[str, str, str, Scope], frozenset[str]]:
    """For every call ``component`` makes, the objects it is limited to (empty: any);
    a call two permissions make is limited to the objects of both."""
    names: dict[tuple[str, str, str, Scope], frozenset[str]] = {}
    for permission in PERMISSIONS[component]:
        for grant in permission.grants():
            before = names.get(grant)
            wider = not permission.names or (before is not None and not before)
            names[grant] = frozenset() if wider else permission.names | (before or frozenset())
    return names


def service_account_name(component: str) -> str:
    return f"loadaware-{component}"


EXPLAIN: tuple[Permission, ...] = (
    _permission("", "nodes", "list", "every node's annotations, allocatable, taints"),
    _permission("", "pods", "get list", "the pod asked about, and every bound pod"),
    _permission("", "events", "list", "the pod's last FailedScheduling message"),
    _permission(
        "policy", "poddisruptionbudgets", "list", "budgets, for the descheduler's skip codes"
    ),
    _permission(
        "",
        "configmaps",
        "get",
        "the policy, the descheduler's configuration and its memory, and the workload "
        "usage the extender's estimate follows, by name",
        Scope.OWN_NAMESPACE,
    ),
)
"""``loadaware explain``, a command people run (not a component with a ServiceAccount):
reads only, granted by the roles of ``deploy/base/explain-rbac.yaml`` to whoever an
operator binds them to (tests/deploy/test_rbac.py compares both ways)."""

EXPLAIN_CONFIGMAPS = (
    POLICY_CONFIGMAP.name,
    DESCHEDULER_CONFIGMAP.name,
    DESCHEDULER_STATE,
    WORKLOAD_USAGE,
)
"""The only ConfigMaps explain reads (its Role names them: ``resourceNames``)."""
