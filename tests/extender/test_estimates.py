"""The extender's estimate: bound pods and reservations on each node's verdict."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType
from prometheus_client import CollectorRegistry

from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.extender.request_pod import demand_of_request_pod
from app.extender.verbs import Outcome, parse_args
from app.kube.client import client_for_server
from app.kube.nodes import NodeCache, NodeInfo
from app.kube.pods import PodCache, scheduled_pod
from app.load.samples import format_usage
from app.objects.pods import ScheduledPod
from app.objects.resources import Resources
from app.policy import DEFAULT_POLICY_YAML, default_policy, policy_from_yaml
from tests.extender.test_node_cache_mode import wait_for
from tests.support import http_client
from tests.support.asgi_server import serve
from tests.support.fakekube import PODS
from tests.support.fakekube_fixtures import FakeKube

GiB = 2.0**30
EIGHT_CPUS = Resources(8.0, 32 * GiB)
BURST_SHARE = 3 * 0.85 / 8  # one pod with a 3-CPU limit on an 8-CPU node
REQUEST_SHARE = 0.2 * 0.85 / 8  # the same pod on its 200m request alone
BURST_LIMITS = Resources(3.0, 0)
BURST_REQUESTS = Resources(0.2, 0)


class Clock:
    def __init__(self) -> None:
        self.now_s = time.time()

    def __call__(self) -> float:
        return self.now_s


def usage(cpu: float, at_s: float) -> dict[str, str]:
    return {
        m: format_usage(cpu if m.startswith("cpu") else 0.3, at_s) for m in default_policy().metrics
    }


def make_extender(clock: Clock) -> Extender:
    client = client_for_server("http://127.0.0.1:9")  # never contacted: caches fed by hand
    pod_cache: PodCache[ScheduledPod] = PodCache(client, scheduled_pod)
    extender = Extender(
        default_policy(),
        node_cache=NodeCache(client),
        pod_cache=pod_cache,
        clock=clock,
        registry=CollectorRegistry(),
        reservation_ttl_s=15.0,
    )
    for name, cpu in (("cool", 0.15), ("warm", 0.50)):
        set_node(extender, name, usage(cpu, clock() - 30))
    return extender


def set_node(extender: Extender, name: str, annotations: dict[str, str]) -> None:
    assert extender.node_cache is not None
    extender.node_cache.apply(name, NodeInfo(name, annotations, None, allocatable=EIGHT_CPUS))


def bind(
    extender: Extender,
    name: str,
    node: str | None,
    at_s: float,
    limits: Resources = BURST_LIMITS,
    requests: Resources = BURST_REQUESTS,
) -> None:
    """The pod as the watch shows a scheduler's binding: pending first, then bound."""
    assert extender.pod_cache is not None
    key = f"default/{name}"
    if key not in extender.pod_cache.objects:
        pending = ScheduledPod(f"uid-{name}", None, requests, limits, at_s, False)
        extender.pod_cache.apply(key, pending)
    pod = ScheduledPod(f"uid-{name}", node, requests, limits, at_s, False)
    extender.pod_cache.apply(key, pod)


def place(
    extender: Extender, name: str, node: str, at_s: float, limits: Resources, requests: Resources
) -> None:
    """The pod as the watch shows one created with spec.nodeName: first seen bound."""
    assert extender.pod_cache is not None
    pod = ScheduledPod(f"uid-{name}", node, requests, limits, at_s, False)
    extender.pod_cache.apply(f"tenant/{name}", pod)


def added_cpu(extender: Extender, node: str) -> float:
    entry = extender.table.lookup(node, extender.clock())
    assert entry is not None
    return entry.unsampled.fractions.get("cpu", 0.0)


def request_pod(name: str) -> dict[str, Any]:
    resources = {"requests": {"cpu": "200m"}, "limits": {"cpu": "3"}}
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "resources": resources}]},
    }


def call(extender: Extender, verb: str, name: str, nodes: list[str]) -> bytes:
    """One verb, recorded as the HTTP layer does once the answer is sent."""
    body = httpx.Request("POST", "/", json={"Pod": request_pod(name), "NodeNames": nodes}).read()
    outcome = Outcome()
    answer: bytes = getattr(extender.verbs, verb)(parse_args(body), outcome)
    extender.record(verb, 200, 0.0, outcome)
    return answer


