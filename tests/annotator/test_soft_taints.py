"""Soft taints written by the annotator, on the fake API server: only loadaware's taint
changes, never over another writer, held through a dip, gone without fresh data, and
taken off everywhere when the feature is off."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

import pytest

from app.annotator.annotator import Annotator, WorkloadUsageTarget
from app.annotator.bindings import BindingObserver, BindingWindows, RecentPods
from app.annotator.settings import DeschedulerState
from app.annotator.softtaints import SOFT_TAINT
from app.annotator.workload_usage import WorkloadUsagePublisher
from app.kube import STATE_NAME, WORKLOAD_USAGE_MAX_AGE_S, PublishedUsage
from app.kube.patching import PatchOutcome, TaintWriter, taints_with
from app.kube.state import STATE_KEY
from app.load import Evidence, PlacedPod, format_usage
from app.load.taints import SOFT_TAINT_KEY, SoftTaintSettings
from app.objects import PodPlacement, Resources
from app.policy import default_policy
from tests.annotator.helpers import (
    annotator,
    eventually,
    fast_lease,
    metric_value,
    policy,
    running,
)
from tests.annotator.promproxy import PromProxy
from tests.support.cadvisor import PodSeries, cadvisor_prometheus
from tests.support.fakekube import CONFIGMAPS, NODES, PODS, FakeKubeStore
from tests.support.fakekube_fixtures import FakeKube

FOREIGN = {"key": "example.com/gpu", "value": "a100", "effect": "NoSchedule"}
OURS = {"key": SOFT_TAINT_KEY, "value": "true", "effect": "PreferNoSchedule"}
# A hold well inside the 5-minute metric's freshness (8 minutes), so that a clock moved
# past the hold still reads the annotations as fresh.
HOLD_S = 120.0
SETTINGS = SoftTaintSettings(release_margin=0.1, min_hold_s=HOLD_S, max_share=0.5)


def taints(fake_kube: FakeKube, node: str) -> list[dict[str, Any]]:
    stored = fake_kube.store.get_node(node)
    assert stored is not None
    return list(stored.get("spec", {}).get("taints") or [])


def set_taints(fake_kube: FakeKube, node: str, entries: list[dict[str, Any]]) -> None:
    fake_kube.store.modify(NODES, node, lambda n: n.setdefault("spec", {}).update(taints=entries))


def cpu(usage: float, age_s: float = 10.0) -> dict[str, str]:
    return {"cpu_usage_avg_5m": format_usage(usage, time.time() - age_s)}


def set_cpu(fake_kube: FakeKube, node: str, annotations: Mapping[str, str]) -> None:
    fake_kube.store.modify(NODES, node, lambda n: n["metadata"]["annotations"].update(annotations))


class Clock:
    def __init__(self) -> None:
        self.offset_s = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset_s


def the_annotator(
    fake_kube: FakeKube,
    client: Any,
    prom: PromProxy,
    settings: SoftTaintSettings | None,
    clock: Callable[[], float] = time.time,
    state: DeschedulerState | None = None,
) -> Annotator:
    """``state``: the descheduler's state, read for its evictions (drained nodes)."""
    return annotator(
        fake_kube,
        client,
        prom.url,
        the_policy=default_policy(),  # cpu_usage_avg_5m limited at 0.65
        soft_taints=settings,
        soft_taint_interval_s=0.05,
        descheduler_state=state,
        clock=clock,
    )


# -- the writer ---------------------------------------------------------------------


def test_taints_with_changes_only_loadaware_s_entry() -> None:
    assert taints_with([FOREIGN], SOFT_TAINT, True) == [FOREIGN, OURS]
    assert taints_with([OURS, FOREIGN], SOFT_TAINT, False) == [FOREIGN]
    assert taints_with([FOREIGN, OURS], SOFT_TAINT, True) is None
    assert taints_with([FOREIGN], SOFT_TAINT, False) is None
    # The key is loadaware's: an entry with another effect becomes ours, or goes.
    wrong = {"key": SOFT_TAINT_KEY, "effect": "NoSchedule"}
    assert taints_with([wrong, FOREIGN], SOFT_TAINT, True) == [FOREIGN, OURS]
    assert taints_with([wrong], SOFT_TAINT, False) == []


