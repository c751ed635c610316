"""Issue 42, point 2: owner references are tenant free text.

The API server checks only that an owner's kind and name are non-empty. One Running pod
whose controller is ``nothing.example/v1 Widget`` with a 1.1 MB name made the
workload-usage document exceed a ConfigMap's 1 MiB (every publication failed, workload
usage off cluster-wide), and once such a pod was evicted the descheduler's state could
not be saved. A tenant with many workloads pushed every other namespace out of the
document's 5,000 entries. Now: an owner in no shape Kubernetes gives its objects makes
the pod bare (no workload key, no owner in any view), both documents keep to a byte
budget in turns by namespace, and no record can stop a save.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from lightkube.resources.core_v1 import Pod

from app.annotator.workload_usage import per_workload
from app.extender.request_pod import request_pod_workload
from app.kube.pods import (
    MIRROR_ANNOTATION,
    READ_POD_ANNOTATIONS,
    pod_info,
    pod_placement,
    scheduled_pod,
)
from app.kube.state import MAX_DOCUMENT_BYTES as STATE_BYTES
from app.kube.state import DeschedulerState
from app.kube.state import decode as decode_state
from app.kube.state import encode as encode_state
from app.kube.workload_usage import MAX_DOCUMENT_BYTES, decode, encode
from app.objects import EvictionRecord, OwnerRef, Resources, workload_key
from app.objects.tenant_text import printable, valid_owner
from app.rebalance.victims import deletion_cost, opt_out

CONFIG_MAP_LIMIT = 1024 * 1024  # bytes, data and metadata together
HUGE = "w" * 1_100_000  # the attack's 1.1 MB owner name
NOW_S = 1_700_000_000.0


def pod(owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "burner",
            "namespace": "tenant",
            "uid": "pod-uid",
            "ownerReferences": [{"uid": "owner-uid", "controller": True, **owner}],
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"},
    }


WIDGET = {"apiVersion": "nothing.example/v1", "kind": "Widget", "name": HUGE}


@pytest.mark.parametrize(
    "owner",
    [
        WIDGET,
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web\x1b[2J\x1b[Hforged"},
        {"apiVersion": "apps/v1", "kind": "Replica Set", "name": "web"},
        {"apiVersion": "apps/v1", "kind": "K" * 64, "name": "web"},
        {"apiVersion": "Not A Group/v1", "kind": "Widget", "name": "web"},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a/b"},
    ],
    ids=["huge-name", "escape-sequences", "space-in-kind", "long-kind", "bad-group", "slash"],
)
def test_a_pod_whose_owner_is_in_no_kubernetes_shape_is_bare_in_every_view(
    owner: dict[str, Any],
) -> None:
    body = pod(owner)
    lightkube_pod = Pod.from_dict(body)
    assert pod_info(lightkube_pod).owner is None
    assert pod_placement(lightkube_pod).workload is None
    assert scheduled_pod(lightkube_pod).workload is None
    assert request_pod_workload(body) is None
    assert not valid_owner(owner["apiVersion"], owner["kind"], owner["name"])
    if owner["apiVersion"] == "apps/v1":  # what the key itself reads: kind and name
        assert workload_key("tenant", OwnerRef(owner["kind"], owner["name"], "u"), {}) is None


@pytest.mark.parametrize(
    ("api_version", "kind", "name"),
    [
        ("apps/v1", "ReplicaSet", "web-7d9f"),
        ("batch/v1", "Job", "nightly-28512345"),
        ("argoproj.io/v1alpha1", "Rollout", "checkout"),
        ("v1", "Node", "ip-10-0-0-1.eu-west-1.compute.internal"),
        ("example.com/v1", "Database", "system:pg-main"),
        ("apps/v1", "StatefulSet", "d" * 253),
    ],
)
def test_owners_kubernetes_gives_its_objects_still_make_a_workload(
    api_version: str, kind: str, name: str
) -> None:
    assert valid_owner(api_version, kind, name)
    info = pod_info(Pod.from_dict(pod({"apiVersion": api_version, "kind": kind, "name": name})))
    assert info.owner == OwnerRef(kind, name, "owner-uid")


def test_the_workload_usage_document_keeps_its_budget_and_every_namespace() -> None:
    # 20,000 workloads with the longest names a reader accepts, all in one namespace and
    # each with more pods than the one workload of another namespace.
    crowd = [(f"tenant/StatefulSet/{i:05d}{'n' * 248}", Resources(0.5, 1e9), 3)
             for i in range(20_000)]  # fmt: skip
    text = encode([*crowd, ("shop/Deployment/web", Resources(0.7, 5e8), 3)], NOW_S)
    assert len(text.encode()) <= MAX_DOCUMENT_BYTES < CONFIG_MAP_LIMIT
    published, skipped = decode(text, NOW_S)
    assert skipped == 0
    assert published.workloads["shop/Deployment/web"] == Resources(0.7, 5e8)
    assert len(published.workloads) > 1000  # the budget holds many, not a few


def crowd_then_shop(crowd: int, name_chars: int) -> list[tuple[str, Resources, int]]:
    """The annotator's order (``per_workload``: most measured pods first) for ``crowd``
    workloads of one tenant, 4 pods each, and one of another namespace with 3 pods,
    every name ``name_chars`` long: the other namespace's workload comes last."""
    usage: dict[str, Resources] = {}
    workload_of: dict[str, str] = {}
    for i in range(crowd):
        for p in range(4):
            usage[f"tenant/w{i}-{p}"] = Resources(0.5, 1e9)
            workload_of[f"tenant/w{i}-{p}"] = f"tenant/Deployment/{i:05d}".ljust(name_chars, "n")
    for p in range(3):
        usage[f"shop/web-{p}"] = Resources(0.7, 5e8)
        workload_of[f"shop/web-{p}"] = "shop/Deployment/web".ljust(name_chars, "b")
    ordered = per_workload(usage, workload_of)
    assert ordered[-1][0].startswith("shop/")
    return ordered


