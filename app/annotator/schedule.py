"""When each metric is due: every metric at start, then each on its own period.

Sync times sit on a grid ``start + k * period`` per metric. Because every grid starts
at the same instant, metrics whose periods divide each other (crane's 3m, 15m and 3h)
fall due at the same instants and share one patch per node.

A failed sync is retried soon, with backoff capped at the period, rather than at the
next grid point: a 3h metric whose query failed once would otherwise go stale. After
the retry succeeds the metric returns to its grid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class MetricSchedule:
    periods_s: Mapping[str, float]  # in policy order
    start_s: float
    first_retry_s: float = 10.0
    # Metrics due this close together run in one tick; covers timer and float jitter.
    coalesce_s: float = 0.5
    _next_due_s: dict[str, float] = field(init=False)
    _failures: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        for metric, period_s in self.periods_s.items():
            if not period_s > 0:
                raise ValueError(f"sync period of {metric} must be positive, got {period_s}")
        self._next_due_s = dict.fromkeys(self.periods_s, self.start_s)
        self._failures = dict.fromkeys(self.periods_s, 0)

    def due(self, now_s: float) -> list[str]:
        """The metrics to sync in a tick at ``now_s``, in policy order."""
        return [m for m, at_s in self._next_due_s.items() if at_s <= now_s + self.coalesce_s]

    def next_due_s(self) -> float:
        return min(self._next_due_s.values(), default=math.inf)

    def next_due_of(self, metric: str) -> float:
        return self._next_due_s[metric]

    def replace_periods(self, periods_s: Mapping[str, float], now_s: float) -> list[str]:
        """Adopt a reloaded policy: new and re-timed metrics fall due at once, on a new grid.

        Returns the metrics whose schedule changed.
        """
        changed = [m for m, p in periods_s.items() if self.periods_s.get(m) != p]
        if not changed and periods_s.keys() == self.periods_s.keys():
            return []
        kept = {m: at_s for m, at_s in self._next_due_s.items() if m in periods_s}
        old_failures = self._failures
        self.periods_s = dict(periods_s)
        self.start_s = now_s if changed else self.start_s
        self.__post_init__()
        for metric in periods_s:
            if metric not in changed:
                self._next_due_s[metric] = kept[metric]
                self._failures[metric] = old_failures[metric]
        return changed

    def record_success(self, metric: str, now_s: float) -> None:
        self._failures[metric] = 0
        self._next_due_s[metric] = self._next_grid_point(metric, now_s)

    def record_failure(self, metric: str, now_s: float) -> None:
        self._failures[metric] += 1
        period_s = self.periods_s[metric]
        backoff_s = self.first_retry_s * 2 ** (self._failures[metric] - 1)
        self._next_due_s[metric] = now_s + min(period_s, backoff_s)

    def _next_grid_point(self, metric: str, now_s: float) -> float:
        # At least half a period away, so that a retry that succeeds just before a
        # grid point does not query again a moment later.
        period_s = self.periods_s[metric]
        steps = math.floor((now_s + period_s / 2 - self.start_s) / period_s) + 1
        return self.start_s + max(steps, 1) * period_s
