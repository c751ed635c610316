"""Per-pod throttling and OOM kills over a window, against a real Prometheus holding
generated cAdvisor counters; absent counters and failed queries are unknown, not 0."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from app.prom.client import PrometheusSource
from app.prom.pod_health import OOM_EVENTS, THROTTLED_PERIODS, PodHealth, read_pod_health
from app.prom.settings import PrometheusSettings
from tests.support.cadvisor import Counter, cadvisor_prometheus
from tests.support.ports import free_port

pytestmark = pytest.mark.prometheus

START_S = time.time()
WINDOW_S = 600.0
THROTTLED = THROTTLED_PERIODS.removesuffix("_total")
OOM = OOM_EVENTS.removesuffix("_total")


def container(pod: str, node: str, name: str = "app") -> dict[str, str]:
    return {"namespace": "shop", "pod": pod, "container": name, "node": node}


def oom_once_at(at_s: float) -> Counter:
    return Counter(OOM, container("web-1", "node-1"), lambda t: 1.0 if t >= at_s else 0.0)


COUNTERS = (
    # web-1 throttled 2 periods a second, in its app container; its pod-level and
    # pause series (container "" and "POD") must not add to it.
    Counter(THROTTLED, container("web-1", "node-1"), lambda t: 2.0 * (t - START_S + 7200)),
    Counter(THROTTLED, container("web-1", "node-1", ""), lambda t: 9.0 * (t - START_S + 7200)),
    Counter(THROTTLED, container("web-1", "node-1", "POD"), lambda t: 5.0 * t),
    # node-2's kubelet claims throttling for web-1, which runs on node-1 (issue 28, 4).
    Counter(THROTTLED, container("web-1", "node-2"), lambda t: 50.0 * (t - START_S + 7200)),
    oom_once_at(START_S - WINDOW_S / 2),
    # web-2 is never throttled, and has no OOM counter at all.
    Counter(THROTTLED, container("web-2", "node-1"), lambda t: 0.0),
)
NODES = {"shop/web-1": ("node-1", "10.0.0.1"), "shop/web-2": ("node-1", "10.0.0.1")}


@pytest.fixture(scope="module")
def source() -> Iterator[PrometheusSource]:
    with cadvisor_prometheus([], counters=COUNTERS) as url:
        prometheus = PrometheusSource(PrometheusSettings(url=url, timeout_s=5.0))
        try:
            yield prometheus
        finally:
            prometheus.close()


def read(source: PrometheusSource, at_s: float) -> PodHealth:
    return asyncio.run(read_pod_health(source, WINDOW_S, at_s, NODES))


def test_throttled_periods_are_the_containers_increase_from_their_own_node(
    source: PrometheusSource,
) -> None:
    health = read(source, START_S)
    throttled = health.throttled(["shop/web-1"])
    assert throttled == pytest.approx(2.0 * WINDOW_S, rel=0.05)
    assert health.throttled(["shop/web-2"]) == 0
    assert health.throttled(["shop/web-1", "shop/web-2"]) == throttled
    assert health.problems == ()


def test_an_oom_kill_counts_in_the_window_that_holds_it(source: PrometheusSource) -> None:
    assert read(source, START_S).oom_killed(["shop/web-1"]) == 1
    assert read(source, START_S - WINDOW_S).oom_killed(["shop/web-1"]) == 0


def test_a_pod_without_the_counter_is_unknown_not_zero(source: PrometheusSource) -> None:
    health = read(source, START_S)
    assert health.oom_killed(["shop/web-2"]) is None
    assert health.throttled(["shop/nobody"]) is None


def test_a_prometheus_that_does_not_answer_leaves_both_counts_unknown() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    prometheus = PrometheusSource(PrometheusSettings(url=url, timeout_s=2.0))
    try:
        health = read(prometheus, START_S)
    finally:
        prometheus.close()
    assert health.throttled(["shop/web-1"]) is None
    assert health.oom_killed(["shop/web-1"]) is None
    assert len(health.problems) == 2
    assert all("cannot connect" in p for p in health.problems), health.problems
