"""One line for every error of the API client (app/kube/api_errors.py), the one way the
commands' reads, the Lease and list/watch put them to the operator."""

from __future__ import annotations

import json

import httpx2
import pytest
from lightkube.core.exceptions import ApiError

from app.kube.api_errors import describe_api_error, is_refusal, unreachable, unreadable

SERVER = "https://127.0.0.1:6443"
REQUEST = httpx2.Request("GET", f"{SERVER}/api/v1/nodes")


def refusal(code: int, reason: str, message: str) -> ApiError:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip
    response = httpx2.Response(code, content=json.dumps(body).encode(), request=REQUEST)
    return ApiError(request=REQUEST, response=response)


def web_page(code: int) -> httpx2.HTTPStatusError:
    response = httpx2.Response(code, content=b"<html></html>", request=REQUEST)
    return httpx2.HTTPStatusError("error", request=REQUEST, response=response)


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (refusal(403, "Forbidden", 'nodes is forbidden: User "x"'), "forbidden for this user"),
        (refusal(401, "Unauthorized", "Unauthorized"),
         f"the API server at {SERVER} refused the credentials (401 Unauthorized)"),
        (refusal(404, "NotFound", 'configmaps "x" not found'), '404 configmaps "x" not found'),
        (web_page(404), f"the server at {SERVER} is not a Kubernetes API server: it answered "
                        "404 Not Found to GET /api/v1/nodes"),
        (web_page(502), f"the server at {SERVER} is not a Kubernetes API server: it answered "
                        "502 Bad Gateway to GET /api/v1/nodes"),
        (httpx2.ConnectError("All connection attempts failed", request=REQUEST),
         f"cannot reach the API server at {SERVER}: All connection attempts failed"),
        (httpx2.ReadTimeout("", request=REQUEST),
         f"the API server at {SERVER} did not answer in time (ReadTimeout)"),
        (ConnectionRefusedError(111, "Connection refused"),
         f"cannot reach the API server at {SERVER}: [Errno 111] Connection refused"),
    ],
    ids=["403", "401", "404-status", "404-web-page", "502-proxy", "refused", "timeout", "oserror"],
)  # fmt: skip
def test_each_client_error_is_one_line_saying_what_happened(
    error: BaseException, line: str
) -> None:
    assert describe_api_error(error, SERVER) == line


def test_a_forbidden_read_names_what_grants_it_and_nothing_else_does() -> None:
    hint = "bind the roles of x.yaml"
    forbidden = unreadable("list nodes", refusal(403, "Forbidden", "no"), SERVER, hint)
    assert str(forbidden) == f"cannot list nodes: forbidden for this user; {hint}"
    assert forbidden.code == 403
    down = unreadable("list nodes", httpx2.ConnectError("refused", request=REQUEST), SERVER, hint)
    assert hint not in str(down)
    assert down.code is None
    assert hint not in str(unreadable("list nodes", web_page(403), SERVER, hint))


def test_only_the_api_servers_own_404_is_not_found_and_only_transport_errors_reached_nothing() -> (
    None
):
    assert is_refusal(refusal(404, "NotFound", "gone"), 404)
    assert not is_refusal(web_page(404), 404)  # a web server's 404 is no "not found"
    assert unreachable(httpx2.ConnectError("refused", request=REQUEST))
    assert unreachable(OSError("reset"))
    assert not unreachable(refusal(500, "InternalError", "boom"))
