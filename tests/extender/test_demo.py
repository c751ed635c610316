"""``loadaware demo``: a fixed built-in cluster that requests cannot change."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest

from app.extender.demo import DemoExtender, demo_node_names
from app.extender.http import ExtenderApp
from tests.extender.nodes import fixture, hot_cpu, with_annotations


def call(app: ExtenderApp, method: str, path: str, body: Any = None) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
            return await client.request(method, path, json=body)

    return asyncio.run(go())


def verdicts(app: ExtenderApp) -> dict[str, str]:
    listing = call(app, "GET", "/debug/nodes").json()
    return {node["name"]: node["verdict"] for node in listing["nodes"]}


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_full_node_objects_are_judged_but_not_added_to_the_demo_cluster(verb: str) -> None:
    app = ExtenderApp(DemoExtender())
    built = verdicts(app)
    body = fixture(f"{verb}-fullnodes.json")
    # n2 carries a hot CPU; n1 takes the name of a demo node that is overloaded.
    body = with_annotations(body, {"n2": hot_cpu()})
    body["Nodes"]["items"][0]["metadata"]["name"] = "hot-cpu"

    response = call(app, "POST", f"/{verb}", body)

    assert response.status_code == 200, response.text
    answer = response.json()
    if verb == "filter":
        # Judged by the annotations the objects carry, as in full-nodes mode.
        assert answer["FailedAndUnresolvableNodes"] == {
            "n2": "Load[cpu_usage_avg_5m] is too high (> 0.65)"
        }
        assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["hot-cpu", "n3"]
    else:
        assert {item["Host"] for item in answer} == {"hot-cpu", "n2", "n3"}
    assert verdicts(app) == built
    assert sorted(built) == sorted(demo_node_names())
    assert built["hot-cpu"] == "overloaded"


def test_unknown_node_names_get_advice_that_fits_the_demo(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = ExtenderApp(DemoExtender())
    with caplog.at_level(logging.WARNING, logger="app.extender.extender"):
        response = call(app, "POST", "/prioritize", {"Pod": {}, "NodeNames": ["cool-1", "n9"]})
    assert response.status_code == 200
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("1 of 2 node(s) in a request are unknown to the extender")
    assert "The demo cluster has only cool-1, cool-2, hot-cpu" in warning
    assert "--node-cache" not in warning