def metric(extender: Extender, name: str, **labels: str) -> float:
    value = extender.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_effective_usage_rises_on_binding_and_a_sample_soon_after_does_not_hide_it() -> None:
    clock = Clock()
    extender = make_extender(clock)
    bind(extender, "a", "cool", clock() - 5)
    assert added_cpu(extender, "cool") == pytest.approx(BURST_SHARE)
    bind(extender, "b", "cool", clock() - 1)
    entry = extender.table.get("cool")
    assert entry is not None
    assert entry.reason is not None
    # The annotator's next sample, 1-5 s after the bindings: a 5-minute average that
    # the pods were hardly part of. They keep counting (coveredAfter is 5m).
    set_node(extender, "cool", usage(0.16, clock()))
    assert added_cpu(extender, "cool") == pytest.approx(2 * BURST_SHARE)
    entry = extender.table.get("cool")
    assert entry is not None
    assert entry.reason is not None


def test_a_pod_bound_in_the_second_of_the_sample_counts() -> None:
    """Annotation and PodScheduled timestamps both have 1-second resolution: a pod
    bound in the same second as the sample must never be taken as covered by it."""
    clock = Clock()
    clock.now_s = float(int(clock.now_s))
    extender = make_extender(clock)
    set_node(extender, "cool", usage(0.15, clock()))  # sample stamped at second t
    bind(extender, "a", "cool", clock())  # bound in that same second
    clock.now_s += 0.5
    assert added_cpu(extender, "cool") == pytest.approx(BURST_SHARE)


def test_a_pod_stops_counting_after_max_age_without_a_newer_sample() -> None:
    clock = Clock()
    extender = make_extender(clock)
    bind(extender, "a", "cool", clock())
    clock.now_s += 299
    assert added_cpu(extender, "cool") == pytest.approx(BURST_SHARE)
    clock.now_s += 2  # maxAge is 5m; the node's sample (30 s older) is still fresh
    assert added_cpu(extender, "cool") == 0.0


def test_pods_older_than_max_age_and_finished_pods_do_not_count() -> None:
    clock = Clock()
    extender = make_extender(clock)
    bind(extender, "old", "cool", clock() - 301)
    assert added_cpu(extender, "cool") == 0.0
    bind(extender, "new", "cool", clock())
    assert extender.pod_cache is not None
    done = ScheduledPod("uid-new", "cool", Resources(), Resources(3.0, 0), clock(), True)
    extender.pod_cache.apply("default/new", done)
    assert added_cpu(extender, "cool") == 0.0


def test_prioritize_reserves_on_the_clear_best_and_the_binding_confirms_it() -> None:
    clock = Clock()
    extender = make_extender(clock)
    call(extender, "prioritize", "p", ["warm", "cool"])
    assert added_cpu(extender, "cool") == pytest.approx(BURST_SHARE)
    assert metric(extender, "loadaware_extender_reservations_made_total", verb="prioritize") == 1
    bind(extender, "p", "cool", clock())
    assert added_cpu(extender, "cool") == pytest.approx(BURST_SHARE)  # counted once
    assert extender.reserve is not None
    assert extender.reserve.reservations == 0
    ended = "loadaware_extender_reservations_ended_total"
    assert metric(extender, ended, result="confirmed") == 1


def test_a_reservation_moves_to_where_the_pod_was_really_bound() -> None:
    clock = Clock()
    extender = make_extender(clock)
    call(extender, "prioritize", "p", ["warm", "cool"])
    bind(extender, "p", "warm", clock())
    assert added_cpu(extender, "cool") == 0.0
    assert added_cpu(extender, "warm") == pytest.approx(BURST_SHARE)
    assert metric(extender, "loadaware_extender_reservations_ended_total", result="moved") == 1


def test_an_unconfirmed_reservation_is_dropped_after_its_ttl() -> None:
    clock = Clock()
    extender = make_extender(clock)
    call(extender, "prioritize", "p", ["warm", "cool"])
    clock.now_s += 14.9
    assert added_cpu(extender, "cool") == pytest.approx(BURST_SHARE)
    clock.now_s += 0.2
    assert added_cpu(extender, "cool") == 0.0
    assert metric(extender, "loadaware_extender_reservations_ended_total", result="dropped") == 1


