"""Prometheus credentials never reach a log line or an error message, at any log level.

Each case runs the real client against a stand-in Prometheus on loopback, at DEBUG
(which turns on urllib3's connection logging), and includes the failures whose
messages are most tempted to echo a request: 401, 500 and connection refused.
The credentials must reach the wire, or the test would prove nothing.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from app.prom.client import PrometheusQueryError, PrometheusSource
from app.prom.settings import PrometheusSettings, redact_url
from tests.annotator.promproxy import PromProxy, ProxyBehaviour, wait_until
from tests.support.fakekube_fixtures import FakeKube

TOKEN = "tok-4f1c9a-SECRET"
PASSWORD = "pw-77b2e0-SECRET"
URL_PASSWORD = "urlpw-0d93aa-SECRET"
SECRETS = (TOKEN, PASSWORD, URL_PASSWORD)
REFUSED = "127.0.0.1:1"  # nothing listens on port 1


@dataclass(frozen=True)
class Credentials:
    name: str
    token: Path | None = None
    username: str | None = None
    password: Path | None = None
    url_userinfo: str = ""

    def settings(self, host: str) -> PrometheusSettings:
        return PrometheusSettings(
            f"http://{self.url_userinfo}{host}",
            token_file=self.token,
            username=self.username,
            password_file=self.password,
        )


@pytest.fixture
def credentials(tmp_path: Path) -> list[Credentials]:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")
    return [
        Credentials("bearer token file", token=token),
        Credentials("basic auth password file", username="loadaware", password=password),
        Credentials("credentials in the URL", url_userinfo=f"loadaware:{URL_PASSWORD}@"),
    ]


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def run_queries(settings: PrometheusSettings) -> list[str]:
    """Query twice, return the error messages."""
    source = PrometheusSource(settings)
    messages = []
    try:
        for _ in range(2):
            try:
                source.query("cpu_usage_avg_5m")
            except PrometheusQueryError as error:
                messages.append(str(error))
    finally:
        source.close()
    return messages


@pytest.mark.parametrize("status", [None, 401, 403, 500])
def test_answered_queries_log_no_credentials_at_debug(
    static_prom: PromProxy,
    credentials: list[Credentials],
    caplog: pytest.LogCaptureFixture,
    status: int | None,
) -> None:
    host = static_prom.url.removeprefix("http://")
    caplog.set_level(logging.DEBUG)
    for credential in credentials:
        static_prom.behave(ProxyBehaviour(status=status, times=2))
        messages = run_queries(credential.settings(host))
        assert len(messages) == (0 if status is None else 2), credential.name
        assert_no_secret("\n".join(messages))
    assert_no_secret(caplog.text)
    # Debug logging was really on, and every credential really went over the wire.
    assert any(record.levelno == logging.DEBUG for record in caplog.records)
    sent = " ".join(query.headers["authorization"] for query in static_prom.seen)
    assert f"Bearer {TOKEN}" in sent
    assert sent.count("Basic ") == 4


def test_refused_connections_log_no_credentials_at_debug(
    credentials: list[Credentials], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for credential in credentials:
        messages = run_queries(credential.settings(REFUSED))
        assert len(messages) == 2
        assert all("cannot connect to Prometheus" in message for message in messages)
        assert_no_secret("\n".join(messages))
    assert_no_secret(caplog.text)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:p4ss@h:9090/prom", "http://u:***@h:9090/prom"),
        ("https://:p4ss@h", "https://:***@h"),
        ("http://u@h:9090", "http://u@h:9090"),
        ("http://h:9090", "http://h:9090"),
        ("http://[::1", "<unparsable URL>"),
    ],
)
def test_redact_url_masks_only_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_malformed_url_with_credentials_is_refused_without_echoing_them() -> None:
    with pytest.raises(ValueError, match="is not an http") as error:
        PrometheusSettings(f"ftp://u:{URL_PASSWORD}@h")
    assert_no_secret(str(error.value))


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server}}],
                "users": [{"name": "nobody", "user": {}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "nobody"}}],
                "current-context": "fake",
            }
        ),
        encoding="utf-8",
    )
    return path


def annotator_output(
    kubeconfig_path: Path, prometheus: list[str], until: PromProxy, auth_scheme: str
) -> str:
    """Run ``loadaware --log-level debug annotator`` until it has queried three times
    (queries carrying ``auth_scheme``, so that another process's queries to the same
    proxy cannot end the wait before this one has started); its output."""
    seen_before = len(until.seen)
    process = subprocess.Popen(
        [
            sys.executable, "-m", "app.cli", "--log-level", "debug", "annotator",
            "--no-leader-elect", "--kubeconfig", str(kubeconfig_path),
            "--health-host", "127.0.0.1", "--health-port", "0", *prometheus,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # The third query starts after the second one's answer (and any failure) was
        # handled and logged: no fixed wait.
        def queried_three_times() -> bool:
            ours = [
                query
                for query in until.seen[seen_before:]
                if query.headers.get("authorization", "").startswith(auth_scheme)
            ]
            return len(ours) >= 3

        wait_until(queried_three_times, 60)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return output


def test_the_annotator_process_at_debug_logs_no_credentials(
    fake_kube: FakeKube, static_prom: PromProxy, tmp_path: Path
) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")
    config = kubeconfig(tmp_path / "kubeconfig", fake_kube.url)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    password = tmp_path / "password"
    password.write_text(PASSWORD)
    host = static_prom.url.removeprefix("http://")
    static_prom.behave(ProxyBehaviour(status=401))
    outputs = [
        annotator_output(
            config, ["--prometheus-url", static_prom.url, "--prometheus-token-file", str(token)],
            static_prom,
            "Bearer ",
        ),
        annotator_output(
            config,
            [
                "--prometheus-url", f"http://u:{URL_PASSWORD}@{host}",
                "--prometheus-username", "loadaware", "--prometheus-password-file", str(password),
            ],
            static_prom,
            "Basic ",
        ),
    ]
    output = "\n".join(outputs)
    assert "DEBUG" in output
    assert "401" in output  # the failure was logged, and logged without the secrets
    assert_no_secret(output)
    sent = " ".join(query.headers.get("authorization", "") for query in static_prom.seen)
    assert f"Bearer {TOKEN}" in sent
