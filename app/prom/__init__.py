"""Prometheus access: instant queries (``client``), matching series to nodes
(``matching``), per-pod usage (``pod_usage``) and the ``--prometheus-*`` flags (``flags``)."""

from app.prom.client import (
    BAD_QUERY,
    InstantQuery,
    InvalidSample,
    PrometheusQueryError,
    PrometheusSettings,
    PrometheusSource,
    PromSample,
    RangeSeries,
    build_query,
    invalid_sample,
    redact_url,
)
from app.prom.flags import add_prometheus_flags, label_matchers, prometheus_settings_from_args
from app.prom.matching import NodeAddress, match_series
from app.prom.pod_usage import (
    PodNodes,
    PodUsage,
    PodUsageQueries,
    PodUsageUnavailable,
    pod_nodes,
    read_pod_usage,
)

__all__ = [
    "BAD_QUERY",
    "InstantQuery",
    "InvalidSample",
    "NodeAddress",
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
    "read_pod_usage",
    "redact_url",
]
