"""The Prometheus connection: credentials, TLS, extra headers and answer decoding."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.prom.client import PrometheusQueryError, PrometheusSource, build_query, parse_vector
from app.prom.settings import PrometheusSettings, parse_header
from tests.annotator.promproxy import PromProxy, running_proxy
from tests.support.pki import Pki, make_pki

RESULT = [{"metric": {"instance": "10.0.0.1:9100"}, "value": [1_700_000_000.5, "42.5"]}]


@pytest.fixture
def prom(static_prom: PromProxy) -> PromProxy:
    static_prom.static_result = RESULT
    return static_prom


def query(settings: PrometheusSettings) -> None:
    source = PrometheusSource(settings)
    try:
        samples = source.query("cpu_usage_avg_5m")
    finally:
        source.close()
    assert [(s.labels["instance"], s.value, s.timestamp_s) for s in samples] == [
        ("10.0.0.1:9100", 42.5, 1_700_000_000.5)
    ]


def test_a_rotated_bearer_token_is_used_without_a_restart(prom: PromProxy, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    source = PrometheusSource(PrometheusSettings(prom.url, token_file=token))
    source.query("up")
    token.write_text("second")
    source.query("up")
    assert [q.headers["authorization"] for q in prom.seen] == ["Bearer first", "Bearer second"]


def test_basic_auth_reads_the_password_file(prom: PromProxy, tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    query(PrometheusSettings(prom.url, username="loadaware", password_file=password))
    assert prom.seen[0].headers["authorization"] == "Basic bG9hZGF3YXJlOnMzY3JldA=="


def test_extra_headers_such_as_mimir_s_tenant_are_sent(prom: PromProxy) -> None:
    name, value = parse_header("X-Scope-OrgID: tenant-1")
    query(PrometheusSettings(prom.url, headers={name: value}))
    assert prom.seen[0].headers["x-scope-orgid"] == "tenant-1"


def test_the_query_timeout_is_passed_to_the_server_in_a_form_it_parses(prom: PromProxy) -> None:
    query(PrometheusSettings(prom.url, timeout_s=0.5))
    assert prom.seen[0].params["timeout"] == "500ms"


def test_a_missing_token_file_is_reported_as_a_credentials_problem(
    prom: PromProxy, tmp_path: Path
) -> None:
    source = PrometheusSource(PrometheusSettings(prom.url, token_file=tmp_path / "absent"))
    with pytest.raises(PrometheusQueryError) as caught:
        source.query("up")
    assert caught.value.reason == "credentials"
    assert "check the Secret is mounted" in str(caught.value)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_prom(pki: Pki) -> Iterator[PromProxy]:
    with running_proxy(None, tls=(pki.server_cert, pki.server_key)) as proxy:
        proxy.static_result = RESULT
        yield proxy


def test_a_private_ca_verifies_the_server(tls_prom: PromProxy, pki: Pki) -> None:
    query(PrometheusSettings(tls_prom.url, ca_file=pki.ca_cert))


def test_an_unknown_ca_is_refused_with_a_hint(tls_prom: PromProxy) -> None:
    source = PrometheusSource(PrometheusSettings(tls_prom.url))
    with pytest.raises(PrometheusQueryError) as caught:
        source.query("up")
    assert caught.value.reason == "tls"
    assert "--prometheus-ca-file" in str(caught.value)


def test_insecure_skip_verify_accepts_any_certificate(tls_prom: PromProxy) -> None:
    query(PrometheusSettings(tls_prom.url, insecure_skip_verify=True))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "prometheus:9090"}, "not an http(s) URL"),
        ({"token_file": Path("t"), "username": "u", "password_file": Path("p")}, "choose one"),
        ({"username": "u"}, "needs --prometheus-password-file"),
        ({"ca_file": Path("ca"), "insecure_skip_verify": True}, "contradict"),
        ({"timeout_s": 0}, "must be positive"),
    ],
)
def test_contradictory_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"url": "http://prometheus:9090", **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        PrometheusSettings(**arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("metric", "selector", "query_text"),
    [
        ("cpu_usage_avg_5m", "", "cpu_usage_avg_5m"),
        ("cpu_usage_avg_5m", 'cluster="prod"', 'cpu_usage_avg_5m{cluster="prod"}'),
        ("cpu_usage_avg_5m", '{cluster="prod"}', 'cpu_usage_avg_5m{cluster="prod"}'),
    ],
)
def test_build_query(metric: str, selector: str, query_text: str) -> None:
    assert build_query(metric, selector) == query_text


@pytest.mark.parametrize("selector", ["up{x}", "a} or vector(1) {"])
def test_a_selector_that_is_not_just_matchers_is_refused(selector: str) -> None:
    with pytest.raises(ValueError, match="label matchers only"):
        build_query("cpu_usage_avg_5m", selector)


@pytest.mark.parametrize("header", ["no-colon", ": value", "Bad Name: x"])
def test_a_malformed_header_flag_is_refused(header: str) -> None:
    with pytest.raises(ValueError, match="Name: value"):
        parse_header(header)


def test_special_float_values_decode_for_the_sync_to_judge() -> None:
    items = [
        {"metric": {"instance": i}, "value": [1.0, v]}
        for i, v in (("a", "NaN"), ("b", "+Inf"), ("c", "-Inf"), ("d", "-1"))
    ]
    values = [s.value for s in parse_vector(items)]
    assert math.isnan(values[0])
    assert values[1:] == [math.inf, -math.inf, -1.0]
