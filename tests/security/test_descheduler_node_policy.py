"""The descheduler's ValidatingAdmissionPolicy (loadaware-descheduler-node-writes),
evaluated with a CEL implementation: its identity, granted `patch nodes` for
consolidation's drain taint, may change that taint and nothing else on a Node."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from app.kube.patching import taints_with
from app.rebalance import DRAIN_TAINT_KEY, drain_taint
from tests.deploy.manifests import DEPLOY, Obj, named, render
from tests.security.test_admission_policy import Admission

DESCHEDULER = "system:serviceaccount:loadaware:loadaware-descheduler"
POLICY = "loadaware-descheduler-node-writes"
GPU = {"key": "example.com/gpu", "value": "a100", "effect": "NoSchedule"}
DRAIN = {"key": DRAIN_TAINT_KEY, "value": "1764400000", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def admission() -> Admission:
    return Admission(named(render(DEPLOY / "base"), "ValidatingAdmissionPolicy", POLICY))


def node(*taints: dict[str, str]) -> Obj:
    spec: dict[str, object] = {"podCIDR": "10.244.1.0/24"}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"},
                     "annotations": {"cpu_usage_avg_5m": "0.10000,2024-05-01T10:00:00Z"}},
        "spec": spec,
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]},
    }  # fmt: skip


def written(old: Obj, present: bool) -> Obj:
    """``old`` as the descheduler's taint writer leaves it (app/kube/patching.py)."""
    new = copy.deepcopy(old)
    taint = drain_taint(1764400000)
    changed = taints_with(old["spec"].get("taints") or [], taint, present)
    assert changed is not None
    if changed:
        new["spec"]["taints"] = changed
    else:
        new["spec"].pop("taints", None)
    return new


ALLOWED: list[tuple[str, Callable[[], Obj], bool]] = [
    ("the drain taint put on", node, True),
    ("the drain taint put on beside another", lambda: node(GPU), True),
    ("the drain taint taken off", lambda: node(DRAIN), False),
    ("the drain taint taken off, another kept", lambda: node(GPU, DRAIN), False),
]


@pytest.mark.parametrize(("case", "old", "present"), ALLOWED, ids=[c[0] for c in ALLOWED])
def test_the_descheduler_may_put_on_and_take_off_its_drain_taint(
    admission: Admission, case: str, old: Callable[[], Obj], present: bool
) -> None:
    assert admission.denials(old(), written(old(), present), DESCHEDULER) == [], case


def edited(edit: Callable[[Obj], None]) -> Obj:
    new = node(GPU)
    edit(new)
    return new


DENIED: list[tuple[str, Obj, str]] = [
    ("an annotation changed", edited(
        lambda n: n["metadata"]["annotations"].update(cpu_usage_avg_5m="0.9,2024-05-01T10:03:00Z")
    ), "annotations"),
    ("a label added", edited(lambda n: n["metadata"]["labels"].update(x="y")), "labels"),
    ("another taint removed", edited(lambda n: n["spec"].pop("taints")), "other than"),
    ("another taint added", edited(
        lambda n: n["spec"]["taints"].append({"key": "x", "effect": "NoSchedule"})
    ), "other than"),
    ("the drain taint as NoExecute", edited(
        lambda n: n["spec"]["taints"].append({**DRAIN, "effect": "NoExecute"})
    ), "only as"),
    ("the drain taint with a free-text value", edited(
        lambda n: n["spec"]["taints"].append({**DRAIN, "value": "evict-everything"})
    ), "only as"),
    ("the drain taint twice", edited(lambda n: n["spec"]["taints"].extend([DRAIN, DRAIN])),
     "only as"),
    ("cordoned", edited(lambda n: n["spec"].update(unschedulable=True)), "spec"),
    ("status changed", edited(
        lambda n: n["status"].update(addresses=[{"type": "InternalIP", "address": "10.9.9.9"}])
    ), "status"),
    ("a finalizer added", edited(lambda n: n["metadata"].update(finalizers=["x/y"])), "finalizers"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "new", "message"), DENIED, ids=[c[0] for c in DENIED])
def test_the_descheduler_may_change_nothing_else_on_a_node(
    admission: Admission, case: str, new: Obj, message: str
) -> None:
    denials = admission.denials(node(GPU), new, DESCHEDULER)
    assert denials, case
    assert any(message in denial for denial in denials), denials


def test_other_users_are_not_matched(admission: Admission) -> None:
    cordoned = edited(lambda n: n["spec"].update(unschedulable=True))
    assert admission.denials(node(GPU), cordoned, "system:node:n1") is None
    assert admission.denials(node(GPU), cordoned, "kubernetes-admin") is None
