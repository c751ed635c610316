"""The Kubernetes API adapter, the one part of loadaware that talks to the API server
(an import-linter contract in pyproject.toml holds it so): the client (``client``) and
what its errors mean (``api_errors``), the commands' one-off reads (``reads``), the
leader election's Lease (``lease``), watch caches fed by list and
watch (``cache``, ``listwatch``), and the views and writes of each kind: nodes, pods,
PodDisruptionBudgets, annotation patches, evictions. ``state`` and ``events`` are the
descheduler's state as the API holds it (a ConfigMap, Events); ``permissions`` lists
every API call each component makes, the list RBAC is checked against.

Each module lists its names once, in its ``__all__``. The ConfigMaps' defaults load at
once; the rest (the Kubernetes client, lightkube and httpx: a few tenths of a second) on
first use, so that a command that stops at a bad flag, or prints its help, never pays
for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.kube.defaults import *  # noqa: F403
from app.objects import load_modules_on_use

if TYPE_CHECKING:
    from app.kube.admission import *  # noqa: F403
    from app.kube.api_errors import *  # noqa: F403
    from app.kube.cache import *  # noqa: F403
    from app.kube.client import *  # noqa: F403
    from app.kube.events import *  # noqa: F403
    from app.kube.eviction import *  # noqa: F403
    from app.kube.lease import *  # noqa: F403
    from app.kube.nodes import *  # noqa: F403
    from app.kube.patching import *  # noqa: F403
    from app.kube.pdbs import *  # noqa: F403
    from app.kube.pods import *  # noqa: F403
    from app.kube.reads import *  # noqa: F403
    from app.kube.state import *  # noqa: F403
    from app.kube.workload_usage import *  # noqa: F403

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_modules_on_use(
    __name__,
    (
        "admission",
        "api_errors",
        "cache",
        "client",
        "events",
        "eviction",
        "lease",
        "nodes",
        "patching",
        "pdbs",
        "pods",
        "reads",
        "state",
        "workload_usage",
    ),
    globals(),
)
