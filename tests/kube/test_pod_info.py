"""pod_info: the descheduler's view of a pod, read through the real lightkube client."""

from __future__ import annotations

from datetime import datetime

from lightkube.resources.core_v1 import Pod

from app.kube.pods import pod_info
from app.objects.pods import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PodAffinityTerm,
    SpreadConstraint,
    Toleration,
)
from app.objects.resources import Resources
from app.objects.selectors import LabelRequirement, LabelSelector
from app.rebalance.config import DeschedulerConfig
from app.rebalance.victims import hard_protection
from tests.support.fakekube import JSON, PODS
from tests.support.fakekube_fixtures import FakeKube

GI = 2.0**30


def container(name: str, requests: JSON | None = None, limits: JSON | None = None,
              **extra: str) -> JSON:
    resources: JSON = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "registry.k8s.io/pause:3.9", "resources": resources, **extra}


FULL_POD: JSON = {
    "metadata": {
        "name": "web-7d9f-abcde",
        "namespace": "shop",
        "labels": {"app": "web"},
        "annotations": {"descheduler.alpha.kubernetes.io/evict": "true"},
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n-uid"},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "rs-uid",
             "controller": True},
        ],
    },
    "spec": {
        "nodeName": "n1",
        "priority": 1000,
        "priorityClassName": "batch",
        "containers": [
            container("app", {"cpu": "500m", "memory": "1Gi"}, {"cpu": "1"}),
            container("log", {"cpu": "100m", "memory": "128Mi"}),
        ],
        "initContainers": [
            container("migrate", {"cpu": "2", "memory": "64Mi"}),
            container("proxy", {"cpu": "50m", "memory": "64Mi"}, restartPolicy="Always"),
        ],
        "volumes": [
            {"name": "scratch", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
        ],
        "nodeSelector": {"disk": "ssd"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                  "values": ["n9"]}]},
            ]}}},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "shop", "effect": "NoSchedule"},
            {"operator": "Exists"},
        ],
    },
    "status": {
        "phase": "Running",
        "qosClass": "Burstable",
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}


def read_back(fake_kube: FakeKube, pod: JSON) -> Pod:
    fake_kube.store.add(PODS, pod)
    meta = pod["metadata"]
    read: Pod = fake_kube.client().get(Pod, meta["name"], namespace=meta.get("namespace"))
    return read


def test_every_field_the_rules_read_comes_through(fake_kube: FakeKube) -> None:
    pod = read_back(fake_kube, FULL_POD)
    info = pod_info(pod)
    assert pod.metadata is not None
    assert info.key == "shop/web-7d9f-abcde"
    assert info.uid == pod.metadata.uid
    assert info.uid
    assert (info.node_name, info.phase) == ("n1", "Running")
    assert info.ready
    assert not info.terminating
    created = pod.metadata.creationTimestamp
    assert isinstance(created, datetime)
    assert info.created_s == created.timestamp()
    assert (info.priority, info.priority_class, info.qos) == (1000, "batch", "Burstable")
    # max(app 0.6 + sidecar 0.05, init 2) cores; max(1Gi + 128Mi + 64Mi, 64Mi) bytes
    assert info.requests == Resources(2.0, GI + 192 * 2.0**20)
    assert info.limits == Resources(1.0, 0.0)
    assert info.owner == OwnerRef("ReplicaSet", "web-7d9f", "rs-uid")
    assert info.local_storage
    assert info.uses_pvc
    assert not info.is_mirror
    assert dict(info.node_selector) == {"disk": "ssd"}
    assert info.required_node_affinity == (
        NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("a", "b")),)),
        NodeSelectorTerm((), (NodeSelectorRequirement("metadata.name", "NotIn", ("n9",)),)),
    )
    assert info.tolerations == (
        Toleration("dedicated", "Equal", "shop", "NoSchedule"),
        Toleration(None, "Exists", None, None),
    )


def test_a_bare_pending_pod_gets_safe_defaults(fake_kube: FakeKube) -> None:
    pod: JSON = {"metadata": {"name": "bare"}, "spec": {"containers": [container("c")]}}
    info = pod_info(read_back(fake_kube, pod))
    assert info.node_name is None
    assert info.owner is None
    assert info.phase == "Unknown"
    assert not info.ready
    assert (info.priority, info.qos) == (0, "BestEffort")
    assert info.requests == Resources()
    assert info.tolerations == ()
    assert info.required_node_affinity == ()
    assert not info.local_storage


