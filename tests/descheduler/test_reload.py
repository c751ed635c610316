"""The configuration file is reloaded on change; a broken new file keeps the old one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.descheduler.descheduler import Descheduler
from app.descheduler.main import parse_args, settings_from_args
from app.policy import default_policy
from app.prom.client import PrometheusSource
from tests.support.fakekube_fixtures import FakeKube


def test_a_broken_file_on_reload_keeps_the_previous_config(fake_kube: FakeKube,
                                                           tmp_path: Path) -> None:
    path = tmp_path / "descheduler.yaml"
    path.write_text("maxNoOfPodsToEvictTotal: 4\n", encoding="utf-8")

    async def scenario() -> None:
        settings = settings_from_args(
            parse_args(["--descheduler-config", str(path), "--no-leader-elect", "--once",
                        "--prometheus-url", "http://127.0.0.1:9"]))
        watcher = settings.config
        assert settings.policy.watcher is None  # no --policy: the default, for good
        source = PrometheusSource(settings.prometheus)
        async with fake_kube.async_client() as client:
            descheduler = Descheduler(settings.config, default_policy(), client, source)
            assert descheduler.config.max_no_of_pods_to_evict_total == 4

            path.write_text("maxNoOfPodsToEvictTotal: 6\n", encoding="utf-8")
            assert watcher.check_once()
            assert descheduler.config.max_no_of_pods_to_evict_total == 6

            path.write_text("maxNoOfPodsToEvictTotal: -1\n", encoding="utf-8")
            assert not watcher.check_once()
            assert descheduler.config.max_no_of_pods_to_evict_total == 6
            path.write_text("maxNoOfPodsToEvictTotal: [\n", encoding="utf-8")
            assert not watcher.check_once()
            assert descheduler.config.max_no_of_pods_to_evict_total == 6
            counted = descheduler.telemetry.registry.get_sample_value
            name = "loadaware_descheduler_config_reloads_total"
            assert counted(name, {"result": "error"}) == 2
            assert counted(name, {"result": "success"}) == 1
        source.close()

    asyncio.run(scenario())
