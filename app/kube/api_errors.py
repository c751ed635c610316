"""What the API client raises, turned into the operator's words, one way for every caller.

The client raises three kinds of error: the API server's refusal (a ``Status``: 403,
404, 409 ...), an answer that is no Kubernetes API server's (an HTTP error whose body
is not a ``Status``: a web server, a proxy, a wrong port), and a transport error (the
server is down, does not answer in time, or its TLS fails). ``describe`` says which in
one line; ``ClusterUnreadable`` is a read that failed, with that line.
"""

from __future__ import annotations

import httpx2
from lightkube.core.exceptions import ApiError

__all__ = [
    "ClusterUnreadable",
    "describe_api_error",
]


class ClusterUnreadable(Exception):
    """A read the API server refused or could not answer; the message says which and why.
    ``code`` is the API server's HTTP status, None when it gave none."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def status_code(error: BaseException) -> int | None:
    """The HTTP status of an answer, None for a transport error (or any other)."""
    if isinstance(error, ApiError) and error.status is not None and error.status.code:
        return int(error.status.code)
    if isinstance(error, httpx2.HTTPStatusError):
        return error.response.status_code
    return None


def is_refusal(error: BaseException, code: int) -> bool:
    """True when the API server itself answered with ``code`` (a ``Status``): a 404 from
    a server that is no API server is not a Kubernetes "not found"."""
    return isinstance(error, ApiError) and status_code(error) == code


def unreachable(error: BaseException) -> bool:
    """True when the request reached no API server (refused, reset, timed out, TLS)."""
    return isinstance(error, httpx2.TransportError | OSError)


def is_api_error(error: BaseException) -> bool:
    """True for what the API client raises about a request: a refusal, an answer that is
    no API server's, a transport error."""
    return isinstance(error, httpx2.HTTPError | OSError)


def describe_api_error(error: BaseException, server: str = "") -> str:
    """One line on why a request failed; ``server`` (its URL) names the API server."""
    at = f" at {server}" if server else ""
    code = status_code(error)
    if isinstance(error, ApiError) and code is not None:
        message = (error.status.message or error.status.reason or "").strip()
        if code == 401:
            return f"the API server{at} refused the credentials (401 Unauthorized)"
        if code == 403:
            return "forbidden for this user"
        return f"{code} {message}".strip()
    if isinstance(error, httpx2.HTTPStatusError):
        response = error.response
        request = error.request
        return (
            f"the server{at} is not a Kubernetes API server: it answered "
            f"{response.status_code} {response.reason_phrase} to {request.method} "
            f"{request.url.path}"
        )
    if isinstance(error, httpx2.TimeoutException):
        return f"the API server{at} did not answer in time ({type(error).__name__})"
    if unreachable(error):
        reason = str(error).strip() or type(error).__name__
        return f"cannot reach the API server{at}: {reason}"
    return f"{type(error).__name__}: {error}"


def unreadable(
    what: str, error: BaseException, server: str = "", hint: str = ""
) -> ClusterUnreadable:
    """``ClusterUnreadable`` for a failed read of ``what`` ("list nodes", "read ConfigMap
    x/y"); ``hint`` says what grants the read, added when it was forbidden."""
    code = status_code(error)
    line = f"cannot {what}: {describe_api_error(error, server)}"
    if code == 403 and hint and isinstance(error, ApiError):
        line += f"; {hint}"
    return ClusterUnreadable(line, code)
