"""The small HTTP server every component answers probes on: ``/healthz``, ``/readyz``,
``/metrics`` (``server``), held to connection limits against slow and crowding
clients (``connections``, which the extender's verb listener uses too; the numbers
themselves are ``limits``).

The limits load at once; the server and the protocol (uvicorn, FastAPI: a few tenths of a
second) on first use, so that a command that stops at a bad flag, or prints its help,
never pays for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.health.limits import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    ConnectionLimits,
)
from app.health.listening import CannotListen, listen, listen_for_health
from app.objects import load_on_use

if TYPE_CHECKING:
    from app.health.connections import guarded_protocol
    from app.health.server import (
        EmbeddedServer,
        add_probe_routes,
        build_app,
        embedded_server,
        probe_status,
        serve,
    )

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HANDSHAKE_TIMEOUT_S",
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_IDLE_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_CONNECTIONS_PER_CLIENT",
    "CannotListen",
    "ConnectionLimits",
    "EmbeddedServer",
    "add_probe_routes",
    "build_app",
    "embedded_server",
    "guarded_protocol",
    "listen",
    "listen_for_health",
    "probe_status",
    "serve",
]

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_on_use(
    __name__,
    {
        "connections": ("guarded_protocol",),
        "server": (
            "EmbeddedServer",
            "add_probe_routes",
            "build_app",
            "embedded_server",
            "probe_status",
            "serve",
        ),
    },
    globals(),
)