def test_a_shared_top_score_reserves_on_the_preferred_node_the_answer_puts_on_top() -> None:
    """Nodes that tie are where a burst overcommits: the extender answers the first of
    them one point higher, so kube-scheduler binds where the reservation is."""
    clock = Clock()
    extender = make_extender(clock)
    set_node(extender, "warm-2", usage(0.50, clock() - 30))
    answer = orjson.loads(call(extender, "prioritize", "p", ["warm", "warm-2"]))
    assert answer[0]["Host"] == "warm"
    assert answer[0]["Score"] == answer[1]["Score"] + 1
    assert added_cpu(extender, "warm") == pytest.approx(BURST_SHARE)
    assert added_cpu(extender, "warm-2") == 0.0
    # warm now holds the pod's estimate (0.50 + 0.32 > 0.65): the next pod goes elsewhere.
    assert b'"warm"' not in call(extender, "filter", "q", ["warm", "warm-2"]).split(b"Failed")[0]
    assert metric(extender, "loadaware_extender_reservations_skipped_total") == 0


def test_no_passing_node_reserves_nothing() -> None:
    clock = Clock()
    extender = make_extender(clock)
    set_node(extender, "hot", usage(0.90, clock() - 30))
    call(extender, "prioritize", "p", ["hot"])
    assert extender.reserve is not None
    assert extender.reserve.reservations == 0
    assert metric(extender, "loadaware_extender_reservations_skipped_total") == 1


def test_filter_reserves_when_only_one_node_passes() -> None:
    clock = Clock()
    extender = make_extender(clock)
    set_node(extender, "hot", usage(0.90, clock() - 30))
    call(extender, "filter", "p", ["hot", "warm"])
    assert added_cpu(extender, "warm") == pytest.approx(BURST_SHARE)
    assert metric(extender, "loadaware_extender_reservations_made_total", verb="filter") == 1
    # The next pod finds warm full too (0.50 + 0.32 > 0.65): kube-scheduler would
    # have bound both there.
    answer = call(extender, "filter", "q", ["hot", "warm"])
    assert b'"NodeNames":[]' in answer


def test_estimation_off_in_the_policy_reserves_and_adds_nothing() -> None:
    clock = Clock()
    extender = make_extender(clock)
    extender.set_policy(policy_from_yaml(DEFAULT_POLICY_YAML + "  estimation: {enabled: false}\n"))
    call(extender, "prioritize", "p", ["warm", "cool"])
    bind(extender, "a", "cool", clock())
    assert added_cpu(extender, "cool") == 0.0
    assert extender.reserve is not None
    assert extender.reserve.reservations == 0


def test_a_policy_reload_reprices_live_reservations_and_the_next_ones() -> None:
    clock = Clock()
    extender = make_extender(clock)
    call(extender, "prioritize", "p", ["warm", "cool"])
    assert added_cpu(extender, "cool") == pytest.approx(BURST_SHARE)
    halved = "  estimation: {factors: {cpu: 0.425}}\n"
    extender.set_policy(policy_from_yaml(DEFAULT_POLICY_YAML + halved))
    assert added_cpu(extender, "cool") == pytest.approx(BURST_SHARE / 2)
    call(extender, "prioritize", "q", ["warm", "cool"])  # same shape: not the old estimate
    assert added_cpu(extender, "cool") == pytest.approx(BURST_SHARE)


def test_pod_demand_sums_containers_against_init_containers_plus_overhead() -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}},
                {"resources": {"requests": {"cpu": "300m", "memory": "1Gi"}}},
                {"name": "no-resources"},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
            "overhead": {"cpu": "50m"},
        }
    }
    assert demand_of_request_pod(pod) == (2.05, GiB, 1.05, 0.0)
    with pytest.raises(ValueError, match="not a quantity"):
        demand_of_request_pod({"spec": {"containers": [{"resources": {"limits": {"cpu": "x"}}}]}})


# Samples cover a pod 1 s after its binding here, so that a test can patch one that does.
QUICK_COVER = policy_from_yaml(DEFAULT_POLICY_YAML + "  estimation: {coveredAfter: 1s}\n")


