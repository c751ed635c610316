"""What RBAC sees in an API request: verb, API group, resource[/subresource], namespace.

The same reading the API server's request-info step makes of a URL: GET on a
collection is list (watch with ``?watch=true``), on an object get; POST is create;
PUT update; PATCH patch; DELETE delete.
"""

from __future__ import annotations

from dataclasses import dataclass

_OBJECT_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True, slots=True)
class RequestAttributes:
    verb: str
    api_group: str
    resource: str  # "pods/eviction" for a subresource
    namespace: str | None  # None: cluster-scoped, or across all namespaces


def attributes(method: str, path: str, query: dict[str, str]) -> RequestAttributes:
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"]:
        group, rest = parts[1], parts[3:]
    else:
        raise ValueError(f"not a resource request: {method} {path}")
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource, name, subresource = [*rest, None, None][:3]
    if resource is None:
        raise ValueError(f"not a resource request: {method} {path}")
    if subresource is not None:
        resource = f"{resource}/{subresource}"
    if name is None:
        watching = query.get("watch") in ("true", "1")
        verb = {"GET": "watch" if watching else "list", "POST": "create"}[method]
        if method == "DELETE":
            verb = "deletecollection"
    else:
        verb = "create" if method == "POST" else _OBJECT_VERBS[method]
    return RequestAttributes(verb, group, resource, namespace)
