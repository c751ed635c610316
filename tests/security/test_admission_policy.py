"""The annotator's ValidatingAdmissionPolicy, evaluated for real with a CEL implementation.

RBAC grants `patch nodes` whole; the optional policy in
deploy/components/annotator-admission-policy narrows it to loadaware's own annotation
keys. Each case is an (oldObject, object) pair as the API server would hand it to
admission, run through the policy's rendered matchConditions, variables and
validations.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from app.load.samples import HOT_VALUE_KEY
from app.load.taints import SOFT_TAINT_EFFECT, SOFT_TAINT_KEY, SOFT_TAINT_VALUE
from app.load.warm_taint import WARM_TAINT_KEY
from app.policy import class_usage_key, usage_metric
from tests.deploy.manifests import DEPLOY, Obj, named, render

if TYPE_CHECKING:
    import celpy

OVERLAY = DEPLOY / "overlays" / "annotator-admission-policy"
ANNOTATOR = "system:serviceaccount:loadaware:loadaware-annotator"
KUBELET = "system:node:n1"
POLICY_NAME = "loadaware-annotator-node-annotations"
WRITERS_POLICY = "loadaware-node-annotation-writers"


def rendered_policy() -> Obj:
    return named(render(OVERLAY), "ValidatingAdmissionPolicy", POLICY_NAME)


def cel_environment() -> celpy.Environment:
    """celpy is imported by the tests that evaluate CEL (celpy and its parser: ~50 ms of
    every xdist worker's collection at the top of this module)."""
    import celpy

    return celpy.Environment()


class Admission:
    """The policy's CEL programs, evaluated as the API server's admission plugin does."""

    def __init__(self, policy: Obj) -> None:
        self.environment = cel_environment()
        spec = policy["spec"]
        self.conditions = [self._compile(c["expression"]) for c in spec["matchConditions"]]
        self.variables = [
            (v["name"], self._compile(v["expression"])) for v in spec.get("variables", [])
        ]
        self.validations = [
            (self._compile(v["expression"]), v["message"]) for v in spec["validations"]
        ]

    def _compile(self, expression: str) -> Callable[[dict[str, Any]], Any]:
        program = self.environment.program(self.environment.compile(expression))
        return program.evaluate

    def denials(self, old: Obj | None, new: Obj, username: str) -> list[str] | None:
        """None when the request is not matched; else the messages of failed validations."""
        from celpy.adapter import json_to_cel

        activation: dict[str, Any] = {
            "oldObject": json_to_cel(old),
            "object": json_to_cel(new),
            "request": json_to_cel({
                "userInfo": {"username": username},
                "operation": "CREATE" if old is None else "UPDATE",
            }),
        }
        if not all(bool(condition(activation)) for condition in self.conditions):
            return None
        variables: dict[str, Any] = {}
        for name, program in self.variables:
            variables[name] = program({**activation, "variables": json_to_cel(variables)})
        activation["variables"] = json_to_cel(variables)
        return [message for program, message in self.validations if not bool(program(activation))]


@pytest.fixture(scope="module")
def admission() -> Admission:
    return Admission(rendered_policy())


def node() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "labels": {"kubernetes.io/hostname": "n1"},
            "annotations": {
                "cpu_usage_avg_5m": "0.10000,2024-05-01T10:00:00Z",
                "node.alpha.kubernetes.io/ttl": "0",
            },
        },
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]},
    }


def changed(edit: Callable[[Obj], None], base: Callable[[], Obj] = node) -> Obj:
    new = copy.deepcopy(base())
    edit(new)
    return new


CLASS_CPU = class_usage_key("production", "cpu")


def class_used() -> Obj:
    """A node with the usage of a class of pods on it, as the annotator writes it."""
    return changed(
        lambda n: n["metadata"]["annotations"].update({CLASS_CPU: "0.30000,2024-05-01T10:0Z"})
    )


def bare_node() -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


SOFT = {"key": SOFT_TAINT_KEY, "value": SOFT_TAINT_VALUE, "effect": SOFT_TAINT_EFFECT}
WARM = {"key": WARM_TAINT_KEY, "value": SOFT_TAINT_VALUE, "effect": SOFT_TAINT_EFFECT}
GPU = {"key": "example.com/gpu", "value": "a100", "effect": "NoSchedule"}


