"""Ctrl-C stops every command at once, whatever it is waiting on (issue 46): an API
server or a Prometheus that accepts the connection and never answers.

tests/test_cli_bad_input.py holds the first cases (explain node, the descheduler and the
annotator on a Prometheus that never answers; the extender, the demo and simulate at
work). These are the rest: every command that reads the API server, on one that never
answers, and every other command that queries Prometheus, on one that never answers.
Each runs the real command line in a process of its own, started as a shell in a
terminal starts it (SIGINT at its default). The bound below is far longer than a
second and far shorter than any timeout the command would otherwise wait out (the
query timeout is 600 s; the Kubernetes client has none): a command that does not stop
at the signal fails it; no time is measured.
"""

from __future__ import annotations

import json
import signal
import socket
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.support.fakekube_fixtures import FakeKube
from tests.support.http_stub import serving
from tests.support.ports import free_port
from tests.support.zygote import clean_environment
from tests.test_cli_bad_input import start_cli

STOP_BOUND_S = 15  # far above "at once", far below what a wait without the signal takes

# One-shot commands end with 130; servers and loops stopped by SIGINT end with 0
# (app/commandline/flags.py, EXIT_MEANINGS).
INTERRUPTED, STOPPED = 130, 0


@contextmanager
def server_that_never_answers() -> Iterator[tuple[str, socket.socket]]:
    """A loopback port that accepts connections and never says a word."""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        hung.settimeout(60)  # the command connects within this, or the test fails
        yield f"http://127.0.0.1:{hung.getsockname()[1]}", hung


def kubeconfig_for(folder: Path, server: str) -> str:
    from tests.explain.test_cli import kubeconfig

    return kubeconfig(folder / "kubeconfig", server)


def interrupt_once_connected(argv: list[str], hung: socket.socket, home: Path) -> tuple[int, str]:
    """Start ``argv``, wait for its connection to ``hung``, send SIGINT, and return its
    exit code and stderr."""
    process = start_cli(argv, clean_environment(home))
    try:
        try:
            connection, _ = hung.accept()  # the command is waiting on it now
        except TimeoutError:
            process.kill()
            _, err = process.communicate()
            pytest.fail(f"{argv[0]} never connected: {err}")
        with connection:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=STOP_BOUND_S)  # no hang: the bound is the test
    finally:
        process.kill()
        process.wait()
    assert process.stderr is not None
    return process.returncode, process.stderr.read()


def assert_stopped_cleanly(code: int, expected: int, err: str, name: str) -> None:
    assert "Traceback" not in err, err
    assert code == expected, err
    last = err.splitlines()[-1] if err.strip() else ""
    if expected == INTERRUPTED:
        assert last == "loadaware: interrupted", err
    else:
        assert last.endswith(" stopped") or "Finished server process" in last, (name, err)


NO_PROMETHEUS = ["--prometheus-url", "http://127.0.0.1:9"]  # never reached: the API hangs

# command, exit code; KUBECONFIG: a kubeconfig whose API server never answers
HUNG_API_SERVER = {
    "explain pod": (["explain", "pod", "shop/web"], INTERRUPTED),
    "explain node": (["explain", "node", "hot"], INTERRUPTED),
    "report": (["report"], INTERRUPTED),
    "capture": (["capture", *NO_PROMETHEUS], INTERRUPTED),
    "descheduler --once": (["descheduler", "--once", "--dry-run", "--no-leader-elect",
                            *NO_PROMETHEUS], INTERRUPTED),
    "descheduler, leader-elected": (["descheduler", *NO_PROMETHEUS, "--health-port", "0"],
                                    STOPPED),
    "annotator": (["annotator", "--no-leader-elect", *NO_PROMETHEUS, "--health-port", "0"],
                  STOPPED),
    "extender": (["extender", "--port", "PORT"], STOPPED),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HUNG_API_SERVER))
def test_ctrl_c_while_the_api_server_never_answers_stops_at_once(
    name: str, tmp_path: Path
) -> None:
    argv, expected = HUNG_API_SERVER[name]
    argv = [str(free_port()) if arg == "PORT" else arg for arg in argv]
    with server_that_never_answers() as (url, hung):
        config = kubeconfig_for(tmp_path, url)
        code, err = interrupt_once_connected([*argv, "--kubeconfig", config], hung, tmp_path)
    assert_stopped_cleanly(code, expected, err, name)


class EmptyCluster(BaseHTTPRequestHandler):
    """An API server with nothing in it: every list is empty, every object is missing.
    Enough for capture to read the cluster and go on to Prometheus (the fake API server
    of tests/support serves no apps/v1 lists)."""

    def do_GET(self) -> None:
        last = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        listing = last.endswith("s") and "configmaps/" not in self.path
        body = json.dumps(
            {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
             "items": []}
            if listing
            else {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                  "reason": "NotFound", "code": 404}
        ).encode()  # fmt: skip
        self.send_response(200 if listing else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def empty_cluster() -> AbstractContextManager[str]:
    return serving(EmptyCluster)


POLICY = Path(__file__).resolve().parents[1] / "deploy" / "base" / "policy.yaml"

# command, the API server it reads first (none, the fake one seeded with the
# descheduler's cluster and memory, or an empty one), exit code
HUNG_PROMETHEUS = {
    "policy check": (["policy", "check", str(POLICY)], None, INTERRUPTED),
    "report": (["report"], "seeded", INTERRUPTED),
    "capture": (["capture", "--range", "1h"], "empty", INTERRUPTED),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HUNG_PROMETHEUS))
def test_ctrl_c_during_a_prometheus_query_that_never_answers_stops_at_once(
    name: str, fake_kube: FakeKube, tmp_path: Path
) -> None:
    from tests.descheduler import cluster

    argv, api_server, expected = HUNG_PROMETHEUS[name]
    cluster.seed(fake_kube.store)  # nodes, pods and the descheduler's state
    with empty_cluster() as empty, server_that_never_answers() as (url, hung):
        if api_server is not None:
            server = fake_kube.url if api_server == "seeded" else empty
            argv = [*argv, "--kubeconfig", kubeconfig_for(tmp_path, server)]
        code, err = interrupt_once_connected(
            [*argv, "--prometheus-url", url, "--query-timeout", "600s"], hung, tmp_path
        )
    assert_stopped_cleanly(code, expected, err, name)
