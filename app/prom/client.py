"""Instant queries against Prometheus or anything that speaks its HTTP API.

Thanos Query, Mimir and VictoriaMetrics answer ``/api/v1/query`` the same way, so the
only differences a deployment needs are in the connection: a bearer token that the
platform rotates, basic auth, a private CA, and extra headers such as Mimir's
``X-Scope-OrgID``. All of that lives here; callers get plain samples.

prometheus-api-client's ``PrometheusConnect`` sends the queries and decodes the JSON;
it is synchronous (requests): call ``query`` from a worker thread. What reads each
answer off the wire is ours (issue 42, point 5): ``BoundedAnswers``, the transport
adapter mounted on the session in place of the library's, reads the body itself before
requests or the library see it: at most ``MAX_ANSWER_BYTES`` after decompression (a
larger answer, or one whose Content-Length says so, is refused with reason
``too_large`` before it is decoded), an error answer only to ``MAX_ERROR_BYTES``, and
the whole answer within ``--query-timeout``, checked between the chunks of the body
(each read waits at most the timeout too), so a query abandoned by its caller stops
downloading in its thread within twice the timeout instead of trickling on for ever.
A series' points and a sample whose timestamp is not a finite number are dropped
(``parse_matrix``, ``parse_vector``), and a range answer past the caller's sample bound
is refused (``max_samples``).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import logging
import math
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, TypeVar

import requests
import requests.auth
import urllib3
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from app.prom.queries import build_query as build_query
from app.prom.settings import PrometheusSettings, redact_url

__all__ = [
    "BAD_QUERY",
    "InstantQuery",
    "InvalidSample",
    "PromSample",
    "PrometheusQueryError",
    "PrometheusSource",
    "RangeSeries",
    "invalid_sample",
]

log = logging.getLogger(__name__)

# The largest answer read: a sample is about 250 bytes with its labels, so 64 MiB holds
# an instant answer for about 250,000 pods, and capture's range answers (at most
# MAX_SAMPLES_PER_ANSWER samples by design) with room to spare.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
# An answer other than 200 is read to this much and cut: its start says what went
# wrong, and the rest would only grow the exception that carries it.
MAX_ERROR_BYTES = 64 * 1024
_CHUNK_BYTES = 256 * 1024
TOO_LARGE = "too_large"  # the reason of an answer past MAX_ANSWER_BYTES or the sample bound


@dataclass(frozen=True, slots=True)
class PromSample:
    """One series of an instant-vector result."""

    labels: Mapping[str, str]
    value: float  # may be NaN or ±Inf: Prometheus sends those, and callers decide
    timestamp_s: float


class InvalidSample(StrEnum):
    """Why a sample value cannot be a usage: Prometheus sends these, a broken rule makes them."""

    NAN = "nan"
    INFINITE = "infinite"
    NEGATIVE = "negative"


def invalid_sample(value: float) -> InvalidSample | None:
    """Why ``value`` is no usable usage, or None when it is a finite number >= 0."""
    if math.isnan(value):
        return InvalidSample.NAN
    if math.isinf(value):
        return InvalidSample.INFINITE
    if value < 0:
        return InvalidSample.NEGATIVE
    return None


class InstantQuery(Protocol):
    """Anything that answers an instant query: ``PrometheusSource``, or a test double."""

    async def aquery(self, promql: str, at_s: float | None = None) -> list[PromSample]: ...


BAD_QUERY = "bad_query"  # the reason of a query Prometheus answered as invalid PromQL


class PrometheusQueryError(Exception):
    """A query that produced no usable answer. ``reason`` is a short label for metrics."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _read_secret(path: Path, what: str) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise PrometheusQueryError(
            "credentials",
            f"cannot read the Prometheus {what} file {path}: {error.strerror or error}; "
            "check the Secret is mounted at that path",
        ) from None
    if not text:
        raise PrometheusQueryError(
            "credentials", f"the Prometheus {what} file {path} is empty; check the Secret"
        )
    return text


