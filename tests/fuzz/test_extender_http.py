"""The extender's verbs over real HTTP (uvicorn on loopback) under fuzz, and slow clients.

Whatever arrives, the answer is a correct result (200) or a 4xx whose JSON body says
what was wrong: never a 500, never a hang. Clients that trickle their body a byte at a
time do not hold up anyone else. tests/extender/test_bad_input.py covers the fixed
table of malformed bodies in-process; this file goes over the wire.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.policy import default_policy
from tests.extender.nodes import cool, hot_cpu
from tests.fuzz.budget import examples, scale
from tests.fuzz.documents import values
from tests.support.asgi_server import serve

MAX_BODY_BYTES = 256 * 1024
CACHED = ["hot", "n1", "n2"]
POD: dict[str, Any] = {"metadata": {"name": "p", "namespace": "default"}}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    extender = Extender(default_policy(), mode="test")
    extender.table.upsert("hot", hot_cpu())
    for name in CACHED[1:]:
        extender.table.upsert(name, cool())
    with serve(ExtenderApp(extender, max_body_bytes=MAX_BODY_BYTES)) as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=10) as http:
        yield http


names = st.lists(st.sampled_from([*CACHED, "ghost", "", "ü", "a" * 300]), max_size=6)
well_formed = st.fixed_dictionaries(
    {"Pod": st.none() | st.just(POD) | values, "NodeNames": st.none() | names | values},
    optional={
        "Nodes": st.none() | values,
        "Unknown": values,
        "nodeNames": names,
    },
)


def encode(document: Any) -> bytes:
    """JSON as any client may write it: big integers, and NaN/Infinity (not JSON) too."""
    return json.dumps(document).encode()


bodies = st.one_of(
    well_formed.map(encode),
    st.tuples(well_formed.map(encode), st.floats(0, 1)).map(
        lambda pair: pair[0][: int(len(pair[0]) * pair[1])]  # truncated JSON
    ),
    st.binary(max_size=64),  # mostly not UTF-8
    well_formed.map(encode).map(lambda body: body.replace(b'"p"', b'"\xff\xfe"')),
    st.integers(1, 5000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.integers(1, 5000).map(lambda depth: b'{"Pod":' * depth + b"{}" + b"}" * depth),
)


def asked_names(document: dict[str, Any]) -> list[str]:
    """The node names a request that got 200 asked about: its NodeNames list when it has
    one (even empty, whatever else "Nodes" holds), else the names of its Node objects."""
    names = document.get("NodeNames")
    if isinstance(names, list):
        return names
    nodes = document.get("Nodes")
    items = nodes.get("items") if isinstance(nodes, dict) else None
    return [node["metadata"]["name"] for node in items or []]


def assert_answer_is_sound(response: httpx.Response, verb: str, body: bytes) -> None:
    assert response.status_code in (200, 400, 413), response.text
    answer = orjson.loads(response.content)
    if response.status_code != 200:
        assert answer["error"], answer
        return
    document = orjson.loads(body)
    asked = asked_names(document)
    if verb == "prioritize":
        assert [entry["Host"] for entry in answer] == asked
        assert all(0 <= entry["Score"] <= 10 for entry in answer)
    elif answer.get("NodeNames") is not None:
        assert set(answer["NodeNames"]) <= set(asked)
        assert "hot" not in answer["NodeNames"]


@examples(250)
@given(body=bodies, verb=st.sampled_from(["filter", "prioritize"]))
# Found by this test once in CI: an empty NodeNames beside a "Nodes" that is no object.
@example(body=b'{"Pod": {}, "NodeNames": [], "Nodes": true}', verb="filter")
def test_any_body_over_http_gets_a_result_or_a_clear_4xx(
    client: httpx.Client, body: bytes, verb: str
) -> None:
    assert_answer_is_sound(client.post(f"/{verb}", content=body), verb, body)


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (encode({"Pod": POD, "NodeNames": []}), 200, None),
        (encode({"Pod": None, "NodeNames": ["n1"]}), 400, '"Pod" must be a Pod object'),
        (b"\xff\xfe\x00{", 400, "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "not valid JSON"),
        (encode({"Pod": POD, "NodeNames": ["n1"] * 60_000}), 413, "exceeds 262144 bytes"),
    ],
    ids=["empty node list", "null Pod", "not UTF-8", "deeply nested", "huge"],
)
def test_edge_bodies_over_http(
    client: httpx.Client, body: bytes, status: int, message: str | None
) -> None:
    response = client.post("/filter", content=body)
    assert response.status_code == status
    if message is not None:
        assert message in response.json()["error"]
    else:
        assert response.json()["NodeNames"] == []


def slow_request(host: str, port: int, body: bytes) -> socket.socket:
    """Open a connection and send the headers of a POST whose body is still to come."""
    connection = socket.create_connection((host, port), timeout=10)
    head = (
        f"POST /filter HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    connection.sendall(head.encode())
    return connection


def test_clients_trickling_their_body_do_not_hold_up_others(
    base_url: str, client: httpx.Client
) -> None:
    host, port = base_url.removeprefix("http://").split(":")
    body = encode({"Pod": POD, "NodeNames": ["n1", "hot"]})
    slow = [slow_request(host, int(port), body) for _ in range(32)]
    step_s = 0.3 * scale() / len(body)  # every slow body takes 0.3 s (scaled) to arrive
    latencies_s = []
    try:
        for index in range(len(body)):
            for connection in slow:
                connection.sendall(body[index : index + 1])
            started = time.monotonic()
            response = client.post("/filter", content=body)
            latencies_s.append(time.monotonic() - started)
            assert response.status_code == 200
            assert response.json()["NodeNames"] == ["n1"]
            time.sleep(step_s)
        # Every slow client gets its answer once its body is complete.
        for connection in slow:
            answer = connection.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:80]
            assert b'"NodeNames":["n1"]' in answer
    finally:
        for connection in slow:
            connection.close()
    # Normal requests were served between every slow byte, not after the slow bodies:
    # each took far less than the slow bodies' own arrival time.
    assert len(latencies_s) == len(body)
    assert max(latencies_s) < 5.0
