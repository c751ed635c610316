"""Reading RBAC attributes from request URLs, as the API server does."""

from __future__ import annotations

import pytest

from tests.deploy.requestinfo import RequestAttributes, attributes


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/nodes", {}, RequestAttributes("list", "", "nodes", None)),
        ("GET", "/api/v1/nodes", {"watch": "true"}, RequestAttributes("watch", "", "nodes", None)),
        ("PATCH", "/api/v1/nodes/n1", {}, RequestAttributes("patch", "", "nodes", None)),
        ("GET", "/api/v1/pods", {"watch": "1"}, RequestAttributes("watch", "", "pods", None)),
        (
            "POST",
            "/api/v1/namespaces/ns/pods/p/eviction",
            {},
            RequestAttributes("create", "", "pods/eviction", "ns"),
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/la/leases/x",
            {},
            RequestAttributes("get", "coordination.k8s.io", "leases", "la"),
        ),
        (
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/la/leases",
            {},
            RequestAttributes("create", "coordination.k8s.io", "leases", "la"),
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/la/leases/x",
            {},
            RequestAttributes("update", "coordination.k8s.io", "leases", "la"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods",
            {},
            RequestAttributes("list", "", "pods", "ns"),
        ),
    ],
)
def test_a_request_reads_as_rbac_attributes(
    method: str, path: str, query: dict[str, str], expected: RequestAttributes
) -> None:
    assert attributes(method, path, query) == expected