class BearerTokenFile(requests.auth.AuthBase):
    """Sends the token from a file, read at every request so that rotation needs no restart.

    Kubernetes projected tokens and Vault agents rewrite the file in place; a query
    every few minutes makes re-reading cheaper than watching the file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = "Bearer " + _read_secret(self.path, "bearer token")
        return request


class BasicAuthPasswordFile(requests.auth.AuthBase):
    """Basic auth whose password comes from a file, re-read like the bearer token."""

    def __init__(self, username: str, password_file: Path) -> None:
        self.username = username
        self.password_file = password_file

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        password = _read_secret(self.password_file, "password")
        prepared: requests.PreparedRequest = requests.auth.HTTPBasicAuth(self.username, password)(
            request
        )
        return prepared


class BoundedAnswers(HTTPAdapter):
    """requests' transport adapter that reads each answer itself, bounded (module doc).

    ``HTTPAdapter.send`` returns the response with its body unread (urllib3's, not
    preloaded); this reads it as a stream, and requests, then prometheus-api-client,
    get the bytes read (``content``, ``json()``). Every answer of the session goes
    through here, a redirect's included.
    """

    def __init__(self, shown_url: str, timeout_s: float, max_retries: Retry) -> None:
        super().__init__(max_retries=max_retries)
        self.shown_url = shown_url  # the URL as error messages may show it (redacted)
        self.timeout_s = timeout_s
        self.max_answer_bytes = MAX_ANSWER_BYTES

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float, float] | tuple[float, None] | None = None,
        verify: bool | str = True,
        cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        deadline = time.monotonic() + self.timeout_s
        response = super().send(request, stream, timeout, verify, cert, proxies)
        try:
            body, whole = self._read(response, deadline)
        except BaseException:
            response.close()  # hangs up: the server's writes fail and it stops
            raise
        if whole:
            response.raw.release_conn()  # read to its end: the connection serves again
        else:
            response.close()  # an error answer cut short: the rest is never read
        # requests has no public way to give a response its body: ``content`` returns
        # ``_content`` once that is set (requests 2.x) and reads ``raw`` only while it
        # is not. Replacing ``raw`` instead would lose what requests takes from it (the
        # cookies, the connection). tests/prom/test_hostile_prometheus.py pins this.
        response._content = body
        return response

    def _read(self, response: requests.Response, deadline: float) -> tuple[bytes, bool]:
        """The decoded body, and whether it was read to its end (an error answer is cut
        at MAX_ERROR_BYTES); PrometheusQueryError past the cap, requests' errors else."""
        ok = response.status_code == 200
        declared = response.headers.get("Content-Length", "")
        if ok and declared.isdigit() and int(declared) > self.max_answer_bytes:
            raise self._too_large(f" (it declares {int(declared):,} bytes)")
        limit = self.max_answer_bytes if ok else MAX_ERROR_BYTES
        chunks: list[bytes] = []
        size = 0
        while chunk := _read1(response):
            # read1: what has arrived, so that a trickle is checked against the deadline
            # byte by byte; decoded, so a compressed answer counts in full.
            size += len(chunk)
            if size > limit:
                if ok:
                    raise self._too_large("")
                chunks.append(chunk[: len(chunk) - (size - limit)])
                return b"".join(chunks), False
            if time.monotonic() > deadline:
                raise requests.exceptions.ReadTimeout(
                    "the whole answer took longer than the timeout", response=response
                )
            chunks.append(chunk)
        return b"".join(chunks), True

    def _too_large(self, declared: str) -> PrometheusQueryError:
        return PrometheusQueryError(
            TOO_LARGE,
            f"Prometheus at {self.shown_url} sent an answer larger than the "
            f"{self.max_answer_bytes // 2**20} MiB loadaware reads{declared}; narrow the "
            "query (a smaller range or step, a more selective matcher)",
        )


