"""An operator can see which verdict index answers: start-up log, /debug/nodes, /metrics."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.extender.index import new_verdict_index
from app.policy import default_policy


def get(app: ExtenderApp, path: str) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            return await client.get(path)

    return asyncio.run(go())


async def start_and_stop(extender: Extender) -> None:
    await extender.start()
    await extender.stop()


@pytest.mark.parametrize(
    ("implementation", "level", "log_text"),
    [
        ("native", logging.INFO, "answered by the native verdict index"),
        ("python", logging.WARNING, "answered by the pure-Python verdict index"),
    ],
)
def test_the_index_in_use_is_logged_listed_and_exported(
    implementation: str, level: int, log_text: str, caplog: pytest.LogCaptureFixture
) -> None:
    extender = Extender(default_policy(), index=new_verdict_index(implementation))
    app = ExtenderApp(extender)
    with caplog.at_level(logging.INFO, logger="app.extender.extender"):
        asyncio.run(start_and_stop(extender))
    assert [r.levelno for r in caplog.records if log_text in r.getMessage()] == [level]
    assert get(app, "/debug/nodes").json()["verdict_index"] == implementation
    exported = f'loadaware_extender_verdict_index_info{{implementation="{implementation}"}} 1.0'
    assert exported in get(app, "/metrics").text.splitlines()
