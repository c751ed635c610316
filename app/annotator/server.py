"""The annotator's small HTTP server: ``/healthz``, ``/readyz`` and ``/metrics``.

Readiness does not depend on leadership. A follower with synced caches is a healthy
standby that takes over the moment the leader goes; marking it unready would only
make rollouts wait for a leader change that never comes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

READINESS_NOTE = (
    "readiness does not depend on leadership: a follower with synced node and pod "
    "caches is a healthy standby; only the leader writes annotations"
)

StatusSource = Callable[[], Mapping[str, Any]]
"""Returns the annotator's status; must include the booleans ``alive`` and ``ready``."""


def build_app(status: StatusSource, registry: CollectorRegistry) -> FastAPI:
    app = FastAPI(title="loadaware annotator", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        current = dict(status())
        return JSONResponse(current, status_code=200 if current.get("alive") else 503)

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        current = dict(status())
        current["note"] = READINESS_NOTE
        return JSONResponse(current, status_code=200 if current.get("ready") else 503)

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app