def _read1(response: requests.Response) -> bytes:
    """One decoded chunk of the body; urllib3's errors as requests' (as ``iter_content``,
    but a stall inside the body is a timeout)."""
    try:
        return response.raw.read1(_CHUNK_BYTES, decode_content=True)
    except urllib3.exceptions.ReadTimeoutError as error:
        raise requests.exceptions.ReadTimeout(error, response=response) from None
    except urllib3.exceptions.SSLError as error:
        raise requests.exceptions.SSLError(error, response=response) from None
    except urllib3.exceptions.DecodeError as error:
        raise requests.exceptions.ContentDecodingError(error, response=response) from None
    except urllib3.exceptions.ProtocolError as error:
        raise requests.exceptions.ChunkedEncodingError(error, response=response) from None


T = TypeVar("T")

# Query threads alive at once, in this process. An abandoned query's thread lives on
# until its socket times out (a server that trickles bytes holds it longer); past this
# many, a new query fails at once rather than start yet another thread.
MAX_QUERY_THREADS = 32
_query_threads = threading.BoundedSemaphore(MAX_QUERY_THREADS)


async def in_daemon_thread(call: Callable[[], T]) -> T:
    """``call()`` in a thread of its own that nothing waits for once the caller is
    cancelled.

    ``asyncio.to_thread`` runs in the loop's default executor, which ``asyncio.run``
    waits for at its end: a Ctrl-C during a query to a Prometheus that does not answer
    waited out the query (28-89 s in ``explain node`` and ``descheduler --once``). A
    daemon thread is abandoned instead; its answer, if it ever comes, is dropped."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if answer.done():  # the caller was cancelled
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = call()
        except BaseException as raised:  # handed to the caller, whatever it is
            error = raised
        finally:
            slots.release()
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it
            loop.call_soon_threadsafe(settle, result, error)

    slots = _query_threads
    if not slots.acquire(blocking=False):
        raise PrometheusQueryError(
            "timeout",
            f"{MAX_QUERY_THREADS} Prometheus queries are still unanswered past their timeout; "
            "this one is not sent until some end (is Prometheus hanging?)",
        )
    try:
        threading.Thread(target=work, name="prometheus-query", daemon=True).start()
    except BaseException:
        slots.release()
        raise
    return await answer


class PrometheusSource:
    """A connection to one Prometheus-compatible endpoint. Thread-safe for ``query``."""

    def __init__(self, settings: PrometheusSettings) -> None:
        self.settings = settings
        if settings.insecure_skip_verify:
            log.warning(
                "--prometheus-insecure-skip-verify: Prometheus' TLS certificate is not checked; "
                "use --prometheus-ca-file outside of tests"
            )
            # Said once here rather than by urllib3 at every query.
            warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
        session = requests.Session()
        session.verify = (
            str(settings.ca_file) if settings.ca_file else not settings.insecure_skip_verify
        )
        # No transport-level retries: a failed query is retried by the sync schedule,
        # and retries here would stretch one query far past --query-timeout.
        # read=False re-raises read timeouts as such instead of as connection errors.
        no_retries = Retry(total=0, read=False, raise_on_status=False)
        auth: requests.auth.AuthBase | None = None
        if settings.token_file is not None:
            auth = BearerTokenFile(settings.token_file)
        elif settings.username is not None and settings.password_file is not None:
            auth = BasicAuthPasswordFile(settings.username, settings.password_file)
        self._connection = PrometheusConnect(
            url=settings.url.rstrip("/"),
            headers=dict(settings.headers) or None,
            auth=auth,
            session=session,
            retry=no_retries,
            timeout=settings.timeout_s,
        )
        # PrometheusConnect mounts a plain HTTPAdapter on its URL, which would read any
        # answer whole; ours replaces it there (the same prefix), and serves every
        # other URL a redirect may lead to.
        self.answers = BoundedAnswers(redact_url(settings.url), settings.timeout_s, no_retries)
        for prefix in (self._connection.url, "http://", "https://"):
            session.mount(prefix, self.answers)

    def close(self) -> None:
        self._connection.close()

    async def aquery(self, promql: str, at_s: float | None = None) -> list[PromSample]:
        """``query`` in a worker thread, abandoned one second after the query timeout.

        requests' timeout bounds each socket read, not the whole answer, so a server
        that trickles bytes could otherwise hold a sync for much longer.
        """
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the answer of
            # a query that ends as its task is cancelled and drops the cancellation, and
            # a SIGTERM then left the annotator running until its next period.
            async with asyncio.timeout(self.settings.timeout_s + 1.0):
                return await in_daemon_thread(lambda: self.query(promql, at_s))
        except TimeoutError:
            raise PrometheusQueryError(
                "timeout",
                f"Prometheus query {promql!r} at {redact_url(self.settings.url)} took longer than "
                f"{self.settings.timeout_s:g}s; raise --query-timeout or check the server's load",
            ) from None

    def query(self, promql: str, at_s: float | None = None) -> list[PromSample]:
        """Run an instant query; raise PrometheusQueryError with an operator-facing message."""
        params: dict[str, str] = {
            # Ask the server to give up too, so an abandoned query stops costing it CPU.
            # Whole milliseconds: Prometheus' duration parser rejects fractions ("0.5s").
            "timeout": f"{max(1, round(self.settings.timeout_s * 1000))}ms",
        }
        if at_s is not None:
            params["time"] = f"{at_s:.3f}"
        where = f"{redact_url(self.settings.url)} for {promql!r}"
        result = self._guarded(
            lambda: self._connection.custom_query(
                promql, params=params, timeout=self.settings.timeout_s
            ),
            where,
        )
        return parse_vector(result, where)

    def query_range(
        self,
        promql: str,
        start_s: float,
        end_s: float,
        step_s: float,
        max_samples: int | None = None,
    ) -> list[RangeSeries]:
        """Run a range query (whole seconds); raise PrometheusQueryError as ``query`` does.

        Prometheus refuses more than 11,000 points per series: the caller chunks by time.
        An answer of more than ``max_samples`` points is refused (reason ``too_large``).
        """
        params = {"timeout": f"{max(1, round(self.settings.timeout_s * 1000))}ms"}
        where = f"{redact_url(self.settings.url)} for {promql!r}"
        result = self._guarded(
            lambda: self._connection.custom_query_range(
                promql,
                start_time=datetime.fromtimestamp(start_s, UTC),
                end_time=datetime.fromtimestamp(end_s, UTC),
                step=f"{step_s:g}s",
                params=params,
                timeout=self.settings.timeout_s,
            ),
            where,
        )
        return parse_matrix(result, where, max_samples)

    def _guarded(self, call: Callable[[], Any], where: str) -> Any:
        """``call``'s answer, every failure turned into an operator-facing PrometheusQueryError."""
        try:
            return call()
        except PrometheusQueryError:
            raise
        except requests.Timeout:
            raise PrometheusQueryError(
                "timeout",
                f"Prometheus query timed out after {self.settings.timeout_s:g}s at {where}; "
                "raise --query-timeout or check the server's load",
            ) from None
        except requests.exceptions.SSLError as error:
            raise PrometheusQueryError(
                "tls",
                f"TLS handshake with Prometheus failed at {where}: {_root_cause(error)}; "
                "pass the server's CA with --prometheus-ca-file",
            ) from None
        except requests.ConnectionError as error:
            raise PrometheusQueryError(
                "connection",
                f"cannot connect to Prometheus at {where}: {_root_cause(error)}; "
                "check --prometheus-url and that the server is up",
            ) from None
        except PrometheusApiClientException as error:
            text = str(error)
            if "bad_data" in text:  # HTTP 400: the server is up; the PromQL is wrong
                raise PrometheusQueryError(
                    BAD_QUERY,
                    f"Prometheus at {where} rejected the query as invalid: "
                    f"{_shorten(_api_error(text))}; fix the PromQL (Prometheus is up)",
                ) from None
            raise PrometheusQueryError(
                "http", f"Prometheus refused the query at {where}: {_shorten(text)}"
            ) from None
        except (ValueError, KeyError, TypeError) as error:
            # requests' JSON decoder errors are ValueErrors; missing keys are KeyErrors.
            raise PrometheusQueryError(
                "bad_response",
                f"Prometheus at {where} answered something that is not a query result "
                f"({type(error).__name__}: {_shorten(str(error))}); is the URL pointing at "
                "Prometheus itself and not at a UI or proxy login page?",
            ) from None
        except requests.RequestException as error:
            raise PrometheusQueryError(
                "request", f"Prometheus query failed at {where}: {_shorten(str(error))}"
            ) from None


