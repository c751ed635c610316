"""Issue 42, point 5: hostile or huge Prometheus answers, from a fake Prometheus on
loopback (a plain http.server: the attack is an answer no real Prometheus sends).

Before: 10 million points in one answer took capture to 2.6 GB and succeeded; a point
after the range ended capture in an IndexError traceback, a NaN timestamp in a
ValueError, and a point before the range was recorded at the end of it; the annotator
and the descheduler read answers without a byte cap, and a query abandoned at its
timeout kept downloading in its worker thread for as long as the server trickled.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
import requests
from lightkube.resources.core_v1 import Pod

from app.capture.catalog import Catalog, build_catalog
from app.capture.history import CaptureError, record
from app.prom.client import (
    BAD_QUERY,
    MAX_ANSWER_BYTES,
    TOO_LARGE,
    PrometheusQueryError,
    PrometheusSource,
)
from app.prom.settings import PrometheusSettings

START_S = 1_700_000_000.0
STEP_S = 60.0
POINTS = 11  # START_S .. START_S + 10 steps
LABELS = {"namespace": "shop", "pod": "web-0", "node": "n1"}

Body = Callable[[BaseHTTPRequestHandler], None]


class FakePrometheus:
    """Answers every request with ``self.body`` (set by the test); counts the answers
    it is still writing (``writing``)."""

    def __init__(self) -> None:
        self.body: Body = lambda handler: None
        self.stop = threading.Event()
        self.writing = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with fake._lock:
                    fake.writing += 1
                try:
                    fake.body(self)
                except OSError:
                    pass  # the client hung up: what a bounded client does
                finally:
                    with fake._lock:
                        fake.writing -= 1

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake() -> Iterator[FakePrometheus]:
    server = FakePrometheus()
    yield server
    server.close()


def send(handler: BaseHTTPRequestHandler, body: bytes, length: int | None = None) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body) if length is None else length))
    handler.end_headers()
    handler.wfile.write(body)


def matrix(points: list[list[Any]]) -> Body:
    text = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": LABELS, "values": points}]}})  # fmt: skip
    return lambda handler: send(handler, text.encode())


def ten_million_points(handler: BaseHTTPRequestHandler) -> None:
    """One series of 10,000,000 points (about 190 MB), streamed without a length."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.write(b'{"status":"success","data":{"resultType":"matrix","result":[')
    handler.wfile.write(b'{"metric":{"namespace":"shop","pod":"web-0"},"values":[')
    block = b'[1700000000,"0.5"],' * 10_000
    for _ in range(1000):
        handler.wfile.write(block)
    handler.wfile.write(b'[1700000000,"0.5"]]}]}}')


def source(url: str, timeout_s: float = 10.0) -> PrometheusSource:
    return PrometheusSource(PrometheusSettings(url=url, timeout_s=timeout_s))


