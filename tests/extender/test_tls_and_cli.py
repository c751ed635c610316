"""TLS and mutual TLS as configured by the CLI flags, and the real entry points."""

from __future__ import annotations

import argparse
import os
import re
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from app.cli import build_parser
from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.extender.main import health_config, server_config, tls_context
from app.health import build_app, embedded_server
from app.health.connection_limits import EXTENDER_CONNECTION_LIMITS
from app.health.connections import guarded_protocol
from app.policy import DEFAULT_POLICY_YAML, default_policy
from app.runtime import StartupError
from tests.deploy.manifests import expected_variable
from tests.extender.nodes import fixture
from tests.support import http_client
from tests.support.asgi_server import serve
from tests.support.pki import Pki, make_pki
from tests.support.ports import free_port
from tests.support.zygote import Zygote, clean_environment


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def flags(pki: Pki, client_ca: bool) -> argparse.Namespace:
    return argparse.Namespace(
        tls_cert=str(pki.server_cert),
        tls_key=str(pki.server_key),
        client_ca=str(pki.ca_cert) if client_ca else None,
    )


def client_context(pki: Pki, with_cert: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    if with_cert:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return context


def test_tls_serves_the_verbs(pki: Pki) -> None:
    with serve(
        ExtenderApp(Extender(default_policy())),
        http=guarded_protocol(EXTENDER_CONNECTION_LIMITS, tls_context(flags(pki, False))),
    ) as url:
        assert url.startswith("https://")
        response = http_client.post(
            f"{url}/filter",
            json=fixture("filter-fullnodes.json"),
            verify=client_context(pki, False),
        )
        assert response.status_code == 200


def test_mutual_tls_refuses_clients_without_a_certificate(pki: Pki) -> None:
    with serve(
        ExtenderApp(Extender(default_policy())),
        http=guarded_protocol(EXTENDER_CONNECTION_LIMITS, tls_context(flags(pki, True))),
    ) as url:
        body = fixture("filter-fullnodes.json")
        ok = http_client.post(f"{url}/filter", json=body, verify=client_context(pki, True))
        assert ok.status_code == 200
        with pytest.raises(httpx.TransportError):
            http_client.post(f"{url}/filter", json=body, verify=client_context(pki, False))


@pytest.mark.parametrize(
    ("cert", "key", "ca", "message"),
    [("c", None, None, "must be given together"), (None, None, "ca", "--client-ca needs")],
)
def test_incomplete_tls_flags_are_refused(
    cert: str | None,
    key: str | None,
    ca: str | None,
    message: str,
) -> None:
    with pytest.raises(StartupError) as stopped:
        tls_context(argparse.Namespace(tls_cert=cert, tls_key=key, client_ca=ca))
    assert message in str(stopped.value)


@pytest.fixture
def run_cli() -> Iterator[list[subprocess.Popen[str]]]:
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


def start(
    processes: list[subprocess.Popen[str]], *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    processes.append(process)
    return process


def wait_ready(url: str, process: subprocess.Popen[str]) -> None:
    # A deadline for a loaded machine (the suite runs in parallel workers), not a
    # measure of start-up time: a healthy start takes about a second.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            if http_client.get(f"{url}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("server did not become ready")


def test_demo_answers_the_curl_it_prints(run_cli: list[subprocess.Popen[str]]) -> None:
    port = free_port()
    process = start(run_cli, "demo", "--port", str(port))
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process)
    answer = http_client.post(
        f"{url}/filter", json={"Pod": {}, "NodeNames": ["cool-1", "hot-cpu", "stale", "no-data"]}
    ).json()
    assert answer["NodeNames"] == ["cool-1", "stale", "no-data"]
    assert list(answer["FailedAndUnresolvableNodes"]) == ["hot-cpu"]
    burst = http_client.get(f"{url}/debug/nodes/burst").json()
    assert burst["hot_value"] == 3
    assert burst["score"] == burst["load_score"] - 30


def test_extender_command_reads_flags_from_the_environment(
    run_cli: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(DEFAULT_POLICY_YAML.replace("maxLimitPecent: 0.65", "maxLimitPecent: 0.5", 1))
    port = free_port()
    process = start(
        run_cli,
        "extender",
        "--host",
        "127.0.0.1",
        env={
            "LOADAWARE_PORT": str(port),
            "LOADAWARE_POLICY": str(policy),
            "LOADAWARE_EXTENDER_NODE_CACHE": "false",
            "LOADAWARE_EXTENDER_DEBUG_ENDPOINTS": "true",
        },
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process)
    listing = http_client.get(f"{url}/debug/nodes").json()
    assert listing["mode"] == "full-nodes"
    assert listing["policy"] == str(policy)


def test_extender_refuses_to_start_with_a_broken_policy(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("spec: {syncPolicy: [{name: x, period: soon}]}")
    result = cli_zygote.run(
        ["extender", "--no-node-cache", "--policy", str(policy)], clean_environment(tmp_path)
    )
    assert result.returncode == 2
    assert "spec.syncPolicy.0.period: invalid duration 'soon'" in result.stderr


def test_extender_without_a_kubeconfig_exits_with_one_clear_line(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    result = cli_zygote.run(["--log-level", "error", "extender"], clean_environment(tmp_path))
    assert result.returncode == 2  # a configuration error, as in every component
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(
        "loadaware extender: error: cannot build a Kubernetes client from in-cluster config"
    )
    assert "~/.kube/config not found" in line
    assert "--kubeconfig FILE" in line
    assert "--no-node-cache" in line


@pytest.mark.parametrize(("component", "flags"), [("extender", 27), ("demo", 7)])
def test_help_shows_every_flags_default_and_variable(
    component: str, flags: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args([component, "--help"])
    options = capsys.readouterr().out.split("options:\n", 1)[1].split("\n\nexit codes:")[0]
    # One entry per flag: its first line starts "  --", continuation lines are indented more.
    entries = [" ".join(e.split()) for e in re.split(r"\n(?=  -)", options) if "--help" not in e]
    assert len(entries) == flags
    for entry in entries:
        variable = expected_variable(component, entry.split()[0].strip(","))
        assert "(default" in entry, entry
        assert entry.endswith(f"[env {variable}]"), entry
    assert "--port PORT port to listen on (default: 8888) [env LOADAWARE_PORT]" in entries
    assert "%" not in " ".join(entries)


def test_idle_connections_outlive_kube_schedulers_own_idle_timeout() -> None:
    # Go's HTTP client drops idle connections after 90 s; the server must not close first.
    args = build_parser().parse_args(["extender", "--no-node-cache"])
    config = server_config(ExtenderApp(Extender(default_policy())), args)
    assert config.timeout_keep_alive > 90


def test_no_listener_speaks_websocket() -> None:
    # No component serves a WebSocket: a request asking for one is answered as plain HTTP,
    # and the WebSocket implementation is never loaded at start.
    args = build_parser().parse_args(["extender", "--no-node-cache", "--health-port", "8081"])
    app = ExtenderApp(Extender(default_policy()))
    probes = build_app("loadaware test", dict, CollectorRegistry(), "")
    configs = [server_config(app, args), health_config(app, args)]
    configs.append(embedded_server(probes, "127.0.0.1", 0).config)
    for config in configs:
        config.load()
        assert config.ws_protocol_class is None