def tainted() -> Obj:
    return changed(lambda n: n["spec"].update(taints=[dict(GPU)]))


def soft_tainted() -> Obj:
    return changed(lambda n: n["spec"].update(taints=[dict(GPU), dict(SOFT)]))


ALLOWED: list[tuple[str, Callable[[], Obj], Obj]] = [
    ("a class usage written", node, class_used()),
    ("a class usage rewritten", class_used, changed(
        lambda n: n["metadata"]["annotations"].update({CLASS_CPU: "0.1,2024-05-01T10:03:00Z"}),
        class_used,
    )),
    ("a new usage value", node, changed(
        lambda n: n["metadata"]["annotations"].update(cpu_usage_avg_5m="0.7,2024-05-01T10:03:00Z")
    )),
    ("a first hot value", node, changed(
        lambda n: n["metadata"]["annotations"].update({HOT_VALUE_KEY: "1,2024-05-01T10:03:00Z"})
    )),
    ("a loadaware key removed", node, changed(
        lambda n: n["metadata"]["annotations"].pop("cpu_usage_avg_5m")
    )),
    ("the first annotation on a bare node", bare_node, changed(
        lambda n: n["metadata"].update(annotations={"mem_usage_avg_5m": "0.2,2024-05-01T10:0Z"}),
        bare_node,
    )),
    ("nothing changed", node, node()),
    ("the soft taint added", node, changed(lambda n: n["spec"].update(taints=[SOFT]))),
    ("the soft taint added after another", tainted, changed(
        lambda n: n["spec"]["taints"].append(SOFT), tainted
    )),
    ("the soft taint removed", soft_tainted, changed(
        lambda n: n["spec"]["taints"].remove(SOFT), soft_tainted
    )),
    ("the last taint, the soft one, removed", lambda: changed(
        lambda n: n["spec"].update(taints=[SOFT])
    ), node()),
    ("the soft taint on a node without spec", bare_node, changed(
        lambda n: n.update(spec={"taints": [SOFT]}), bare_node
    )),
    ("the warm taint added", node, changed(lambda n: n["spec"].update(taints=[WARM]))),
    ("the warm taint beside the soft one", soft_tainted, changed(
        lambda n: n["spec"]["taints"].append(WARM), soft_tainted
    )),
    ("the warm taint removed", lambda: changed(
        lambda n: n["spec"].update(taints=[GPU, WARM])
    ), changed(lambda n: n["spec"].update(taints=[GPU]))),
]

DENIED: list[tuple[str, Obj, str]] = [
    ("a foreign annotation added", changed(
        lambda n: n["metadata"]["annotations"].update({"evil.example/x": "1"})
    ), "add or change only"),
    ("a foreign annotation changed", changed(
        lambda n: n["metadata"]["annotations"].update({"node.alpha.kubernetes.io/ttl": "30"})
    ), "add or change only"),
    ("a foreign annotation removed", changed(
        lambda n: n["metadata"]["annotations"].pop("node.alpha.kubernetes.io/ttl")
    ), "remove only"),
    ("every annotation dropped", changed(
        lambda n: n["metadata"].pop("annotations")
    ), "remove only"),
    ("a label changed", changed(
        lambda n: n["metadata"]["labels"].update({"node-role.kubernetes.io/control-plane": ""})
    ), "labels"),
    ("the labels dropped", changed(lambda n: n["metadata"].pop("labels")), "labels"),
    ("a taint added", changed(
        lambda n: n["spec"].update(taints=[{"key": "x", "effect": "NoSchedule"}])
    ), "a taint other than"),
    ("a taint added beside the soft one", changed(
        lambda n: n["spec"].update(taints=[SOFT, {"key": "x", "effect": "NoSchedule"}])
    ), "a taint other than"),
    ("the soft taint as NoSchedule", changed(
        lambda n: n["spec"].update(taints=[{**SOFT, "effect": "NoSchedule"}])
    ), "only as loadaware.io/hot=true:PreferNoSchedule"),
    ("the soft taint as NoExecute", changed(
        lambda n: n["spec"].update(taints=[{**SOFT, "effect": "NoExecute",
                                            "timeAdded": "2024-05-01T10:00:00Z"}])
    ), "only as"),
    ("the soft taint with another value", changed(
        lambda n: n["spec"].update(taints=[{**SOFT, "value": "false"}])
    ), "only as"),
    ("the soft taint twice", changed(lambda n: n["spec"].update(taints=[SOFT, SOFT])), "only as"),
    ("the warm taint as NoSchedule", changed(
        lambda n: n["spec"].update(taints=[{**WARM, "effect": "NoSchedule"}])
    ), "only as loadaware.io/warm=true:PreferNoSchedule"),
    ("the warm taint twice", changed(lambda n: n["spec"].update(taints=[WARM, WARM])), "only as"),
    ("cordoned", changed(lambda n: n["spec"].update(unschedulable=True)), "spec"),
    ("cordoned with the soft taint", changed(
        lambda n: n["spec"].update(unschedulable=True, taints=[SOFT])
    ), "spec"),
    ("its pod CIDR changed", changed(lambda n: n["spec"].update(podCIDR="10.9.0.0/24")), "spec"),
    ("a provider ID set", changed(lambda n: n["spec"].update(providerID="aws:///i-1")), "spec"),
    ("status changed", changed(
        lambda n: n["status"].update(addresses=[{"type": "InternalIP", "address": "10.9.9.9"}])
    ), "status"),
    ("a finalizer added", changed(
        lambda n: n["metadata"].update(finalizers=["example.com/hold"])
    ), "finalizers"),
]


