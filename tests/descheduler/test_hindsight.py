"""Did it help? Each run's evictions judged settleTime later by a later run: kept in the
memory, counted in the outcome metric, and told on the workload in one Event."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest

from app.descheduler.act import outcome_messages
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube import state
from app.kube.events import OUTCOME_REASON
from app.objects import MoveRecord
from app.rebalance import STOPPED_HELPING
from tests.descheduler import cluster
from tests.descheduler.test_run import memory_of, prometheus_url, run_once
from tests.support.cadvisor import Counter, cadvisor_prometheus
from tests.support.fakekube import CONFIGMAPS, NODES
from tests.support.fakekube_fixtures import FakeKube

__all__ = ["prometheus_url"]  # the module fixture, shared with test_run

SETTLED_S = 400.0  # past the default settleTime (300 s)
OUTCOMES = "loadaware_descheduler_eviction_outcomes_total"


@pytest.fixture
def seeded(fake_kube: FakeKube) -> FakeKube:
    cluster.seed(fake_kube.store)
    return fake_kube


def hot_reads(fake_kube: FakeKube, cpu: float) -> None:
    """The annotator's next sample of ``hot``, as seen SETTLED_S later."""
    at_s = time.time() + SETTLED_S - 30.0

    def write(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"].update(cluster.load_annotations(cpu, at_s=at_s))

    fake_kube.store.modify(NODES, "hot", write)


def outcome_events(fake_kube: FakeKube) -> list[dict[str, Any]]:
    return [e for e in fake_kube.store.events() if e.get("reason") == OUTCOME_REASON]


@pytest.mark.prometheus
@pytest.mark.parametrize(
    ("hot_after", "outcome", "label"),
    [(0.625, "helped", "helped"), (0.85, "no effect", "no_effect")],
)
def test_a_later_run_judges_the_evictions_once_settled(
    seeded: FakeKube, prometheus_url: str, hot_after: float, outcome: str, label: str
) -> None:
    config = cluster.config(maxNoOfPodsToEvictTotal=2, workloadCooldown="0s")
    first = run_once(seeded, prometheus_url, config)
    assert len(first.evicted) == 2
    pending = memory_of(seeded)["moves"]
    assert [(m["source"], m["pods"], "outcome" in m) for m in pending] == [("hot", 2, False)]
    assert pending[0]["moved"] == pytest.approx(2 * cluster.WEB_CORES / 4)

    hot_reads(seeded, hot_after)
    telemetry = DeschedulerMetrics()
    second = run_once(seeded, prometheus_url, config, later_s=SETTLED_S, telemetry=telemetry)
    judged = [m for m in memory_of(seeded)["moves"] if "outcome" in m]
    assert [(m["source"], m["outcome"]) for m in judged] == [("hot", outcome)]
    assert telemetry.registry.get_sample_value(OUTCOMES, {"outcome": label}) == 2.0
    events = outcome_events(seeded)
    assert [e["involvedObject"]["kind"] for e in events] == ["Deployment"]
    assert events[0]["involvedObject"]["name"] == "web"
    assert f"2 {outcome}" in events[0]["message"]
    # The run that judged a move that did not help already left its source alone.
    skipped_hot = {
        s.code.value for s in (second.plan.skipped if second.plan else []) if s.node == "hot"
    }
    assert ("backed_off" in skipped_hot) is (outcome != "helped")


def throttled_from(at_s: float, node: str = "hot") -> list[Counter]:
    """Every web pod's app container throttled once a second from ``at_s`` on."""
    return [
        Counter(
            "container_cpu_cfs_throttled_periods",
            {"namespace": "shop", "pod": pod, "container": "app", "node": node},
            lambda t: max(0.0, t - at_s),
        )
        for pod in cluster.WEB_PODS
    ]


@pytest.mark.prometheus
def test_a_workload_throttled_more_after_its_evictions_is_a_backfire(seeded: FakeKube) -> None:
    """The source cooled as planned, but cAdvisor shows the workload's pods throttled
    from after the eviction on: the move backfired, with the numbers, and backs off."""
    rises_at_s = time.time() + 120.0  # after the first run, before the second looks
    config = cluster.config(maxNoOfPodsToEvictTotal=2, workloadCooldown="0s")
    with cadvisor_prometheus(cluster.series(), counters=throttled_from(rises_at_s)) as url:
        first = run_once(seeded, url, config)
        assert len(first.evicted) == 2
        assert time.time() < rises_at_s, "Prometheus took too long to start for this test"
        hot_reads(seeded, 0.70)  # cooler by 0.15 of the 0.225 moved: helped on usage alone
        second = run_once(seeded, url, config, later_s=SETTLED_S)
    judged = [m for m in memory_of(seeded)["moves"] if "outcome" in m]
    assert [(m["source"], m["outcome"]) for m in judged] == [("hot", "backfired")]
    reason = judged[0]["reason"]
    assert reason.startswith("the workload was throttled more (0 -> "), reason
    assert "; the workload was throttled 0 -> " in reason
    assert "OOM-killed" not in reason  # no OOM counter scraped: unknown, not 0
    skipped_hot = {s.code.value for s in (second.plan.skipped if second.plan else [])
                   if s.node == "hot"}  # fmt: skip
    assert "backed_off" in skipped_hot


@pytest.mark.prometheus
def test_throttling_another_nodes_kubelet_claims_does_not_count(seeded: FakeKube) -> None:
    """cool-1's kubelet publishes throttling for the web pods on hot: ignored, so the
    move is judged on usage alone (helped)."""
    rises_at_s = time.time() + 120.0
    config = cluster.config(maxNoOfPodsToEvictTotal=2, workloadCooldown="0s")
    counters = throttled_from(rises_at_s, node="cool-1")
    with cadvisor_prometheus(cluster.series(), counters=counters) as url:
        run_once(seeded, url, config)
        hot_reads(seeded, 0.70)
        run_once(seeded, url, config, later_s=SETTLED_S)
    judged = [m for m in memory_of(seeded)["moves"] if "outcome" in m]
    assert [(m["source"], m["outcome"]) for m in judged] == [("hot", "helped")]
    assert "throttled" not in judged[0]["reason"]


@pytest.mark.prometheus
def test_moves_not_yet_settled_wait(seeded: FakeKube, prometheus_url: str) -> None:
    config = cluster.config(maxNoOfPodsToEvictTotal=1, workloadCooldown="0s")
    run_once(seeded, prometheus_url, config)
    telemetry = DeschedulerMetrics()
    run_once(seeded, prometheus_url, config, later_s=60.0, telemetry=telemetry)
    assert all("outcome" not in m for m in memory_of(seeded)["moves"])
    assert telemetry.registry.get_sample_value(OUTCOMES, {"outcome": "helped"}) == 0.0
    assert outcome_events(seeded) == []


def test_one_message_per_workload_counts_its_evictions_by_outcome() -> None:
    def move(source: str, outcome: str, pods: int, workloads: tuple[str, ...]) -> MoveRecord:
        return MoveRecord(source, 1.0, "cpu", 0.9, 0.2, 0.6, "cool", pods, workloads,
                          outcome=outcome, reason=f"{source} reason")  # fmt: skip

    messages = outcome_messages(
        [
            move("a", "helped", 2, ("shop/Deployment/web",)),
            move("b", "no effect", 1, ("shop/Deployment/web", "shop/StatefulSet/db")),
        ]
    )
    assert sorted(messages) == ["shop/Deployment/web", "shop/StatefulSet/db"]
    assert ": 2 helped, 1 no effect." in messages["shop/Deployment/web"]
    assert "from b: no effect, b reason" in messages["shop/StatefulSet/db"]


def test_moves_round_trip_through_the_memory_and_stay_bounded() -> None:
    now_s = 1_700_000_000.0
    saved_state = state.DeschedulerState()
    for i in range(state.MAX_MOVES + 20):
        move = MoveRecord(f"n{i}", now_s - 1000 + i, "cpu", 0.9, 0.2, 0.6, "cool", 1,
                          ("shop/Deployment/web",), 0.3, 0.65)  # fmt: skip
        saved_state.moves[move.key] = move
    judged = replace(move, outcome="backfired", judged_at_s=now_s, cooling=-0.1,
                     attributed=-0.3, reason="x" * 5000)  # fmt: skip
    saved_state.moves[judged.key] = judged
    read, ignored = state.decode(state.encode(saved_state, now_s - 3600), now_s, now_s - 3600)
    assert ignored == []
    assert len(read.moves) == state.MAX_MOVES
    assert read.moves[judged.key] == replace(judged, reason="x" * state.MAX_REASON)


@pytest.mark.parametrize(
    "entry",
    [
        {"source": "n", "round": 1.0, "resource": "disk"},
        {"source": "n", "round": 1.0, "resource": "cpu", "before": 0.9, "moved": 0.2,
         "others": 0.6, "destination": "c", "pods": 1, "workloads": [], "outcome": "great"},
        {"source": "n", "round": 1.0, "resource": "cpu", "before": float("nan"), "moved": 0.2,
         "others": 0.6, "destination": "c", "pods": 1, "workloads": []},
        {"source": "n", "round": 1.0, "resource": "cpu", "before": 0.9, "moved": 0.2,
         "others": 0.6, "destination": "c", "pods": True, "workloads": []},
        "a string",
    ],
)  # fmt: skip
def test_a_move_entry_that_does_not_parse_is_ignored_and_said(entry: Any) -> None:
    document = json.dumps({"version": 1, "evictions": [], "hotRounds": {}, "moves": [entry]})
    read, ignored = state.decode(document, 100.0, 0.0)
    assert read.moves == {}
    assert len(ignored) == 1
    assert "unreadable move entry" in ignored[0]


def test_evictions_and_moves_dated_in_the_future_are_ignored_and_said() -> None:
    now_s = 10_000.0
    eviction = {"pod": "shop/web", "uid": "u1", "node": "hot", "destination": "cool-1",
                "cpuCores": 0.5, "memoryBytes": 1e8, "workload": "shop/Deployment/web"}
    move = {"source": "hot", "resource": "cpu", "before": 0.9, "moved": 0.2, "others": 0.6,
            "destination": "cool-1", "pods": 1, "workloads": []}  # fmt: skip
    document = json.dumps({
        "version": 1,
        "evictions": [{**eviction, "at": now_s + 3600}, {**eviction, "uid": "u2", "at": now_s}],
        "hotRounds": {},
        "moves": [{**move, "round": now_s + 3600}, {**move, "source": "warm", "round": now_s}],
    })  # fmt: skip
    read, ignored = state.decode(document, now_s, now_s - 3600)
    assert list(read.evictions) == ["u2"]
    assert [m.source for m in read.moves.values()] == ["warm"]
    assert ignored == [
        "the eviction of shop/web, dated in the future",
        "the move from hot, dated in the future",
    ]


def test_every_hot_node_backed_off_is_said_in_the_plan_and_logged(
    seeded: FakeKube, prometheus_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Both hot nodes' last moves did not help: the run says so once, in the log."""
    now_s = time.time()
    saved_state = state.DeschedulerState(exists=True)
    for node in ("hot", "hot-2"):
        move = MoveRecord(node, now_s - 400, "cpu", 0.85, 0.1, 0.6, "cool-1", 1, (),
                          outcome="no effect", judged_at_s=now_s - 10, reason="r")  # fmt: skip
        saved_state.moves[move.key] = move
    text = state.encode(saved_state, now_s - 3600)

    def write(obj: dict[str, Any]) -> None:
        obj["data"] = {state.STATE_KEY: text}

    seeded.store.modify(CONFIGMAPS, state.DEFAULT_NAME, write, namespace="default")
    with caplog.at_level("WARNING"):
        report = run_once(seeded, prometheus_url, cluster.config())
    assert report.evicted == []
    assert report.plan is not None
    assert STOPPED_HELPING in report.plan.notes
    said = [r for r in caplog.records if STOPPED_HELPING in r.getMessage()]
    assert len(said) == 1


def test_the_health_window_is_the_evicted_and_stayed_pods_then_and_the_workloads_pods_now() -> None:
    """Before: the pods evicted in the move's run and the workload's pods placed before
    it; after: the workload's pods now (a replacement included); other workloads and
    pods evicted by another run are not asked about; each pod with its node's names."""
    from app.descheduler.hindsight import health_window
    from app.objects import EvictionRecord, NodeInfo, OwnerRef, PodInfo, Resources
    from app.rebalance import ClusterView

    round_s = 10_000.0
    web = OwnerRef("ReplicaSet", "web-5d8f9", "u")

    def pod(name: str, node: str, created_s: float, owner: OwnerRef = web) -> PodInfo:
        return PodInfo("shop", name, f"uid-{name}", node, "Running", True, False, created_s,
                       owner=owner, labels={"pod-template-hash": "5d8f9"})  # fmt: skip

    def evicted(name: str, at_s: float) -> EvictionRecord:
        return EvictionRecord(f"shop/{name}", f"uid-{name}", "hot", "cool", Resources(),
                              at_s, "shop/Deployment/web")  # fmt: skip

    pods = [pod("web-stayed", "hot", 100.0), pod("web-new", "cool", round_s + 30),
            pod("api-0", "hot", 100.0, OwnerRef("ReplicaSet", "api-6f7d8", "v"))]  # fmt: skip
    view = ClusterView(
        nodes={"hot": NodeInfo("hot", {}, "10.0.0.1"), "cool": NodeInfo("cool", {}, None)},
        pods={p.key: p for p in pods},
        pod_usage={},
    )
    move = MoveRecord("hot", round_s, "cpu", 0.9, 0.2, 0.6, "cool", 1, ("shop/Deployment/web",))
    records = [evicted("web-gone", round_s + 1), evicted("web-older", round_s - 900)]
    config = cluster.config()
    window = health_window(move, records, view, config, now_s=round_s + 400)
    assert window is not None
    assert window.window_s == 400
    assert window.before_at_s == round_s
    assert dict(window.before) == {
        "shop/web-gone": ("hot", "10.0.0.1"), "shop/web-stayed": ("hot", "10.0.0.1"),
    }  # fmt: skip
    assert dict(window.after) == {
        "shop/web-stayed": ("hot", "10.0.0.1"), "shop/web-new": ("cool",),
    }  # fmt: skip
    # An hour at most; nothing under a minute; nothing for a move of bare pods.
    assert health_window(move, records, view, config, round_s + 9000).window_s == 3600  # type: ignore[union-attr]
    assert health_window(move, records, view, config, round_s + 30) is None
    bare = replace(move, workloads=())
    assert health_window(bare, records, view, config, round_s + 400) is None
