"""The extender's HTTP surface.

``POST /filter`` and ``POST /prioritize`` sit on kube-scheduler's serial scheduling
cycle, so they are served by a lean ASGI handler in front of FastAPI: read the body
(bounded in size and in time), call the verb, write the bytes. Everything else (health,
readiness, metrics, debug) is ordinary FastAPI.

The debug endpoints (``/debug/nodes``, ``/debug/estimates``, ``/docs``,
``/openapi.json``) list every node, its load and the pods behind its estimate, and the
largest pod estimates: ``loadaware extender`` serves them only with
``--debug-endpoints``, behind the same authentication as the verbs, and pages
``/debug/nodes``. ``health_api`` is the plain listener for probes and Prometheus
(``--health-port``): ``/healthz``, ``/readyz`` and ``/metrics`` only.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from app.commandline import RateLimitedLog
from app.extender.defaults import FULL_NODES_MAX_BODY_BYTES
from app.extender.extender import Extender
from app.extender.verbs import BadRequest, ExtenderArgs, Outcome, parse_args
from app.health import add_probe_routes, probe_status

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# A request body's size bounds the memory its parse takes: about 32 times the body for
# one made of tiny JSON objects (`{}` items: 16 MiB took the process from 83 to 585 MiB).
DEFAULT_MAX_BODY_BYTES = FULL_NODES_MAX_BODY_BYTES
# /debug/nodes answers at most this many nodes per page (?limit=, ?after= for the next).
DEBUG_PAGE_DEFAULT = 100
DEBUG_PAGE_MAX = 1000
_JSON_HEADERS = [(b"content-type", b"application/json")]
_CLOSE = ((b"connection", b"close"),)


class _BodyTooLarge(Exception):
    pass


class ExtenderApp:
    """ASGI app: the hot verbs directly, the rest through FastAPI."""

    def __init__(
        self,
        extender: Extender,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        *,
        body_timeout_s: float | None = None,
        debug_endpoints: bool = True,
    ) -> None:
        """``body_timeout_s``: a verb's body must arrive within it (else 408 and the
        connection closes); None waits as long as the client. ``debug_endpoints``:
        serve /debug/*, /docs and /openapi.json (the CLI turns them off by default)."""
        self.extender = extender
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        verbs = extender.verbs
        self._routes: dict[str, tuple[str, Callable[[ExtenderArgs, Outcome], bytes]]] = {
            "/filter": ("filter", verbs.filter),
            "/prioritize": ("prioritize", verbs.prioritize),
        }
        self.api = build_api(extender, debug_endpoints=debug_endpoints)
        # Bad requests are logged with their reason, at most one line per 10 s.
        self.bad_requests = RateLimitedLog(log)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self._routes.get(scope["path"]) if scope["type"] == "http" else None
        if route is None:
            await self.api(scope, receive, send)
            return
        verb, handler = route
        if scope["method"] != "POST":
            message = f"{verb}: method {scope['method']} not allowed, use POST"
            await _send(send, 405, _error(message), ((b"allow", b"POST"),))
            return
        # The verb is served here, not in a method of its own: a coroutine less on
        # kube-scheduler's cycle. Its body usually arrives with its head: the first
        # message is usually all of it, taken without arming a deadline or calling a
        # helper (each would cost more than the verb's routing).
        first = await receive()
        body = first.get("body", b"")
        if (
            first["type"] != "http.request"
            or first.get("more_body", False)
            or len(body) > self.max_body_bytes
        ):
            body = await self._body_or_answer(verb, first, receive, send)
            if body is None:
                return
        started = time.perf_counter()
        outcome = Outcome()
        try:
            payload = handler(parse_args(body), outcome)
        except BadRequest as error:
            await _send(send, 400, _error(f"{verb}: {error}"))
            self.extender.record(verb, 400, time.perf_counter() - started, None)
            self.bad_requests.warning("bad request answered 400: %s: %s", verb, error)
            return
        # As _send, written out: one coroutine less on kube-scheduler's cycle.
        content_length = (b"content-length", str(len(payload)).encode())
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [*_JSON_HEADERS, content_length],
            }
        )
        await send({"type": "http.response.body", "body": payload})
        self.extender.record(verb, 200, time.perf_counter() - started, outcome)

    async def _read_body(self, first: Message, receive: Receive) -> bytes:
        """The body of which ``first`` is the first message, when it did not come whole
        in it. A body that starts and does not finish in time gets 408 here; one that
        never starts is cut by the connection's own deadline (app/health/connections.py)."""
        chunk = self._chunk(first, 0)
        if not first.get("more_body", False):
            return chunk
        if self.body_timeout_s is None:
            return await self._read_rest(receive, [chunk], len(chunk))
        async with asyncio.timeout(self.body_timeout_s):
            return await self._read_rest(receive, [chunk], len(chunk))

    def _chunk(self, message: Message, size: int) -> bytes:
        if message["type"] == "http.disconnect":
            raise ConnectionError("client disconnected")
        chunk: bytes = message.get("body", b"")
        if size + len(chunk) > self.max_body_bytes:
            raise _BodyTooLarge
        return chunk

    async def _read_rest(self, receive: Receive, chunks: list[bytes], size: int) -> bytes:
        while True:
            message = await receive()
            chunk = self._chunk(message, size)
            size += len(chunk)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _body_or_answer(
        self, verb: str, first: Message, receive: Receive, send: Send
    ) -> bytes | None:
        """The body of a verb that did not come whole in its ``first`` message; None
        when it was answered instead (408 late, 413 too large) or the client left."""
        try:
            return await self._read_body(first, receive)
        except TimeoutError:
            message = f"{verb}: the body did not arrive within {self.body_timeout_s:g} s"
            await _send(send, 408, _error(message), _CLOSE)
            self.extender.record(verb, 408, 0.0, None)
            self.bad_requests.warning("bad request answered 408: %s", message)
        except _BodyTooLarge:
            message = f"{verb}: the body exceeds {self.max_body_bytes} bytes (--max-body-bytes)"
            await _send(send, 413, _error(message))
            self.extender.record(verb, 413, 0.0, None)
            self.bad_requests.warning("bad request answered 413: %s", message)
        except ConnectionError:
            pass
        return None


def _error(message: str) -> bytes:
    return orjson.dumps({"error": message})


async def _send(
    send: Send, status: int, payload: bytes, extra_headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    headers = [*_JSON_HEADERS, (b"content-length", str(len(payload)).encode()), *extra_headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def build_api(extender: Extender, *, debug_endpoints: bool = True) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await extender.start()
        try:
            yield
        finally:
            await extender.stop()

    if debug_endpoints:
        api = FastAPI(
            title="loadaware scheduler extender",
            description="POST /filter and /prioritize take kube-scheduler ExtenderArgs.",
            lifespan=lifespan,
        )
    else:
        api = FastAPI(
            title="loadaware scheduler extender",
            lifespan=lifespan,
            docs_url=None,
            redoc_url=None,
            openapi_url=None,
        )
    add_health_routes(api, extender)
    if debug_endpoints:
        add_debug_routes(api, extender)
    return api


def health_api(extender: Extender) -> FastAPI:
    """The plain listener for probes and Prometheus: no verbs, no debug, no lifespan."""
    api = FastAPI(
        title="loadaware extender health", docs_url=None, redoc_url=None, openapi_url=None
    )
    add_health_routes(api, extender)
    return api


def extender_status(extender: Extender) -> dict[str, Any]:
    """The status every component answers (``app.health.probe_status``), with the mode.
    Alive while the process answers: the extender's tasks (caches, the policy watcher)
    only make it unready when their data is stale."""
    ready, reason = extender.ready()
    caches = {"nodes": extender.node_cache, "pods": extender.pod_cache}
    return {
        **probe_status(
            "extender",
            stopped_tasks=[],
            not_ready_because="" if ready else reason,
            caches_synced={name: cache.synced for name, cache in caches.items() if cache},
        ),
        "mode": extender.mode,
    }


def add_health_routes(api: FastAPI, extender: Extender) -> None:
    add_probe_routes(api, lambda: extender_status(extender), extender.metrics.registry)


def add_debug_routes(api: FastAPI, extender: Extender) -> None:
    @api.get("/debug/nodes")
    async def debug_nodes(limit: str = str(DEBUG_PAGE_DEFAULT), after: str = "") -> Response:
        # Read as text, so that limit=abc gets the same 400 {"error"} as limit=0.
        count = int(limit) if limit.strip().isdigit() else 0
        if not 1 <= count <= DEBUG_PAGE_MAX:
            return JSONResponse(
                {"error": f"limit must be between 1 and {DEBUG_PAGE_MAX}, got {limit!r}"},
                status_code=400,
            )
        names = sorted(entry.name for entry in extender.table)
        start = bisect.bisect_right(names, after) if after else 0
        page = names[start : start + count]
        more = start + count < len(names)
        return Response(
            orjson.dumps(
                {
                    "policy": extender.table.policy.source,
                    "mode": extender.mode,
                    "verdict_index": extender.index_implementation,
                    "total": len(names),
                    "nodes": extender.debug.nodes(page),
                    # Pass it as ?after= for the next page; null on the last one.
                    "next": page[-1] if more and page else None,
                },
                option=orjson.OPT_INDENT_2,
            ),
            media_type="application/json",
        )

    @api.get("/debug/estimates")
    async def debug_estimates(limit: int = DEBUG_PAGE_DEFAULT) -> Response:
        """The largest pod estimates now, and whose they are (docs/security.md)."""
        if not 1 <= limit <= DEBUG_PAGE_MAX:
            return JSONResponse(
                {"error": f"limit must be between 1 and {DEBUG_PAGE_MAX}, got {limit}"},
                status_code=400,
            )
        return Response(
            orjson.dumps(extender.debug.estimates(limit), option=orjson.OPT_INDENT_2),
            media_type="application/json",
        )

    @api.get("/debug/nodes/{name}")
    async def debug_node(name: str) -> Response:
        view = extender.debug.node(name)
        if view is None:
            return JSONResponse(
                {"error": f"node {name!r} is not known to the extender", "mode": extender.mode},
                status_code=404,
            )
        return Response(
            orjson.dumps(view, option=orjson.OPT_INDENT_2), media_type="application/json"
        )
