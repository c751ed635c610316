"""Which nodes need their ``node_hot_value`` annotation rewritten, and with what.

A node is patched only when what the scheduler would read differs from what the
bindings say, so a quiet cluster costs no writes:

* the hot value changed (up as bindings arrive, down as they age out, down to 0);
* a non-zero value is close to expiring (valid 5 minutes) and still holds;
* a stale or missing annotation is not rewritten as 0: the scheduler reads both as 0.

What is on the node is taken from the node cache, or from this replica's own last
write when that is newer (the watch may not have delivered it yet).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.annotator.bindings import BindingObserver, BindingWindows
from app.annotator.telemetry import AnnotatorMetrics
from app.kube import AnnotationPatcher, NodeInfo, PatchOutcome
from app.load import HOT_VALUE_KEY, format_hot_value, parse_hot_value
from app.policy import HOT_VALUE_VALID_S

log = logging.getLogger("app.annotator.annotator")  # the component's log, as before


@dataclass(frozen=True, slots=True)
class WrittenHotValue:
    value: int
    at_s: float


def refresh_after_s(interval_s: float) -> float:
    """Rewrite an unchanged non-zero value this long after it was written.

    Two publishing rounds plus a minute before expiry, so that a failed patch can be
    retried before the scheduler stops seeing the value.
    """
    return max(HOT_VALUE_VALID_S - 2 * interval_s - 60.0, HOT_VALUE_VALID_S / 2)


def needs_write(want: int, have: WrittenHotValue | None, now_s: float, refresh_s: float) -> bool:
    fresh = have is not None and now_s < have.at_s + HOT_VALUE_VALID_S
    if want == 0:
        return fresh and have is not None and have.value != 0
    if not fresh or have is None:
        return True
    return have.value != want or now_s - have.at_s >= refresh_s


class HotValueWrites:
    """Remembers what this replica wrote, and plans the next round of hot-value patches."""

    def __init__(self, interval_s: float) -> None:
        self.refresh_s = refresh_after_s(interval_s)
        self._written: dict[str, WrittenHotValue] = {}

    def record_written(self, node: str, value: int, at_s: float) -> None:
        self._written[node] = WrittenHotValue(value, at_s)

    def forget(self, node: str) -> None:
        self._written.pop(node, None)

    def on_node(self, node: str, annotations: Mapping[str, str]) -> WrittenHotValue | None:
        """The value currently on the node: the newer of the annotation and our own write."""
        raw = annotations.get(HOT_VALUE_KEY)
        sample = parse_hot_value(raw) if raw is not None else None
        seen = WrittenHotValue(int(sample.value), sample.timestamp_s) if sample else None
        ours = self._written.get(node)
        if ours is None or (seen is not None and seen.at_s >= ours.at_s):
            return seen
        return ours

    def plan(
        self,
        node_annotations: Mapping[str, Mapping[str, str]],
        hot_values: Mapping[str, int],
        now_s: float,
    ) -> dict[str, dict[str, str]]:
        """Patches for the nodes whose hot value must be written now."""
        patches: dict[str, dict[str, str]] = {}
        for node, on_node in node_annotations.items():
            want = hot_values.get(node, 0)
            if needs_write(want, self.on_node(node, on_node), now_s, self.refresh_s):
                patches[node] = {HOT_VALUE_KEY: format_hot_value(want, now_s)}
        for node in self._written.keys() - node_annotations.keys():
            del self._written[node]  # node deleted
        return patches


class HotValuePublisher:
    """One hot-value round: the bindings' hot values, written where they changed."""

    def __init__(
        self,
        observer: BindingObserver,
        windows: BindingWindows,
        writes: HotValueWrites,
        patcher: AnnotationPatcher,
        telemetry: AnnotatorMetrics,
        clock: Callable[[], float],
    ) -> None:
        self._observer = observer
        self._windows = windows
        self._writes = writes
        self._patcher = patcher
        self._telemetry = telemetry
        self._clock = clock

    async def publish(self, nodes: Mapping[str, NodeInfo]) -> int:
        """Write the hot values that changed; returns the number of nodes written."""
        now_s = self._clock()
        self._observer.tidy(now_s)
        hot_values = self._windows.hot_values(now_s)
        annotations = {name: info.annotations for name, info in nodes.items()}
        plan = self._writes.plan(annotations, hot_values, now_s)
        if not plan:
            return 0
        report = await self._patcher.patch_nodes(plan)
        for node, outcome in report.outcomes.items():
            self._telemetry.patches.labels("hot_value", outcome.value).inc()
            if outcome.is_error:
                self._telemetry.patch_errors.labels("hot_value", outcome.value).inc()
            if outcome is PatchOutcome.WRITTEN:
                self._writes.record_written(node, hot_values.get(node, 0), now_s)
        log.info(
            "hot values: %d nodes changed, patches: %s (%d nodes with bindings in the window)",
            len(plan),
            report.summary(),
            len(hot_values),
        )
        return report.written
