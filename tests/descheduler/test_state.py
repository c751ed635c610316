"""Attacks 3 and 4 of docs/security.md: nobody but the descheduler steers its memory.

Its recent evictions and debounce rounds live in one ConfigMap that only its Role may
write. Forged Events (in another namespace, from another reporting controller, dated
in the future), and debounce annotations written on a Node, change nothing. A memory
it cannot read or write makes it evict nothing more, never something wrong.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from app.descheduler.descheduler import RunResult
from app.kube import state
from app.kube.events import (
    CPU_CORES,
    DESTINATION_NODE,
    EVICTED_AT,
    MEMORY_BYTES,
    POD_UID,
    REASON,
    SOURCE_NODE,
    WORKLOAD,
)
from tests.descheduler import cluster
from tests.descheduler.test_run import evicted_pods, memory_of, prometheus_url, run_once
from tests.support.fakekube import CONFIGMAPS, EVENTS, NODES
from tests.support.fakekube_fixtures import FakeKube

__all__ = ["prometheus_url"]  # the module fixture, shared with test_run

STATE_PATH = f"/api/v1/namespaces/default/configmaps/{state.DEFAULT_NAME}"


def forged_event(
    namespace: str, *, component: str, at_s: float, node: str, workload: str | None
) -> dict[str, Any]:
    """An Event shaped exactly like the descheduler's, claiming 100 cores moved."""
    annotations = {
        SOURCE_NODE: node,
        DESTINATION_NODE: "cool-1",
        CPU_CORES: "100",
        MEMORY_BYTES: "1e12",
        EVICTED_AT: datetime.fromtimestamp(at_s, tz=UTC).isoformat(),
        POD_UID: f"forged-{namespace}-{component}-{at_s}",
    }
    if workload:
        annotations[WORKLOAD] = workload
    return {
        "metadata": {"name": f"forged.{time.time_ns():x}", "namespace": namespace,
                     "annotations": annotations},
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "victim"},
        "reason": REASON,
        "message": "Evicted by loadaware descheduler",
        "source": {"component": component},
        "reportingComponent": component,
        "type": "Normal",
    }  # fmt: skip


def set_memory(fake_kube: FakeKube, document: Any) -> None:
    text = document if isinstance(document, str) else json.dumps(document)

    def write(obj: dict[str, Any]) -> None:
        obj["data"] = {state.STATE_KEY: text}

    fake_kube.store.modify(CONFIGMAPS, state.DEFAULT_NAME, write, namespace="default")


@pytest.fixture
def seeded(fake_kube: FakeKube) -> FakeKube:
    cluster.seed(fake_kube.store)
    return fake_kube


@pytest.mark.prometheus
@pytest.mark.parametrize(
    "forgery",
    ["another-namespace", "another-controller", "dated-in-the-future", "a-cooldown"],
)
def test_forged_events_change_nothing(seeded: FakeKube, prometheus_url: str, forgery: str) -> None:
    now = time.time()
    event = {
        # 100 cores "moved" onto cool-1 would make it a source, or full.
        "another-namespace": forged_event("tenant", component="loadaware-descheduler",
                                          at_s=now - 30, node="hot", workload=None),
        "another-controller": forged_event("shop", component="someone-else",
                                           at_s=now - 30, node="hot", workload=None),
        "dated-in-the-future": forged_event("shop", component="loadaware-descheduler",
                                            at_s=now + 3600, node="hot", workload=None),
        # The web Deployment "evicted a minute ago": a cooldown, if it were believed.
        "a-cooldown": forged_event("shop", component="loadaware-descheduler", at_s=now - 60,
                                   node="hot", workload="shop/Deployment/web"),
    }[forgery]  # fmt: skip
    seeded.store.add(EVENTS, event)
    report = run_once(seeded, prometheus_url, cluster.config())
    assert report.result is RunResult.OK, report.message
    assert report.plan is not None
    assert len(report.evicted) == 2  # as without the forged Event
    assert {e.destination for e in report.plan.evictions} <= {"cool-1", "cool-2"}
    assert seeded.requests("GET", "/api/v1/events") == []  # Events are never read


