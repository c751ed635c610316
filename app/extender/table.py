"""Per-node verdicts and scores, computed when a node changes rather than per request.

A verdict depends only on a node's loadaware annotations, the policy and the clock,
so the table keeps one ``NodeEntry`` per node and recomputes it when the annotations
change, when the policy changes, or when the clock passes ``recheck_at_s`` (a value
goes stale). A request then costs a dict lookup per node.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import orjson

from app.load.model import NodeLoad, evaluate_node
from app.load.samples import HOT_VALUE_KEY
from app.policy import Policy

log = logging.getLogger(__name__)

AnnotationKey = tuple[str | None, ...]


@dataclass(slots=True)
class NodeEntry:
    name: str
    annotations: Mapping[str, str]  # only loadaware's keys
    key: AnnotationKey  # the relevant annotation values, to detect changes cheaply
    load: NodeLoad
    reason: str | None  # the filter reason, None when the node passes
    score_json: bytes  # this node's pre-encoded prioritize item
    last_seen_s: float


VerdictListener = Callable[[NodeEntry, NodeEntry | None], None]
"""Called with a node's new entry and its previous one whenever a verdict is recomputed."""


class NodeTable:
    """The extender's view of every node it knows: name → precomputed entry."""

    def __init__(self, policy: Policy, clock: Callable[[], float] = time.time) -> None:
        self._policy = policy
        self._clock = clock
        self._keys = self._relevant_keys(policy)
        self._entries: dict[str, NodeEntry] = {}
        self._unknown_score_json: dict[str, bytes] = {}
        self._listeners: list[VerdictListener] = []
        self._unknown_load = evaluate_node({}, policy, clock())

    @staticmethod
    def _relevant_keys(policy: Policy) -> tuple[str, ...]:
        return (*policy.metrics, HOT_VALUE_KEY)

    @property
    def policy(self) -> Policy:
        return self._policy

    def add_listener(self, listener: VerdictListener) -> None:
        self._listeners.append(listener)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[NodeEntry]:
        return iter(list(self._entries.values()))

    def get(self, name: str) -> NodeEntry | None:
        return self._entries.get(name)

    def key_of(self, annotations: Mapping[str, str]) -> AnnotationKey:
        return tuple(annotations.get(key) for key in self._keys)

    def set_policy(self, policy: Policy) -> None:
        """Swap the policy and recompute every node under it."""
        self._policy = policy
        self._keys = self._relevant_keys(policy)
        now_s = self._clock()
        self._unknown_load = evaluate_node({}, policy, now_s)
        self._unknown_score_json.clear()
        for name, entry in list(self._entries.items()):
            self._store(name, entry.annotations, now_s, entry.last_seen_s)

    def upsert(self, name: str, annotations: Mapping[str, str]) -> NodeEntry:
        """Record a node's current annotations; recompute only if they changed."""
        now_s = self._clock()
        entry = self._entries.get(name)
        key = self.key_of(annotations)
        if entry is not None and entry.key == key:
            entry.last_seen_s = now_s
            return self.current(entry, now_s)
        return self._store(name, annotations, now_s, now_s)

    def remove(self, name: str) -> None:
        self._entries.pop(name, None)

    def prune_unseen(self, older_than_s: float) -> int:
        """Drop entries not seen for a while (full-nodes mode has no delete events)."""
        cutoff_s = self._clock() - older_than_s
        stale = [name for name, e in self._entries.items() if e.last_seen_s < cutoff_s]
        for name in stale:
            del self._entries[name]
        return len(stale)

    def current(self, entry: NodeEntry, now_s: float) -> NodeEntry:
        """``entry``, recomputed first if the clock has moved past its recheck time."""
        if now_s < entry.load.recheck_at_s:
            return entry
        return self._store(entry.name, entry.annotations, now_s, entry.last_seen_s)

    def lookup(self, name: str, now_s: float) -> NodeEntry | None:
        entry = self._entries.get(name)
        return None if entry is None else self.current(entry, now_s)

    @property
    def unknown_load(self) -> NodeLoad:
        """The verdict for a node the extender has no annotations for: it passes."""
        return self._unknown_load

    def unknown_score_json(self, name: str) -> bytes:
        encoded = self._unknown_score_json.get(name)
        if encoded is None:
            encoded = _score_json(name, self._unknown_load.extender_score)
            if len(self._unknown_score_json) < 100_000:
                self._unknown_score_json[name] = encoded
        return encoded

    def _store(
        self, name: str, annotations: Mapping[str, str], now_s: float, last_seen_s: float
    ) -> NodeEntry:
        relevant = {k: v for k in self._keys if (v := annotations.get(k)) is not None}
        load = evaluate_node(relevant, self._policy, now_s)
        entry = NodeEntry(
            name=name,
            annotations=relevant,
            key=self.key_of(relevant),
            load=load,
            reason=load.reason,
            score_json=_score_json(name, load.extender_score),
            last_seen_s=last_seen_s,
        )
        previous = self._entries.get(name)
        self._entries[name] = entry
        if previous is None or previous.reason != entry.reason:
            _log_verdict_change(entry, previous)
        for listener in self._listeners:
            listener(entry, previous)
        return entry


def _score_json(name: str, score: int) -> bytes:
    return orjson.dumps({"Host": name, "Score": score})


def _log_verdict_change(entry: NodeEntry, previous: NodeEntry | None) -> None:
    if entry.load.overloads:
        details = ", ".join(
            f"{o.metric}={o.usage_fraction:.3f} > {o.limit_fraction:g}"
            for o in entry.load.overloads
        )
        log.info("node %s is overloaded and will be filtered out: %s", entry.name, details)
    elif previous is not None and previous.reason is not None:
        log.info("node %s is no longer overloaded", entry.name)
