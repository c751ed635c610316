"""The small HTTP server every component answers probes on: ``/healthz``, ``/readyz``,
``/metrics`` (``server``), held to connection limits against slow and crowding
clients (``connections``, which the extender's verb listener uses too)."""

from app.health.connections import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    ConnectionLimits,
    guarded_protocol,
)
from app.health.server import (
    CannotListen,
    EmbeddedServer,
    add_probe_routes,
    build_app,
    embedded_server,
    listen,
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
    "probe_status",
    "serve",
]
