"""The extender's background tasks, which keep its parts current between requests:
the caches' watches, the sweep that ages estimated pods and reservations out, the
forgetting of nodes unseen in full-nodes mode, the policy watcher and the workload-usage
follower. Started with the server and stopped with it; none of them runs on a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from app.extender.reservations import Reservations
from app.extender.table import NodeTable
from app.extender.workload_usage import WorkloadUsageFollower
from app.kube import NodeCache, PodCache
from app.objects import ScheduledPod
from app.policy import Policy
from app.runtime import InForce

__all__ = ["ESTIMATE_SWEEP_S", "FULL_MODE_FORGET_AFTER_S", "Upkeep"]

log = logging.getLogger(__name__)

# Full-nodes mode never hears that a node was deleted; forget nodes unseen this long.
FULL_MODE_FORGET_AFTER_S = 3600.0
# How often estimated pods and reservations are aged out: they may end a little late.
ESTIMATE_SWEEP_S = 0.5


class Upkeep:
    """The tasks over the parts given; ``start`` creates them, ``stop`` cancels them."""

    def __init__(
        self,
        table: NodeTable,
        clock: Callable[[], float],
        *,
        node_cache: NodeCache | None,
        pod_cache: PodCache[ScheduledPod] | None,
        reservations: Reservations | None,
        policy_in_force: InForce[Policy],
        workload_usage: WorkloadUsageFollower | None,
    ) -> None:
        self._table, self._clock = table, clock
        self._node_cache, self._pod_cache = node_cache, pod_cache
        self._reservations = reservations
        self._policy_in_force, self._workload_usage = policy_in_force, workload_usage
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        if self._node_cache is not None:
            self.add(self._node_cache.run(), "node-cache")
        if self._pod_cache is not None:
            self.add(self._pod_cache.run(), "pod-cache")
            self.add(self._expire_estimates(), "estimates")
        else:
            self.add(self._forget_unseen(), "forget-unseen")
        if self._policy_in_force.watcher is not None:
            self.add(self._policy_in_force.run(), "policy")
        if self._workload_usage is not None:
            self.add(self._workload_usage.run(), "workload-usage")

    def add(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """One more task, stopped with the others (the demo's refresh)."""
        self._tasks.append(asyncio.create_task(work, name=name))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _expire_estimates(self) -> None:
        """Age estimated pods and reservations out, between requests rather than in one."""
        while True:
            await asyncio.sleep(ESTIMATE_SWEEP_S)
            if self._reservations is not None:
                self._reservations.verify(self._clock())
            self._table.expire_estimates(self._clock())

    async def _forget_unseen(self) -> None:
        while True:
            await asyncio.sleep(FULL_MODE_FORGET_AFTER_S / 6)
            forgotten = self._table.prune_unseen(FULL_MODE_FORGET_AFTER_S)
            if forgotten:
                log.info("forgot %d node(s) not seen in a request for an hour", forgotten)
