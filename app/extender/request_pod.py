"""The demand of the Pod in a kube-scheduler request, read from its JSON.

The rule is ``app.objects.demand``'s; this module reads the wire format into it. The
native reader (``_pod_demand.c``) answers the same, faster, where it was built: a
reservation reads its pod after every answer in a burst, on the extender's only
thread. ``demand_of_request_pod`` is the reference it is held to.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from app.objects import (
    CPU,
    MEMORY,
    NO_DEMAND,
    Demand,
    OwnerRef,
    effective_demand,
    parse_quantity,
    valid_owner,
    workload_key,
)

try:
    from app.extender._pod_demand import pod_demand as _native_pod_demand
except ImportError:  # built without a C compiler: the pure-Python reader below answers
    _native_pod_demand = None  # type: ignore[assignment]

native_pod_demand: Callable[[dict[str, Any], Callable[[Any], float]], Demand] | None = (
    _native_pod_demand
)
"""The native reader (app/extender/_pod_demand.c); None where it was not built."""


# Each reservation parses its pod's quantities after the answer is sent, but on the
# extender's only thread: the same few strings ("100m", "128Mi") are parsed once.
_cached_quantity = functools.lru_cache(maxsize=4096)(parse_quantity)


def _quantity(value: Any) -> float:
    try:
        return _cached_quantity(value)
    except TypeError:  # unhashable: a list or a map where a quantity belongs
        raise ValueError(f"not a quantity: {value!r}") from None


_NONE = (0.0, 0.0)


def _pair(amounts: Any) -> tuple[float, float]:
    if not amounts:
        return _NONE
    # dict, not the Mapping ABC: both sources (JSON, lightkube) give dicts, and an ABC
    # check costs several times more.
    if not isinstance(amounts, dict):
        raise ValueError(f"not a map of quantities: {amounts!r}")
    cpu, memory = amounts.get(CPU), amounts.get(MEMORY)
    return (
        0.0 if cpu is None else _quantity(cpu),
        0.0 if memory is None else _quantity(memory),
    )


def _container(container: Any) -> Demand:
    """One container's (cpu, memory) requested and (cpu, memory) limited."""
    resources = container.get("resources") if isinstance(container, dict) else None
    if not resources:
        return NO_DEMAND
    if not isinstance(resources, dict):
        raise ValueError(f"container resources are not a map: {resources!r}")
    return _pair(resources.get("requests")) + _pair(resources.get("limits"))


def _items(spec: dict[str, Any], key: str) -> list[Any]:
    items = spec.get(key)
    if not items:
        return []
    if not isinstance(items, list):
        raise ValueError(f"spec.{key} is not a list")
    return items


def demand_of_request_pod(pod: Mapping[str, Any]) -> Demand:
    """The demand of the Pod JSON in a kube-scheduler request (ValueError if unreadable).

    The reference for ``request_pod_demand``, which the extender calls: the same answers
    and errors, from native code when it was built."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return NO_DEMAND
    overhead = spec.get("overhead")
    # Both lists are checked before any container is read, as the native reader does.
    containers, init_containers = _items(spec, "containers"), _items(spec, "initContainers")
    return effective_demand(
        [_container(c) for c in containers],
        [
            (_container(c), isinstance(c, dict) and c.get("restartPolicy") == "Always")
            for c in init_containers
        ],
        _pair(overhead) if isinstance(overhead, dict) else _NONE,
    )


def _native_request_pod_demand(pod: dict[str, Any]) -> Demand:
    assert native_pod_demand is not None
    return native_pod_demand(pod, _cached_quantity)


request_pod_demand: Callable[[dict[str, Any]], Demand] = (
    demand_of_request_pod if native_pod_demand is None else _native_request_pod_demand
)
"""demand_of_request_pod for a request's Pod (a dict), natively where it was built: a
reservation reads its pod after every answer in a burst, on the extender's only thread."""


def request_pod_workload(pod: Mapping[str, Any]) -> str | None:
    """The workload of the Pod in a request (``app.objects.workload_key``, from its
    controller ownerReference and labels), or None for a bare or unreadable pod. Its
    namespace is the pod's own, so whatever the pod claims names a workload there."""
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict):
        return None
    namespace = metadata.get("namespace") or "default"
    owners = metadata.get("ownerReferences")
    labels = metadata.get("labels")
    if not isinstance(namespace, str) or not isinstance(owners, list):
        return None
    for owner in owners:
        if isinstance(owner, dict) and owner.get("controller") is True:
            kind, name = owner.get("kind"), owner.get("name")
            if not (isinstance(kind, str) and isinstance(name, str)):
                return None
            if not valid_owner(owner.get("apiVersion"), kind, name):
                return None
            return workload_key(
                namespace,
                OwnerRef(kind, name, str(owner.get("uid", ""))),
                labels if isinstance(labels, dict) else {},
            )
    return None
