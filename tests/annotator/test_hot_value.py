"""Bindings seen through the pod watch become node_hot_value, promptly and only once."""

from __future__ import annotations

import asyncio

import pytest
from lightkube import AsyncClient

from app.annotator.annotator import Annotator
from app.annotator.bindings import BindingObserver, BindingWindows
from app.annotator.hotvalue import HotValueWrites, WrittenHotValue, needs_write
from app.load.samples import HOT_VALUE_KEY, format_hot_value
from app.objects.pods import PodPlacement
from app.policy import HOT_VALUE_VALID_S, HotValuePolicy
from tests.annotator.helpers import annotator, eventually, hot_value, policy, running
from tests.annotator.promproxy import PromProxy
from tests.support.fakekube import JSON, PODS
from tests.support.fakekube_fixtures import FakeKube

INTERVAL_S = 0.3
WINDOW = [{"timeRange": "2s", "count": 1}]  # every binding in the last 2 s adds 1


def bind(fake_kube: FakeKube, pod: str, node: str) -> None:
    fake_kube.store.add_pod(pod)
    fake_kube.store.bind("default", pod, node)


# -- the pure parts -------------------------------------------------------------------


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Pods:
    """The pod cache's side of the contract: (old, new) changes, synced after the first list."""

    def __init__(self, clock: Clock) -> None:
        self.state: dict[str, PodPlacement] = {}
        self.synced = False
        windows = BindingWindows(
            [
                HotValuePolicy.model_validate({"timeRange": "5m", "count": 5}),
                HotValuePolicy.model_validate({"timeRange": "1m", "count": 2}),
            ]
        )
        self.observer = BindingObserver(windows, clock, pod_watch=self)

    def set(self, name: str, uid: str, node: str | None) -> bool:
        new = PodPlacement(uid, node)
        old = self.state.get(name)
        self.state[name] = new
        return self.observer.on_change(name, old, new)

    def first_list(self, *pods: tuple[str, str, str | None]) -> None:
        for name, uid, node in pods:
            self.set(name, uid, node)
        self.synced = True


def test_pods_already_bound_at_the_first_list_are_not_bindings() -> None:
    pods = Pods(Clock())
    pods.first_list(("a", "u1", "n1"), ("b", "u2", "n1"))
    assert pods.observer.windows.binding_count() == 0


def test_a_pending_pod_that_gets_a_node_is_one_binding_however_often_it_is_seen() -> None:
    pods = Pods(Clock())
    pods.first_list(("a", "u1", None))
    assert pods.set("a", "u1", "n1")
    assert not pods.set("a", "u1", "n1")  # status update
    assert not pods.observer.on_change("a", None, PodPlacement("u1", "n1"))  # replayed add
    assert pods.observer.windows.binding_count() == 1


def test_a_pod_created_already_bound_counts_once() -> None:
    pods = Pods(Clock())
    pods.first_list()
    assert pods.set("a", "u1", "n1")
    assert not pods.set("a", "u1", "n1")


def test_a_pod_recreated_under_the_same_name_is_a_new_binding() -> None:
    pods = Pods(Clock())
    pods.first_list(("web-0", "u1", "n1"))
    assert pods.set("web-0", "u2", "n2")
    assert pods.observer.windows.binding_count() == 1


def test_bindings_older_than_the_longest_time_range_are_forgotten() -> None:
    clock = Clock()
    pods = Pods(clock)
    pods.first_list()
    obs = pods.observer
    for i in range(6):
        pods.set(f"p{i}", f"u{i}", "n1")
    assert obs.windows.hot_value("n1", clock.now) == 6 // 5 + 6 // 2
    clock.now += 120
    assert obs.windows.hot_values(clock.now) == {"n1": 1}
    clock.now += 200
    obs.tidy(clock.now)
    assert obs.windows.binding_count() == 0
    assert obs.windows.hot_values(clock.now) == {}


@pytest.mark.parametrize(
    ("want", "have", "age_s", "write"),
    [
        (2, None, 0, True),  # first non-zero value
        (0, None, 0, False),  # nothing to say
        (2, 2, 10, False),  # unchanged and far from expiry
        (3, 2, 10, True),  # changed
        (0, 2, 10, True),  # decayed to 0 while the old value is still valid
        (0, 2, HOT_VALUE_VALID_S + 1, False),  # old value already expired: reads as 0
        (0, 0, 10, False),
        (2, 2, 250, True),  # unchanged but about to expire: refresh
        (2, 2, HOT_VALUE_VALID_S + 1, True),
    ],
)
def test_when_a_hot_value_is_written(
    want: int, have: int | None, age_s: float, write: bool
) -> None:
    current = None if have is None else WrittenHotValue(have, 1000.0 - age_s)
    refresh_s = HotValueWrites(15.0).refresh_s
    assert needs_write(want, current, 1000.0, refresh_s) is write