def test_a_taint_added_by_another_writer_meanwhile_is_kept(fake_kube: FakeKube) -> None:
    """The write is conditional on the version read: another writer's change between
    our read and our write makes it a 409, and the retry reads again."""
    fake_kube.store.add_node("n1")
    fake_kube.delay("PATCH", "/api/v1/nodes/n1", 0.3, times=1)

    async def scenario() -> PatchOutcome:
        async with fake_kube.async_client() as client:
            writer = TaintWriter(client, first_backoff_s=0.01)
            write = asyncio.create_task(writer.set_taint("n1", SOFT_TAINT, True))
            await asyncio.sleep(0.15)  # our GET is done, our PATCH is held
            set_taints(fake_kube, "n1", [FOREIGN])
            return await write

    assert asyncio.run(scenario()) is PatchOutcome.WRITTEN
    assert taints(fake_kube, "n1") == [FOREIGN, OURS]
    patches = fake_kube.requests("PATCH", "/api/v1/nodes/n1")
    assert len(patches) == 2  # the first refused (409) for its stale resourceVersion


def test_a_follower_writes_no_taint(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1")

    async def scenario() -> PatchOutcome:
        async with fake_kube.async_client() as client:
            writer = TaintWriter(client, may_write=lambda: False)
            return await writer.set_taint("n1", SOFT_TAINT, True)

    assert asyncio.run(scenario()) is PatchOutcome.NOT_LEADER
    assert fake_kube.requests("*", "/api/v1/nodes/n1") == []


# -- the annotator --------------------------------------------------------------------


def test_a_hot_node_is_tainted_and_nothing_else_of_any_node_changes(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    store = fake_kube.store
    store.add_node("hot", annotations=cpu(0.90))
    store.add_node("cool", annotations=cpu(0.20))
    store.add_node("garbage", annotations={"cpu_usage_avg_5m": "0.99;not a sample"})
    store.add_node("future", annotations=cpu(0.99, age_s=-3600))  # stamped ahead: distrusted
    store.add_node("stale", annotations=cpu(0.99, age_s=3 * 3600))
    set_taints(fake_kube, "hot", [FOREIGN])
    before = {name: store.get_node(name) for name in ("cool", "garbage", "future", "stale")}
    caplog.set_level(logging.INFO, logger="app.annotator")

    async def scenario() -> Annotator:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, SETTINGS)
            async with running(annotator):
                assert await eventually(lambda: OURS in taints(fake_kube, "hot"))
                rounds = annotator.loops.soft_taint_rounds
                assert await eventually(lambda: annotator.loops.soft_taint_rounds >= rounds + 3)
            return annotator

    annotator = asyncio.run(scenario())
    assert taints(fake_kube, "hot") == [FOREIGN, OURS]
    for name, node in before.items():
        assert node is not None
        stored = store.get_node(name)
        assert stored is not None
        assert stored["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"], name
    assert metric_value(annotator, "loadaware_annotator_soft_tainted_nodes") == 1
    added = {"change": "added"}
    assert metric_value(annotator, "loadaware_annotator_soft_taint_changes_total", added) == 1
    # One write for one change: later rounds find nothing to do and send nothing.
    assert len(fake_kube.requests("PATCH", "/api/v1/nodes/hot")) == 1
    assert fake_kube.requests("GET", "/api/v1/nodes/cool") == []
    assert "soft taint put on node hot: hot: cpu_usage_avg_5m 0.90 > 0.65" in caplog.text


def test_the_taint_stays_through_a_dip_goes_when_cool_and_at_once_when_stale(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.annotator")
    store = fake_kube.store
    for name in ("a", "b", "c", "d"):
        store.add_node(name, annotations=cpu(0.90 if name == "a" else 0.20))
    clock = Clock()

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, SETTINGS, clock)

            async def after_rounds(n: int = 2) -> None:
                rounds = annotator.loops.soft_taint_rounds
                assert await eventually(lambda: annotator.loops.soft_taint_rounds >= rounds + n)

            async with running(annotator):
                assert await eventually(lambda: OURS in taints(fake_kube, "a"))
                set_cpu(fake_kube, "a", cpu(0.20))  # a dip, cool
                await after_rounds()
                assert OURS in taints(fake_kube, "a")
                clock.offset_s = HOLD_S + 1  # cool for longer than the hold
                assert await eventually(lambda: taints(fake_kube, "a") == [])
                clock.offset_s = 0.0
                set_cpu(fake_kube, "a", cpu(0.90))
                assert await eventually(lambda: OURS in taints(fake_kube, "a"))
                set_cpu(fake_kube, "a", cpu(0.90, age_s=3 * 3600))  # stale: fail open
                assert await eventually(lambda: taints(fake_kube, "a") == [])
                assert await eventually(lambda: "fail open" in caplog.text)  # after the write

    asyncio.run(scenario())
    assert "soft taint taken off node a: cool for 12" in caplog.text  # 121 s, or a bit more
    assert "soft taint taken off node a: no fresh data: fail open" in caplog.text


def test_a_taint_found_without_memory_is_held_from_now(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """A new leader (or a restart) finds the taint on a node gone cool: it keeps it for
    the hold rather than dropping it at once."""
    store = fake_kube.store
    for name in ("a", "b", "c"):
        store.add_node(name, annotations=cpu(0.20))
    set_taints(fake_kube, "a", [OURS])
    clock = Clock()

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, SETTINGS, clock)
            async with running(annotator):
                assert await eventually(lambda: annotator.loops.soft_taint_rounds >= 3)
                assert taints(fake_kube, "a") == [OURS]
                clock.offset_s = HOLD_S + 1
                assert await eventually(lambda: taints(fake_kube, "a") == [])
                # The line follows the write's answer, which the store sees first.
                assert await eventually(lambda: "soft taint taken off node a" in caplog.text)

    caplog.set_level(logging.INFO, logger="app.annotator")
    asyncio.run(scenario())
    assert "soft taint taken off node a: cool for 12" in caplog.text


def test_turned_off_it_takes_every_soft_taint_off_and_says_how_many(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    store = fake_kube.store
    for name in ("a", "b", "c"):
        store.add_node(name, annotations=cpu(0.90))
    set_taints(fake_kube, "a", [FOREIGN, OURS])
    set_taints(fake_kube, "b", [OURS])
    caplog.set_level(logging.INFO, logger="app.annotator")

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, None)
            async with running(annotator):
                assert await eventually(
                    lambda: taints(fake_kube, "a") == [FOREIGN] and taints(fake_kube, "b") == []
                )
                assert await eventually(lambda: annotator.metric_loop.ticks >= 1)
            assert annotator.loops.soft_taint_rounds == 0

    asyncio.run(scenario())
    assert taints(fake_kube, "c") == []  # hot, but the feature is off
    assert "soft taints are off: took loadaware's taint loadaware.io/hot off 2 nodes" in caplog.text


def test_a_refused_write_is_counted_and_tried_again(
    fake_kube: FakeKube, static_prom: PromProxy
) -> None:
    store = fake_kube.store
    for name in ("a", "b", "c"):
        store.add_node(name, annotations=cpu(0.90 if name == "a" else 0.2))
    fake_kube.fail_next("PATCH", "/api/v1/nodes/a", 422, times=1, message="denied by policy")

    async def scenario() -> Annotator:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, SETTINGS)
            async with running(annotator):
                assert await eventually(lambda: OURS in taints(fake_kube, "a"))
            return annotator

    annotator = asyncio.run(scenario())
    rejected = {"kind": "soft_taint", "reason": "rejected"}
    assert metric_value(annotator, "loadaware_annotator_patch_errors_total", rejected) == 1


