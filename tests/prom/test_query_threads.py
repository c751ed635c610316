"""Prometheus queries run in daemon threads of their own: a cancelled caller does not
wait for one (Ctrl-C waited out a hung query), and their number is bounded."""

from __future__ import annotations

import asyncio
import threading

import pytest

from app.prom import client
from app.prom.client import PrometheusQueryError, in_daemon_thread


def test_the_answer_and_the_error_of_the_call_reach_the_caller() -> None:
    assert asyncio.run(in_daemon_thread(lambda: 42)) == 42

    def broken() -> int:
        raise ValueError("bad answer")

    with pytest.raises(ValueError, match="bad answer"):
        asyncio.run(in_daemon_thread(broken))


def test_a_cancelled_caller_and_asyncio_run_do_not_wait_for_the_thread() -> None:
    release = threading.Event()

    async def cancelled() -> None:
        task = asyncio.ensure_future(in_daemon_thread(lambda: release.wait(600)))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(cancelled())  # returns: asyncio.to_thread's executor was waited for
    finally:
        release.set()


def test_past_the_bound_a_query_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "_query_threads", threading.BoundedSemaphore(2))
    release = threading.Event()

    async def three() -> list[object]:
        hung = [asyncio.ensure_future(in_daemon_thread(lambda: release.wait(600)))
                for _ in range(2)]  # fmt: skip
        await asyncio.sleep(0.05)
        with pytest.raises(PrometheusQueryError, match="still unanswered"):
            await in_daemon_thread(lambda: 1)
        release.set()
        answers: list[object] = list(await asyncio.gather(*hung))
        answers.append(await in_daemon_thread(lambda: 1))  # a slot is free again
        return answers

    assert asyncio.run(three()) == [True, True, 1]