def test_its_own_newer_write_wins_over_a_lagging_cache() -> None:
    writes = HotValueWrites(15.0)
    writes.record_written("n1", 3, 1000.0)
    lagging = {"n1": {HOT_VALUE_KEY: format_hot_value(1, 990.0)}}
    assert writes.plan(lagging, {"n1": 3}, 1001.0) == {}


# -- through the pod watch and the fake API server ------------------------------------


def hot_value_annotator(
    fake_kube: FakeKube,
    client: AsyncClient,
    prometheus_url: str,
    window: list[dict[str, object]] | None = None,
) -> Annotator:
    """An annotator with a short binding window and hot-value interval, for these tests."""
    return annotator(
        fake_kube,
        client,
        prometheus_url,
        the_policy=policy(hot_value=window or WINDOW),
        hot_value_interval_s=INTERVAL_S,
    )


def test_bindings_reach_the_nodes_hot_value_at_the_next_round(
    fake_kube: FakeKube, static_prom: PromProxy
) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")
    fake_kube.store.add_node("n2", internal_ip="10.0.0.2")

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            # A window no slow machine outlasts: the value must be 2 when checked.
            window = [{"timeRange": "10m", "count": 1}]
            the_annotator = hot_value_annotator(fake_kube, client, static_prom.url, window)
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.pod_watch.synced, 30)
                bind(fake_kube, "a", "n1")
                bind(fake_kube, "b", "n1")
                # Seen by the watch, the bindings are in the next round's write: no
                # round after both are observed may leave the value short.
                assert await eventually(lambda: the_annotator.observer.bindings_observed == 2, 30)
                seen_at_round = the_annotator.loops.hot_value_rounds
                assert await eventually(
                    lambda: the_annotator.loops.hot_value_rounds >= seen_at_round + 2, 30
                )
                assert hot_value(fake_kube, "n1") == 2

    asyncio.run(scenario())
    assert hot_value(fake_kube, "n2") is None  # no bindings, no write


def test_pods_bound_before_start_and_repeated_events_do_not_count_twice(
    fake_kube: FakeKube, static_prom: PromProxy
) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")
    fake_kube.store.add_pod("old", node_name="n1")

    async def scenario() -> int:
        async with fake_kube.async_client() as client:
            the_annotator = hot_value_annotator(fake_kube, client, static_prom.url)
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.pod_watch.synced, 5)
                bind(fake_kube, "a", "n1")
                for i in range(3):  # later updates of the bound pod: same UID

                    def relabel(pod: JSON, rev: str = str(i)) -> None:
                        pod["metadata"]["labels"].update(rev=rev)

                    fake_kube.store.modify(PODS, "a", relabel, namespace="default")
                assert await eventually(lambda: hot_value(fake_kube, "n1") is not None, 30)
                rounds = the_annotator.loops.hot_value_rounds
                assert await eventually(
                    lambda: the_annotator.loops.hot_value_rounds >= rounds + 2, 30
                )
                return the_annotator.observer.bindings_observed

    assert asyncio.run(scenario()) == 1
    assert hot_value(fake_kube, "n1") == 1


def test_the_hot_value_decays_to_zero_and_zero_is_written(
    fake_kube: FakeKube, static_prom: PromProxy
) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")

    async def scenario() -> list[int | None]:
        seen: list[int | None] = []
        async with fake_kube.async_client() as client:
            the_annotator = hot_value_annotator(fake_kube, client, static_prom.url)
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.pod_watch.synced, 5)
                bind(fake_kube, "a", "n1")
                assert await eventually(lambda: hot_value(fake_kube, "n1") == 1, 30)
                seen.append(hot_value(fake_kube, "n1"))
                assert await eventually(lambda: hot_value(fake_kube, "n1") == 0, 30)
                seen.append(hot_value(fake_kube, "n1"))
                patches = len(fake_kube.requests("PATCH", "/api/v1/nodes/n1"))
                rounds = the_annotator.loops.hot_value_rounds
                assert await eventually(
                    lambda: the_annotator.loops.hot_value_rounds >= rounds + 3, 30
                )
                # Once 0 is written, nothing changes and nothing more is written.
                assert len(fake_kube.requests("PATCH", "/api/v1/nodes/n1")) == patches
        return seen

    assert asyncio.run(scenario()) == [1, 0]


def test_memory_stays_bounded_without_anyone_publishing() -> None:
    # A follower never calls hot_values(); the observer must still forget old bindings.
    clock = Clock()
    pods = Pods(clock)
    pods.first_list()
    obs = pods.observer
    for i in range(10_000):
        clock.now += 1.0
        obs.on_change(f"p{i}", None, PodPlacement(f"u{i}", f"n{i % 7}"))
    assert obs.windows.binding_count() <= 300 + 7
    assert len(obs._counted) <= 300 + 300 / 4 + 1
