"""A reloaded policy the annotator cannot use (absurd values, or no syncPolicy at all)
leaves the previous one whole and counts in loadaware_policy_reloads_total{result="error"},
through the same wiring as `loadaware annotator` (issue 18, attack 5)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.annotator.annotator import Annotator
from app.annotator.main import settings_from_args
from app.cli import build_parser
from app.policy import DEFAULT_POLICY_YAML
from app.prom.client import PrometheusSource
from tests.support.fakekube_fixtures import FakeKube

NO_SYNC_POLICY = """\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  priority:
    - {name: cpu_usage_avg_5m, weight: 1}
"""


@pytest.mark.parametrize(
    "broken",
    [
        DEFAULT_POLICY_YAML.replace("period: 3m", "period: 100000h", 1),
        DEFAULT_POLICY_YAML.replace("weight: 0.2", "weight: .inf", 1),
        DEFAULT_POLICY_YAML.replace("count: 5", "count: 1e400", 1),
        NO_SYNC_POLICY,
    ],
    ids=["absurd period", "infinite weight", "absurd count", "no syncPolicy"],
)
def test_a_policy_the_annotator_cannot_use_keeps_the_old_one_and_counts_an_error(
    fake_kube: FakeKube, tmp_path: Path, broken: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEFAULT_POLICY_YAML)
    args = build_parser().parse_args(
        ["annotator", "--policy", str(path), "--prometheus-url", "http://127.0.0.1:9"]
    )

    async def scenario() -> None:
        settings = settings_from_args(args)
        watcher = settings.policy_in_force
        assert watcher.watcher is not None
        source = PrometheusSource(settings.prometheus)
        async with fake_kube.async_client() as client:
            the_annotator = Annotator(settings.annotator, client, source, policy_in_force=watcher)
            before = dict(the_annotator.periods_s)
            path.write_text(broken)
            assert not watcher.check_once()
            assert the_annotator.periods_s == before
            assert the_annotator.windows.keep_s == 300.0
            counted = the_annotator.telemetry.registry.get_sample_value
            assert counted("loadaware_policy_reloads_total", {"result": "error"}) == 1
            # A good file afterwards is adopted and counted as such.
            path.write_text(DEFAULT_POLICY_YAML.replace("period: 3m", "period: 4m"))
            assert watcher.check_once()
            assert the_annotator.periods_s["cpu_usage_avg_5m"] == 240.0
            assert watcher.value is the_annotator.policy  # in force once adopted
            assert counted("loadaware_policy_reloads_total", {"result": "success"}) == 1
        source.close()

    asyncio.run(scenario())
