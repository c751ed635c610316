"""Slow and stalled clients over real sockets, against the real ``loadaware extender``
process: a head or a body that stalls is cut off after its timeout, connections beyond
the limit are refused, and a thousand stalled connections do not keep their descriptors
(issue 18, attack 6). Every wait has a generous deadline and nothing asserts a duration."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.support import http_client
from tests.support.ports import free_port

DEADLINE_S = 60.0


@contextlib.contextmanager
def extender(*flags: str) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "--log-level",
            "warning",
            "extender",
            "--no-node-cache",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *flags,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        wait_until(lambda: answers(port), "the extender answers /readyz", process)
        yield port, process
    finally:
        process.terminate()
        process.wait(timeout=30)


# One extender serves every test that its limits suit: each start costs about a CPU-second,
# and a test leaves no connection of its own behind (each reads its connections until the
# server closes them). The thousand stalled connections need body timeouts of 1 s (not the
# default 10 s) and room for them; the others time out in 1 s either way.
SHARED_LIMITS = ("--header-timeout", "1", "--body-timeout", "1", "--max-connections", "4096")


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[int, subprocess.Popen[str]]]:
    with extender(*SHARED_LIMITS) as running:
        yield running


def answers(port: int) -> bool:
    try:
        return http_client.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
    except httpx.TransportError:
        return False


def wait_until(
    condition: Callable[[], bool], what: str, process: subprocess.Popen[str] | None = None
) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert process is None or process.poll() is None, "the extender exited"
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting until {what}")
        time.sleep(0.05)


def connect(port: int, data: bytes) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
    with contextlib.suppress(OSError):  # the server may already have given up on it
        connection.sendall(data)
    return connection


def read_until_closed(connection: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (the socket timeout,
    a generous deadline, fails the test if it never does)."""
    received = b""
    while True:
        try:
            chunk = connection.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def read_one_response(connection: socket.socket) -> bytes:
    """One whole response (head and Content-Length body), leaving the connection open."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += connection.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(65536)
    return received


HALF_HEAD = b"POST /filter HTTP/1.1\r\nHost: extender\r\nContent-Type: applic"
BODY = b'{"Pod": {}, "NodeNames": ["n1"]}'
HEAD = (
    b"POST /filter HTTP/1.1\r\nHost: extender\r\nContent-Type: application/json\r\n"
    b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n"
)


def test_a_client_stalled_mid_headers_is_disconnected(
    shared: tuple[int, subprocess.Popen[str]],
) -> None:
    port, _ = shared
    with connect(port, HALF_HEAD) as connection:
        assert read_until_closed(connection) == b""


def test_a_request_head_over_the_size_limit_gets_431_and_is_disconnected(
    shared: tuple[int, subprocess.Popen[str]],
) -> None:
    head = (
        HALF_HEAD
        + b"\r\n"
        + b"".join(b"X-Padding-%d: %s\r\n" % (index, b"p" * 1000) for index in range(80))
    )
    port, _ = shared
    with connect(port, head) as connection:
        answer = read_until_closed(connection)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
    assert answers(port)


def test_a_client_that_sends_nothing_is_disconnected(
    shared: tuple[int, subprocess.Popen[str]],
) -> None:
    port, _ = shared
    with connect(port, b"") as connection:
        assert read_until_closed(connection) == b""


def test_a_client_stalled_mid_body_gets_408_and_is_disconnected(
    shared: tuple[int, subprocess.Popen[str]],
) -> None:
    port, _ = shared
    with connect(port, HEAD + BODY[:10]) as connection:
        answer = read_until_closed(connection)
    # The verb's own deadline answers 408; the connection-level backstop (a second
    # later) only closes: either way the connection is gone.
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer[:80]


def test_a_kept_alive_connection_stalled_in_its_second_head_is_disconnected(
    shared: tuple[int, subprocess.Popen[str]],
) -> None:
    port, _ = shared
    with connect(port, HEAD + BODY) as connection:
        first = read_one_response(connection)
        assert first.startswith(b"HTTP/1.1 200"), first[:80]
        connection.sendall(HALF_HEAD)
        assert read_until_closed(connection) == b""


def test_whole_requests_are_served_on_a_kept_alive_connection(
    shared: tuple[int, subprocess.Popen[str]],
) -> None:
    port, _ = shared
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=DEADLINE_S) as client:
        for _ in range(3):
            answer = client.post("/filter", content=BODY)
            assert answer.status_code == 200
            assert answer.json()["NodeNames"] == ["n1"]


def test_a_connection_beyond_the_limit_is_refused() -> None:
    limit = 5
    with extender("--max-connections", str(limit), "--header-timeout", "600") as (port, _):
        # limit + 1 stalled connections: at least `limit` of them hold their slot.
        stalled = [connect(port, HALF_HEAD) for _ in range(limit + 1)]
        try:
            refused = connect(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            with refused:
                answer = read_until_closed(refused)
            assert answer.startswith(b"HTTP/1.1 503"), answer[:80]
            assert b"too many connections" in answer
        finally:
            for connection in stalled:
                connection.close()
        # Once they are gone, new connections are served again.
        wait_until(lambda: answers(port), "the extender serves again")


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_thousand_stalled_connections_do_not_keep_their_descriptors(
    shared: tuple[int, subprocess.Popen[str]],
) -> None:
    # Half of them stall in the body (SHARED_LIMITS: its timeout at 1 s too).
    port, process = shared
    baseline = open_descriptors(process.pid)
    stalled = []
    try:
        for index in range(1000):
            stalled.append(connect(port, HALF_HEAD if index % 2 else HEAD + BODY[:5]))
        for connection in stalled:
            read_until_closed(connection)
        # Every one was closed by the server; its descriptors go with them.
        wait_until(
            lambda: open_descriptors(process.pid) <= baseline + 10,
            f"the extender's descriptors fall back near {baseline}",
            process,
        )
    finally:
        for connection in stalled:
            connection.close()
    assert answers(port)
