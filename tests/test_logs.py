"""The log an operator reads (app/commandline/logs.py): one format for the app's lines and
uvicorn's, JSON when asked, the HTTP clients' per-request lines only at debug, and bad
requests to the verbs logged with their reason, at most a line per interval."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from app.commandline.logs import JsonFormatter, RateLimitedLog, configure_logging
from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.policy import default_policy
from tests.support import http_client
from tests.support.asgi_server import serve


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {n: logging.getLogger(n).level for n in ("httpx2", "httpx", "uvicorn.error")}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)


@pytest.mark.usefixtures("restore_logging")
@pytest.mark.parametrize(("level", "per_request_shown"), [("info", False), ("debug", True)])
def test_the_http_clients_per_request_lines_show_only_at_debug(
    level: str, per_request_shown: bool
) -> None:
    configure_logging(level)
    # lightkube and the Prometheus client go through httpx2, which logs each request
    # at INFO: a line per Node patch, thousands per sync on a big cluster.
    assert logging.getLogger("httpx2").isEnabledFor(logging.INFO) is per_request_shown
    assert logging.getLogger("app.annotator.sync").isEnabledFor(logging.INFO)


def test_json_lines_carry_time_level_logger_and_message() -> None:
    record = logging.LogRecord(
        "uvicorn.error", logging.INFO, __file__, 1, "Started %s", ("x",), None
    )
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "INFO"
    assert line["logger"] == "uvicorn.error"
    assert line["message"] == "Started x"
    assert line["time"].endswith("Z")


def test_a_flood_is_one_line_then_one_that_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limited = RateLimitedLog(logging.getLogger("test.flood"), interval_s=3600)
    with caplog.at_level(logging.WARNING, logger="test.flood"):
        for n in range(100):
            limited.warning("bad request %d", n)
    assert [r.getMessage() for r in caplog.records] == ["bad request 0"]
    limited._last_s -= 3600  # the interval has passed
    with caplog.at_level(logging.WARNING, logger="test.flood"):
        limited.warning("bad request %d", 100)
    assert caplog.records[-1].getMessage() == (
        "bad request 100 (and 99 more like it since the last such line)"
    )


def test_bad_requests_to_the_verbs_are_logged_with_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = ExtenderApp(Extender(default_policy(), mode="full-nodes"), max_body_bytes=1000)
    with caplog.at_level(logging.WARNING, logger="app.extender.http"), serve(app) as url:
        for _ in range(5):
            assert http_client.post(f"{url}/filter", content=b"{not json").status_code == 400
        assert http_client.post(f"{url}/prioritize", content=b"x" * 2000).status_code == 413
    lines = [r.getMessage() for r in caplog.records if r.name == "app.extender.http"]
    assert len(lines) == 1, lines  # five bad requests, one line (rate-limited)
    assert lines[0].startswith("bad request answered 400: filter: ")
