"""``loadaware policy check FILE --prometheus-url URL``: does Prometheus have every metric
the policy syncs? One ``count(...)`` query per metric, all at once.

A metric Prometheus has no series for (its recording rule not installed, or recording
nothing) loads as a valid policy and then never gets a value: the annotator's sync of it
fails each period, and the extender treats it as missing data. Without a URL nothing is
looked up, and the check says so; the annotator still tells it at run time (the log,
``/status``, ``loadaware_annotator_query_errors_total{reason="no_series"}``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.prom import build_query

if TYPE_CHECKING:
    from app.policy import Policy
    from app.prom import InstantQuery

RULES_FILE = "deploy/prometheus/loadaware-rules.yaml"


@dataclass(frozen=True, slots=True)
class MetricLookup:
    """What Prometheus holds of each metric the policy syncs."""

    series: dict[str, int]  # metric -> series Prometheus has now (0: none)
    unqueryable: tuple[str, ...]  # names that are no Prometheus metric name

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(metric for metric, count in self.series.items() if count == 0)


async def look_up_metrics(source: InstantQuery, policy: Policy) -> MetricLookup:
    """How many series Prometheus has of each synced metric; PrometheusQueryError when
    it cannot be asked (the first failure)."""
    names = [entry.name for entry in policy.spec.sync_policy]
    queries: dict[str, str] = {}
    unqueryable = []
    for name in names:
        try:
            queries[name] = f"count({build_query(name)})"
        except ValueError:
            unqueryable.append(name)
    answers = await asyncio.gather(*(source.aquery(q) for q in queries.values()))
    series = {
        name: int(answer[0].value) if answer else 0
        for name, answer in zip(queries, answers, strict=True)
    }
    return MetricLookup(series, tuple(unqueryable))


def missing_message(url: str, missing: Sequence[str]) -> str:
    names = ", ".join(missing)
    return (
        f"Prometheus at {url} has no series for {names}: the annotator could never write "
        f"{'it' if len(missing) == 1 else 'them'}, and the extender would treat "
        f"{'it' if len(missing) == 1 else 'them'} as missing data; install the recording "
        f"rule ({RULES_FILE} records cpu_ and mem_ usage avg_5m, max_avg_1h/1d and "
        f"p90/p95_avg_1h/1d) or take the metric out of the policy"
    )


def unqueryable_message(unqueryable: Sequence[str]) -> str:
    return (
        f"not looked up: {', '.join(unqueryable)} (no Prometheus metric name; the loadaware "
        f"annotator cannot sync it, another writer must write the annotation)"
    )


def found_message(url: str, lookup: MetricLookup) -> str:
    counts = ", ".join(f"{metric} {count}" for metric, count in lookup.series.items())
    return f"prometheus: series at {url}: {counts}" if counts else f"prometheus: {url} asked"
