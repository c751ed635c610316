"""The extender judges each node by its node pool's limits, resolved when the node or
the policy changes (app/policy/pools.py), and a node two pools select by the defaults."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
import yaml

from app.extender.extender import Extender
from app.extender.table import NodeTable
from app.extender.verbs import Outcome, parse_args
from app.load.samples import format_usage
from app.policy import DEFAULT_POLICY_YAML, Policy, default_policy, policy_from_mapping

NOW = 1_800_000_000.0
GPU = {"pool": "gpu"}
GENERAL = {"pool": "general"}


def pools_policy(*extra: dict[str, Any]) -> Policy:
    document: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)
    document["spec"]["nodePools"] = [
        {
            "name": "gpu",
            "nodeSelector": {"matchLabels": GPU},
            "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.4}],
        },
        {
            "name": "general",
            "nodeSelector": {"matchLabels": GENERAL},
            "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.9}],
        },
        *extra,
    ]
    return policy_from_mapping(document, "pools.yaml")


def busy(cpu: float) -> dict[str, str]:
    return {"cpu_usage_avg_5m": format_usage(cpu, NOW - 30)}


def reason(table: NodeTable, name: str) -> str | None:
    entry = table.get(name)
    assert entry is not None
    return entry.reason


def too_high(limit: float) -> str:
    return f"Load[cpu_usage_avg_5m] is too high (> {limit:g})"


def test_each_node_is_judged_by_its_pool_s_limit() -> None:
    table = NodeTable(pools_policy(), lambda: NOW)
    table.upsert("gpu-1", busy(0.5), GPU)
    table.upsert("general-1", busy(0.8), GENERAL)
    table.upsert("plain-1", busy(0.7), {"pool": "none"})
    table.upsert("plain-2", busy(0.5))  # no labels: in no pool
    assert reason(table, "gpu-1") == too_high(0.4)
    assert reason(table, "general-1") is None  # 0.8 is under the pool's 0.9
    assert reason(table, "plain-1") == too_high(0.65)
    assert reason(table, "plain-2") is None
    gpu = table.get("gpu-1")
    assert gpu is not None
    assert gpu.pool is not None
    assert gpu.pool.pool == "gpu"


def test_a_label_change_moves_the_node_to_its_new_pool() -> None:
    table = NodeTable(pools_policy(), lambda: NOW)
    table.upsert("n1", busy(0.5), GENERAL)
    assert reason(table, "n1") is None
    table.upsert("n1", busy(0.5), GPU)  # the same annotations, relabelled
    assert reason(table, "n1") == too_high(0.4)
    table.upsert("n1", busy(0.5), {})
    assert reason(table, "n1") is None


def test_a_policy_reload_resolves_the_pools_from_the_labels_kept() -> None:
    table = NodeTable(default_policy(), lambda: NOW)
    table.upsert("n1", busy(0.5), GPU)
    assert reason(table, "n1") is None  # no pools: 0.5 is under 0.65
    table.set_policy(pools_policy())
    assert reason(table, "n1") == too_high(0.4)
    table.set_policy(default_policy())
    assert reason(table, "n1") is None
    entry = table.get("n1")
    assert entry is not None
    assert entry.pool is None


def test_a_node_two_pools_select_gets_the_defaults_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    zone = {
        "name": "zone-a",
        "nodeSelector": {"matchLabels": {"zone": "a"}},
        "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.2}],
    }
    table = NodeTable(pools_policy(zone), lambda: NOW)
    both = {**GPU, "zone": "a"}
    with caplog.at_level(logging.ERROR, logger="app.extender.table"):
        table.upsert("n1", busy(0.5), both)
        table.upsert("n1", busy(0.55), both)  # recomputed, still in both
        table.upsert("n1", busy(0.6), dict(both))
    # Judged by the policy's own limit (0.65), neither the gpu pool's nor the zone's.
    assert reason(table, "n1") is None
    assert table.overlapping == {"n1"}
    said = [r.getMessage() for r in caplog.records if "n1" in r.getMessage()]
    assert len(said) == 1
    assert "node pools gpu, zone-a" in said[0]
    table.upsert("n1", busy(0.5), GPU)  # relabelled into one pool
    assert reason(table, "n1") == too_high(0.4)
    assert table.overlapping == frozenset()


def test_full_nodes_mode_reads_the_pool_from_the_request_s_node_labels() -> None:
    extender = Extender(pools_policy(), mode="test", clock=lambda: NOW)

    def node(name: str, labels: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": labels, "annotations": busy(0.5)}}

    body = {
        "Pod": {},
        "Nodes": {
            "items": [
                node("gpu-1", GPU),
                node("general-1", GENERAL),
                # Garbage labels are dropped, not trusted: the node is in no pool.
                node("odd-1", {"pool": 7}),
                node("odd-2", ["pool", "gpu"]),
            ]
        },
    }
    answer = orjson.loads(extender.verbs.filter(parse_args(orjson.dumps(body)), Outcome()))
    passed = [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
    assert passed == ["general-1", "odd-1", "odd-2"]
    assert answer["FailedAndUnresolvableNodes"] == {"gpu-1": too_high(0.4)}
    # The next request relabels them: each node moves to its new pool.
    body["Nodes"] = {"items": [node("gpu-1", GENERAL), node("general-1", GPU)]}
    again = orjson.loads(extender.verbs.filter(parse_args(orjson.dumps(body)), Outcome()))
    assert [n["metadata"]["name"] for n in again["Nodes"]["items"]] == ["gpu-1"]
    assert again["FailedAndUnresolvableNodes"] == {"general-1": too_high(0.4)}


def test_the_debug_view_names_the_node_s_pool() -> None:
    extender = Extender(pools_policy(), mode="test", clock=lambda: NOW)
    extender.table.upsert("gpu-1", busy(0.3), GPU)
    view = extender.debug.node("gpu-1")
    assert view is not None
    assert (view["pool"], view["pools"]) == ("gpu", ())
    plain = Extender(default_policy(), mode="test", clock=lambda: NOW)
    plain.table.upsert("n1", busy(0.3), GPU)
    shown = plain.debug.node("n1")
    assert shown is not None
    assert "pool" not in shown


def test_a_node_in_a_pool_passes_a_pod_only_where_its_own_estimate_fits() -> None:
    """A node in a pool takes a pod only where the pod's estimate fits under the pool's
    limits (the rule of a class of pods), in both of kube-scheduler's forms; a node in no
    pool is judged by its usage before the pod, as crane judges it."""
    import time

    from app.extender.classes import NO_POOL_ROOM_REASON
    from app.kube.client import client_for_server
    from app.kube.nodes import NodeCache, NodeInfo
    from app.kube.pods import PodCache, scheduled_pod
    from app.objects import Resources
    from tests.extender.nodes import usage_annotations

    client = client_for_server("http://127.0.0.1:9")  # never contacted: caches fed by hand
    extender = Extender(
        pools_policy(),
        node_cache=NodeCache(client),
        pod_cache=PodCache(client, scheduled_pod),
        mode="test",
    )
    assert extender.node_cache is not None
    no_pool: dict[str, str] = {}
    nodes = (("gpu-1", 0.3, GPU), ("general-1", 0.5, GENERAL), ("plain-1", 0.6, no_pool))
    for name, cpu, labels in nodes:
        node = NodeInfo(
            name, usage_annotations(cpu, 0.3), None, labels=labels,
            allocatable=Resources(8.0, 32e9),
        )  # fmt: skip
        extender.node_cache.apply(name, node)
    names = [name for name, _, _ in nodes]

    def answer(limit_cpu: str, **form: Any) -> dict[str, Any]:
        resources = {"requests": {"cpu": "100m"}, "limits": {"cpu": limit_cpu}}
        request_pod = {
            "metadata": {"name": "p", "namespace": "ns", "uid": f"u-{time.time()}"},
            "spec": {"containers": [{"name": "c", "resources": resources}]},
        }
        body = orjson.dumps({"Pod": request_pod, **(form or {"NodeNames": names})})
        answered: dict[str, Any] = orjson.loads(extender.verbs.filter(parse_args(body), Outcome()))
        return answered

    # Estimated at 1 x 0.85 cores, 10.6 % of the node: 30 % + 10.6 % is past the GPU
    # pool's 40 %; 50 % + 10.6 % is under the general pool's 90 %; the node in no pool,
    # at 60 % under the policy's own 65 % before the pod, passes as crane passes it.
    answered = answer("1")
    assert answered["NodeNames"] == ["general-1", "plain-1"]
    assert answered["FailedAndUnresolvableNodes"] == {"gpu-1": NO_POOL_ROOM_REASON}
    # Half of it (5.3 %) fits on the GPU node.
    assert answer("500m")["NodeNames"] == names
    # The same in full-nodes form (Node objects, not names).
    items = [{"metadata": {"name": name}} for name in names]
    full = answer("1", Nodes={"items": items})
    assert [n["metadata"]["name"] for n in full["Nodes"]["items"]] == ["general-1", "plain-1"]
    assert full["FailedAndUnresolvableNodes"] == {"gpu-1": NO_POOL_ROOM_REASON}
