"""The load model: pure functions from node annotations, policy and clock to verdicts and scores."""

from app.load.model import (
    Freshness,
    MetricReading,
    NodeLoad,
    Overload,
    evaluate_node,
    hot_value_from_bindings,
    is_exempt_from_filter,
)
from app.load.samples import HOT_VALUE_KEY, Sample, format_hot_value, format_usage

__all__ = [
    "HOT_VALUE_KEY",
    "Freshness",
    "MetricReading",
    "NodeLoad",
    "Overload",
    "Sample",
    "evaluate_node",
    "format_hot_value",
    "format_usage",
    "hot_value_from_bindings",
    "is_exempt_from_filter",
]
