"""Logging for every command: one format for the app's lines and uvicorn's, as text or
as JSON (``--log-format json``, one object a line, for log pipelines).

The HTTP clients (the Kubernetes client and Prometheus' go through httpx2) log a line
per request at INFO, which on a big cluster is thousands of lines a sync: those lines
are shown at ``--log-level debug`` only; the components log their own summaries at info.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Final

__all__ = ["LOG_FORMATS", "RateLimitedLog", "configure_logging"]

LOG_FORMATS: Final = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Loggers that log a line per HTTP request.
PER_REQUEST_LOGGERS: Final = ("httpx", "httpx2", "httpcore", "httpcore2")
# uvicorn's loggers: with log_config=None they keep no handler of their own and their
# lines reach ours through the root logger.
UVICORN_LOGGERS: Final = ("uvicorn", "uvicorn.error", "uvicorn.access")


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message"}`` (and ``"exception"``), one line each."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, log_format: str = "text") -> None:
    """Send every line, the app's and uvicorn's, to stderr in one format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.propagate = True
    quiet = logging.DEBUG if level.lower() == "debug" else logging.WARNING
    for name in PER_REQUEST_LOGGERS:
        logging.getLogger(name).setLevel(quiet)


class RateLimitedLog:
    """At most one line per ``interval_s`` for a noisy kind of event, with the number of
    events it stands for, so that a flood of bad requests cannot flood the log."""

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._last_s = -float("inf")
        self._suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        now_s = time.monotonic()
        if now_s - self._last_s < self._interval_s:
            self._suppressed += 1
            return
        self._last_s = now_s
        if self._suppressed:
            message += " (and %d more like it since the last such line)"
            args = (*args, self._suppressed)
        self._suppressed = 0
        self._logger.warning(message, *args)
