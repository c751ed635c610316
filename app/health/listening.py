"""Binding a component's listening socket, which every command does before it loads
what serves (uvicorn, FastAPI, the component itself: about a second), so that a port in
use or a host that does not resolve is told at once. The standard library only."""

from __future__ import annotations

import socket

__all__ = [
    "CannotListen",
    "listen",
    "listen_for_health",
]


class CannotListen(Exception):
    """An address that cannot be listened on (a port in use, a host that does not
    resolve): bad configuration, reported in one line naming the flag."""


def listen(host: str, port: int, flags: tuple[str, str]) -> socket.socket:
    """A socket bound to ``host:port`` before anything is served or printed; ``flags``
    are the host's and the port's, which the error names."""
    host_flag, port_flag = flags
    try:
        family, kind, proto, _name, where = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as error:
        raise CannotListen(
            f"{host_flag} {host!r}: cannot listen there: {error.strerror or error}"
        ) from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
    except OSError as error:
        sock.close()
        raise CannotListen(
            f"{port_flag} {port}: cannot listen on {host}:{port}: {error.strerror or error}"
        ) from None
    return sock


def listen_for_health(host: str, port: int | None) -> socket.socket | None:
    """The health port's socket (``--health-host``, ``--health-port``), or None when the
    component serves no health port."""
    return None if port is None else listen(host, port, ("--health-host", "--health-port"))
