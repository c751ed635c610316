"""The small HTTP server every loop component runs: ``/healthz``, ``/readyz``, ``/metrics``.

Each component passes a status function (a mapping with the booleans ``alive`` and
``ready``) and its metrics registry. The server runs inside the component's event
loop and leaves signals to it, so that SIGTERM can release a Lease before exit. It
holds slow and crowding clients to ``HEALTH_LIMITS`` (connections.py), so that no pod
can starve the probes or the component's own descriptors.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from app.health.connections import HEALTH_LIMITS, ConnectionLimits, guarded_protocol


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


StatusSource = Callable[[], Mapping[str, Any]]
"""Returns the component's status; must include the booleans ``alive`` and ``ready``."""


def build_app(
    title: str, status: StatusSource, registry: CollectorRegistry, readiness_note: str = ""
) -> FastAPI:
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        current = dict(status())
        return JSONResponse(current, status_code=200 if current.get("alive") else 503)

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        current = dict(status())
        if readiness_note:
            current["note"] = readiness_note
        return JSONResponse(current, status_code=200 if current.get("ready") else 503)

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


class EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: the component owns SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def embedded_server(
    app: FastAPI, host: str, port: int, limits: ConnectionLimits = HEALTH_LIMITS
) -> EmbeddedServer:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        log_config=None,  # its lines go through the component's (app/commandline/logs.py)
        access_log=False,
        lifespan="off",
        http=guarded_protocol(limits),
        timeout_keep_alive=limits.idle_timeout_s,  # type: ignore[arg-type]
    )
    return EmbeddedServer(config)


async def serve(server: EmbeddedServer, port: int, sock: socket.socket | None = None) -> None:
    """Serve until cancelled (on ``sock`` when bound beforehand); raise if the server
    stops on its own."""
    try:
        await server.serve(sockets=[sock] if sock is not None else None)
    finally:
        server.should_exit = True
    raise RuntimeError(f"the health server on port {port} stopped; is the port in use?")
