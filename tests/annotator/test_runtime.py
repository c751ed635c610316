"""The annotator as a whole: status for the probes, and policy reloads."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from tests.annotator.helpers import annotator, eventually, policy, running
from tests.annotator.promproxy import PromProxy
from tests.support.fakekube_fixtures import FakeKube


def test_a_reloaded_policy_changes_the_periods_without_a_restart(
    fake_kube: FakeKube, static_prom: PromProxy
) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")

    async def scenario() -> Counter[str]:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(
                fake_kube,
                client,
                static_prom.url,
                the_policy=policy({"cpu_usage_avg_5m": "1h", "mem_usage_avg_5m": "1h"}),
            )
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.metric_loop.ticks >= 1, 5)
                the_annotator.policy_in_force.adopt(policy({"cpu_usage_avg_5m": "1s"}))
                assert await eventually(
                    lambda: Counter(static_prom.queries())["cpu_usage_avg_5m"] >= 3, 30
                )
        return Counter(static_prom.queries())

    queries = asyncio.run(scenario())
    assert queries["mem_usage_avg_5m"] == 1  # dropped from the policy: never queried again


def test_status_reports_each_metric_and_readiness_without_leadership(
    fake_kube: FakeKube, static_prom: PromProxy
) -> None:
    # One series (of no known node): the query answered, so the sync succeeded. An
    # answer with no series at all is a failed sync (test_no_series.py).
    static_prom.static_result = [
        {"metric": {"instance": "10.9.9.9:9100"}, "value": [time.time(), "42"]}
    ]

    async def scenario() -> dict[str, object]:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(fake_kube, client, static_prom.url)
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.metric_loop.ticks >= 1, 5)
                return dict(the_annotator.status())

    status = asyncio.run(scenario())
    assert status["alive"] is True
    assert status["ready"] is True
    assert status["leader"] is True
    metrics = status["metrics"]
    assert isinstance(metrics, dict)
    assert set(metrics) == {
        "cpu_usage_avg_5m",
        "cpu_usage_max_avg_1h",
        "cpu_usage_max_avg_1d",
        "mem_usage_avg_5m",
        "mem_usage_max_avg_1h",
        "mem_usage_max_avg_1d",
    }
    assert metrics["cpu_usage_avg_5m"]["last_success"] is not None
    assert metrics["cpu_usage_avg_5m"]["period"] == "1h"