@pytest.fixture
def served(fake_kube: FakeKube) -> Iterator[tuple[str, Extender]]:
    for name, cpu in (("cool", 0.15), ("warm", 0.50)):
        fake_kube.store.add_node(
            name,
            annotations=usage(cpu, time.time() - 30),
            allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"},
        )
    client = client_for_server(fake_kube.url)
    extender = Extender(
        QUICK_COVER,
        node_cache=NodeCache(client, retry_delay_s=0.05),
        pod_cache=PodCache(client, scheduled_pod, retry_delay_s=0.05),
    )
    with serve(ExtenderApp(extender)) as url:
        wait_for(lambda: http_client.get(f"{url}/readyz").status_code == 200)
        assert extender.pod_cache is not None
        wait_for(lambda: extender.pod_cache is not None and extender.pod_cache.synced)
        yield url, extender


def add_bound_pod(fake_kube: FakeKube, name: str, node: str) -> None:
    """Created pending, then bound, as kube-scheduler does."""
    pod = request_pod(name)
    del pod["metadata"]["uid"]
    fake_kube.store.add(PODS, pod)
    fake_kube.store.bind("default", name, node)


def add_placed_pod(fake_kube: FakeKube, name: str, node: str) -> None:
    """Created with spec.nodeName, around the scheduler."""
    pod = request_pod(name)
    pod["spec"]["nodeName"] = node
    del pod["metadata"]["uid"]
    fake_kube.store.add(PODS, pod)


def test_pod_cache_survives_watch_expiry_and_relists(
    served: tuple[str, Extender], fake_kube: FakeKube
) -> None:
    url, extender = served
    fake_kube.store.compact()
    fake_kube.store.close_watches()
    add_placed_pod(fake_kube, "after-410", "cool")
    wait_for(lambda: added_cpu(extender, "cool") > 0)
    view = http_client.get(f"{url}/debug/nodes/cool").json()
    assert view["estimate"]["pods"][0]["pod"] == "default/after-410"
    # First seen on its node, whether by the watch or by the relist: its requests count.
    assert view["estimate"]["pods"][0]["kind"] == "placed"
    assert view["metrics"]["cpu_usage_avg_5m"]["estimated_addition"] == pytest.approx(
        REQUEST_SHARE, abs=1e-4
    )
    pods_lists = [r for r in fake_kube.requests("GET", "/api/v1/pods") if not r.is_watch]
    assert len(pods_lists) >= 2


def test_a_sample_taken_covered_after_the_binding_ends_the_estimate(
    served: tuple[str, Extender], fake_kube: FakeKube
) -> None:
    url, _extender = served
    add_bound_pod(fake_kube, "a", "warm")
    wait_for(lambda: http_client.get(f"{url}/debug/nodes/warm").json()["verdict"] == "overloaded")
    fake_kube.client().patch(
        Node,
        "warm",
        {"metadata": {"annotations": usage(0.55, time.time() + 3)}},
        patch_type=PatchType.MERGE,
    )
    wait_for(lambda: http_client.get(f"{url}/debug/nodes/warm").json()["verdict"] == "ok")
    assert http_client.get(f"{url}/debug/nodes/warm").json()["estimate"]["pods"] == []


def test_a_policy_reload_reprices_live_reservations() -> None:
    clock = Clock()
    extender = make_extender(clock)
    call(extender, "prioritize", "p", ["warm", "cool"])
    extender.set_policy(
        policy_from_yaml(DEFAULT_POLICY_YAML + "  estimation: {factors: {cpu: 1.0}}\n")
    )
    assert added_cpu(extender, "cool") == pytest.approx(3 / 8)
    view = extender.debug.node("cool")
    assert view is not None
    assert view["estimate"]["pods"][0]["kind"] == "reserved"
    assert view["estimate"]["pods"][0]["cpu_cores"] == 3.0


def test_metrics_show_how_many_nodes_carry_an_estimate_and_the_largest() -> None:
    clock = Clock()
    extender = make_extender(clock)
    assert metric(extender, "loadaware_extender_nodes_with_estimate") == 0.0
    bind(extender, "a", "cool", clock() - 5)
    bind(extender, "b", "cool", clock() - 4)
    bind(extender, "c", "warm", clock() - 3)
    assert metric(extender, "loadaware_extender_nodes_with_estimate") == 2.0
    largest = metric(extender, "loadaware_extender_estimated_addition_max_fraction", resource="cpu")
    assert largest == pytest.approx(2 * BURST_SHARE)


