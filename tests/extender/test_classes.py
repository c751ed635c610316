"""The extender judges a pod of a class by its class's usage and limits."""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
import pytest

from app.extender.classes import NO_ROOM_REASON
from app.extender.extender import Extender
from app.extender.verbs import Outcome, parse_args
from app.load.samples import format_usage
from app.policy import class_usage_key, default_policy, policy_from_yaml
from tests.extender.nodes import usage_annotations
from tests.test_policy_classes import classed


def pod(priority: int | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"name": "p", "namespace": "ns", "labels": labels or {}}, "spec": spec}


def class_usage(production_cpu: float, batch_cpu: float) -> dict[str, str]:
    now_s = time.time() - 30
    return {
        class_usage_key("production", "cpu"): format_usage(production_cpu, now_s),
        class_usage_key("production", "memory"): format_usage(0.1, now_s),
        class_usage_key("batch", "cpu"): format_usage(batch_cpu, now_s),
        class_usage_key("batch", "memory"): format_usage(0.1, now_s),
    }


def seeded(extender: Extender) -> None:
    # busy-prod: production uses 50 % (over production's 45 %); the node 60 % in all.
    extender.table.upsert("busy-prod", {**usage_annotations(0.6, 0.3), **class_usage(0.5, 0.1)})
    # busy-batch: batch uses 50 %; production 10 %; the node 60 % (over batch's 55 %).
    extender.table.upsert("busy-batch", {**usage_annotations(0.6, 0.3), **class_usage(0.1, 0.5)})
    extender.table.upsert("quiet", {**usage_annotations(0.2, 0.3), **class_usage(0.05, 0.05)})