def test_a_follower_touches_no_taint_and_a_new_leader_with_soft_taints_off_removes_them(
    fake_kube: FakeKube, static_prom: PromProxy
) -> None:
    """A rollout that turns soft taints off: the new replica (off) waits as a follower
    while the old leader (on) keeps the taint, then takes it off when it leads."""
    store = fake_kube.store
    for name in ("a", "b", "c"):
        store.add_node(name, annotations=cpu(0.90 if name == "a" else 0.20))

    async def scenario() -> None:
        async with fake_kube.async_client() as client_on, fake_kube.async_client() as client_off:
            on = annotator(
                fake_kube, client_on, static_prom.url, the_policy=default_policy(),
                soft_taints=SETTINGS, soft_taint_interval_s=0.05, lease=fast_lease("on"),
            )  # fmt: skip
            off = annotator(
                fake_kube, client_off, static_prom.url, the_policy=default_policy(),
                lease=fast_lease("off"),
            )  # fmt: skip
            async with running(on) as on_task:
                assert await eventually(lambda: OURS in taints(fake_kube, "a"), 10)
                async with running(off):
                    elector = off.elector
                    assert elector is not None
                    assert await eventually(lambda: elector.attempts >= 5, 10)
                    assert not off.may_write()
                    assert OURS in taints(fake_kube, "a")  # the follower left it
                    on_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await on_task
                    assert await eventually(lambda: taints(fake_kube, "a") == [], 10)
                    assert off.may_write()

    asyncio.run(scenario())