@pytest.mark.parametrize(
    ("crowd", "name_chars"),
    [(6_000, 30), (3_000, 250)],
    ids=["more-workloads-than-entries", "more-bytes-than-the-budget"],
)
def test_a_tenant_with_many_workloads_cannot_push_another_namespace_out(
    crowd: int, name_chars: int
) -> None:
    """Point 2's last attack: a tenant with more workloads than the document holds (5,000
    entries) or longer names than its byte budget, each with more pods than another
    namespace's one workload, pushed that workload out of the document. Namespaces now
    take turns, so the other namespace's workload is kept, whatever the tenant has."""
    text = encode(crowd_then_shop(crowd, name_chars), NOW_S)
    assert len(text.encode()) <= MAX_DOCUMENT_BYTES
    published, skipped = decode(text, NOW_S)
    assert skipped == 0
    shop = [key for key in published.workloads if key.startswith("shop/")]
    assert shop == ["shop/Deployment/web".ljust(name_chars, "b")]
    assert published.pods[shop[0]] == 3
    assert len(published.workloads) > 1000  # and the tenant keeps the rest of the room


def test_an_entry_a_reader_would_skip_is_not_published() -> None:
    entries = [(f"tenant/Widget/{HUGE}", Resources(1, 1), 3), ("a/Job/b", Resources(1, 1), 3)]
    text = encode(entries, 0)
    assert len(text) < 1000
    assert set(json.loads(text)["workloads"]) == {"a/Job/b"}


def record(i: int, namespace: str, workload: str | None, at_s: float) -> EvictionRecord:
    name = f"{namespace}/p{i:05d}-{'x' * 200}"
    return EvictionRecord(name, f"uid-{namespace}-{i}", "n1", "n2", Resources(1, 1), at_s, workload)


def test_an_evicted_pod_with_a_huge_owner_cannot_stop_the_state_from_being_saved() -> None:
    state = DeschedulerState()
    evicted = record(0, "tenant", f"tenant/Widget/{HUGE}", NOW_S - 10)
    state.evictions[evicted.uid] = evicted
    text = encode_state(state, NOW_S - 3600)
    assert len(text.encode()) < CONFIG_MAP_LIMIT
    stored, ignored = decode_state(text, NOW_S, NOW_S - 3600)
    assert ignored == []
    # The eviction still counts for its node and namespace; only the workload is gone.
    assert stored.evictions[evicted.uid] == evicted.__class__(
        evicted.pod_key, evicted.uid, "n1", "n2", Resources(1, 1), NOW_S - 10, None
    )


def test_the_state_keeps_its_budget_and_every_namespace_s_newest_eviction() -> None:
    state = DeschedulerState()
    for i in range(1999):  # a namespace evicted often, each record ~700 bytes
        r = record(i, "busy", "busy/Deployment/" + "w" * 250, NOW_S - 100 + i * 0.01)
        state.evictions[r.uid] = r
    quiet = record(0, "quiet", "quiet/Deployment/web", NOW_S - 500)
    state.evictions[quiet.uid] = quiet
    text = encode_state(state, NOW_S - 3600)
    assert len(text.encode()) <= STATE_BYTES
    stored, _ = decode_state(text, NOW_S, NOW_S - 3600)
    assert quiet.uid in stored.evictions  # the oldest, but its namespace's newest
    assert "uid-busy-1998" in stored.evictions  # the newest overall
    assert "uid-busy-0" not in stored.evictions  # the oldest of the crowd made room


