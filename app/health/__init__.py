"""The small HTTP server every component answers probes on: ``/healthz``, ``/readyz``,
``/metrics`` (``server``), held to connection limits against slow and crowding
clients (``connections``, which the extender's verb listener uses too; the numbers
themselves are ``limits``).

The limits load at once; the server and the protocol (uvicorn, FastAPI: a few tenths of a
second) on first use, so that a command that stops at a bad flag, or prints its help,
never pays for them."""

from __future__ import annotations

import importlib
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

if TYPE_CHECKING:
    from app.health.connections import guarded_protocol
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

# Each name loaded on first use, with its module (PEP 562).
_LOADED_ON_USE = {
    name: module
    for module, names in {
        "connections": ("guarded_protocol",),
        "server": (
            "CannotListen",
            "EmbeddedServer",
            "add_probe_routes",
            "build_app",
            "embedded_server",
            "listen",
            "probe_status",
            "serve",
        ),
    }.items()
    for name in names
}


def __getattr__(name: str) -> object:
    if name not in _LOADED_ON_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LOADED_ON_USE[name]}"), name)
    globals()[name] = value  # once: the next lookup finds it here
    return value
