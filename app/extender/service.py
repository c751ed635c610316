"""The extender's state and wiring: node table, verbs, node source, policy, metrics."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from app.extender.index import IMPLEMENTATION_ENV, VerdictIndex, implementation_of
from app.extender.metrics import ExtenderMetrics
from app.extender.table import NodeEntry, NodeTable
from app.extender.verbs import Outcome, Verbs
from app.kube.nodes import NodeCache, NodeInfo
from app.policy import Policy
from app.policy.watch import PolicyWatcher

log = logging.getLogger(__name__)

# Full-nodes mode never hears that a node was deleted; forget nodes unseen this long.
FULL_MODE_FORGET_AFTER_S = 3600.0
_WARN_EVERY_S = 60.0


class Extender:
    """One extender instance. ``node_cache`` is None in full-nodes mode."""

    # Full Node objects in requests update the table (full-nodes mode has no other source).
    remembers_request_nodes = True

    def __init__(
        self,
        policy: Policy,
        *,
        node_cache: NodeCache | None = None,
        policy_watcher: PolicyWatcher | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
        mode: str | None = None,
        index: VerdictIndex | None = None,
    ) -> None:
        self.clock = clock
        self._mode = mode
        self.table = NodeTable(policy, clock, index)
        self.verbs = Verbs(self.table, clock, remember_request_nodes=self.remembers_request_nodes)
        self.node_cache = node_cache
        self.policy_watcher = policy_watcher
        self.metrics = ExtenderMetrics(registry or CollectorRegistry())
        self.metrics.policy_last_reload.set(clock())
        self.metrics.nodes_known.set_function(lambda: len(self.table))
        self.metrics.nodes_overloaded.set_function(self._count_overloaded)
        self.metrics.node_cache_age.set_function(self._node_cache_age)
        self.metrics.verdict_index.labels(implementation=self.index_implementation).set(1)
        # Metric children looked up once: .labels() takes a lock on every call.
        self._request_children: dict[tuple[str, int], tuple[Any, Any]] = {}
        self._rejected_counters: dict[str, Any] = {}
        self._last_unknown_warning_s = -math.inf
        self._tasks: list[asyncio.Task[None]] = []
        if node_cache is not None:
            node_cache.add_listener(self._on_node)

    @property
    def mode(self) -> str:
        if self._mode is not None:
            return self._mode
        return "node-cache" if self.node_cache is not None else "full-nodes"

    def _on_node(self, name: str, _old: NodeInfo | None, info: NodeInfo | None) -> None:
        if info is None:
            self.table.remove(name)
        else:
            self.table.upsert(name, info.annotations)

    def _count_overloaded(self) -> float:
        self.table.refresh(self.clock())
        return float(len(self.table.rejected_metric))

    def _node_cache_age(self) -> float:
        age = self.node_cache.age_s() if self.node_cache is not None else None
        return -1.0 if age is None else age

    def set_policy(self, policy: Policy) -> None:
        self.table.set_policy(policy)
        self.metrics.policy_last_reload.set(self.clock())

    def on_policy_reload(self, result: str) -> None:
        self.metrics.policy_reloads.labels(result=result).inc()

    def ready(self) -> tuple[bool, str]:
        if self.node_cache is not None:
            return self.node_cache.current()
        return True, "ok"

    def record(self, verb: str, code: int, elapsed_s: float, outcome: Outcome | None) -> None:
        children = self._request_children.get((verb, code))
        if children is None:
            children = (
                self.metrics.requests.labels(verb=verb, code=str(code)),
                self.metrics.latency.labels(verb=verb),
            )
            self._request_children[(verb, code)] = children
        children[0].inc()
        children[1].observe(elapsed_s)
        if outcome is None:
            return
        # Counted here, after the answer is sent, to keep it off the scheduling cycle.
        for reason, nodes in outcome.rejected.items():
            counter = self._rejected_counters.get(reason)
            if counter is None:
                metric = self.table.metric_of_reason.get(reason, "unknown")
                counter = self.metrics.nodes_rejected.labels(metric=metric)
                self._rejected_counters[reason] = counter
            counter.inc(nodes)
        if outcome.unknown_nodes:
            self.metrics.unknown_nodes.inc(outcome.unknown_nodes)
            self._warn_unknown(outcome)

    def _warn_unknown(self, outcome: Outcome) -> None:
        now_s = self.clock()
        if now_s - self._last_unknown_warning_s < _WARN_EVERY_S:
            return
        self._last_unknown_warning_s = now_s
        log.warning(
            "%d of %d node(s) in a request are unknown to the extender; they pass unfiltered "
            "and score as nodes without data. %s",
            outcome.unknown_nodes,
            outcome.nodes,
            self.unknown_nodes_advice(),
        )

    def unknown_nodes_advice(self) -> str:
        """Why node names can be unknown here, and what to do about it."""
        if self.node_cache is None:
            return (
                "This extender runs without a node cache: set nodeCacheCapable: false in the "
                "scheduler's extender config, or run with --node-cache"
            )
        return "The node cache has not seen them yet (still syncing, or the nodes are new)"

    @property
    def index_implementation(self) -> str:
        return implementation_of(self.table.index)

    async def start(self) -> None:
        if self.index_implementation == "native":
            log.info("filter and prioritize are answered by the native verdict index")
        else:
            log.warning(
                "filter and prioritize are answered by the pure-Python verdict index (%s=%s, "
                "or the C extension was not built): each call costs more per node name. "
                "Reinstall with a C compiler at hand for the native one",
                IMPLEMENTATION_ENV,
                os.environ.get(IMPLEMENTATION_ENV, "auto"),
            )
        if self.node_cache is not None:
            self._tasks.append(asyncio.create_task(self.node_cache.run(), name="node-cache"))
        else:
            self._tasks.append(asyncio.create_task(self._forget_unseen(), name="forget-unseen"))
        if self.policy_watcher is not None:
            self._tasks.append(asyncio.create_task(self.policy_watcher.run(), name="policy"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _forget_unseen(self) -> None:
        while True:
            await asyncio.sleep(FULL_MODE_FORGET_AFTER_S / 6)
            forgotten = self.table.prune_unseen(FULL_MODE_FORGET_AFTER_S)
            if forgotten:
                log.info("forgot %d node(s) not seen in a request for an hour", forgotten)

    def debug_nodes(self) -> list[dict[str, Any]]:
        now_s = self.clock()
        self.table.refresh(now_s)
        views = [debug_view(entry, now_s) for entry in self.table]
        return sorted(views, key=lambda view: str(view["name"]))

    def debug_node(self, name: str) -> dict[str, Any] | None:
        now_s = self.clock()
        entry = self.table.lookup(name, now_s)
        return None if entry is None else debug_view(entry, now_s)


def debug_view(entry: NodeEntry, now_s: float) -> dict[str, Any]:
    """Everything about one node's verdict, for ``curl /debug/nodes``."""
    load = entry.load
    policy_windows = {r.metric: r for r in load.readings}
    return {
        "name": entry.name,
        "verdict": "overloaded" if load.overloads else "ok",
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
                "freshness": str(reading.freshness),
                "age_seconds": (
                    None if reading.timestamp_s is None else round(now_s - reading.timestamp_s, 1)
                ),
                "raw": entry.annotations.get(metric),
            }
            for metric, reading in policy_windows.items()
        },
        "hot_value": load.hot_value,
        "hot_value_fresh": load.hot_value_fresh,
        "load_score": load.load_score,
        "score": load.score,
        "extender_score": load.extender_score,
        "recheck_in_seconds": (
            None if math.isinf(load.recheck_at_s) else round(load.recheck_at_s - now_s, 1)
        ),
    }