@dataclass(frozen=True, slots=True)
class RangeSeries:
    """One series of a range-query (matrix) answer: its points in time order."""

    labels: Mapping[str, str]
    times_s: tuple[float, ...]
    values: tuple[float, ...]  # may be NaN or ±Inf, as in PromSample


def parse_matrix(
    result: Any, where: str = "Prometheus", max_samples: int | None = None
) -> list[RangeSeries]:
    """Decode the ``data.result`` of a range-query answer; a point whose timestamp is
    not a finite number is dropped, and more than ``max_samples`` points in all are
    refused (``too_large``)."""
    if not isinstance(result, list):
        raise PrometheusQueryError(
            "bad_response", f"{where}: expected a matrix, got {type(result).__name__}"
        )
    if max_samples is not None:
        total = sum(len(i["values"]) for i in result if isinstance(i, dict)
                    and isinstance(i.get("values"), list))  # fmt: skip
        if total > max_samples:
            raise PrometheusQueryError(
                TOO_LARGE,
                f"{where}: the answer holds {total:,} points, more than the {max_samples:,} "
                "asked for; narrow the query (a smaller range or step)",
            )
    found = []
    for item in result:
        try:
            labels = item["metric"]
            points = [(float(t), float(v)) for t, v in item["values"]]
            points = [(t, v) for t, v in points if math.isfinite(t)]
            found.append(
                RangeSeries(
                    labels={str(k): str(v) for k, v in labels.items()},
                    times_s=tuple(t for t, _ in points),
                    values=tuple(v for _, v in points),
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise PrometheusQueryError(
                "bad_response",
                f"{where}: a result item is not a range series: {_shorten(repr(item))}",
            ) from None
    return found


def parse_vector(result: Any, where: str = "Prometheus") -> list[PromSample]:
    """Decode the ``data.result`` of an instant-vector answer."""
    if not isinstance(result, list):
        raise PrometheusQueryError(
            "bad_response", f"{where}: expected an instant vector, got {type(result).__name__}"
        )
    samples = []
    for item in result:
        try:
            labels = item["metric"]
            timestamp, text = item["value"]
            sample = PromSample(
                labels={str(k): str(v) for k, v in labels.items()},
                value=float(text),
                timestamp_s=float(timestamp),
            )
            if math.isfinite(sample.timestamp_s):  # a value may be NaN; its time may not
                samples.append(sample)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise PrometheusQueryError(
                "bad_response",
                f"{where}: a result item is not an instant-vector sample: {_shorten(repr(item))}; "
                "the query must return one sample per series, not a matrix or a scalar",
            ) from None
    return samples


def _api_error(text: str) -> str:
    """The ``error`` field of Prometheus' JSON answer, which the client library's
    exception carries as the repr of the response bytes; else the text itself."""
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            body = json.loads(codecs.decode(text[start : end + 1], "unicode_escape"))
        except (ValueError, UnicodeDecodeError):
            return text
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, str):
            return error
    return text


def _root_cause(error: BaseException) -> str:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        nested = current.args[0] if current.args else None
        current = current.__cause__ or (nested if isinstance(nested, BaseException) else None)
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            current = reason
    return _shorten(str(seen[-1]))


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
