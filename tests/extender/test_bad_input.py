"""Bad requests get a 400 with a clear JSON error, never a 500 and never a crash."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import build_parser
from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.extender.main import max_body_bytes
from app.policy import default_policy
from tests.extender.nodes import hot_cpu

POD: dict[str, Any] = {"metadata": {"name": "p", "namespace": "default"}}


def make_app(max_body_bytes: int = 1 << 20) -> ExtenderApp:
    extender = Extender(default_policy(), mode="test")
    extender.table.upsert("n1", hot_cpu())
    return ExtenderApp(extender, max_body_bytes=max_body_bytes)


def call(app: ExtenderApp, verb: str, content: bytes) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            return await client.post(f"/{verb}", content=content)

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "body is not valid JSON"),
        (b"", "body is not valid JSON"),
        (b"[]", "body must be a JSON object"),
        (b'{"NodeNames": ["n1"]}', '"Pod" must be a Pod object'),
        (b'{"Pod": [], "NodeNames": ["n1"]}', '"Pod" must be a Pod object'),
        (b'{"Pod": {}, "NodeNames": "n1"}', '"NodeNames" must be a list of node names'),
        (b'{"Pod": {}, "NodeNames": [1, 2]}', '"NodeNames" must be a list of node names'),
        (b'{"Pod": {}, "Nodes": null, "NodeNames": null}', 'neither "NodeNames" nor "Nodes"'),
        (b'{"Pod": {}, "Nodes": {"items": {}}}', '"Nodes" must be a NodeList'),
        (b'{"Pod": {}, "Nodes": {"items": [{}]}}', '"Nodes.items[0]" has no metadata.name'),
        (
            b'{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a", "annotations": []}}]}}',
            'metadata.annotations" must be an object',
        ),
    ],
)
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_malformed_body_is_a_400_that_says_why(verb: str, body: bytes, message: str) -> None:
    response = call(make_app(), verb, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error.startswith(f"{verb}: ")
    assert message in error


def test_huge_body_is_refused_with_413() -> None:
    body = orjson.dumps({"Pod": POD, "NodeNames": ["n" * 100] * 200})
    response = call(make_app(max_body_bytes=4096), "filter", body)
    assert response.status_code == 413
    error = response.json()["error"]
    assert error.startswith("filter: ")  # as every other error names its verb
    assert "exceeds 4096 bytes" in error


def test_garbage_annotation_values_fail_open() -> None:
    node = {
        "metadata": {
            "name": "g",
            "annotations": {"cpu_usage_avg_5m": 0.99, "mem_usage_avg_5m": "junk"},
        }
    }
    body = orjson.dumps({"Pod": POD, "Nodes": {"items": [node]}})
    response = call(make_app(), "filter", body)
    assert response.status_code == 200
    assert response.json()["Nodes"]["items"] == [node]


def test_unknown_node_names_pass_and_are_scored_as_without_data() -> None:
    body = orjson.dumps({"Pod": POD, "NodeNames": ["n1", "ghost"]})
    app = make_app()
    assert call(app, "filter", body).json()["NodeNames"] == ["ghost"]
    scores = call(app, "prioritize", body).json()
    assert [s["Host"] for s in scores] == ["n1", "ghost"]
    unknown = app.extender.metrics.registry.get_sample_value(
        "loadaware_extender_unknown_nodes_total"
    )
    assert unknown == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["Pod", "Nodes", "NodeNames", "items", "metadata", "name", "annotations"]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=json_values, verb=st.sampled_from(["filter", "prioritize"]))
def test_any_json_gets_200_or_400_never_500(document: Any, verb: str) -> None:
    response = call(make_app(), verb, json.dumps(document).encode())
    assert response.status_code in (200, 400)
    assert isinstance(response.json(), dict | list)


@pytest.mark.parametrize(
    ("flags", "limit"),
    [
        ([], 4 * 1024 * 1024),  # node cache: one pod and node names
        (["--no-node-cache"], 64 * 1024 * 1024),  # full nodes: every Node in the body
        (["--no-node-cache", "--max-body-bytes", "1000"], 1000),
        (["--max-body-bytes", "100000000"], 100_000_000),
    ],
)
def test_the_body_limit_defaults_to_the_mode_and_the_flag_wins(
    flags: list[str], limit: int
) -> None:
    assert max_body_bytes(build_parser().parse_args(["extender", *flags])) == limit