def filtered(extender: Extender, request_pod: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    body = {"Pod": request_pod, "NodeNames": ["busy-prod", "busy-batch", "quiet"]}
    answer = orjson.loads(extender.verbs.filter(parse_args(orjson.dumps(body)), Outcome()))
    return answer["NodeNames"], answer["FailedAndUnresolvableNodes"]


def test_each_class_is_filtered_by_its_own_limits() -> None:
    extender = Extender(policy_from_yaml(classed()), mode="test")
    seeded(extender)
    passed, failed = filtered(extender, pod(9500))
    assert passed == ["busy-batch", "quiet"]
    assert failed == {"busy-prod": "Load[production:cpu_usage] is too high (> 0.45)"}
    passed, failed = filtered(extender, pod(5500))
    assert passed == ["quiet"]
    assert set(failed) == {"busy-prod", "busy-batch"}
    # A pod in no class: the policy's own limits (0.65), as without classes.
    passed, failed = filtered(extender, pod(None))
    assert passed == ["busy-prod", "busy-batch", "quiet"]
    # The selector keeps team=ml out of batch: judged as a pod in no class.
    assert filtered(extender, pod(5500, {"team": "ml"}))[0] == ["busy-prod", "busy-batch", "quiet"]


def test_a_policy_without_classes_answers_every_pod_from_the_one_table() -> None:
    extender = Extender(default_policy(), mode="test")
    seeded(extender)
    assert extender.table.table_for(pod(9500)) is extender.table
    assert filtered(extender, pod(9500)) == filtered(extender, pod(None))


def test_prioritize_scores_a_class_by_its_weights() -> None:
    extender = Extender(policy_from_yaml(classed()), mode="test")
    seeded(extender)
    body = {"Pod": pod(5500), "NodeNames": ["busy-prod", "busy-batch"]}
    scores = orjson.loads(extender.verbs.prioritize(parse_args(orjson.dumps(body)), Outcome()))
    by_node = {entry["Host"]: entry["Score"] for entry in scores}
    # Batch is weighted by production's usage alone: 10 % beats 50 %.
    assert by_node["busy-batch"] > by_node["busy-prod"]


def test_a_policy_reload_adds_and_drops_class_tables() -> None:
    extender = Extender(default_policy(), mode="test")
    seeded(extender)
    extender.set_policy(policy_from_yaml(classed()))
    seeded(extender)  # without a node cache, the next request's nodes fill them
    assert filtered(extender, pod(9500))[1] == {
        "busy-prod": "Load[production:cpu_usage] is too high (> 0.45)"
    }
    extender.set_policy(default_policy())
    assert filtered(extender, pod(9500))[1] == {}


def test_garbage_class_usage_fails_open_as_any_unreadable_metric() -> None:
    extender = Extender(policy_from_yaml(classed()), mode="test")
    key = class_usage_key("production", "cpu")
    extender.table.upsert("n", {**usage_annotations(0.2, 0.3), key: "NaN,yesterday"})
    body = {"Pod": pod(9500), "NodeNames": ["n"]}
    answer = orjson.loads(extender.verbs.filter(parse_args(orjson.dumps(body)), Outcome()))
    assert answer["NodeNames"] == ["n"]


def test_a_reload_that_brings_classes_in_starts_from_the_node_cache() -> None:
    class Cache:
        """The node cache's view the class tables read (``NodeCache.nodes``)."""

        def __init__(self, nodes: dict[str, dict[str, str]]) -> None:
            from app.objects import NodeInfo

            self.nodes = {n: NodeInfo(n, a, None) for n, a in nodes.items()}

    busy = {**usage_annotations(0.6, 0.3), **class_usage(0.5, 0.1)}
    from app.extender.classes import ClassTables
    from app.extender.table import NodeTable

    cache = Cache({"busy-prod": busy})
    tables = ClassTables(
        known=lambda: {n: (i.annotations, i.labels) for n, i in cache.nodes.items()}
    )
    table = NodeTable(default_policy(), followers=tables)
    table.upsert("busy-prod", busy)  # no classes yet: the class tables are told nothing
    assert table.table_for(pod(9500)) is table
    table.set_policy(policy_from_yaml(classed()))
    production = table.table_for(pod(9500))
    assert production is not table
    entry = production.get("busy-prod")
    assert entry is not None
    assert entry.reason == "Load[production:cpu_usage] is too high (> 0.45)"


def test_a_batch_pod_stops_at_production_s_limits_where_production_runs() -> None:
    from tests.test_policy_classes import HOT_BATCH

    def production_usage(cpu: float, memory: float, age_s: float = 30.0) -> dict[str, str]:
        at_s = time.time() - age_s
        return {
            class_usage_key("production", "cpu"): format_usage(cpu, at_s),
            class_usage_key("production", "memory"): format_usage(memory, at_s),
        }

    extender = Extender(policy_from_yaml(classed(HOT_BATCH)), mode="test")
    table = extender.table
    node = usage_annotations(0.8, 0.3)  # 80 % of the CPU: under batch's 92 %
    table.upsert("beside-production", {**node, **production_usage(0.05, 0.02)})
    table.upsert("batch-only", {**node, **production_usage(0.0, 0.0)})
    table.upsert("production-gone", {**node, **production_usage(0.05, 0.02, age_s=3600)})
    table.upsert("unpublished", node)
    names = ["beside-production", "batch-only", "production-gone", "unpublished"]
    body = {"Pod": pod(5500), "NodeNames": names}
    answer = orjson.loads(extender.verbs.filter(parse_args(orjson.dumps(body)), Outcome()))
    # Where production's pods run, batch is held to production's 65 %; where none run
    # (or their usage is stale, or unpublished: fails open), to its own 92 %.
    assert answer["FailedAndUnresolvableNodes"] == {
        "beside-production": "Load[cpu_usage_avg_5m] is too high (> 0.65)"
    }
    assert answer["NodeNames"] == ["batch-only", "production-gone", "unpublished"]
    # Production itself is held to its own limits alone.
    assert filtered_names(extender, pod(9500), names) == []


def filtered_names(extender: Extender, request_pod: dict[str, Any], names: list[str]) -> list[str]:
    body = {"Pod": request_pod, "NodeNames": names}
    answer = orjson.loads(extender.verbs.filter(parse_args(orjson.dumps(body)), Outcome()))
    result: list[str] = answer["NodeNames"]
    return result


def test_a_class_s_pod_is_judged_with_its_own_estimate_added() -> None:
    """A node passes a class's pod only where the pod's estimate fits under the class's
    limits: with batch at 92 %, a node at 80 % does not take a pod of 32 % more (it
    would run past its CPU and throttle batch itself); a pod in no class is judged by
    the node's usage before it, as crane judges it."""
    from app.kube.client import client_for_server
    from app.kube.nodes import NodeCache, NodeInfo
    from app.kube.pods import PodCache, scheduled_pod
    from app.objects import Resources
    from tests.test_policy_classes import HOT_BATCH

    client = client_for_server("http://127.0.0.1:9")  # never contacted: caches fed by hand
    extender = Extender(
        policy_from_yaml(classed(HOT_BATCH)),
        node_cache=NodeCache(client),
        pod_cache=PodCache(client, scheduled_pod),
        mode="test",
    )
    assert extender.node_cache is not None
    for name, cpu in (("hot", 0.8), ("warm", 0.5), ("cool", 0.2)):
        batch = {class_usage_key("batch", "cpu"): format_usage(cpu, time.time() - 30)}
        annotations = {**usage_annotations(cpu, 0.3), **batch}  # no production runs there
        extender.node_cache.apply(
            name, NodeInfo(name, annotations, None, allocatable=Resources(8.0, 32e9))
        )
    names = ["hot", "warm", "cool"]

    def answer(priority: int | None, limit_cpu: str) -> tuple[list[str], dict[str, str]]:
        request_pod = pod(priority)
        resources = {"requests": {"cpu": "200m"}, "limits": {"cpu": limit_cpu}}
        request_pod["spec"]["containers"][0]["resources"] = resources
        body = orjson.dumps({"Pod": request_pod, "NodeNames": names})
        answered = orjson.loads(extender.verbs.filter(parse_args(body), Outcome()))
        return answered["NodeNames"], answered["FailedAndUnresolvableNodes"]

    # A batch pod estimated at 3 x 0.85 = 2.55 cores, 32 % of the node: 80 % + 32 % > 92 %.
    passed, failed = answer(5500, "3")
    assert passed == ["warm", "cool"]
    assert failed == {"hot": NO_ROOM_REASON}
    # A small batch pod (0.5 x 0.85 cores, 5 %) fits under 92 % on every node.
    assert answer(5500, "500m")[0] == names
    # Production (the policy's 65 %): 50 % + 32 % is too much, 20 % + 32 % is not.
    passed, failed = answer(9500, "3")
    assert passed == ["cool"]
    assert failed["warm"] == NO_ROOM_REASON
    assert failed["hot"] == "Load[cpu_usage_avg_5m] is too high (> 0.65)"
    # A pod in no class: the node's usage before the pod, as crane (and as without classes).
    assert answer(7000, "3")[0] == ["warm", "cool"]
    # The same in full-nodes form (Node objects, not names).
    batch_pod = pod(5500)
    batch_pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "3"}}
    items = [{"metadata": {"name": name}} for name in names]
    body = orjson.dumps({"Pod": batch_pod, "Nodes": {"items": items}})
    answered = orjson.loads(extender.verbs.filter(parse_args(body), Outcome()))
    assert [n["metadata"]["name"] for n in answered["Nodes"]["items"]] == ["warm", "cool"]
    assert answered["FailedAndUnresolvableNodes"] == {"hot": NO_ROOM_REASON}


