"""What the extender knows of each node and each estimated pod, for people: the views
behind ``/debug/nodes``, ``/debug/estimates`` and the estimate metrics. Computed when
asked, never on the request path."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from app.extender.reserve import Contribution, PodEstimate, Reserve
from app.extender.table import NodeTable
from app.extender.verdicts import NodeEntry
from app.load import unsampled_fractions
from app.objects import ZERO, Resources


def pod_estimate(contribution: Contribution, allocatable: Resources | None) -> PodEstimate:
    """A pod's estimate with its share of its node (of nothing: the node is not known)."""
    of = allocatable if allocatable is not None else ZERO
    fractions = unsampled_fractions((contribution.usage,), of)
    raised = unsampled_fractions((contribution.raised_by,), of)
    return PodEstimate(contribution, fractions, raised)


def _largest_first(estimate: PodEstimate) -> tuple[float, str]:
    return -estimate.share, estimate.contribution.pod


class DebugViews:
    """The debug views of one extender's node table and reserve."""

    def __init__(
        self, table: NodeTable, reserve: Reserve | None, clock: Callable[[], float]
    ) -> None:
        self._table = table
        self._reserve = reserve
        self._clock = clock

    def nodes(self, names: list[str] | None = None) -> list[dict[str, Any]]:
        """The debug view of ``names`` (default: every node), sorted by name."""
        now_s = self._clock()
        self._table.refresh(now_s)
        self._table.expire_estimates(now_s)
        if names is None:
            names = [entry.name for entry in self._table]
        entries = [self._table.lookup(name, now_s) for name in names]
        views = [
            debug_view(entry, self._contributions(entry, now_s), now_s)
            for entry in entries
            if entry is not None
        ]
        return sorted(views, key=lambda view: str(view["name"]))

    def node(self, name: str) -> dict[str, Any] | None:
        now_s = self._clock()
        entry = self._table.lookup(name, now_s)
        if entry is None:
            return None
        return debug_view(entry, self._contributions(entry, now_s), now_s)

    def estimates(self, limit: int) -> dict[str, Any]:
        """``/debug/estimates``: the ``limit`` largest pod estimates across the cluster,
        each with its pod, node, kind and share of the node (issue 28, attack 1)."""
        now_s = self._clock()
        estimates = self.pod_estimates()
        return {
            "total": len(estimates),
            "pods": [
                {
                    **pod_view(estimate.contribution, now_s),
                    "node": estimate.contribution.node,
                    "share": {r: round(f, 5) for r, f in estimate.fractions.items()},
                }
                for estimate in estimates[:limit]
            ],
        }

    def pod_estimates(self) -> list[PodEstimate]:
        """Every pod counting on a node's estimate now, largest share first."""
        if self._reserve is None or not self._table.policy.spec.estimation.enabled:
            return []
        now_s = self._clock()
        self._table.refresh(now_s)
        self._table.expire_estimates(now_s)

        def sample_at(node: str) -> float | None:
            entry = self._table.lookup(node, now_s)
            return None if entry is None else entry.unsampled.sample_at_s

        reserve = self._reserve
        return sorted(
            (
                pod_estimate(contribution, reserve.allocatable(node))
                for node in reserve.tracked_nodes()
                for contribution in reserve.contributions(node, sample_at(node), now_s)
            ),
            key=_largest_first,
        )

    def unsampled_estimates(self) -> dict[str, Mapping[str, float]]:
        self._table.refresh(self._clock())
        return {entry.name: entry.unsampled.fractions for entry in self._table}

    def _contributions(self, entry: NodeEntry, now_s: float) -> list[Contribution]:
        if self._reserve is None or not self._table.policy.spec.estimation.enabled:
            return []
        return self._reserve.contributions(entry.name, entry.unsampled.sample_at_s, now_s)


def debug_view(entry: NodeEntry, contributions: list[Contribution], now_s: float) -> dict[str, Any]:
    """Everything about one node's verdict, for ``curl /debug/nodes``."""
    load = entry.load
    policy_windows = {r.metric: r for r in load.readings}
    return {
        "name": entry.name,
        "verdict": "overloaded" if load.overloads else "ok",
        # The node pool it is judged by (app/policy/pools.py); absent: the policy has none.
        **({} if entry.pool is None else {"pool": entry.pool.pool, "pools": entry.pool.overlap}),
        "reasons": [
            {
                "metric": o.metric,
                "usage": round(o.usage_fraction, 5),
                "limit": o.limit_fraction,
                "message": o.reason,
            }
            for o in load.overloads
        ],
        "metrics": {
            metric: {
                "usage": reading.usage_fraction,
                "measured": (
                    None
                    if reading.measured_fraction is None
                    else round(reading.measured_fraction, 5)
                ),
                "estimated_addition": round(reading.unsampled_fraction, 5),
                "freshness": str(reading.freshness),
                "age_seconds": (
                    None if reading.timestamp_s is None else round(now_s - reading.timestamp_s, 1)
                ),
                "raw": entry.annotations.get(metric),
            }
            for metric, reading in policy_windows.items()
        },
        "estimate": estimate_view(entry, contributions, now_s),
        "hot_value": load.hot_value,
        "hot_value_fresh": load.hot_value_fresh,
        "load_score": load.load_score,
        "score": load.score,
        "extender_score": load.extender_score,
        "recheck_in_seconds": (
            None if math.isinf(load.recheck_at_s) else round(load.recheck_at_s - now_s, 1)
        ),
    }


def estimate_view(
    entry: NodeEntry, contributions: list[Contribution], now_s: float
) -> dict[str, Any]:
    """The pods behind a node's unsampled estimate (README "Burst-aware estimation")."""
    unsampled = entry.unsampled
    return {
        "sample_age_seconds": (
            None if unsampled.sample_at_s is None else round(now_s - unsampled.sample_at_s, 1)
        ),
        "added": {resource: round(f, 5) for resource, f in unsampled.fractions.items()},
        "pods": [pod_view(c, now_s) for c in contributions],
    }


def pod_view(contribution: Contribution, now_s: float) -> dict[str, Any]:
    """One pod behind an estimate: who, why it counts (``kind``: reserved, or scored,
    bound or placed, ``app.extender.reserve``) and what it adds, within its node."""
    return {
        "pod": contribution.pod,
        "kind": contribution.kind,
        "age_seconds": round(now_s - contribution.since_s, 1),
        "cpu_cores": round(contribution.usage.cpu_cores, 3),
        "memory_bytes": round(contribution.usage.memory_bytes),
    }
