# Types of the native pod demand reader built from _pod_demand.c (see request_pod.py).

from collections.abc import Callable
from typing import Any

def pod_demand(
    pod: dict[str, Any], quantity: Callable[[Any], float], /
) -> tuple[float, float, float, float]: ...
