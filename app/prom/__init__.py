"""Prometheus access: instant queries (``client``), matching series to nodes
(``matching``), per-pod usage (``pod_usage``), per-pod throttling and OOM kills
(``pod_health``), the queries themselves (``queries``), the ``--prometheus-*`` flags
(``flags``) and the settings they give (``settings``).

The flags, settings and queries load at once; the client, the matching and the reading
of per-pod usage (requests, prometheus-api-client: a few tenths of a second) on first
use, so that a command that stops at a bad flag or file never pays for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.objects import load_on_use
from app.prom.flags import add_prometheus_flags, label_matchers, prometheus_settings_from_args
from app.prom.queries import PodUsageQueries, build_query
from app.prom.settings import PrometheusSettings, redact_url

if TYPE_CHECKING:
    from app.prom.client import (
        BAD_QUERY,
        InstantQuery,
        InvalidSample,
        PrometheusQueryError,
        PrometheusSource,
        PromSample,
        RangeSeries,
        invalid_sample,
    )
    from app.prom.matching import NodeAddress, match_series
    from app.prom.pod_health import PodHealth, read_pod_health
    from app.prom.pod_usage import (
        PodNodes,
        PodUsage,
        PodUsageUnavailable,
        pod_nodes,
        read_pod_usage,
    )

__all__ = [
    "BAD_QUERY",
    "InstantQuery",
    "InvalidSample",
    "NodeAddress",
    "PodHealth",
    "PodNodes",
    "PodUsage",
    "PodUsageQueries",
    "PodUsageUnavailable",
    "PromSample",
    "PrometheusQueryError",
    "PrometheusSettings",
    "PrometheusSource",
    "RangeSeries",
    "add_prometheus_flags",
    "build_query",
    "invalid_sample",
    "label_matchers",
    "match_series",
    "pod_nodes",
    "prometheus_settings_from_args",
    "read_pod_health",
    "read_pod_usage",
    "redact_url",
]

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_on_use(
    __name__,
    {
        "client": (
            "BAD_QUERY",
            "InstantQuery",
            "InvalidSample",
            "PrometheusQueryError",
            "PrometheusSource",
            "PromSample",
            "RangeSeries",
            "invalid_sample",
        ),
        "matching": ("NodeAddress", "match_series"),
        "pod_health": ("PodHealth", "read_pod_health"),
        "pod_usage": (
            "PodNodes",
            "PodUsage",
            "PodUsageUnavailable",
            "pod_nodes",
            "read_pod_usage",
        ),
    },
    globals(),
)
