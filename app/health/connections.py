"""Every loadaware listener's limits for clients that stall or crowd it out.

uvicorn closes a keep-alive connection that idles after a response
(``timeout_keep_alive``), but nothing else: a client that connects and sends half a
request head, or a head and half a body, keeps its connection (and a file descriptor)
until it goes away, and nothing caps how many connections are open, nor how many one
client holds. ``guarded_protocol`` adds, per connection:

- a **connection limit**, counted from the TCP accept (so a connection still in its TLS
  handshake counts): a connection beyond ``max_connections`` open ones, or beyond
  ``max_connections_per_client`` from one address, is answered 503 (plain HTTP) or just
  closed (TLS) at once. One client cannot take the budget of the others: the kubelet's
  probes and kube-scheduler keep theirs while another pod holds its share;
- a **TLS handshake deadline** (``handshake_timeout_s``) when the listener serves TLS:
  the handshake is done here, with ``loop.start_tls``, not by uvicorn, so that the
  connection is counted while it lasts and cut when it stalls;
- a **header deadline**: from the connection's first byte (or from its opening, for a
  client that sends nothing), or from the first byte of the next request on a reused
  connection, the whole request head must arrive within ``header_timeout_s``, and
  within ``max_header_bytes`` (431 otherwise, however the head is split into reads);
- a **body deadline**: once the head is in, the body must be complete within
  ``body_timeout_s`` plus a second's grace (so that the extender verbs' own 408 answer,
  timed from the body's first part, wins on their paths); otherwise the connection is
  closed.

The idle timeout stays uvicorn's ``timeout_keep_alive``. ``EXTENDER_CONNECTION_LIMITS`` suit
kube-scheduler's client, which sends each request whole at once and keeps idle
connections for 90 s; ``HEALTH_CONNECTION_LIMITS`` suit the annotator's and the descheduler's own
health listeners, which only the kubelet and Prometheus call (docs/security.md, "Slow
and stalled clients", "Crowding out the probes").
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any, ClassVar

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from app.health.connection_limits import (
    BODY_GRACE_S,
    EXTENDER_CONNECTION_LIMITS,
    ConnectionLimits,
)

__all__ = [
    "guarded_protocol",
]

log = logging.getLogger(__name__)

_HEAD_END = b"\r\n\r\n"

_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: 46\r\n\r\n"
    b'{"error": "too many connections, retry later"}'
)
_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n"
    b"content-length: 0\r\n\r\n"
)


class _Budget:
    """Open connections of one listener, in all and per client address."""

    def __init__(self) -> None:
        self.total = 0
        self.by_client: dict[str, int] = {}

    def admit(self, client: str, limits: ConnectionLimits) -> str | None:
        """Count the connection in, or say which limit refuses it."""
        if self.total >= limits.max_connections:
            return f"{self.total} open, the limit (--max-connections)"
        held = self.by_client.get(client, 0)
        if held >= limits.max_connections_per_client:
            return f"{held} open from {client}, the limit (--max-connections-per-client)"
        self.total += 1
        self.by_client[client] = held + 1
        return None

    def release(self, client: str) -> None:
        self.total -= 1
        held = self.by_client.pop(client) - 1
        if held:
            self.by_client[client] = held


class _Handshaking(asyncio.Protocol):
    """Holds what arrives between the TLS handshake's end and the HTTP protocol's start
    (a client may send its request in the same flight as its last handshake message)."""

    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.eof = False
        self.lost = False
        self.exc: Exception | None = None

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def eof_received(self) -> bool | None:
        self.eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.exc = exc


class _Guarded(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    limits: ClassVar[ConnectionLimits] = EXTENDER_CONNECTION_LIMITS
    tls: ClassVar[ssl.SSLContext | None] = None
    budget: ClassVar[_Budget]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._head_tail = b""
        self._seen_cycle: Any = None
        self._reading_head = True
        self._counted_as: str | None = None
        peer = transport.get_extra_info("peername")
        client = str(peer[0]) if peer else "?"
        refusal = self.budget.admit(client, self.limits)
        if refusal is not None:
            if self.tls is None:
                transport.write(_REFUSED)  # type: ignore[attr-defined]
            transport.close()
            log.warning("refused a connection from %s: %s", client, refusal)
            return
        self._counted_as = client
        if self.tls is None:
            self._start_http(transport)
        else:
            self._early = bytearray()
            self._handshake = self.loop.create_task(self._start_tls(transport))
            # The task's first step hands the socket to TLS and schedules the TLS
            # protocol's start; the hand-over runs after that.
            self.loop.call_soon(self.loop.call_soon, self._hand_over_early, transport)

    def _hand_over_early(self, transport: asyncio.BaseTransport) -> None:
        """Give the TLS protocol the bytes that reached this one before it took over
        (the start of the client's hello: uvloop reads as soon as a connection opens)."""
        early = bytes(self._early)
        self._early.clear()
        tls: Any = transport.get_protocol()
        if not early or tls is self or transport.is_closing():
            return
        while early and hasattr(tls, "get_buffer"):  # asyncio's and uvloop's SSLProtocol
            buffer = memoryview(tls.get_buffer(len(early)))
            size = min(len(buffer), len(early))
            buffer[:size] = early[:size]
            tls.buffer_updated(size)
            early = early[size:]
        if early:
            tls.data_received(early)

    async def _start_tls(self, transport: asyncio.BaseTransport) -> None:
        pending = _Handshaking()
        try:
            secure = await self.loop.start_tls(
                transport,
                pending,
                self.tls,
                server_side=True,
                ssl_handshake_timeout=self.limits.handshake_timeout_s,
            )
        except Exception as error:  # a failed or stalled handshake, whatever its cause
            log.info("closing a connection from %s: TLS handshake: %r", self._counted_as, error)
            transport.close()
            self._release()
            return
        self._start_http(secure)
        secure.set_protocol(self)
        for data in pending.data:
            if secure.is_closing():
                break
            self.data_received(data)
        if pending.eof:
            self.eof_received()
        if pending.lost:
            self.connection_lost(pending.exc)

    def _start_http(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm(self.limits.header_timeout_s, "request head")

    def _release(self) -> None:
        if self._counted_as is not None:
            self.budget.release(self._counted_as)
            self._counted_as = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted_as is None:
            return
        self._release()
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._counted_as is None:
            return
        if self.tls is not None and self.transport is None:
            self._early += data  # before the handshake took the socket over
            return
        cycle = self.cycle
        between_requests = cycle is None or cycle.response_complete
        if not self._reading_head and between_requests and cycle is self._seen_cycle:
            # The first bytes of the next request on a kept-alive connection.
            self._reading_head = True
            self._head_bytes = 0
            self._head_tail = b""
            self._arm(self.limits.header_timeout_s, "request head")
        if self._reading_head and self._head_too_large(data):
            self.transport.write(_HEAD_TOO_LARGE)
            self.transport.close()
            self._disarm()
            return
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm()
            return
        if self.cycle is not None and self.cycle is not self._seen_cycle:
            self._seen_cycle = self.cycle
            self._reading_head = False
            if self.cycle.more_body:
                self._arm(self.limits.body_timeout_s + BODY_GRACE_S, "request body")
            else:
                self._disarm()
        elif not self._reading_head and self.cycle is not None and not self.cycle.more_body:
            self._disarm()

    def _head_too_large(self, data: bytes) -> bool:
        """Whether the head, with ``data``, exceeds ``max_header_bytes``: counted up to
        its blank line when it ends in ``data`` (a body after it does not count), and
        whole while it goes on; checked before the parser sees it, whatever the reads."""
        window = self._head_tail + data
        end = window.find(_HEAD_END)
        if end < 0:
            self._head_bytes += len(data)
            self._head_tail = window[-(len(_HEAD_END) - 1) :]
        else:
            self._head_bytes += end + len(_HEAD_END) - len(self._head_tail)
        return self._head_bytes > self.limits.max_header_bytes

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


def guarded_protocol(
    limits: ConnectionLimits, tls: ssl.SSLContext | None = None
) -> type[asyncio.Protocol]:
    """An HTTP protocol class for uvicorn's ``http=`` that enforces ``connection_limits``, with a
    connection budget of its own: make one per listener. With ``tls``, it serves HTTPS
    itself (leave uvicorn's ``ssl_*`` settings unset)."""
    return type(
        "GuardedHTTPProtocol", (_Guarded,), {"limits": limits, "tls": tls, "budget": _Budget()}
    )