def test_a_namespace_evicted_often_cannot_push_another_s_eviction_out_of_the_state() -> None:
    """The state's budget too: 2,000 newer evictions of one namespace, each record as long
    as the quiet namespace's older one, filled the document newest first and left the
    quiet namespace's eviction (its cooldown, its namespace limit) out. Namespaces take
    turns now: the quiet one's newest eviction is kept."""
    state = DeschedulerState()
    for i in range(2000):
        r = record(i, "busy", "busy/Deployment/" + "w" * 250, NOW_S - 100 + i * 0.01)
        state.evictions[r.uid] = r
    quiet = record(0, "quie", "quie/Deployment/" + "w" * 251, NOW_S - 500)  # as long
    state.evictions[quiet.uid] = quiet
    text = encode_state(state, NOW_S - 3600)
    assert len(text.encode()) <= STATE_BYTES
    stored, _ = decode_state(text, NOW_S, NOW_S - 3600)
    assert quiet.uid in stored.evictions
    assert stored.evictions[quiet.uid].workload == quiet.workload
    assert len(stored.evictions) > 500  # the busy namespace keeps the rest of the room


def test_printable_neutralises_escape_sequences_and_bounds_length() -> None:
    assert printable("web\x1b[2J\x1b[Hok\nforged line") == "web?[2J?[Hok?forged line"
    assert printable("x" * 10_000) == "x" * 256 + " [...]"
    assert printable("a\u202eb") == "a?b"  # a right-to-left override reorders a line


def test_an_owner_name_with_escape_sequences_never_reaches_the_dry_run_plan() -> None:
    """Point 6: tenant text reached ``explain node``, the dry-run plan and text logs raw
    (``last Ready replica of ReplicaSet <name>``): escape sequences could clear the
    operator's screen or forge lines. The owner never enters the pod view now."""
    from app.rebalance import plan, render_plan
    from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, node

    forged = "web\x1b[2J\x1b[H\nEvictions (0): nothing to do"
    pods = []
    for i in range(10):
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{forged}-{i}"}
        body = pod({**owner, "uid": f"owner-{i}"})  # each the last Ready replica of its own
        body["metadata"].update(name=f"burner-{i}", uid=f"uid-{i}")
        body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
        body["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        pods.append(pod_info(Pod.from_dict(body)))
    nodes = [node("n1", 0.85), node("cool", 0.2)]
    usage = {p.key: Resources(0.8, 1 * GI) for p in pods}
    text = render_plan(plan(cluster(nodes, pods, usage), config(), POLICY, NOW, {}))
    assert "burner-" in text  # the pods are in the plan ...
    assert "\x1b" not in text  # ... and nothing of their owner's text
    assert "nothing to do" not in text


def test_a_pods_annotations_cost_the_caches_only_what_loadaware_reads() -> None:
    """Point 2's cost per pod in every cache, by the other free-text route: a tenant may
    put 256 KiB of annotations on each pod (the API server's bound), and the
    descheduler's view kept them all (517 KiB a pod: about 1,500 such pods past its
    768 MiB limit).
    It keeps only the annotations loadaware reads now, each short; what they mean is
    unchanged: a long prefer-no-eviction still counts as present, a long deletion cost
    as none, a long safe-to-evict as not "false"."""
    body = pod({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f"})
    filler = {f"tenant.example/k{i:04d}": "v" * 120 for i in range(2000)}  # ~256 KiB
    long = "x" * 100_000
    body["metadata"]["annotations"] = {
        **filler,
        "descheduler.alpha.kubernetes.io/prefer-no-eviction": long,
        "controller.kubernetes.io/pod-deletion-cost": "9" * 5000,
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false" + long,
        "karpenter.sh/do-not-disrupt": "true",
    }
    info = pod_info(Pod.from_dict(body))
    assert len(json.dumps(dict(info.annotations))) < 300
    assert info.annotations["karpenter.sh/do-not-disrupt"] == "true"
    assert "descheduler.alpha.kubernetes.io/prefer-no-eviction" in info.annotations
    assert deletion_cost(info) == 0
    assert opt_out(info, {}) == 'karpenter.sh/do-not-disrupt: "true" on the pod'
    del body["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"]
    assert opt_out(pod_info(Pod.from_dict(body)), {}) is None  # safe-to-evict is not "false"


def test_every_pod_annotation_loadaware_reads_is_kept() -> None:
    """A new annotation read by the descheduler's rules must be added to what a pod view
    keeps, or it would silently read as absent."""
    from app.rebalance import victims

    read = {
        value
        for name, value in vars(victims).items()
        if name.endswith("_ANNOTATION") and isinstance(value, str)
    }
    assert len(read) == 5
    assert read | {MIRROR_ANNOTATION} == READ_POD_ANNOTATIONS