def test_without_the_pod_cache_classes_and_pools_are_said_to_be_judged_before_the_pod(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With no pod cache (``--no-node-cache``, ``--no-pod-cache``) no pod's estimate is
    known: the class and pool limits hold on the nodes' usage alone, and the extender
    says so at start and at each policy adopted, once; a policy with neither says
    nothing, nor does an extender with the estimate."""
    from app.kube.client import client_for_server
    from app.kube.nodes import NodeCache
    from app.kube.pods import PodCache, scheduled_pod
    from tests.extender.test_node_pools import pools_policy

    def warnings() -> list[str]:
        found = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        caplog.clear()
        return found

    caplog.set_level(logging.WARNING, logger="app.extender.extender")
    extender = Extender(policy_from_yaml(classed()), mode="test")
    (said,) = warnings()
    assert said.startswith("the policy has classes, but without the pod cache")
    extender.set_policy(default_policy())
    assert warnings() == []
    extender.set_policy(pools_policy())
    (said,) = warnings()
    assert said.startswith("the policy has node pools, but")
    client = client_for_server("http://127.0.0.1:9")  # never contacted
    Extender(
        policy_from_yaml(classed()),
        node_cache=NodeCache(client),
        pod_cache=PodCache(client, scheduled_pod),
        mode="test",
    )
    assert warnings() == []


def test_a_class_s_pods_just_reserved_count_in_its_usage_until_a_sample_holds_them() -> None:
    """A production pod reserved on a node counts in production's usage there (as
    koordinator adds production pods not yet reported to production's usage): with
    production at 40 % of a 45 % limit, one production pod of 1.7 cores (10.6 % of 16)
    reserved on "warm" takes it past the limit for the next production pod, while a pod
    in no class reserved there counts in the node's usage alone. A scale-up no longer lands pod
    after pod on a node whose production usage is stale by one sample."""
    from app.kube.client import client_for_server
    from app.kube.nodes import NodeCache, NodeInfo
    from app.kube.pods import PodCache, scheduled_pod
    from app.objects import Resources

    client = client_for_server("http://127.0.0.1:9")  # never contacted: caches fed by hand
    extender = Extender(
        policy_from_yaml(classed()),
        node_cache=NodeCache(client),
        pod_cache=PodCache(client, scheduled_pod),
        mode="test",
    )
    assert extender.node_cache is not None
    for name, production_cpu in (("warm", 0.4), ("cool", 0.05)):
        annotations = {**usage_annotations(0.1, 0.3), **class_usage(production_cpu, 0.0)}
        extender.node_cache.apply(
            name, NodeInfo(name, annotations, None, allocatable=Resources(16.0, 64e9))
        )

    def request(priority: int, uid: str) -> dict[str, Any]:
        request_pod = pod(priority)
        request_pod["metadata"].update(uid=uid, name=uid)
        request_pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2"}}
        return request_pod

    def reserve_on_warm(request_pod: dict[str, Any]) -> None:
        outcome = Outcome(pod=request_pod, nodes=1, names=["warm"])
        body = orjson.dumps({"Pod": request_pod, "NodeNames": ["warm"]})
        extender.verbs.filter(parse_args(body), outcome)  # the only node: reserved there
        extender.record("filter", 200, 0.0, outcome)

    def passes_warm(priority: int, uid: str) -> bool:
        body = orjson.dumps({"Pod": request(priority, uid), "NodeNames": ["warm", "cool"]})
        answer = orjson.loads(extender.verbs.filter(parse_args(body), Outcome()))
        return "warm" in answer["NodeNames"]

    assert passes_warm(9500, "probe-1")
    reserve_on_warm(request(7000, "other-1"))  # in no class: the node's usage alone
    assert passes_warm(9500, "probe-2")
    reserve_on_warm(request(9500, "web-1"))
    assert extender.reserve is not None
    assert extender.reserve.reservations == 2
    assert not passes_warm(9500, "probe-3")
    body = orjson.dumps({"Pod": request(9500, "probe-4"), "NodeNames": ["warm", "cool"]})
    answer = orjson.loads(extender.verbs.filter(parse_args(body), Outcome()))
    assert answer["FailedAndUnresolvableNodes"] == {
        "warm": "Load[production:cpu_usage] is too high (> 0.45)"
    }


def test_a_class_s_limit_on_its_own_usage_yields_where_no_node_passes_it() -> None:
    """production's 45 % on its own usage is room for its peak, not a ceiling on its
    growth: where no node of the request passes it, a node that passes every other limit
    takes the pod (without classes it would have), in both request forms; where some
    node has the room, only that one passes (issue 45: production's scale-up waited
    twice as long with classes on a shape whose production nodes had room)."""
    extender = Extender(policy_from_yaml(classed()), mode="test")
    seeded(extender)  # busy-prod: production 50 % (over 45 %), the node 60 % (under 65 %)
    extender.table.upsert("hot", {**usage_annotations(0.7, 0.3), **class_usage(0.6, 0.1)})
    assert filtered_names(extender, pod(9500), ["busy-prod", "quiet"]) == ["quiet"]
    assert filtered_names(extender, pod(9500), ["busy-prod", "hot"]) == ["busy-prod"]
    # A node over the policy's own limits still refuses it, and batch does not yield.
    assert filtered_names(extender, pod(9500), ["hot"]) == []
    assert filtered_names(extender, pod(5500), ["busy-prod", "busy-batch"]) == []
    annotations = {
        "busy-prod": {**usage_annotations(0.6, 0.3), **class_usage(0.5, 0.1)},
        "hot": {**usage_annotations(0.7, 0.3), **class_usage(0.6, 0.1)},
    }
    items = [{"metadata": {"name": n, "annotations": a}} for n, a in annotations.items()]
    body = orjson.dumps({"Pod": pod(9500), "Nodes": {"items": items}})
    answered = orjson.loads(extender.verbs.filter(parse_args(body), Outcome()))
    assert [n["metadata"]["name"] for n in answered["Nodes"]["items"]] == ["busy-prod"]
    assert answered["FailedAndUnresolvableNodes"] == {
        "hot": "Load[cpu_usage_avg_5m] is too high (> 0.65)"
    }


def test_a_pod_passed_where_its_own_usage_limit_yields_is_reserved_there() -> None:
    """kube-scheduler binds to the only feasible node without prioritize: the extender
    reserves the pod's estimate there, also where that node passed only because the
    class's limit on its own usage yielded."""
    from app.kube.client import client_for_server
    from app.kube.nodes import NodeCache, NodeInfo
    from app.kube.pods import PodCache, scheduled_pod
    from app.objects import Resources

    client = client_for_server("http://127.0.0.1:9")  # never contacted: caches fed by hand
    extender = Extender(
        policy_from_yaml(classed()),
        node_cache=NodeCache(client),
        pod_cache=PodCache(client, scheduled_pod),
        mode="test",
    )
    assert extender.node_cache is not None
    assert extender.reserve is not None
    annotations = {**usage_annotations(0.3, 0.3), **class_usage(0.5, 0.0)}  # over 45 %
    extender.node_cache.apply(
        "warm", NodeInfo("warm", annotations, None, allocatable=Resources(16.0, 64e9))
    )
    request_pod = pod(9500)
    request_pod["metadata"].update(uid="web-1", name="web-1")
    outcome = Outcome(pod=request_pod)
    body = orjson.dumps({"Pod": request_pod, "NodeNames": ["warm"]})
    answer = orjson.loads(extender.verbs.filter(parse_args(body), outcome))
    assert answer["NodeNames"] == ["warm"]
    extender.record("filter", 200, 0.0, outcome)
    assert extender.reserve.reservations == 1
