"""Shared helpers for the annotator tests."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lightkube import AsyncClient

from app.annotator.annotator import Annotator, AnnotatorConfig
from app.annotator.sync import QueryShape
from app.kube.patching import PatchOutcome
from app.load.samples import parse_hot_value, parse_usage
from app.objects import Taint
from app.policy import Policy, policy_from_mapping
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.runtime.flags import LeaseSettings
from tests.support.fakekube_fixtures import FakeKube
from tests.support.promdata import DEFAULT_METRICS


def policy(
    periods: Mapping[str, str] | None = None,
    hot_value: list[dict[str, Any]] | None = None,
) -> Policy:
    """A policy with the given sync periods (default: the six metrics every hour)."""
    periods = periods if periods is not None else dict.fromkeys(DEFAULT_METRICS, "1h")
    return policy_from_mapping(
        {
            "spec": {
                "syncPolicy": [{"name": m, "period": p} for m, p in periods.items()],
                "hotValue": hot_value
                if hot_value is not None
                else [
                    {"timeRange": "5m", "count": 5},
                    {"timeRange": "1m", "count": 2},
                ],
            }
        },
        "<test policy>",
    )


def source(url: str, timeout_s: float = 5.0, **kwargs: Any) -> PrometheusSource:
    return PrometheusSource(PrometheusSettings(url=url, timeout_s=timeout_s, **kwargs))


def annotator(
    fake_kube: FakeKube,
    client: AsyncClient,
    prom_url: str,
    *,
    the_policy: Policy | None = None,
    query_timeout_s: float = 5.0,
    clock: Callable[[], float] = time.time,
    **config: Any,
) -> Annotator:
    shape = config.pop("shape", QueryShape())
    settings = AnnotatorConfig(policy=the_policy or policy(), shape=shape, **config)
    return Annotator(settings, client, source(prom_url, query_timeout_s), clock=clock)


@contextlib.asynccontextmanager
async def running(annotator: Annotator) -> AsyncIterator[asyncio.Task[None]]:
    """Run the annotator as a task for the block; cancel it (gracefully) afterwards."""
    task = asyncio.create_task(annotator.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.02)
    return condition()


def node_annotations(fake_kube: FakeKube, node: str) -> dict[str, str]:
    stored = fake_kube.store.get_node(node)
    assert stored is not None, f"node {node} is not in the fake API server"
    return dict(stored["metadata"].get("annotations") or {})


def usage(fake_kube: FakeKube, node: str, metric: str) -> float | None:
    raw = node_annotations(fake_kube, node).get(metric)
    sample = parse_usage(raw) if raw is not None else None
    return sample.value if sample else None


def hot_value(fake_kube: FakeKube, node: str) -> int | None:
    raw = node_annotations(fake_kube, node).get("node_hot_value")
    sample = parse_hot_value(raw) if raw is not None else None
    return int(sample.value) if sample else None


def metric_value(annotator: Annotator, name: str, labels: Mapping[str, str] | None = None) -> float:
    value = annotator.telemetry.registry.get_sample_value(name, dict(labels or {}))
    return 0.0 if value is None else value


def fast_lease(identity: str) -> LeaseSettings:
    """The annotator's Lease in "default", on timings short enough for a test."""
    return LeaseSettings(
        namespace="default",
        name="loadaware-annotator",
        identity=identity,
        lease_duration_s=1.0,
        renew_deadline_s=0.6,
        retry_period_s=0.1,
    )


@dataclass
class Writer:
    """A taint writer that records each taint change instead of writing it."""

    changes: dict[str, bool] = field(default_factory=dict)

    async def set_taint(self, node: str, _taint: Taint, present: bool) -> PatchOutcome:
        self.changes[node] = present
        return PatchOutcome.WRITTEN