@pytest.mark.prometheus
def test_a_debounce_count_written_on_a_node_is_ignored(
    seeded: FakeKube, prometheus_url: str
) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def forge(node: dict[str, Any]) -> None:
        node["metadata"].setdefault("annotations", {})["descheduler.loadaware.io/hot-rounds"] = (
            f"5,{stamp}"
        )

    seeded.store.modify(NODES, "hot", forge)
    report = run_once(seeded, prometheus_url, cluster.config(consecutiveHotRounds=2))
    assert report.plan is not None
    assert report.plan.node_classes["hot"].kind.value == "debouncing"
    assert report.evicted == []


@pytest.mark.prometheus
def test_the_first_run_without_memory_makes_it_and_acts_like_any_other(
    fake_kube: FakeKube, prometheus_url: str
) -> None:
    cluster.seed(fake_kube.store, memory=False)
    first = run_once(fake_kube, prometheus_url, cluster.config())
    assert first.result is RunResult.OK, first.message
    assert len(first.evicted) == 2
    assert len(evicted_pods(fake_kube)) == 2
    assert len(memory_of(fake_kube)["evictions"]) == 2  # made, with what it did
    second = run_once(fake_kube, prometheus_url, cluster.config())
    assert second.result is RunResult.OK
    assert second.evicted == []


@pytest.mark.prometheus
@pytest.mark.parametrize("garbage", ["not json", '{"version": 99}', "[]", ""])
def test_an_unreadable_memory_evicts_nothing_and_says_why(
    seeded: FakeKube, prometheus_url: str, garbage: str
) -> None:
    set_memory(seeded, garbage)
    report = run_once(seeded, prometheus_url, cluster.config())
    assert report.result is RunResult.HISTORY_UNAVAILABLE
    assert "unreadable" in report.message
    assert evicted_pods(seeded) == []


@pytest.mark.prometheus
def test_unreadable_or_future_entries_are_skipped_and_the_rest_is_kept(
    seeded: FakeKube, prometheus_url: str
) -> None:
    now = time.time()
    web = {"pod": "shop/web-old", "uid": "u1", "node": "hot", "destination": "cool-1",
           "cpuCores": 0.5, "memoryBytes": 1e8, "workload": "shop/Deployment/web"}  # fmt: skip
    set_memory(
        seeded,
        {
            "version": 1,
            "evictions": [
                {**web, "at": now + 3600},  # in the future: a cooldown it must not believe
                {**web, "uid": "u2", "cpuCores": float("nan"), "at": now - 30},  # unreadable
                "garbage",
            ],
            "hotRounds": {"hot": ["x", now], "cool-1": [1, now + 3600]},
        },
    )
    report = run_once(seeded, prometheus_url, cluster.config())
    assert report.result is RunResult.OK, report.message
    assert len(report.evicted) == 2  # no cooldown from the skipped entries


@pytest.mark.prometheus
def test_a_memory_that_cannot_be_written_evicts_nothing_more(
    seeded: FakeKube, prometheus_url: str
) -> None:
    seeded.fail_next("PUT", STATE_PATH, 500, times=1)  # the round's debounce write
    report = run_once(seeded, prometheus_url, cluster.config())
    assert report.result is RunResult.STATE_NOT_SAVED
    assert "cannot write ConfigMap default/loadaware-descheduler-state" in report.message
    assert evicted_pods(seeded) == []


@pytest.mark.prometheus
def test_a_conflicting_write_is_merged_and_retried(seeded: FakeKube, prometheus_url: str) -> None:
    seeded.fail_next("PUT", STATE_PATH, 409, times=1)
    report = run_once(seeded, prometheus_url, cluster.config())
    assert report.result is RunResult.OK, report.message
    assert len(report.evicted) == 2
    assert len(memory_of(seeded)["evictions"]) == 2