# -- issue 28, attack 1: a tenant's declared limits ------------------------------------

HUGE_LIMITS = Resources(100_000.0, 2.0**50)  # 100,000 CPU and 1 PiB
TINY_REQUESTS = Resources(0.001, 0.0)


def passes_filter(extender: Extender, nodes: list[str]) -> list[str]:
    answer = orjson.loads(call(extender, "filter", "ordinary", nodes))
    passed: list[str] = answer["NodeNames"]
    return passed


def test_pods_placed_around_the_scheduler_count_their_requests_not_their_limits() -> None:
    """The attack: pods created with spec.nodeName skip kube-scheduler and the filter,
    each with a 1m request and a 100,000-CPU, 1 PiB limit. Their limits are the
    tenant's word: they count on their requests alone, and no node is blocked."""
    clock = Clock()
    extender = make_extender(clock)
    for node in ("cool", "warm"):
        place(extender, f"blocker-{node}", node, clock() - 1, HUGE_LIMITS, TINY_REQUESTS)
    assert passes_filter(extender, ["cool", "warm"]) == ["cool", "warm"]
    assert added_cpu(extender, "cool") == pytest.approx(0.001 * 0.85 / 8)
    view = extender.debug.node("cool")
    assert view is not None
    assert [p["kind"] for p in view["estimate"]["pods"]] == ["placed"]
    # As the API server stores it, a memory limit without a request is the request too:
    # 1 PiB, which no node can admit. The kubelet refuses such a pod; it counts nothing.
    place(extender, "defaulted", "warm", clock() - 1, HUGE_LIMITS, Resources(0.001, 2.0**50))
    assert passes_filter(extender, ["cool", "warm"]) == ["cool", "warm"]
    # A placed pod whose requests fit counts on them.
    place(extender, "honest", "cool", clock() - 1, HUGE_LIMITS, Resources(2.0, 0.0))
    assert added_cpu(extender, "cool") == pytest.approx(2.001 * 0.85 / 8)


