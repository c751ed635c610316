"""The extender's listeners, with the limits uvicorn lacks for clients that stall.

uvicorn closes a keep-alive connection that idles after a response
(``timeout_keep_alive``), but nothing else: a client that connects and sends half a
request head, or a head and half a body, keeps its connection (and a file descriptor)
until it goes away, and nothing caps how many connections are open. ``guarded_protocol``
adds, per connection:

- a **header deadline**: from the connection's first byte (or from its opening, for a
  client that sends nothing), or from the first byte of the next request on a reused
  connection, the whole request head must arrive within ``header_timeout_s``, and
  within ``max_header_bytes``;
- a **body deadline**: once the head is in, the body must be complete within
  ``body_timeout_s`` plus a second's grace (so that the verbs' own 408 answer from
  app/extender/http.py, timed from the body's first part, wins on their paths);
  otherwise the connection is closed;
- a **connection limit**: a connection beyond ``max_connections`` is answered 503 and
  closed at once.

The idle timeout stays uvicorn's ``timeout_keep_alive``. These are the defaults that
suit kube-scheduler's client, which sends each request whole at once and keeps idle
connections for 90 s (docs/security.md, "Slow and stalled clients").
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

log = logging.getLogger(__name__)

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 10.0
# Longer than Go's http.Transport IdleConnTimeout (90 s, what kube-scheduler's extender
# client uses): the client, not the server, closes an idle connection, so a POST is never
# sent on a connection that the server is closing at the same moment.
DEFAULT_IDLE_TIMEOUT_S = 120.0
DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
BODY_GRACE_S = 1.0

_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: 46\r\n\r\n"
    b'{"error": "too many connections, retry later"}'
)
_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n"
    b"content-length: 0\r\n\r\n"
)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES

    def check(self) -> None:
        """Raise ValueError naming the flag whose value cannot work."""
        for flag, value in (
            ("--header-timeout", self.header_timeout_s),
            ("--body-timeout", self.body_timeout_s),
            ("--idle-timeout", self.idle_timeout_s),
        ):
            if not value > 0 or value == float("inf"):
                raise ValueError(f"{flag} must be a positive number of seconds, got {value}")
        if self.max_connections < 1:
            raise ValueError(f"--max-connections must be at least 1, got {self.max_connections}")


class _Guarded(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    limits: ConnectionLimits = ConnectionLimits()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._seen_cycle: Any = None
        self._reading_head = True
        if len(self.connections) >= self.limits.max_connections:
            # Not added to the server's connections: nothing else to undo.
            self._refused = True
            transport.write(_REFUSED)  # type: ignore[attr-defined]
            transport.close()
            log.warning(
                "refused a connection: %d open, the limit (--max-connections)",
                len(self.connections),
            )
            return
        self._refused = False
        super().connection_made(transport)
        self._arm(self.limits.header_timeout_s, "request head")

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        cycle = self.cycle
        between_requests = cycle is None or cycle.response_complete
        if not self._reading_head and between_requests and cycle is self._seen_cycle:
            # The first bytes of the next request on a kept-alive connection.
            self._reading_head = True
            self._head_bytes = 0
            self._arm(self.limits.header_timeout_s, "request head")
        if self._reading_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm()
            return
        if self.cycle is not None and self.cycle is not self._seen_cycle:
            self._seen_cycle = self.cycle
            self._reading_head = False
            self._head_bytes = 0
            if self.cycle.more_body:
                self._arm(self.limits.body_timeout_s + BODY_GRACE_S, "request body")
            else:
                self._disarm()
        elif self._reading_head and self._head_bytes > self.limits.max_header_bytes:
            self.transport.write(_HEAD_TOO_LARGE)
            self.transport.close()
            self._disarm()
        elif not self._reading_head and self.cycle is not None and not self.cycle.more_body:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._deadline is not None and self.cycle is not None and self.cycle.more_body:
            # Answered before the body was read (413, 405...): the body deadline still
            # runs, and uvicorn closes the connection when it ends.
            return
        self._disarm()

    def _arm(self, timeout_s: float, what: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(timeout_s, self._expired, what)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, what: str) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            log.info(
                "closing a connection from %s: its %s did not arrive in time",
                f"{self.client[0]}:{self.client[1]}" if self.client else "?",
                what,
            )
            self.transport.close()


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """An HTTP protocol class for uvicorn's ``http=`` that enforces ``limits``."""
    return type("GuardedHTTPProtocol", (_Guarded,), {"limits": limits})
