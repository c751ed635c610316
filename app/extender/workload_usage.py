"""What each workload's pods are observed to use, as the annotator last published it
(``app/kube/workload_usage.py``), kept current off the scheduling path.

Every ``refresh_s`` the follower reads the ConfigMap once (one GET) and swaps in what
it holds; ``observed`` is one dict lookup, so the estimate of a pod just bound (the
reserve's) and of the pod being scored (``app.extender.verbs``) cost no API call.

It fails safe: a missing object, a document that cannot be trusted
(``WorkloadUsageUnreadable``), an API error, or a document published more than
``max_age_s`` ago (the annotator stopped, lost its Prometheus, or lost its lease)
leave nothing observed, and every pod is estimated from its requests and limits alone,
as without the feature. Each change of state is logged once and counted
(``loadaware_extender_workload_usage_reads_total``); ``on_change`` is called whenever
what ``observed`` answers changes, so that every estimate resting on it is redone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from app.extender.defaults import WORKLOAD_USAGE_REFRESH_S
from app.kube import WORKLOAD_USAGE_MAX_AGE_S, WorkloadUsageStore, WorkloadUsageUnreadable
from app.objects import Resources

log = logging.getLogger(__name__)

DEFAULT_MAX_AGE_S = WORKLOAD_USAGE_MAX_AGE_S
DEFAULT_REFRESH_S = WORKLOAD_USAGE_REFRESH_S

_NOTHING: Mapping[str, Resources] = MappingProxyType({})
_NO_PODS: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class WorkloadUsageSource:
    """Where the published workload usage is read, and how: what the extender builds
    its follower from."""

    store: WorkloadUsageStore
    max_age_s: float = DEFAULT_MAX_AGE_S
    refresh_s: float = DEFAULT_REFRESH_S


class WorkloadUsageFollower:
    """The published workload usage, refreshed by ``run``; ``observed`` reads it."""

    def __init__(
        self,
        source: WorkloadUsageSource,
        *,
        clock: Callable[[], float],
        on_change: Callable[[], None] = lambda: None,
        on_read: Callable[[str], None] = lambda _result: None,
    ) -> None:
        self._store = source.store
        self._clock = clock
        self.on_change = on_change
        self.on_read = on_read
        self.max_age_s = source.max_age_s
        self.refresh_s = source.refresh_s
        self._workloads = _NOTHING
        self._pods: Mapping[str, int] = MappingProxyType({})
        self.published_at_s: float | None = None  # of what ``observed`` answers from
        self.state = "not read yet"

    @property
    def workloads(self) -> Mapping[str, Resources]:
        return self._workloads

    def published(self) -> Mapping[str, Resources]:
        """``workloads``, as a call: what the verbs read per request."""
        return self._workloads

    def observed(self, workload: str | None) -> Resources | None:
        """What one pod of ``workload`` uses, if it is published and fresh."""
        if workload is None:
            return None
        return self._workloads.get(workload)

    def measured(self, workload: str) -> int:
        """How many running pods ``workload``'s published usage was measured on (the
        bounds on the raise, ``app.load.estimate``); 0: not said, or nothing fresh."""
        return self._pods.get(workload, 0)

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.refresh_s)

    async def refresh(self) -> None:
        """Read the object once and adopt what it says (module doc); never raises but
        for cancellation."""
        now_s = self._clock()
        try:
            read = await self._store.read(now_s)
        except WorkloadUsageUnreadable as error:
            self._adopt(_NOTHING, None, "unreadable", f"{self._store.where} is unreadable: {error}")
            return
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the API server's answer or a network error
            self._adopt(_NOTHING, None, "error", f"reading {self._store.where} failed: {error}")
            return
        if read is None:
            self._adopt(_NOTHING, None, "missing", f"{self._store.where} does not exist")
            return
        usage, skipped = read
        if skipped:
            log.debug("%s: skipped %d unreadable entries", self._store.where, skipped)
        age_s = now_s - usage.published_at_s
        if age_s >= self.max_age_s:
            self._adopt(
                _NOTHING,
                None,
                "stale",
                f"{self._store.where} was published {age_s:.0f}s ago (more than "
                f"--workload-usage-max-age, {self.max_age_s:.0f}s): is the annotator running?",
            )
            return
        self._adopt(usage.workloads, usage.published_at_s, "ok", "", usage.pods)

    def _adopt(
        self,
        workloads: Mapping[str, Resources],
        at_s: float | None,
        state: str,
        why: str,
        pods: Mapping[str, int] = _NO_PODS,
    ) -> None:
        self.on_read(state)
        if state != self.state:
            if state == "ok":
                log.info(
                    "workload usage: following %s (%d workloads)",
                    self._store.where,
                    len(workloads),
                )
            else:
                log.warning(
                    "workload usage: %s; pods are estimated from their requests and limits "
                    "alone until it is fresh again",
                    why,
                )
            self.state = state
        changed = workloads != self._workloads or pods != self._pods
        self._workloads = workloads
        self._pods = pods
        self.published_at_s = at_s
        if changed:
            self.on_change()