def catalog() -> Catalog:
    pod = Pod.from_dict({
        "metadata": {"name": "web-0", "namespace": "shop"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    })  # fmt: skip
    return build_catalog([], [pod], {}, [])


def capture_usage(url: str) -> tuple[Any, Any]:
    usage, _, _, stats = record(
        source(url), catalog(), START_S, START_S + (POINTS - 1) * STEP_S, STEP_S
    )
    return usage, stats


def at(step: float) -> float:
    return START_S + step * STEP_S


@pytest.mark.parametrize(
    ("case", "stray"),
    [
        ("a point after the range", [at(POINTS + 5), "7"]),
        ("a NaN timestamp", ["NaN", "7"]),
        ("an infinite timestamp", ["+Inf", "7"]),
        ("a point before the range", [at(-3), "7"]),
    ],
)
def test_capture_drops_points_outside_the_range_or_at_no_time(
    fake: FakePrometheus, case: str, stray: list[Any]
) -> None:
    fake.body = matrix([[at(0), "1"], stray, [at(POINTS - 1), "2"]])
    usage, stats = capture_usage(fake.url)
    cpu = usage.sums[0][usage.index["shop-web-0"]]
    assert cpu[0] == 1.0, case  # the stray point is nowhere
    assert cpu[-1] == 2.0, case
    assert float(np.sum(cpu)) == 3.0, case
    # (a point at no finite time is dropped as the answer is decoded, before capture)
    assert stats.dropped_points > 0 or "timestamp" in case, case


def test_capture_refuses_ten_million_points_with_one_line(fake: FakePrometheus) -> None:
    fake.body = ten_million_points
    with pytest.raises(CaptureError) as error:
        capture_usage(fake.url)
    assert f"{MAX_ANSWER_BYTES // 2**20} MiB" in str(error.value)
    assert "\n" not in str(error.value)


def test_an_answer_that_declares_too_many_bytes_is_refused_before_it_is_read(
    fake: FakePrometheus,
) -> None:
    fake.body = lambda handler: send(handler, b"{}", length=MAX_ANSWER_BYTES + 1)
    with pytest.raises(PrometheusQueryError) as error:
        source(fake.url).query("up")
    assert error.value.reason == TOO_LARGE


def test_a_range_answer_past_the_sample_bound_is_refused(fake: FakePrometheus) -> None:
    fake.body = matrix([[at(0), "1"]] * 2000)
    with pytest.raises(PrometheusQueryError) as error:
        source(fake.url).query_range("x", START_S, at(10), STEP_S, max_samples=1000)
    assert error.value.reason == TOO_LARGE
    assert len(source(fake.url).query_range("x", START_S, at(10), STEP_S)[0].values) == 2000


def test_an_instant_answer_past_the_byte_cap_is_refused(fake: FakePrometheus) -> None:
    """The annotator's and the descheduler's queries go through the same reader."""
    fake.body = ten_million_points
    prom = source(fake.url)
    with pytest.raises(PrometheusQueryError) as error:
        asyncio.run(prom.aquery("sum by (namespace, pod) (x)"))
    assert error.value.reason == TOO_LARGE


def trickle(fake: FakePrometheus) -> Body:
    def body(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(b'{"status":"success","data":{"resultType":"vector","result":[')
        handler.wfile.flush()
        while not fake.stop.wait(0.05):  # a byte at a time, until the client hangs up
            handler.wfile.write(b" ")
            handler.wfile.flush()

    return body


def test_a_timed_out_query_stops_downloading(fake: FakePrometheus) -> None:
    fake.body = trickle(fake)
    prom = source(fake.url, timeout_s=1.0)

    async def three_timeouts() -> None:
        for _ in range(3):
            with pytest.raises(PrometheusQueryError) as error:
                await prom.aquery("up")
            assert error.value.reason == "timeout"

    asyncio.run(three_timeouts())
    # Each worker thread hangs up once the query's time is over: the server's writes
    # fail and it stops (it would trickle on for ever to a client that keeps reading).
    deadline = time.monotonic() + 30
    while fake.writing and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fake.writing == 0


def vector_answer(value: str) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": LABELS, "value": [START_S, value]}]}}).encode()  # fmt: skip


def gzipped(plain: bytes, times: int = 1) -> bytes:
    """``plain`` repeated ``times`` times, gzip-compressed without holding it whole."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip framing
    parts = [compressor.compress(plain) for _ in range(times)]
    return b"".join([*parts, compressor.flush()])


def send_gzip(handler: BaseHTTPRequestHandler, body: bytes, status: int = 200) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Encoding", "gzip")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_a_compressed_answer_is_decoded_once(fake: FakePrometheus) -> None:
    fake.body = lambda handler: send_gzip(handler, gzipped(vector_answer("0.25")))
    [sample] = source(fake.url).query("up")
    assert sample.value == 0.25
    assert dict(sample.labels) == LABELS


def test_a_compressed_answer_counts_decompressed(fake: FakePrometheus) -> None:
    """A gzip bomb: about 65 KiB on the wire, past the cap once decompressed."""
    bomb = gzipped(b" " * 2**20, MAX_ANSWER_BYTES // 2**20 + 1)
    fake.body = lambda handler: send_gzip(handler, bomb)
    with pytest.raises(PrometheusQueryError) as error:
        source(fake.url).query("up")
    assert error.value.reason == TOO_LARGE


def test_a_redirect_s_answer_is_bounded_too(fake: FakePrometheus) -> None:
    def body(handler: BaseHTTPRequestHandler) -> None:
        if handler.path.startswith("/api/"):
            handler.send_response(302)
            handler.send_header("Location", "/elsewhere")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
        else:
            ten_million_points(handler)

    fake.body = body
    with pytest.raises(PrometheusQueryError) as error:
        source(fake.url).query("up")
    assert error.value.reason == TOO_LARGE


def test_an_invalid_query_answer_is_a_bad_query(fake: FakePrometheus) -> None:
    """A 400 surfaces through prometheus-api-client's exception, mapped as before."""
    answer = {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}

    def bad_request(handler: BaseHTTPRequestHandler) -> None:
        text = json.dumps(answer).encode()
        handler.send_response(400)
        handler.send_header("Content-Length", str(len(text)))
        handler.end_headers()
        handler.wfile.write(text)

    fake.body = bad_request
    with pytest.raises(PrometheusQueryError) as error:
        source(fake.url).query("up{")
    assert error.value.reason == BAD_QUERY
    assert "parse error at char 3" in str(error.value)


def test_a_huge_error_answer_is_cut_and_named_in_one_short_line(fake: FakePrometheus) -> None:
    def huge_error(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(503)
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(b"upstream overloaded " + b"x" * 10_000)
        for _ in range(200):  # 200 MB that nobody should read
            handler.wfile.write(b"y" * 1_000_000)

    fake.body = huge_error
    with pytest.raises(PrometheusQueryError) as error:
        source(fake.url).query("up")
    assert error.value.reason == "http"
    assert "503" in str(error.value)
    assert "upstream overloaded" in str(error.value)
    assert len(str(error.value)) < 1000


def test_a_stall_inside_the_answer_is_a_timeout(fake: FakePrometheus) -> None:
    def stall(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        handler.wfile.write(b'{"status":"success",')
        handler.wfile.flush()
        fake.stop.wait(10)  # silent, until the test ends

    fake.body = stall
    with pytest.raises(PrometheusQueryError) as error:
        source(fake.url, timeout_s=0.5).query("up")
    assert error.value.reason == "timeout"


def test_requests_takes_a_response_s_body_from_content_once_it_is_set() -> None:
    """What BoundedAnswers relies on (requests has no public setter for a body): once
    ``_content`` holds bytes, ``content``, ``text`` and ``json()`` give them and ``raw``
    is never read. An upgrade of requests that changes it fails here."""

    class Unreadable:
        def read(self, *args: Any, **kwargs: Any) -> bytes:
            raise AssertionError("raw was read")

        stream = read

    response = requests.Response()
    response.status_code = 200
    response.raw = Unreadable()
    response._content = b'{"status": "success"}'
    assert response.content == b'{"status": "success"}'
    assert response.json() == {"status": "success"}
    assert response.text == '{"status": "success"}'


def test_prometheus_connect_s_own_adapter_is_replaced(fake: FakePrometheus) -> None:
    """PrometheusConnect mounts a plain adapter on its URL; every URL the session may
    reach (its own, a redirect's) gets the bounded one."""
    prom = source(fake.url + "/")
    for url in (fake.url + "/api/v1/query", "http://127.0.0.2:1/x", "https://127.0.0.1/x"):
        assert prom.answers is prom._connection._session.get_adapter(url), url