@pytest.mark.parametrize(("case", "old", "new"), ALLOWED, ids=[c[0] for c in ALLOWED])
def test_the_annotator_may_write_loadaware_s_own_annotations(
    admission: Admission, case: str, old: Callable[[], Obj], new: Obj
) -> None:
    assert admission.denials(old(), new, ANNOTATOR) == [], case


@pytest.mark.parametrize(("case", "new", "message"), DENIED, ids=[c[0] for c in DENIED])
def test_the_annotator_may_change_nothing_else_on_a_node(
    admission: Admission, case: str, new: Obj, message: str
) -> None:
    denials = admission.denials(node(), new, ANNOTATOR)
    assert denials, case
    assert any(message in denial for denial in denials), denials


@pytest.mark.parametrize(("case", "new", "message"), DENIED, ids=[c[0] for c in DENIED])
def test_other_users_are_not_matched(
    admission: Admission, case: str, new: Obj, message: str
) -> None:
    assert admission.denials(node(), new, KUBELET) is None, case
    assert admission.denials(node(), new, "system:serviceaccount:other:loadaware-annotator") is None


@pytest.mark.parametrize("name", [POLICY_NAME, WRITERS_POLICY])
def test_the_key_list_is_every_recorded_metric_and_the_hot_value(name: str) -> None:
    # Every usage metric deploy/prometheus records, so that a policy naming any of them
    # (the percentiles of docs/tuning.md too) is written, and written by no one else.
    spec = named(render(OVERLAY), "ValidatingAdmissionPolicy", name)["spec"]
    (keys,) = [v for v in spec["variables"] if v["name"] == "loadawareKeys"]
    from celpy.celtypes import ListType

    environment = cel_environment()
    listed = environment.program(environment.compile(keys["expression"])).evaluate({})
    assert isinstance(listed, ListType)
    policy = yaml.safe_load((DEPLOY / "base" / "policy.yaml").read_text(encoding="utf-8"))
    metrics = {entry["name"] for entry in policy["spec"]["syncPolicy"]}
    rules = yaml.safe_load((DEPLOY / "prometheus" / "loadaware-rules.yaml").read_text())
    recorded = {r["record"] for g in rules["groups"] for r in g["rules"]
                if usage_metric(r["record"]) is not None}  # fmt: skip
    assert metrics <= recorded
    assert sorted(str(key) for key in listed) == sorted({*recorded, HOT_VALUE_KEY})


# -- issue 28, attack 4: only the annotator writes loadaware's keys ----------------------


@pytest.fixture(scope="module")
def writers() -> Admission:
    return Admission(named(render(OVERLAY), "ValidatingAdmissionPolicy", WRITERS_POLICY))