def test_a_reloaded_policy_that_limits_nothing_takes_the_taints_off_and_says_so(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("a", "b", "c"):
        fake_kube.store.add_node(name, annotations=cpu(0.90 if name == "a" else 0.20))
    caplog.set_level(logging.INFO, logger="app.annotator")

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, SETTINGS)
            async with running(annotator):
                assert await eventually(lambda: OURS in taints(fake_kube, "a"))
                annotator.policy_in_force.adopt(policy())  # syncPolicy, hotValue, no predicate
                assert await eventually(lambda: taints(fake_kube, "a") == [])
                assert await eventually(lambda: "fail open" in caplog.text)  # after the write

    asyncio.run(scenario())
    assert "limits no metric (no predicate), so soft taints come off every node" in caplog.text
    assert "soft taint taken off node a: no fresh data: fail open" in caplog.text


# -- the estimate of pods bound since the samples --------------------------------------


def add_pod(
    fake_kube: FakeKube,
    name: str,
    *,
    requests: Mapping[str, str],
    limits: Mapping[str, str] | None = None,
    node: str | None = None,
) -> None:
    resources = {"requests": dict(requests), "limits": dict(limits or {})}
    container = {"name": "main", "image": "registry.k8s.io/pause:3.9", "resources": resources}
    spec: dict[str, Any] = {"containers": [container]}
    if node is not None:
        spec["nodeName"] = node
    pod = {"metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": {}}
    fake_kube.store.add(PODS, pod)


def busy_node_and_two_pods(fake_kube: FakeKube) -> FakeKubeStore:
    """Nodes of 5 CPUs: "busy" read at 0.30, "b" and "c" at 0.20; pods p1 and p2
    (500m, limit 1 CPU) pending, for the test to bind."""
    store = fake_kube.store
    for name in ("busy", "b", "c"):
        store.add_node(name, annotations=cpu(0.30 if name == "busy" else 0.20),
                       allocatable={"cpu": "5", "memory": "16Gi"})  # fmt: skip
    for name in ("p1", "p2"):
        add_pod(fake_kube, name, requests={"cpu": "500m"}, limits={"cpu": "1"})
    return store


