"""Prometheus access: instant queries (``client``), matching series to nodes
(``matching``), per-pod usage (``pod_usage``), per-pod throttling and OOM kills
(``pod_health``), the queries themselves (``queries``), the ``--prometheus-*`` flags
(``flags``) and the settings they give (``settings``).

Each module lists its names once, in its ``__all__``. The flags, settings and queries
load at once; the client, the matching and the reading of per-pod usage (requests,
prometheus-api-client: a few tenths of a second) on first use, so that a command that
stops at a bad flag or file never pays for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.objects import load_modules_on_use
from app.prom.flags import *  # noqa: F403
from app.prom.queries import *  # noqa: F403
from app.prom.settings import *  # noqa: F403

if TYPE_CHECKING:
    from app.prom.client import *  # noqa: F403
    from app.prom.matching import *  # noqa: F403
    from app.prom.pod_health import *  # noqa: F403
    from app.prom.pod_usage import *  # noqa: F403

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_modules_on_use(
    __name__, ("client", "matching", "pod_health", "pod_usage"), globals()
)