def test_one_pod_never_adds_more_than_its_node_holds() -> None:
    """A pod the scheduler bound (or this extender scored) is estimated on its limit,
    but never beyond its node's allocatable: one pod fills at most its own node."""
    clock = Clock()
    extender = make_extender(clock)
    bind(extender, "huge", "cool", clock() - 1, HUGE_LIMITS, TINY_REQUESTS)
    entry = extender.table.lookup("cool", clock())
    assert entry is not None
    assert dict(entry.unsampled.fractions) == {"cpu": 1.0, "memory": 1.0}
    assert passes_filter(extender, ["cool", "warm"]) == ["warm"]
    # A reservation of such a pod is bounded the same way.
    set_node(extender, "spare", usage(0.10, clock() - 30))
    huge = request_pod("huge-2")
    huge["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "100k", "memory": "1Pi"}}
    body = httpx.Request("POST", "/", json={"Pod": huge, "NodeNames": ["spare"]}).read()
    outcome = Outcome()
    extender.verbs.filter(parse_args(body), outcome)
    extender.record("filter", 200, 0.0, outcome)
    assert added_cpu(extender, "spare") == 1.0


def test_the_largest_estimates_are_shown_with_whose_they_are() -> None:
    clock = Clock()
    extender = make_extender(clock)
    bind(extender, "small", "warm", clock() - 2)
    place(extender, "placed", "cool", clock() - 1, HUGE_LIMITS, Resources(1.0, 0.0))
    bind(extender, "huge", "cool", clock() - 1, HUGE_LIMITS, TINY_REQUESTS)
    view = extender.debug.estimates(2)
    assert view["total"] == 3
    assert [(p["pod"], p["node"], p["kind"]) for p in view["pods"]] == [
        ("default/huge", "cool", "bound"),
        ("default/small", "warm", "bound"),
    ]
    assert view["pods"][0]["share"]["cpu"] == 1.0
    assert view["pods"][0]["cpu_cores"] == 8.0
    largest = "loadaware_extender_pod_estimate_max_fraction"
    assert metric(extender, largest, resource="cpu", namespace="default") == 1.0
    kinds = "loadaware_extender_estimated_pods"
    assert metric(extender, kinds, kind="placed") == 1.0
    assert metric(extender, kinds, kind="bound") == 2.0


def test_the_node_lifted_for_a_pod_has_room_for_its_estimate() -> None:
    """crane's score sums free cpu and memory, so a node near its CPU limit with idle
    memory ties one with room for a CPU-heavy pod. The answer lifts the one whose CPU
    limit still holds the pod's estimate (2.55 cores), and reserves there."""
    clock = Clock()
    extender = make_extender(clock)
    at_s = clock() - 30
    policy = default_policy()
    set_node(
        extender,
        "cpu-tight",
        {m: format_usage(0.55 if m.startswith("cpu") else 0.0, at_s) for m in policy.metrics},
    )
    set_node(extender, "balanced", {m: format_usage(0.30, at_s) for m in policy.metrics})
    answer = orjson.loads(call(extender, "prioritize", "p", ["cpu-tight", "balanced"]))
    assert answer == [{"Host": "cpu-tight", "Score": 7}, {"Host": "balanced", "Score": 8}]
    assert added_cpu(extender, "balanced") == pytest.approx(BURST_SHARE)
    # balanced now holds 0.30 + 0.32: neither node has room for another such pod, and
    # the one scored best is lifted, so the reservation is still where the pod goes.
    answer = orjson.loads(call(extender, "prioritize", "q", ["cpu-tight", "balanced"]))
    assert answer[0] == {"Host": "cpu-tight", "Score": 8}
    assert added_cpu(extender, "cpu-tight") == pytest.approx(BURST_SHARE)


@pytest.mark.parametrize(
    "resources",
    [
        {"limits": {"cpu": "1e300"}},  # fits no node: the best one is lifted all the same
        {"limits": {"cpu": "lots"}},  # unreadable: judged as needing nothing
        {"limits": "not a map"},
        {},
    ],
)
def test_a_pod_of_any_size_or_none_is_answered_with_one_node_lifted(
    resources: dict[str, Any],
) -> None:
    clock = Clock()
    extender = make_extender(clock)
    pod = request_pod("p")
    pod["spec"]["containers"][0]["resources"] = resources
    body = httpx.Request("POST", "/", json={"Pod": pod, "NodeNames": ["warm", "cool"]}).read()
    outcome = Outcome()
    answer = orjson.loads(extender.verbs.prioritize(parse_args(body), outcome))
    assert outcome.best_node == "cool"  # the better node, lifted to 9 above warm's 6
    assert answer == [{"Host": "warm", "Score": 6}, {"Host": "cool", "Score": 9}]


def test_a_reservation_too_small_to_change_a_score_still_shrinks_the_room() -> None:
    """The table skips re-assessing a node for a reservation that changes none of its
    answers; the room it has left for the next pod must shrink all the same."""
    clock = Clock()
    extender = make_extender(clock)
    at_s = clock() - 30
    policy = default_policy()
    set_node(
        extender,
        "cpu-tight",
        {m: format_usage(0.60 if m.startswith("cpu") else 0.0, at_s) for m in policy.metrics},
    )
    set_node(extender, "balanced", {m: format_usage(0.30, at_s) for m in policy.metrics})

    def prioritize(name: str, cpu_limit: str) -> Outcome:
        pod = request_pod(name)
        pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": cpu_limit}}
        extender.pod_cache.apply(  # type: ignore[union-attr]
            f"default/{name}",
            ScheduledPod(
                f"uid-{name}", None, Resources(0, 0), Resources(float(cpu_limit), 0), clock(), False
            ),
        )
        body = httpx.Request("POST", "/", json={"Pod": pod, "NodeNames": ["cpu-tight", "balanced"]})
        outcome = Outcome()
        extender.verbs.prioritize(parse_args(body.read()), outcome)
        extender.record("prioritize", 200, 0.0, outcome)
        return outcome

    # Both score 7. cpu-tight has 0.05 x 8 = 0.4 cores of room, balanced 2.8: a 0.6-core
    # pod (0.51 estimated) goes to balanced, its score unchanged; a 3-core pod (2.55)
    # then fits neither, and the first of the top scores is lifted.
    assert prioritize("small", "0.6").best_node == "balanced"
    entry = extender.table.get("balanced")
    assert entry is not None
    assert entry.unassessed_cpu > 0  # reserved without re-assessing the node
    assert prioritize("big", "3").best_node == "cpu-tight"  # no room anywhere: the first top
