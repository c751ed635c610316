"""The extender's HTTP surface.

``POST /filter`` and ``POST /prioritize`` sit on kube-scheduler's serial scheduling
cycle, so they are served by a lean ASGI handler in front of FastAPI: read the body
(bounded), call the verb, write the bytes. Everything else (health, readiness,
metrics, debug) is ordinary FastAPI.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.extender.service import Extender
from app.extender.verbs import BadRequest, ExtenderArgs, Outcome, parse_args

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
_JSON_HEADERS = [(b"content-type", b"application/json")]


class _BodyTooLarge(Exception):
    pass


class ExtenderApp:
    """ASGI app: the hot verbs directly, the rest through FastAPI."""

    def __init__(self, extender: Extender, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.extender = extender
        self.max_body_bytes = max_body_bytes
        verbs = extender.verbs
        self._routes: dict[str, tuple[str, Callable[[ExtenderArgs, Outcome], bytes]]] = {
            "/filter": ("filter", verbs.filter),
            "/prioritize": ("prioritize", verbs.prioritize),
        }
        self.api = build_api(extender)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            route = self._routes.get(scope["path"])
            if route is not None:
                if scope["method"] == "POST":
                    await self._serve_verb(route[0], route[1], receive, send)
                else:
                    message = f"{route[0]}: method {scope['method']} not allowed, use POST"
                    await _send(send, 405, _error(message), ((b"allow", b"POST"),))
                return
        await self.api(scope, receive, send)

    async def _read_body(self, receive: Receive) -> bytes:
        chunks = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ConnectionError("client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _serve_verb(
        self,
        verb: str,
        handler: Callable[[ExtenderArgs, Outcome], bytes],
        receive: Receive,
        send: Send,
    ) -> None:
        try:
            body = await self._read_body(receive)
        except _BodyTooLarge:
            await _send(send, 413, _error(f"body exceeds {self.max_body_bytes} bytes"))
            self.extender.record(verb, 413, 0.0, None)
            return
        except ConnectionError:
            return
        started = time.perf_counter()
        outcome = Outcome()
        try:
            payload = handler(parse_args(body), outcome)
        except BadRequest as error:
            await _send(send, 400, _error(f"{verb}: {error}"))
            self.extender.record(verb, 400, time.perf_counter() - started, None)
            return
        await _send(send, 200, payload)
        self.extender.record(verb, 200, time.perf_counter() - started, outcome)


def _error(message: str) -> bytes:
    return orjson.dumps({"error": message})


async def _send(
    send: Send, status: int, payload: bytes, extra_headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    headers = [*_JSON_HEADERS, (b"content-length", str(len(payload)).encode()), *extra_headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def build_api(extender: Extender) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await extender.start()
        try:
            yield
        finally:
            await extender.stop()

    api = FastAPI(
        title="loadaware scheduler extender",
        description="POST /filter and /prioritize take kube-scheduler ExtenderArgs.",
        lifespan=lifespan,
    )

    @api.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @api.get("/readyz")
    async def readyz() -> JSONResponse:
        ready, detail = extender.ready()
        return JSONResponse(
            {"ready": ready, "detail": detail, "mode": extender.mode},
            status_code=200 if ready else 503,
        )

    @api.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(extender.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @api.get("/debug/nodes")
    async def debug_nodes() -> Response:
        return Response(
            orjson.dumps(
                {
                    "policy": extender.table.policy.source,
                    "mode": extender.mode,
                    "verdict_index": extender.index_implementation,
                    "nodes": extender.debug_nodes(),
                },
                option=orjson.OPT_INDENT_2,
            ),
            media_type="application/json",
        )

    @api.get("/debug/nodes/{name}")
    async def debug_node(name: str) -> Response:
        view = extender.debug_node(name)
        if view is None:
            return JSONResponse(
                {"error": f"node {name!r} is not known to the extender", "mode": extender.mode},
                status_code=404,
            )
        return Response(
            orjson.dumps(view, option=orjson.OPT_INDENT_2), media_type="application/json"
        )

    return api