def test_qos_is_computed_when_the_status_does_not_say(fake_kube: FakeKube) -> None:
    limits = {"cpu": "1", "memory": "1Gi"}
    guaranteed: JSON = {"metadata": {"name": "g"}, "spec": {"containers": [
        container("c", {"cpu": "1000m", "memory": "1Gi"}, limits)]}}
    burstable: JSON = {"metadata": {"name": "b"}, "spec": {"containers": [
        container("c", {"cpu": "500m"}, limits)]}}
    assert pod_info(read_back(fake_kube, guaranteed)).qos == "Guaranteed"
    assert pod_info(read_back(fake_kube, burstable)).qos == "Burstable"


NODE_CONTROLLER: JSON = {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n-uid",
                         "controller": True}


def test_mirror_and_terminating_pods_are_recognised(fake_kube: FakeKube) -> None:
    mirror: JSON = {"metadata": {"name": "etcd-n1", "namespace": "kube-system",
                                 "annotations": {"kubernetes.io/config.mirror": "abc",
                                                 "kubernetes.io/config.source": "file"},
                                 "ownerReferences": [NODE_CONTROLLER]},
                    "spec": {"containers": [container("etcd")], "nodeName": "n1"}}
    leaving: JSON = {"metadata": {"name": "leaving", "deletionTimestamp": "2024-05-01T12:00:00Z",
                                  "finalizers": ["example.com/hold"]},
                     "spec": {"containers": [container("c")]}}
    assert pod_info(read_back(fake_kube, mirror)).is_mirror
    assert pod_info(read_back(fake_kube, leaving)).terminating


def tenant_pod(name: str, annotations: JSON, owners: list[JSON]) -> JSON:
    return {"metadata": {"name": name, "namespace": "tenant", "annotations": annotations,
                         "ownerReferences": owners},
            "spec": {"containers": [container("c")], "nodeName": "n1"},
            "status": {"phase": "Running"}}


def test_a_tenant_cannot_make_its_pod_read_as_a_mirror_pod(fake_kube: FakeKube) -> None:
    """Issue 28, attack 7: a tenant writes annotations on its own pods. The config source
    note, or the mirror annotation without the Node as controller, is not a mirror pod."""
    faked = [
        tenant_pod("source-file", {"kubernetes.io/config.source": "file"}, []),
        tenant_pod("mirror-note", {"kubernetes.io/config.mirror": "x"}, []),
        tenant_pod("node-not-controller", {"kubernetes.io/config.mirror": "x"},
                   [{**NODE_CONTROLLER, "controller": False}]),
    ]
    for pod in faked:
        info = pod_info(read_back(fake_kube, pod))
        assert not info.is_mirror, info.name
        assert hard_protection(info, DeschedulerConfig()) is None, info.name


def test_only_the_controller_reference_names_a_pods_owner(fake_kube: FakeKube) -> None:
    """Issue 28, attack 7: a DaemonSet ownerReference that is not the controller does not
    make a pod a DaemonSet pod; the pod is owned by its controller, or is bare."""
    daemonset: JSON = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds"}
    replicaset: JSON = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs",
                        "controller": True}
    beside = pod_info(read_back(fake_kube, tenant_pod("beside", {}, [daemonset, replicaset])))
    alone = pod_info(read_back(fake_kube, tenant_pod("alone", {}, [daemonset])))
    assert beside.owner == OwnerRef("ReplicaSet", "rs", "rs")
    assert alone.owner is None
    for info in (beside, alone):
        assert hard_protection(info, DeschedulerConfig()) is None, info.name
    controlled = tenant_pod("real", {}, [{**daemonset, "controller": True}])
    real = pod_info(read_back(fake_kube, controlled))
    assert hard_protection(real, DeschedulerConfig()) == "DaemonSet pod"


