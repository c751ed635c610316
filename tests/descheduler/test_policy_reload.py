"""The descheduler's policy reload: an absurd value keeps the previous policy and counts
in loadaware_policy_reloads_total{result="error"} (issue 18, attack 5)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.descheduler.descheduler import Descheduler
from app.descheduler.main import parse_args, settings_from_args
from app.policy import DEFAULT_POLICY_YAML
from app.prom.client import PrometheusSource
from tests.support.fakekube_fixtures import FakeKube


@pytest.mark.parametrize("weight", [".inf", "1e308", ".nan"])
def test_an_absurd_weight_on_reload_keeps_the_previous_policy(
    fake_kube: FakeKube, tmp_path: Path, weight: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEFAULT_POLICY_YAML)

    async def scenario() -> None:
        settings = settings_from_args(
            parse_args(
                [
                    *("--policy", str(path), "--no-leader-elect", "--once"),
                    *("--prometheus-url", "http://127.0.0.1:9"),
                ]
            )
        )
        watcher = settings.policy
        assert settings.config.watcher is None  # no --config: the defaults, for good
        source = PrometheusSource(settings.prometheus)
        async with fake_kube.async_client() as client:
            descheduler = Descheduler(settings.config, settings.policy, client, source)
            before = descheduler.policy
            path.write_text(DEFAULT_POLICY_YAML.replace("weight: 0.2", f"weight: {weight}", 1))
            assert not watcher.check_once()
            assert descheduler.policy is before
            counted = descheduler.telemetry.registry.get_sample_value
            assert counted("loadaware_policy_reloads_total", {"result": "error"}) == 1
        source.close()

    asyncio.run(scenario())