def test_a_node_below_the_limit_with_pods_just_bound_is_tainted_until_they_age_out(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Readings at 0.30 of 5 CPUs, limit 0.65: one pod bound since (limit 1 CPU,
    estimated 0.85 cores, 0.17 of the node) leaves it below even with the next pod like
    it (0.64), a second makes it hot with the next (0.81), as the simulator judges; the
    other nodes, with the next pod too, stay cool. Past ``estimation.maxAge`` (5
    minutes) the pods count no more, nor is there a wave: the node is cool and, the
    hold over, untainted."""
    caplog.set_level(logging.INFO, logger="app.annotator")
    store = busy_node_and_two_pods(fake_kube)
    clock = Clock()

    async def scenario() -> Annotator:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, SETTINGS, clock)
            async with running(annotator):
                assert await eventually(lambda: annotator.pod_watch.synced)
                rounds = annotator.loops.soft_taint_rounds
                assert await eventually(lambda: annotator.loops.soft_taint_rounds >= rounds + 2)
                assert taints(fake_kube, "busy") == []  # 0.30 alone is below the limit
                store.bind("default", "p1", "busy")
                await asyncio.sleep(0.3)
                assert taints(fake_kube, "busy") == []  # one pod and the next: 0.64
                store.bind("default", "p2", "busy")
                assert await eventually(lambda: OURS in taints(fake_kube, "busy"))
                assert taints(fake_kube, "b") == taints(fake_kube, "c") == []
                # Five minutes on: the pods aged out of the estimate, the node is cool,
                # and it has been for longer than the hold (readings still fresh).
                clock.offset_s = 5 * 60.0 + 1
                assert await eventually(lambda: taints(fake_kube, "busy") == [])
            return annotator

    annotator = asyncio.run(scenario())
    assert annotator.recent is not None
    assert len(annotator.recent) == 0
    assert (
        "soft taint put on node busy: hot: cpu_usage_avg_5m 0.81 (+0.34 estimated) "
        "(+0.17 next pod) > 0.65" in caplog.text
    )


def test_a_pod_its_node_s_samples_partly_show_counts_only_for_the_rest(
    fake_kube: FakeKube, static_prom: PromProxy
) -> None:
    """Readings at 0.30 of 5 CPUs; a pod of 1 CPU limit (estimated 0.17 of the node) is
    bound. Four minutes on, a 5-minute average shows 4/5 of it (0.30 + 0.136): the rule
    adds the fifth it does not show and the next pod, 0.64, below 0.65. Counted whole,
    as the extender counts it, the node would read 0.78 and be tainted. A second pod,
    bound after that sample, counts whole: 0.81, hot."""
    store = busy_node_and_two_pods(fake_kube)
    clock = Clock()

    async def rounds_pass(annotator: Annotator) -> None:
        rounds = annotator.loops.soft_taint_rounds
        assert await eventually(lambda: annotator.loops.soft_taint_rounds >= rounds + 3)

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, SETTINGS, clock)
            async with running(annotator):
                assert await eventually(lambda: annotator.pod_watch.synced)
                store.bind("default", "p1", "busy")
                assert await eventually(lambda: annotator.recent is not None
                                        and len(annotator.recent) == 1)  # fmt: skip
                await rounds_pass(annotator)
                assert taints(fake_kube, "busy") == []  # 0.30 + 0.17 + the next 0.17
                clock.offset_s = 240.0
                set_cpu(fake_kube, "busy", cpu(0.30 + 0.8 * 0.17, age_s=-clock.offset_s))
                await rounds_pass(annotator)
                assert taints(fake_kube, "busy") == []
                store.bind("default", "p2", "busy")
                assert await eventually(lambda: OURS in taints(fake_kube, "busy"))
                assert taints(fake_kube, "b") == taints(fake_kube, "c") == []

    asyncio.run(scenario())


def test_garbage_and_pods_placed_around_the_scheduler_neither_break_a_round_nor_taint(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Tenant input: an unreadable request counts as the default pod usage; a pod first
    seen on its node (``spec.nodeName``, around the scheduler) is read from its requests
    alone, and not at all when they exceed the node; so none of them taints a node at
    0.20. Pods bound through the scheduler with a 100,000-CPU limit count at most the
    node's allocatable: one node tainted; on every node, none (never more tainted than
    not hot), which is the stock scheduler's placement. Such a pod is no next pod of a
    wave (it is over the limit on an empty node): judged with it, every node would be
    hot (docs/security.md)."""
    caplog.set_level(logging.INFO, logger="app.annotator")
    store = fake_kube.store
    for name in ("a", "b", "c"):
        store.add_node(name, annotations=cpu(0.20), allocatable={"cpu": "4", "memory": "16Gi"})
    add_pod(fake_kube, "garbage", requests={"cpu": "lots", "memory": "-1Zi"}, limits={"cpu": "?"})
    for name in ("huge-a", "huge-b", "huge-c"):
        add_pod(fake_kube, name, requests={"cpu": "100m"}, limits={"cpu": "100000"})

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            annotator = the_annotator(fake_kube, client, static_prom, SETTINGS)
            recent = annotator.recent
            assert recent is not None

            async def after_rounds(n: int = 3) -> None:
                rounds = annotator.loops.soft_taint_rounds
                assert await eventually(lambda: annotator.loops.soft_taint_rounds >= rounds + n)

            async with running(annotator):
                assert await eventually(lambda: annotator.pod_watch.synced)
                store.bind("default", "garbage", "a")
                # Created on their node after the watch started: PLACED evidence.
                huge = {"cpu": "100000"}
                add_pod(fake_kube, "around", requests=huge, limits=huge, node="a")
                add_pod(fake_kube, "cheap", requests={"cpu": "100m"}, limits=huge, node="a")
                assert await eventually(lambda: len(recent) == 3)
                await after_rounds()
                assert [taints(fake_kube, n) for n in ("a", "b", "c")] == [[], [], []]
                store.bind("default", "huge-a", "a")
                assert await eventually(lambda: OURS in taints(fake_kube, "a"))
                assert taints(fake_kube, "b") == taints(fake_kube, "c") == []
                store.bind("default", "huge-b", "b")
                store.bind("default", "huge-c", "c")
                await after_rounds()
                assert sum(OURS in taints(fake_kube, n) for n in ("a", "b", "c")) == 0

    asyncio.run(scenario())
    assert "failed unexpectedly" not in caplog.text


def test_recent_pods_keep_only_live_pods_bound_within_max_age() -> None:
    """Bounded memory: a deleted pod, a pod replaced under its name, and a pod bound
    longer than ``maxAge`` ago are gone; the evidence is how the binding was seen."""
    estimation = default_policy().spec.estimation  # maxAge 5 minutes
    recent = RecentPods(estimation)
    now = [1000.0]
    observer = BindingObserver(BindingWindows(()), lambda: now[0], recent=recent)
    demand = Resources(0.5, 2.0**30)
    pending = PodPlacement("u1", None, demand, demand)
    observer.on_change("p1", pending, PodPlacement("u1", "n1", demand, demand))
    observer.on_change("p2", None, PodPlacement("u2", "n1", demand, demand))
    observer.on_change("p3", None, PodPlacement("u3", "n2"))
    pods = recent.by_node(now[0])
    assert [p.evidence for p in pods["n1"]] == [Evidence.BOUND, Evidence.PLACED]
    # Not running yet: its containers have not started (the raise's grace, app.load).
    assert pods["n1"][0] == PlacedPod(demand, demand, 1000.0, Evidence.BOUND, None, None)
    observer.on_change("p2", PodPlacement("u2", "n1"), None)  # deleted
    observer.on_change("p3", PodPlacement("u3", "n2"), PodPlacement("u3b", None))  # replaced
    assert list(recent.by_node(now[0])) == ["n1"]
    assert len(recent) == 1
    assert len(recent.by_node(1000.0 + estimation.max_age_s)) == 0
    assert len(recent) == 0


# -- the workload usage the annotator publishes ----------------------------------------

MIB = 2.0**20
# shop's Deployment svc (ReplicaSet svc-7d9f): requests 100m, no CPU limit, and its three
# running pods use about 0.7 core each (crane-style-waves' CPU service).
SERVICE = ("ReplicaSet", "svc-7d9f")
SERVICE_LABELS = {"pod-template-hash": "7d9f"}
RUNNING = tuple(
    PodSeries("shop", f"svc-7d9f-{i}", {"main": (cores, 300 * MIB)}, node=node)
    for i, (cores, node) in enumerate(((0.6, "b"), (0.7, "c"), (0.7, "b")))
)


@pytest.fixture(scope="module")
def service_prom() -> Iterator[str]:
    with cadvisor_prometheus(RUNNING) as url:
        yield url


def service_pods(fake_kube: FakeKube) -> None:
    store = fake_kube.store
    for name, reading in (("busy", 0.40), ("b", 0.20), ("c", 0.20)):
        store.add_node(name, annotations=cpu(reading), internal_ip=None,
                       allocatable={"cpu": "5", "memory": "16Gi"})  # fmt: skip
    for pod in RUNNING:
        store.add_pod(pod.pod, "shop", node_name=pod.node, labels=SERVICE_LABELS,
                      requests={"cpu": "100m"}, owner=SERVICE)  # fmt: skip
    store.add_pod("svc-7d9f-new", "shop", phase="Pending", labels=SERVICE_LABELS,
                  requests={"cpu": "100m"}, owner=SERVICE)  # fmt: skip


@pytest.mark.prometheus
@pytest.mark.parametrize("publishing", [True, False])
def test_a_round_estimates_a_pod_at_the_usage_its_workload_is_published_to_use(
    fake_kube: FakeKube, service_prom: str, caplog: pytest.LogCaptureFixture, publishing: bool
) -> None:
    """Readings at 0.40 of 5 CPUs; a pod of shop's CPU service (requests 100m, no CPU
    limit) is bound. From its requests it is 85m (0.017 of the node, and as much for the
    next pod like it): 0.43, cool. The annotator has published that the service's pods
    use 0.7 core (the 90th percentile of its three running pods, over 3 times the
    guess), and the round estimates the pod, and the next, at that, as the extender
    does: 0.40 + 0.14 + 0.14 = 0.68 > 0.65, hot. Without the publication (workload usage
    off) the round falls back to requests and limits: no taint."""
    caplog.set_level(logging.INFO, logger="app.annotator")
    service_pods(fake_kube)
    target = WorkloadUsageTarget("loadaware") if publishing else None

    async def scenario() -> Annotator:
        async with fake_kube.async_client() as client:
            the = annotator(fake_kube, client, service_prom, the_policy=default_policy(),
                            soft_taints=SETTINGS, soft_taint_interval_s=0.05,
                            workload_usage=target)  # fmt: skip
            async with running(the):
                assert await eventually(lambda: the.pod_watch.synced)
                if publishing:
                    assert await eventually(lambda: the.loops.workload_usage_rounds >= 1, 15.0)
                fake_kube.store.bind("shop", "svc-7d9f-new", "busy")
                assert await eventually(lambda: the.recent is not None and len(the.recent) == 1)
                rounds = the.loops.soft_taint_rounds
                assert await eventually(lambda: the.loops.soft_taint_rounds >= rounds + 3)
                tainted = OURS in taints(fake_kube, "busy")
                assert tainted is publishing
                assert taints(fake_kube, "b") == taints(fake_kube, "c") == []
            return the

    the = asyncio.run(scenario())
    # What the near-whole-node alert reads where no extender runs (issue 42, point 1).
    raised = the.telemetry.registry.get_sample_value(
        "loadaware_annotator_pod_estimate_raise_max_fraction",
        {"resource": "cpu", "namespace": "shop"},
    )
    if not publishing:
        assert raised is None
    if publishing:
        assert the.workload_usage is not None
        assert the.workload_usage.last is not None
        svc = the.workload_usage.last.observed("shop/Deployment/svc")
        assert svc is not None
        assert svc.cpu_cores == pytest.approx(0.7, rel=0.02)
        assert raised == pytest.approx((svc.cpu_cores - 0.1 * 0.85) / 5)
        assert ("soft taint put on node busy: hot: cpu_usage_avg_5m 0.68 (+0.14 estimated) "
                "(+0.14 next pod) > 0.65") in caplog.text  # fmt: skip


def test_a_stale_or_missing_publication_observes_nothing(fake_kube: FakeKube) -> None:
    """The rule takes the usage only while the document this replica last wrote is
    younger than the extender's ``--workload-usage-max-age`` default (10 minutes): a
    publisher failing that long leaves the estimate on requests and limits."""
    now = 1_700_000_000.0

    async def make() -> WorkloadUsagePublisher:
        async with fake_kube.async_client() as client:
            the = annotator(fake_kube, client, "http://127.0.0.1:9",
                            workload_usage=WorkloadUsageTarget("loadaware"))  # fmt: skip
            assert the.workload_usage is not None
            return the.workload_usage

    publisher = asyncio.run(make())
    assert publisher.observed(now) is None
    web = Resources(0.7, 3e8)
    publisher.last = PublishedUsage(now, {"shop/Deployment/web": web}, {"shop/Deployment/web": 3})
    observed = publisher.observed(now + WORKLOAD_USAGE_MAX_AGE_S - 1)
    assert observed is not None
    assert observed("shop/Deployment/web") == web
    assert observed(None) is None
    assert observed("evil/Deployment/web") is None
    assert publisher.observed(now + WORKLOAD_USAGE_MAX_AGE_S) is None
    recent = RecentPods(default_policy().spec.estimation)
    pod = PlacedPod(Resources(0.1, 0.0), Resources(), now)
    recent.record("u1", "n1", pod, "shop/Deployment/web")
    recent.record("u2", "n1", pod, None)  # no controller: nothing to observe
    measured = publisher.measured(now)
    assert measured == {"shop/Deployment/web": 3}
    assert recent.by_node(now, observed, measured)["n1"] == [replace(pod, observed=web), pod]
    # Without the count of pods measured, no raise (app.load.bounded_raises).
    assert recent.by_node(now, observed)["n1"] == [pod, pod]
    assert recent.by_node(now)["n1"] == [pod, pod]


# -- drained nodes (app/load/drained.py) ------------------------------------------------


def descheduler_state(evictions: list[dict[str, Any]]) -> dict[str, Any]:
    document = {"version": 1, "evictions": evictions, "hotRounds": {}}
    return {
        "metadata": {"name": STATE_NAME, "namespace": "default"},
        "data": {STATE_KEY: json.dumps(document)},
    }


def eviction(node: str, cores: float, uid: str) -> dict[str, Any]:
    return {
        "pod": f"shop/web-{uid}",
        "uid": uid,
        "node": node,
        "destination": "c",
        "cpuCores": cores,
        "memoryBytes": 2**28,
        "at": time.time() - 60,
        "workload": "shop/Deployment/web",
    }


def test_a_drained_node_keeps_its_taint_while_the_largest_pod_evicted_from_it_would_not_fit(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Two tainted nodes gone cool (0.50, below the lower line 0.55 of the limit 0.65),
    each drained by the descheduler: on 4 cores, the 1 core evicted from ``a`` would take
    it back to 0.75, over the limit, so its taint stays past the hold; the 0.2 core
    evicted from ``b`` would not (0.55), so its taint goes, as does ``c``'s (no eviction).
    The evictions are read from the descheduler's state ConfigMap alone."""
    caplog.set_level(logging.INFO, logger="app.annotator")
    store = fake_kube.store
    for name in ("a", "b", "c", "d", "e"):
        store.add_node(name, annotations=cpu(0.50 if name in "abc" else 0.20))
        if name in "abc":
            set_taints(fake_kube, name, [OURS])
    evictions = [eviction("a", 0.2, "1"), eviction("a", 1.0, "2"), eviction("b", 0.2, "3")]
    store.add(CONFIGMAPS, descheduler_state(evictions))

    async def past_the_hold(annotator: Annotator) -> None:
        assert await eventually(lambda: taints(fake_kube, "b") == [])
        assert await eventually(lambda: taints(fake_kube, "c") == [])
        rounds = annotator.loops.soft_taint_rounds
        assert await eventually(lambda: annotator.loops.soft_taint_rounds >= rounds + 3)
        assert taints(fake_kube, "a") == [OURS]

    # A pod bound that is no replacement (a bare pod) stands down the guard ahead of
    # the replacements (app/load/landing_guard.py), which would taint b and c: the
    # 1 core moved would warm them.
    run_past_the_hold(fake_kube, static_prom, past_the_hold, arrival=True)
    assert "soft taint taken off node a" not in caplog.text
    kept = (
        "soft taint kept on node a, drained by the descheduler: with the largest pod "
        "evicted from it back: cpu_usage_avg_5m 0.75 (+0.25 estimated) > 0.65"
    )
    assert caplog.text.count(kept) == 1  # said as the hold starts, not every round
    assert "soft taint kept on node b" not in caplog.text


def test_without_the_descheduler_s_state_a_drained_node_loses_its_taint_as_before(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """No state ConfigMap (no descheduler, or not yet run): nothing is held, and a round
    goes on; a ConfigMap of garbage is said once and holds nothing either."""
    caplog.set_level(logging.INFO, logger="app.annotator")
    store = fake_kube.store
    for name in ("a", "b", "c"):
        store.add_node(name, annotations=cpu(0.50 if name == "a" else 0.20))
    set_taints(fake_kube, "a", [OURS])
    garbage = descheduler_state([])
    garbage["data"] = {STATE_KEY: "not json"}
    store.add(CONFIGMAPS, garbage)

    async def past_the_hold(annotator: Annotator) -> None:
        assert await eventually(lambda: taints(fake_kube, "a") == [])

    run_past_the_hold(fake_kube, static_prom, past_the_hold)
    assert caplog.text.count("cannot read the descheduler's evictions") == 1


def run_past_the_hold(
    fake_kube: FakeKube,
    prom: PromProxy,
    then: Callable[[Annotator], Awaitable[None]],
    *,
    arrival: bool = False,
) -> None:
    """An annotator that reads the descheduler's state, three rounds (then, with
    ``arrival``, a bare pod bound on ``d``), then ``then`` with the clock past the hold."""
    clock = Clock()

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            state = DeschedulerState("default")
            annotator = the_annotator(fake_kube, client, prom, SETTINGS, clock, state)
            async with running(annotator):
                assert await eventually(lambda: annotator.loops.soft_taint_rounds >= 3)
                if arrival:
                    add_pod(fake_kube, "newcomer", requests={"cpu": "100m"}, node="d")
                    assert await eventually(lambda: annotator.observer.bindings_observed >= 1)
                clock.offset_s = HOLD_S + 1  # cool for longer than the hold
                await then(annotator)

    asyncio.run(scenario())
