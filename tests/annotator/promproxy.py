"""A programmable HTTP proxy in front of a real Prometheus, for annotator tests.

It forwards ``/api/v1/query`` to the upstream server and records every request
(query, headers), so tests can count queries and check auth headers on the wire.
Between the annotator and the real answer it can inject what a real Prometheus
cannot be made to produce on demand: a status code, a delay, a garbage body, or
NaN/Inf/negative values in place of a series' value.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SeenQuery:
    path: str
    params: dict[str, str]
    headers: dict[str, str]

    @property
    def promql(self) -> str:
        return self.params.get("query", "")


@dataclass
class ProxyBehaviour:
    status: int | None = None  # answer with this status and a short body instead
    delay_s: float = 0.0
    body: bytes | None = None  # answer 200 with this body instead
    # instance label -> replacement value text ("NaN", "+Inf", "-3"), applied to answers
    values: dict[str, str] = field(default_factory=dict)
    times: int | None = None  # how many requests the behaviour applies to (None: all)


class PromProxy:
    def __init__(self, upstream: str | None) -> None:
        self.upstream = upstream.rstrip("/") if upstream else None
        self.seen: list[SeenQuery] = []
        self._behaviours: list[ProxyBehaviour] = []
        self._lock = threading.Lock()
        self.static_result: list[dict[str, Any]] = []  # served when there is no upstream
        self.url = ""

    def behave(self, behaviour: ProxyBehaviour) -> None:
        with self._lock:
            self._behaviours.append(behaviour)

    def reset(self) -> None:
        with self._lock:
            self._behaviours.clear()
            self.seen.clear()

    def queries(self) -> list[str]:
        with self._lock:
            return [q.promql for q in self.seen if q.path == "/api/v1/query"]

    def _take(self) -> ProxyBehaviour | None:
        with self._lock:
            if not self._behaviours:
                return None
            behaviour = self._behaviours[0]
            if behaviour.times is not None:
                behaviour.times -= 1
                if behaviour.times <= 0:
                    self._behaviours.pop(0)
            return behaviour

    def handle(
        self, path: str, params: dict[str, str], headers: dict[str, str]
    ) -> tuple[int, bytes]:
        with self._lock:
            self.seen.append(SeenQuery(path, params, headers))
        behaviour = self._take()
        if behaviour is not None and behaviour.delay_s:
            time.sleep(behaviour.delay_s)
        if behaviour is not None and behaviour.status is not None:
            return behaviour.status, b'{"status":"error","error":"injected by PromProxy"}'
        if behaviour is not None and behaviour.body is not None:
            return 200, behaviour.body
        status, body = self._forward(path, params)
        if behaviour is not None and behaviour.values and status == 200:
            doc = json.loads(body)
            for item in doc["data"]["result"]:
                replacement = behaviour.values.get(item["metric"].get("instance", ""))
                if replacement is not None:
                    item["value"][1] = replacement
            body = json.dumps(doc).encode()
        return status, body

    def _forward(self, path: str, params: dict[str, str]) -> tuple[int, bytes]:
        if self.upstream is None:
            doc = {
                "status": "success",
                "data": {"resultType": "vector", "result": self.static_result},
            }
            return 200, json.dumps(doc).encode()
        url = f"{self.upstream}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()


def _handler(proxy: PromProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self, params: dict[str, str]) -> None:
            path = urllib.parse.urlsplit(self.path).path
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                status, body = proxy.handle(path, params, headers)
            except (BrokenPipeError, ConnectionResetError):
                return
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_GET(self) -> None:
            query = urllib.parse.urlsplit(self.path).query
            self._serve(dict(urllib.parse.parse_qsl(query)))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = self.rfile.read(length).decode()
            self._serve(dict(urllib.parse.parse_qsl(form)))

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def running_proxy(
    upstream: str | None, tls: tuple[Path, Path] | None = None
) -> Iterator[PromProxy]:
    """A PromProxy on a free loopback port for the duration of the block.

    ``tls`` is (certificate, key): serve HTTPS with them.
    """
    proxy = PromProxy(upstream)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    server.daemon_threads = True
    scheme = "http"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    proxy.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def wait_until(condition: Callable[[], bool], timeout_s: float, step_s: float = 0.02) -> bool:
    """Poll ``condition`` until true or the timeout; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step_s)
    return condition()
