"""`loadaware annotator`: flags, environment variables and configuration errors."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from app.annotator import main as annotator_main
from app.cli import build_parser
from app.commandline.flags import env_name
from app.load.taints import SoftTaintSettings
from tests.annotator.promproxy import PromProxy, wait_until
from tests.deploy.manifests import variable_of
from tests.support import http_client
from tests.support.fakekube_fixtures import FakeKube
from tests.support.ports import free_port

FLAGS = [
    "--policy",
    "--kubeconfig",
    "--prometheus-url",
    "--prometheus-token-file",
    "--prometheus-username",
    "--prometheus-password-file",
    "--prometheus-ca-file",
    "--prometheus-insecure-skip-verify",
    "--prometheus-header",
    "--query-timeout",
    "--query-selector",
    "--value-divisor",
    "--patch-concurrency",
    "--hot-value-interval",
    "--leader-elect",
    "--lease-namespace",
    "--lease-name",
    "--health-port",
    "--leader-elect-lease-duration",
    "--leader-elect-renew-deadline",
    "--leader-elect-retry-period",
]


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["annotator", *argv])


def test_help_names_every_flag_and_its_environment_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse("--help")
    text = " ".join(capsys.readouterr().out.split())
    for flag in FLAGS:
        assert flag in text, flag
        assert variable_of("annotator", flag) in text, variable_of("annotator", flag)
    assert "ONE instant query per metric" in text
    assert "readiness does not depend on leadership" in text


def test_defaults_follow_client_go_and_crane() -> None:
    settings = annotator_main.settings_from_args(parse("--prometheus-url", "http://p:9090"))
    config = settings.annotator
    assert config.lease is not None
    assert (
        config.lease.lease_duration_s,
        config.lease.renew_deadline_s,
        config.lease.retry_period_s,
    ) == (15.0, 10.0, 2.0)
    assert config.hot_value_interval_s == 15.0
    assert config.shape.divisor == 100.0
    assert settings.prometheus.timeout_s == 30.0
    assert next(e.name for e in config.policy.spec.sync_policy) == "cpu_usage_avg_5m"
    assert settings.policy_in_force.watcher is None
    assert config.soft_taints is None  # off unless asked for
    assert config.soft_taint_interval_s == 15.0


def test_every_setting_can_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    for flag, value in {
        "--prometheus-url": "https://mimir.example/prometheus",
        "--prometheus-token-file": str(token),
        "--prometheus-header": "X-Scope-OrgID: prod; X-Extra: 1",
        "--query-timeout": "1m",
        "--query-selector": 'cluster="prod"',
        "--value-divisor": "1",
        "--patch-concurrency": "8",
        "--hot-value-interval": "5s",
        "--leader-elect": "false",
        "--health-port": "0",
        "--soft-taints": "true",
        "--soft-taint-max-share": "0.5",
        "--soft-taint-hold": "2m",
        "--soft-taint-release-margin": "0.05",
        "--soft-taint-interval": "5s",
    }.items():
        monkeypatch.setenv(variable_of("annotator", flag), value)
    settings = annotator_main.settings_from_args(parse())
    assert settings.prometheus.headers == {"X-Scope-OrgID": "prod", "X-Extra": "1"}
    assert settings.prometheus.timeout_s == 60.0
    assert settings.prometheus.token_file == token
    config = settings.annotator
    assert config.shape.selector == 'cluster="prod"'
    assert config.shape.divisor == 1.0
    assert config.patch_concurrency == 8
    assert config.hot_value_interval_s == 5.0
    assert config.lease is None
    assert config.health_port is None
    assert config.soft_taints == SoftTaintSettings(
        release_margin=0.05, min_hold_s=120.0, max_share=0.5
    )
    assert config.soft_taint_interval_s == 5.0


def test_headers_on_the_command_line_replace_those_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(env_name("--prometheus-header"), "X-Scope-OrgID: from-env")
    args = parse(
        "--prometheus-url",
        "http://p:9090",
        "--prometheus-header",
        "X-Scope-OrgID: a",
        "--prometheus-header",
        "X-B: b",
    )
    settings = annotator_main.settings_from_args(args)
    assert settings.prometheus.headers == {"X-Scope-OrgID": "a", "X-B": "b"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--prometheus-url is required"),
        (
            ["--prometheus-url", "http://p", "--prometheus-token-file", "/nonexistent"],
            "--prometheus-token-file /nonexistent does not exist",
        ),
        (
            ["--prometheus-url", "http://p", "--leader-elect-renew-deadline", "20s"],
            "must be longer than --leader-elect-renew-deadline",
        ),
        (["--prometheus-url", "http://p", "--prometheus-header", "nocolon"], "Name: value"),
        (
            ["--prometheus-url", "http://p", "--policy", "/nonexistent.yaml"],
            "cannot read policy file",
        ),
        (
            ["--prometheus-url", "http://p", "--soft-taints", "--soft-taint-release-margin", "1"],
            "release margin must be in [0, 1)",
        ),
    ],
)
def test_bad_configuration_exits_with_a_message_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert annotator_main.run(parse(*argv)) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("share", ["1.5", "-0.1", "nan", "a third"])
def test_a_share_outside_0_to_1_is_refused_naming_the_flag(
    share: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse("--prometheus-url", "http://p", "--soft-taint-max-share", share)
    assert exit_.value.code == 2
    assert "--soft-taint-max-share" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "seconds"), [("15s", 15.0), ("1m30s", 90.0), ("2.5", 2.5)])
def test_durations_take_go_syntax_or_seconds(text: str, seconds: float) -> None:
    args = parse("--prometheus-url", "http://p", "--hot-value-interval", text)
    assert args.hot_value_interval == seconds


def test_a_policy_file_is_loaded_and_watched(tmp_path: Path) -> None:
    from app.policy import DEFAULT_POLICY_YAML

    path = tmp_path / "policy.yaml"
    path.write_text(DEFAULT_POLICY_YAML.replace("period: 3m", "period: 1m"))
    settings = annotator_main.settings_from_args(
        parse("--prometheus-url", "http://p:9090", "--policy", str(path))
    )
    assert settings.policy_in_force.watcher is not None
    assert settings.annotator.policy.spec.sync_policy[0].period_s == 60.0


def test_the_process_annotates_serves_probes_and_releases_its_lease_on_sigterm(
    fake_kube: FakeKube, static_prom: PromProxy, tmp_path: Path
) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")
    static_prom.static_result = [
        {"metric": {"instance": "10.0.0.1:9100"}, "value": [time.time(), "42"]}
    ]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": fake_kube.url}}],
                "users": [{"name": "nobody", "user": {}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "nobody"}}],
                "current-context": "fake",
            }
        )
    )
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "annotator",
            "--kubeconfig",
            str(kubeconfig),
            "--prometheus-url",
            static_prom.url,
            "--lease-namespace",
            "default",
            "--health-host",
            "127.0.0.1",
            "--health-port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert wait_until(lambda: "cpu_usage_avg_5m" in node_annotations(fake_kube, "n1"), 15)
        ready = http_client.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
        assert ready.status_code == 200
        assert ready.json()["leader"] is True
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
    output = process.stdout.read() if process.stdout else ""
    lease = fake_kube.store.get_lease("loadaware-annotator")
    assert lease is not None
    assert not lease["spec"].get("holderIdentity"), output
    assert "released" in output
    assert "sync cpu_usage_avg_5m: 1 series, 1 nodes matched" in output


def node_annotations(fake_kube: FakeKube, name: str) -> dict[str, str]:
    stored = fake_kube.store.get_node(name) or {}
    return dict(stored.get("metadata", {}).get("annotations") or {})