SCHEDULING_POD: JSON = {
    "metadata": {"name": "api-1", "namespace": "shop",
                 "labels": {"app": "api", "pod-template-hash": "h1", "tenant": "t1"}},
    "spec": {
        "nodeName": "n1",
        "containers": [container("c")],
        "affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "cache"}},
                 "topologyKey": "zone", "namespaces": ["shop", "infra"]},
            ]},
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchExpressions": [
                        {"key": "app", "operator": "In", "values": ["api"]}]},
                     "topologyKey": "kubernetes.io/hostname",
                     "matchLabelKeys": ["pod-template-hash", "absent"],
                     "mismatchLabelKeys": ["tenant"]},
                    {"labelSelector": {"matchLabels": {"app": "noisy"}},
                     "topologyKey": "kubernetes.io/hostname", "namespaceSelector": {}},
                ],
                # preferred terms never keep a pod off a node
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}}],
            },
        },
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "api"}},
             "matchLabelKeys": ["pod-template-hash"],
             "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"},
            {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
             "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": {"app": "api"}}},
        ],
    },
    "status": {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-05-01T12:00:00Z"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-05-01T12:00:30Z"},
    ]},
}


def test_inter_pod_rules_and_spread_come_through_as_kube_scheduler_reads_them(
    fake_kube: FakeKube,
) -> None:
    info = pod_info(read_back(fake_kube, SCHEDULING_POD))
    assert info.pod_affinity == (
        PodAffinityTerm(LabelSelector({"app": "cache"}), "zone", ("shop", "infra")),
    )
    same_revision, noisy = info.pod_anti_affinity
    # matchLabelKeys become "In [own value]", mismatchLabelKeys "NotIn [own value]";
    # a key the pod lacks is ignored
    assert same_revision == PodAffinityTerm(
        LabelSelector({}, (
            LabelRequirement("app", "In", ("api",)),
            LabelRequirement("pod-template-hash", "In", ("h1",)),
            LabelRequirement("tenant", "NotIn", ("t1",)),
        )),
        "kubernetes.io/hostname",
        ("shop",),  # no namespaces, no namespaceSelector: the pod's own namespace
    )
    assert noisy.namespaces is None  # a namespaceSelector ({} here) reads as every namespace
    # only DoNotSchedule constraints can keep a pod off a node
    assert info.spread == (
        SpreadConstraint(
            max_skew=1, topology_key="zone",
            selector=LabelSelector({"app": "api"},
                                   (LabelRequirement("pod-template-hash", "In", ("h1",)),)),
            min_domains=3, honor_node_affinity=False, honor_node_taints=True,
        ),
    )
    assert info.bound_at_s == datetime.fromisoformat("2026-05-01T12:00:00+00:00").timestamp()
    assert info.own_spread  # constraints of its own: no system-default spreading


def test_preferred_node_affinity_comes_through_with_its_weights(fake_kube: FakeKube) -> None:
    pod: JSON = {"metadata": {"name": "p"}, "spec": {
        "containers": [container("c")],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 30, "preference": {"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a", "b"]}]}},
            {"weight": 5, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}},
        ]}}}}
    info = pod_info(read_back(fake_kube, pod))
    assert info.preferred_node_affinity == (
        (30, NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("a", "b")),))),
        (5, NodeSelectorTerm((), (NodeSelectorRequirement("metadata.name", "In", ("n1",)),))),
    )
    assert not info.own_spread


def test_a_term_without_a_label_selector_matches_no_pod(fake_kube: FakeKube) -> None:
    pod: JSON = {"metadata": {"name": "p", "labels": {"app": "a"}}, "spec": {
        "containers": [container("c")],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname"}]}}}}
    (term,) = pod_info(read_back(fake_kube, pod)).pod_anti_affinity
    assert not term.selector.matches({"app": "a"})
    assert not term.selector.matches({})


def test_a_pod_not_yet_scheduled_has_no_bind_time(fake_kube: FakeKube) -> None:
    pod: JSON = {"metadata": {"name": "pending"}, "spec": {"containers": [container("c")]},
                 "status": {"phase": "Pending", "conditions": [
                     {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
    info = pod_info(read_back(fake_kube, pod))
    assert info.bound_at_s is None
    assert (info.pod_affinity, info.pod_anti_affinity, info.spread) == ((), (), ())
