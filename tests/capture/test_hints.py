"""``capture`` keeps the annotations the descheduler honours, so that a replay knows them:
the autoscalers' opt-outs and prefer-no-eviction on pods (a template's or a live pod's),
Karpenter's opt-out on Nodes; nothing else of a tenant's annotations."""

from __future__ import annotations

from typing import Any

import numpy as np
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Node, Pod

from app.capture.catalog import build_catalog
from app.capture.document import Names, node_groups, workloads
from app.capture.history import UsageHistory

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
PREFER_NO_EVICTION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"


def _node(name: str, annotations: dict[str, str]) -> Any:
    return Node.from_dict({
        "metadata": {"name": name, "annotations": annotations},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}},
    })  # fmt: skip


def _deployment(name: str, annotations: dict[str, str]) -> Any:
    return Deployment.from_dict({
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}, "annotations": annotations},
                              "spec": {"containers": [{"name": "c"}]}}},
    })  # fmt: skip


def _pod(name: str, annotations: dict[str, str]) -> Any:
    return Pod.from_dict({
        "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    })  # fmt: skip


def catalog() -> Any:
    nodes = [_node("n1", {DO_NOT_DISRUPT: "true", "owner-note": "call bob"}), _node("n2", {}),
             _node("n3", {DO_NOT_DISRUPT: "false"})]
    deployments = [
        _deployment("web", {SAFE_TO_EVICT: "false", PREFER_NO_EVICTION: "please, no"}),
        _deployment("api", {SAFE_TO_EVICT: "true"}),  # not an opt-out: nothing to keep
    ]
    pods = [_pod("batch", {DO_NOT_DISRUPT: "true", "team": "x"})]
    return build_catalog(nodes, pods, {"Deployment": deployments}, [])


def test_the_catalog_keeps_the_hints_and_nothing_else() -> None:
    found = catalog()
    by_name = {w.name: w.annotations for w in found.workloads.values()}
    assert by_name == {
        "web": {SAFE_TO_EVICT: "false", PREFER_NO_EVICTION: "true"},  # the text is not kept
        "api": {},
        "batch": {DO_NOT_DISRUPT: "true"},
    }
    assert {n.name: dict(n.annotations) for n in found.nodes} == {
        "n1": {DO_NOT_DISRUPT: "true"}, "n2": {}, "n3": {}}


def test_a_node_that_opts_out_is_a_group_of_its_own_with_its_annotation() -> None:
    groups = node_groups(catalog().nodes, Names(anonymous=True))
    assert sorted(len(g["names"]) for g in groups) == [1, 2]
    opted = next(g for g in groups if "annotations" in g)
    assert opted["annotations"] == {DO_NOT_DISRUPT: "true"}  # kept as is, even anonymized
    assert opted["count"] == 1


def test_the_scenario_s_workloads_carry_their_hints() -> None:
    found = catalog()
    usage = UsageHistory(found, 3)
    for resource in range(2):
        usage.counts[resource][:, :] = 1
        usage.sums[resource][:, :] = 1.0
    documents, _ = workloads(found, usage, {}, 60.0, Names(anonymous=True))
    annotated = sorted(tuple(sorted(d.get("annotations", {}).items())) for d in documents)
    assert annotated == sorted([
        (),
        ((DO_NOT_DISRUPT, "true"),),
        ((SAFE_TO_EVICT, "false"), (PREFER_NO_EVICTION, "true")),
    ])
    assert np.all([d["usage"]["profile"] == "history" for d in documents])
