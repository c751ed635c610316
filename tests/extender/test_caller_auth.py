"""Who may call the extender (issue 18, attack 2 and 6): mutual TLS or a loopback address,
or an explicit, logged --allow-unauthenticated; probes and Prometheus on a plain port
that serves nothing else; the debug endpoints off unless asked for, and paged."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from app.extender.extender import Extender
from app.extender.http import DEBUG_PAGE_MAX, ExtenderApp
from app.policy import default_policy
from tests.extender.nodes import cool, hot_cpu
from tests.extender.test_tls_and_cli import start, wait_ready
from tests.support import http_client
from tests.support.asgi_server import serve
from tests.support.pki import Pki, make_pki
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
BODY = {"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["n1"]}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def run_to_exit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "app.cli", "--log-level", "error"),
            *("extender", "--no-node-cache", *args),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("tls", [False, True])
def test_serving_all_addresses_without_client_certificates_needs_an_explicit_choice(
    pki: Pki, tls: bool
) -> None:
    flags = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)] if tls else []
    result = run_to_exit("--host", "0.0.0.0", "--port", str(free_port()), *flags)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert "--allow-unauthenticated" in line
    assert "mutual TLS" in line


def test_an_explicitly_unauthenticated_extender_warns_at_start(
    run_cli: list[subprocess.Popen[str]],
) -> None:
    port = free_port()
    process = start(
        run_cli,
        "extender",
        "--no-node-cache",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        env={"LOADAWARE_EXTENDER_ALLOW_UNAUTHENTICATED": "true"},
    )
    wait_ready(f"http://127.0.0.1:{port}", process)
    process.terminate()
    output, _ = process.communicate(timeout=30)
    warning = next(line for line in output.splitlines() if "--allow-unauthenticated" in line)
    assert "WARNING" in warning
    assert "ANY client" in warning


def client_context(pki: Pki, with_cert: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    if with_cert:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return context


def test_the_shipped_shape_mutual_tls_on_all_addresses_and_a_plain_health_port(
    pki: Pki, run_cli: list[subprocess.Popen[str]]
) -> None:
    port, health_port = free_port(), free_port()
    process = start(
        run_cli,
        "extender",
        "--no-node-cache",
        env={
            "LOADAWARE_HOST": "0.0.0.0",
            "LOADAWARE_PORT": str(port),
            "LOADAWARE_HEALTH_PORT": str(health_port),
            "LOADAWARE_EXTENDER_TLS_CERT": str(pki.server_cert),
            "LOADAWARE_EXTENDER_TLS_KEY": str(pki.server_key),
            "LOADAWARE_EXTENDER_CLIENT_CA": str(pki.ca_cert),
        },
    )
    health = f"http://127.0.0.1:{health_port}"
    wait_ready(health, process)
    assert "loadaware_extender_requests_total" in http_client.get(f"{health}/metrics").text
    # The plain port serves probes and metrics only.
    for path in ("/filter", "/prioritize"):
        assert http_client.post(f"{health}{path}", json=BODY).status_code == 404
    for path in ("/debug/nodes", "/docs", "/openapi.json"):
        assert http_client.get(f"{health}{path}").status_code == 404
    url = f"https://127.0.0.1:{port}"
    with pytest.raises(httpx.TransportError):
        http_client.post(f"{url}/filter", json=BODY, verify=client_context(pki, False))
    verified = client_context(pki, True)
    answer = http_client.post(f"{url}/filter", json=BODY, verify=verified)
    assert answer.status_code == 200
    assert answer.json()["NodeNames"] == ["n1"]
    # Debug endpoints are off unless asked for, even for an authenticated client.
    for path in ("/debug/nodes", "/debug/nodes/n1", "/docs", "/openapi.json"):
        assert http_client.get(f"{url}{path}", verify=verified).status_code == 404
    process.terminate()
    output, _ = process.communicate(timeout=30)
    assert "ANY client" not in output


@pytest.fixture
def run_cli() -> list[subprocess.Popen[str]]:
    return []


@pytest.fixture(autouse=True)
def _stop(run_cli: list[subprocess.Popen[str]]) -> object:
    yield
    for process in run_cli:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def many_nodes(count: int) -> Extender:
    extender = Extender(default_policy(), mode="test")
    for index in range(count):
        extender.table.upsert(f"node-{index:04d}", hot_cpu() if index % 7 == 0 else cool())
    return extender


def test_debug_nodes_is_paged_and_every_node_appears_once() -> None:
    with serve(ExtenderApp(many_nodes(250), debug_endpoints=True)) as url:
        seen: list[str] = []
        after = ""
        pages = 0
        while True:
            params = {"limit": 100, "after": after}
            page = http_client.get(f"{url}/debug/nodes", params=params).json()
            assert page["total"] == 250
            assert len(page["nodes"]) <= 100
            seen += [node["name"] for node in page["nodes"]]
            pages += 1
            if page["next"] is None:
                break
            after = page["next"]
        assert pages == 3
        assert seen == sorted(f"node-{index:04d}" for index in range(250))
        overloaded = http_client.get(f"{url}/debug/nodes/node-0007").json()
        assert overloaded["verdict"] == "overloaded"


@pytest.mark.parametrize("limit", [0, -1, DEBUG_PAGE_MAX + 1, "abc", "1.5"])
def test_debug_nodes_refuses_pages_out_of_bounds(limit: int | str) -> None:
    with serve(ExtenderApp(many_nodes(3), debug_endpoints=True)) as url:
        answer = http_client.get(f"{url}/debug/nodes", params={"limit": limit})
        assert answer.status_code == 400
        assert "limit must be between 1 and" in answer.json()["error"]


def test_debug_nodes_answers_one_page_by_default_however_many_nodes() -> None:
    with serve(ExtenderApp(many_nodes(1500), debug_endpoints=True)) as url:
        page = http_client.get(f"{url}/debug/nodes").json()
        assert page["total"] == 1500
        assert len(page["nodes"]) == 100
        assert page["next"] == "node-0099"


def test_debug_endpoints_are_off_when_not_asked_for(tmp_path: Path) -> None:
    with serve(ExtenderApp(many_nodes(3), debug_endpoints=False)) as url:
        for path in ("/debug/nodes", "/debug/nodes/node-0000", "/docs", "/openapi.json"):
            assert http_client.get(f"{url}{path}").status_code == 404
        assert http_client.get(f"{url}/readyz").status_code == 200
        assert http_client.post(f"{url}/filter", json=BODY).status_code == 200


def request_over_tls(port: int, context: ssl.SSLContext, server_name: str) -> bytes:
    """POST /filter as kube-scheduler does with tlsConfig.serverName: connect to the
    address, verify the certificate against the name."""
    request = orjson.dumps(BODY)
    head = (
        f"POST /filter HTTP/1.1\r\nHost: {server_name}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(request)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with (
        socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname=server_name) as tls,
    ):
        tls.sendall(head + request)
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    return answer


def test_the_certificates_script_makes_a_working_mutual_tls_pair(
    tmp_path: Path, pki: Pki, run_cli: list[subprocess.Popen[str]]
) -> None:
    certs = tmp_path / "certs"
    made = subprocess.run(
        ["bash", str(ROOT / "scripts" / "extender-certs"), str(certs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    assert "create secret tls loadaware-extender-tls" in made.stdout
    port, health_port = free_port(), free_port()
    process = start(
        run_cli,
        "extender",
        "--no-node-cache",
        env={
            "LOADAWARE_HOST": "0.0.0.0",
            "LOADAWARE_PORT": str(port),
            "LOADAWARE_HEALTH_PORT": str(health_port),
            "LOADAWARE_EXTENDER_TLS_CERT": str(certs / "tls.crt"),
            "LOADAWARE_EXTENDER_TLS_KEY": str(certs / "tls.key"),
            "LOADAWARE_EXTENDER_CLIENT_CA": str(certs / "ca.crt"),
        },
    )
    wait_ready(f"http://127.0.0.1:{health_port}", process)
    scheduler = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    scheduler.load_cert_chain(str(certs / "client.crt"), str(certs / "client.key"))
    answer = request_over_tls(port, scheduler, "loadaware-extender.loadaware.svc")
    assert answer.startswith(b"HTTP/1.1 200"), answer[:80]
    assert b'"NodeNames":["n1"]' in answer
    # A client certificate from another CA is refused.
    stranger = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    stranger.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    try:
        refused = request_over_tls(port, stranger, "loadaware-extender.loadaware.svc")
    except (ssl.SSLError, ConnectionError):
        refused = b""  # TLS 1.3 reports the refusal on the first read, or as a reset
    assert refused == b""