FAKED_LOAD: list[tuple[str, Callable[[], Obj | None], Obj]] = [
    ("its own usage lowered", node, changed(
        lambda n: n["metadata"]["annotations"].update(cpu_usage_avg_5m="0.0,2024-05-01T10:01Z")
    )),
    ("a hot value added", node, changed(
        lambda n: n["metadata"]["annotations"].update({HOT_VALUE_KEY: "0,2030-01-01T00:00:00Z"})
    )),
    ("its usage removed", node, changed(
        lambda n: n["metadata"]["annotations"].pop("cpu_usage_avg_5m")
    )),
    ("every annotation dropped", node, changed(lambda n: n["metadata"].pop("annotations"))),
    ("a class usage added", node, changed(
        lambda n: n["metadata"]["annotations"].update({CLASS_CPU: "0.0,2030-01-01T00:00:00Z"})
    )),
    ("a class usage changed", class_used, changed(
        lambda n: n["metadata"]["annotations"].update({CLASS_CPU: "0.0,2030-01-01T00:00:00Z"}),
        class_used,
    )),
    ("a class usage removed", class_used, node()),
    ("registered with a class usage", lambda: None, class_used()),
    ("registered with a usage", lambda: None, node()),
    ("the soft taint added", node, changed(lambda n: n["spec"].update(taints=[SOFT]))),
    ("the soft taint removed", soft_tainted, tainted()),
    ("the warm taint added", node, changed(lambda n: n["spec"].update(taints=[WARM]))),
    ("registered with the warm taint", lambda: None, changed(
        lambda n: n.update(spec={"taints": [WARM]}), bare_node
    )),
    ("registered with the soft taint", lambda: None, changed(
        lambda n: n.update(spec={"taints": [SOFT]}), bare_node
    )),
]


@pytest.mark.parametrize(("case", "old", "new"), FAKED_LOAD, ids=[c[0] for c in FAKED_LOAD])
def test_no_one_but_the_annotator_writes_loadaware_s_keys(
    writers: Admission, case: str, old: Callable[[], Obj | None], new: Obj
) -> None:
    for user in (KUBELET, "admin", "system:serviceaccount:other:loadaware-annotator"):
        assert writers.denials(old(), new, user), (case, user)
    assert writers.denials(old(), new, ANNOTATOR) is None, case


def test_other_writers_keep_their_other_annotations(writers: Admission) -> None:
    added = changed(lambda n: n["metadata"]["annotations"].update({"example.com/x": "1"}))
    assert writers.denials(node(), added, KUBELET) == []
    # ...and their other taints, beside the soft one or not.
    assert writers.denials(soft_tainted(), changed(
        lambda n: n["spec"]["taints"].remove(GPU), soft_tainted
    ), "admin") == []
    registered = changed(lambda n: n.update(spec={"taints": [GPU]}), bare_node)
    assert writers.denials(None, registered, KUBELET) == []
    assert writers.denials(None, changed(lambda n: n["metadata"].pop("annotations")), KUBELET) == []
    assert writers.denials(bare_node(), bare_node(), KUBELET) == []


@pytest.mark.parametrize("name", [POLICY_NAME, WRITERS_POLICY])
def test_the_policies_name_the_soft_taint_the_annotator_writes(name: str) -> None:
    spec = named(render(OVERLAY), "ValidatingAdmissionPolicy", name)["spec"]
    (key,) = [v for v in spec["variables"] if v["name"] == "softTaintKey"]
    environment = cel_environment()
    assert environment.program(environment.compile(key["expression"])).evaluate({}) == (
        SOFT_TAINT_KEY
    )
    text = yaml.safe_dump(spec)
    assert f"{SOFT_TAINT_KEY}={SOFT_TAINT_VALUE}:{SOFT_TAINT_EFFECT}" in text or name != POLICY_NAME
    assert f"t.value == '{SOFT_TAINT_VALUE}'" in text or name != POLICY_NAME
    assert f"t.effect == '{SOFT_TAINT_EFFECT}'" in text or name != POLICY_NAME


def test_the_binding_denies_and_names_the_policy() -> None:
    binding = named(render(OVERLAY), "ValidatingAdmissionPolicyBinding", POLICY_NAME)
    assert binding["spec"] == {
        "policyName": POLICY_NAME,
        "validationActions": ["Deny"],
    }
    assert rendered_policy()["spec"]["failurePolicy"] == "Fail"
