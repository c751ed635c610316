"""The probes every component answers, and the small server the loop components run:
``/healthz``, ``/readyz``, ``/metrics``.

One implementation and one payload for every component (the extender adds these routes
to its own listeners; the annotator and the descheduler serve them with
``build_app``)::

    {"component", "alive", "stopped_tasks", "ready", "not_ready_because",
     "caches_synced": {cache: bool}, ...the component's own fields}

``/healthz`` answers 200 while ``alive`` (no background task has stopped), else 503;
``/readyz`` 200 while ``ready`` (every cache is current), else 503 with the reason.
The server runs inside the component's event loop and leaves signals to it, so that
SIGTERM can release a Lease before exit. It holds slow and crowding clients to
``HEALTH_CONNECTION_LIMITS`` (connections.py), so that no pod can starve the probes or the
component's own descriptors.
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

from app.health.connection_limits import HEALTH_CONNECTION_LIMITS, ConnectionLimits
from app.health.connections import guarded_protocol

__all__ = [
    "EmbeddedServer",
    "add_probe_routes",
    "build_app",
    "embedded_server",
    "probe_status",
    "serve",
]

StatusSource = Callable[[], Mapping[str, Any]]
"""Returns the component's status (``probe_status``, then the component's own fields)."""


def probe_status(
    component: str,
    *,
    stopped_tasks: list[str],
    not_ready_because: str,
    caches_synced: Mapping[str, bool],
) -> dict[str, Any]:
    """The fields every component's status starts with: alive while no background task
    has stopped, ready while nothing makes it untrustworthy (``not_ready_because`` is
    empty)."""
    return {
        "component": component,
        "alive": not stopped_tasks,
        "stopped_tasks": stopped_tasks,
        "ready": not not_ready_because,
        "not_ready_because": not_ready_because or None,
        "caches_synced": dict(caches_synced),
    }


def add_probe_routes(
    api: FastAPI, status: StatusSource, registry: CollectorRegistry, readiness_note: str = ""
) -> None:
    """``/healthz``, ``/readyz`` and ``/metrics`` on ``api``: the one implementation."""

    @api.get("/healthz")
    async def healthz() -> JSONResponse:
        current = dict(status())
        return JSONResponse(current, status_code=200 if current.get("alive") else 503)

    @api.get("/readyz")
    async def readyz() -> JSONResponse:
        current = dict(status())
        if readiness_note:
            current["note"] = readiness_note
        return JSONResponse(current, status_code=200 if current.get("ready") else 503)

    @api.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def build_app(
    title: str, status: StatusSource, registry: CollectorRegistry, readiness_note: str = ""
) -> FastAPI:
    """The health server's app: the probe routes and nothing else."""
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    add_probe_routes(app, status, registry, readiness_note)
    return app


class EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: the component owns SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def embedded_server(
    app: FastAPI, host: str, port: int, limits: ConnectionLimits = HEALTH_CONNECTION_LIMITS
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
        ws="none",  # no WebSockets: not served, and wsproto not loaded at start
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
