"""The descheduler's state: one ConfigMap that only the descheduler may write.

Recent evictions (for convergence, cooldowns and anti-thrash) and the debounce rounds
of each node used to be read back from Events and Node annotations, which anyone who
may create an Event, or patch a Node, could forge (docs/security.md, attacks 3 and 4).
Now they live in one ConfigMap in the descheduler's own namespace (default
``loadaware/loadaware-descheduler-state``, key ``state.json``), which its Role alone
grants it to write; Events stay as the record for humans and are never read.

The document::

    {"version": 1,
     "evictions": [{"pod": "ns/name", "uid": "...", "node": "...", "destination": "...",
                    "cpuCores": 0.5, "memoryBytes": 1.0e8, "at": 1700000000.0,
                    "workload": "ns/Deployment/web"}, ...],
     "hotRounds": {"node-1": [3, 1700000000.0], ...},
     "demand": [[1700000000.0, 12.5, 3.4e10], ...],
     "moves": [{"source": "node-1", "round": 1700000000.0, "resource": "cpu",
                "before": 0.9, "moved": 0.2, "others": 0.6, "destination": "node-2",
                "pods": 1, "workloads": ["ns/Deployment/web"], "outcome": "helped",
                "judgedAt": 1700000400.0, "cooling": 0.2, "attributed": 0.2,
                "reason": "..."}, ...]}

``demand`` is what the pods that need a node requested at each run (time, cores,
bytes; ``app/rebalance/rise.py``), for the rise consolidation keeps room for across
restarts and ``--once`` runs: at most ``MAX_DEMAND_SAMPLES``, newest kept, in at most
an eighth of the document. ``moves`` are what each run evicted from each source,
pending until judged ``settleTime`` later (no ``outcome``) and then kept, judged, for
``MOVES_KEPT_S`` (for the back-off and ``loadaware report``): at most ``MAX_MOVES``,
newest kept, each reason cut to ``MAX_REASON`` characters, so they add at most about
100 KiB.

Reading is defensive all the same (an operator may edit it): entries that do not
parse are skipped and logged, evictions older than the window or dated in the future
are ignored and logged, and a document that is not JSON at all is reported as
unreadable so that the run evicts nothing. Writing keeps the newest ``MAX_EVICTIONS``
evictions within the window in at most ``MAX_DOCUMENT_BYTES``, in turns by namespace,
leaving out what a reader would skip, so the object stays below the 1 MiB limit
whatever a tenant named its pods' owner, and carries the resourceVersion it read: a
409 re-reads, merges and tries again.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import ConfigMap

from app.kube.configmaps import OwnConfigMapStore, own_config_map
from app.kube.defaults import STATE_NAME
from app.kube.workload_usage import fair_order
from app.objects import EvictionRecord, MoveRecord, Resources

__all__ = [
    "DeschedulerState",
    "StateStore",
    "StateUnreadable",
]

log = logging.getLogger(__name__)

STATE_KEY = "state.json"
VERSION = 1
DEFAULT_NAME = STATE_NAME
MAX_EVICTIONS = 2000  # about 200 bytes each as JSON: well below a ConfigMap's 1 MiB
# Whatever the records hold (a pod key and a workload of up to 512 characters each),
# the document keeps to 3/4 of a ConfigMap's 1 MiB; node hot-round counts to a quarter.
MAX_DOCUMENT_BYTES = 768 * 1024
_ENVELOPE_BYTES = 64
FUTURE_SLACK_S = 60.0  # clocks disagree a little; more than this ahead is not trusted
_SAVE_ATTEMPTS = 3
MAX_MOVES = 300  # about 300 bytes each as JSON
MAX_REASON = 200
MAX_WORKLOADS = 8  # per move
MOVES_KEPT_S = 86400.0  # a day: what ``loadaware report --since`` can look back on
MAX_DEMAND_SAMPLES = 3000  # a day at a 30 s interval; about 35 bytes each as JSON
_OUTCOMES = ("helped", "no effect", "backfired")

HotRounds = dict[str, tuple[int, float]]  # node -> (consecutive hot rounds, when recorded)


class StateUnreadable(ValueError):
    """The state object exists but is not a state document."""


@dataclass
class DeschedulerState:
    """What the descheduler remembers between runs (and across restarts and leaders)."""

    evictions: dict[str, EvictionRecord] = field(default_factory=dict)  # by pod UID
    hot_rounds: HotRounds = field(default_factory=dict)
    moves: dict[str, MoveRecord] = field(default_factory=dict)  # by ``MoveRecord.key``
    # (time, requests of the pods that need a node), oldest first (app/rebalance/rise.py)
    demand: list[tuple[float, Resources]] = field(default_factory=list)
    exists: bool = False  # the object was there when read (False: the first run)
    resource_version: str | None = None

    def recent(self, since_s: float) -> tuple[EvictionRecord, ...]:
        records = (r for r in self.evictions.values() if r.evicted_at_s >= since_s)
        return tuple(sorted(records, key=lambda r: r.evicted_at_s))


def _entry(r: EvictionRecord) -> dict[str, Any]:
    return {
        "pod": r.pod_key,
        "uid": r.uid,
        "node": r.node,
        "destination": r.destination,
        "cpuCores": r.usage.cpu_cores,
        "memoryBytes": r.usage.memory_bytes,
        "at": r.evicted_at_s,
        # A workload a reader would not take back (longer than it reads) is left out,
        # not the record: the eviction still counts for its node and namespace.
        "workload": r.workload if _text(r.workload) is not None else None,
    }


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), sort_keys=True))


def encode(state: DeschedulerState, since_s: float) -> str:
    """The document for ``memory``: evictions at or after ``since_s``, at most
    ``MAX_EVICTIONS`` in at most ``MAX_DOCUMENT_BYTES``, kept newest first in turns by
    namespace (``fair_order``: a namespace evicted often cannot push the others out),
    beside node hot-round counts and the moves to judge (``kept_moves``, newest first),
    each to a quarter of it; a record a reader would skip (a field past its bound) is
    left out, so no record can stop a save (issue 42, point 2)."""
    hot_rounds: dict[str, list[float]] = {}
    size = _ENVELOPE_BYTES
    newest_first = sorted(state.hot_rounds.items(), key=lambda item: -item[1][1])
    for name, (count, at_s) in newest_first:
        entry_bytes = _size({name: [count, at_s]})
        if _text(name) is None or size + entry_bytes > MAX_DOCUMENT_BYTES // 4:
            continue
        hot_rounds[name] = [count, at_s]
        size += entry_bytes
    # The moves awaiting or holding their judgement: newest first, to a quarter too.
    moves: list[MoveRecord] = []
    moves_bytes = 0
    for move in reversed(kept_moves(state.moves.values())):
        entry_bytes = _size(_move_entry(move)) + 1
        if moves_bytes + entry_bytes > MAX_DOCUMENT_BYTES // 4:
            continue
        moves_bytes += entry_bytes
        moves.append(move)
    moves.reverse()
    size += moves_bytes
    # The demand samples: newest first, to an eighth.
    demand: list[list[float]] = []
    demand_bytes = 0
    for at_s, amount in reversed(state.demand[-MAX_DEMAND_SAMPLES:]):
        sample = [at_s, amount.cpu_cores, amount.memory_bytes]
        entry_bytes = _size(sample) + 1
        if demand_bytes + entry_bytes > MAX_DOCUMENT_BYTES // 8:
            break
        demand.append(sample)
        demand_bytes += entry_bytes
    demand.reverse()
    size += demand_bytes
    records = [r for r in reversed(state.recent(since_s)) if _readable(r)]
    kept: list[tuple[EvictionRecord, dict[str, Any]]] = []
    for position in fair_order(r.pod_key for r in records):
        if len(kept) >= MAX_EVICTIONS:
            break
        entry = _entry(records[position])
        entry_bytes = _size(entry) + 1
        if size + entry_bytes > MAX_DOCUMENT_BYTES:
            continue
        size += entry_bytes
        kept.append((records[position], entry))
    kept.sort(key=lambda item: item[0].evicted_at_s)
    document = {
        "version": VERSION,
        "evictions": [entry for _, entry in kept],
        "hotRounds": hot_rounds,
        "moves": [_move_entry(m) for m in moves],
        "demand": demand,
    }
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def _readable(record: EvictionRecord) -> bool:
    """Whether ``decode`` would take the record back."""
    texts = (record.pod_key, record.uid, record.node)
    if any(_text(t) is None for t in texts):
        return False
    return record.destination is None or _text(record.destination) is not None


def decode(text: str, now_s: float, since_s: float) -> tuple[DeschedulerState, list[str]]:
    """The state a document holds, and what in it was ignored (for the log).

    Raises StateUnreadable when the text is not a version-1 state document."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise StateUnreadable(f"{STATE_KEY} is not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("version") != VERSION:
        raise StateUnreadable(f"{STATE_KEY} is not a version-{VERSION} state document")
    state = DeschedulerState(exists=True)
    ignored: list[str] = []
    for record in _dated_entries(document.get("evictions"), _record, "eviction", now_s, ignored):
        if record.evicted_at_s >= since_s:
            state.evictions[record.uid] = record
    rounds = document.get("hotRounds")
    for name, value in (rounds if isinstance(rounds, dict) else {}).items():
        parsed = _hot_round(value)
        if parsed is None:
            ignored.append(f"an unreadable hot-round count for node {str(name)[:80]!r}")
        elif parsed[1] > now_s + FUTURE_SLACK_S:
            ignored.append(f"the hot-round count of node {name}, dated in the future")
        else:
            state.hot_rounds[str(name)] = parsed
    for move in _dated_entries(document.get("moves"), _move, "move", now_s, ignored):
        if move.round_s >= now_s - MOVES_KEPT_S:
            state.moves[move.key] = move
    state.demand, unreadable = _demand(document.get("demand"), now_s)
    if unreadable:
        ignored.append(f"{unreadable} unreadable or future-dated demand samples")
    return state, ignored


def _demand(samples: Any, now_s: float) -> tuple[list[tuple[float, Resources]], int]:
    """The demand samples that parse (three finite numbers, not dated in the future),
    oldest first, the newest ``MAX_DEMAND_SAMPLES``; and how many did not."""
    found: dict[float, Resources] = {}
    unreadable = 0
    for sample in samples if isinstance(samples, list) else []:
        values = [_finite(v) for v in sample] if isinstance(sample, list) else []
        if len(values) != 3 or any(v is None for v in values):
            unreadable += 1
            continue
        at_s, cpu, memory = (float(v or 0.0) for v in values)
        if at_s > now_s + FUTURE_SLACK_S:
            unreadable += 1
            continue
        found[at_s] = Resources(cpu, memory)
    return sorted(found.items(), key=lambda item: item[0])[-MAX_DEMAND_SAMPLES:], unreadable


_Entry = TypeVar("_Entry", EvictionRecord, MoveRecord)


def _dated_entries(
    entries: object,
    parse: Callable[[Any], _Entry | None],
    what: str,
    now_s: float,
    ignored: list[str],
) -> Iterator[_Entry]:
    """The entries of one of the document's lists (of ``what``) that ``parse`` reads and
    that are not dated in the future; each other one said in ``ignored``."""
    for entry in entries if isinstance(entries, list) else []:
        parsed = parse(entry)
        if parsed is None:
            ignored.append(f"an unreadable {what} entry {str(entry)[:80]!r}")
        elif _dated_s(parsed) > now_s + FUTURE_SLACK_S:
            ignored.append(f"{_described(parsed)}, dated in the future")
        else:
            yield parsed


def _dated_s(entry: EvictionRecord | MoveRecord) -> float:
    return entry.evicted_at_s if isinstance(entry, EvictionRecord) else entry.round_s


def _described(entry: EvictionRecord | MoveRecord) -> str:
    if isinstance(entry, EvictionRecord):
        return f"the eviction of {entry.pod_key}"
    return f"the move from {entry.source}"


def kept_moves(moves: Iterable[MoveRecord]) -> list[MoveRecord]:
    """The newest ``MAX_MOVES`` moves, oldest first."""
    return sorted(moves, key=lambda m: m.round_s)[-MAX_MOVES:]


def _move_entry(move: MoveRecord) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "source": move.source,
        "round": move.round_s,
        "resource": move.resource,
        "before": move.source_before,
        "moved": move.moved,
        "others": move.others_before,
        "destination": move.destination,
        "pods": move.pods,
        "workloads": list(move.workloads[:MAX_WORKLOADS]),
    }
    if move.destination_before is not None and move.destination_high is not None:
        entry.update(
            destinationBefore=move.destination_before, destinationHigh=move.destination_high
        )
    if move.outcome is not None:
        entry.update(
            outcome=move.outcome,
            judgedAt=move.judged_at_s,
            cooling=move.cooling,
            attributed=move.attributed,
            reason=move.reason[:MAX_REASON],
        )
    return entry


def _signed(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and abs(number) <= 1e3 else None


def _move(entry: Any) -> MoveRecord | None:
    if not isinstance(entry, dict):
        return None
    source, resource = _text(entry.get("source")), entry.get("resource")
    round_s, before = _finite(entry.get("round")), _finite(entry.get("before"))
    moved, others = _finite(entry.get("moved")), _finite(entry.get("others"))
    pods, workloads = entry.get("pods"), entry.get("workloads")
    destination = entry.get("destination")
    if source is None or resource not in ("cpu", "memory") or round_s is None:
        return None
    if before is None or moved is None or others is None:
        return None
    if isinstance(pods, bool) or not isinstance(pods, int) or not 0 < pods <= 10_000:
        return None
    if not isinstance(destination, str) or len(destination) > 512:
        return None
    if not isinstance(workloads, list) or len(workloads) > MAX_WORKLOADS:
        return None
    names = tuple(_text(w) for w in workloads)
    if any(name is None for name in names):
        return None
    move = MoveRecord(
        source,
        round_s,
        resource,
        before,
        moved,
        others,
        destination,
        pods,
        tuple(n for n in names if n is not None),
        _finite(entry.get("destinationBefore")),
        _finite(entry.get("destinationHigh")),
    )
    outcome = entry.get("outcome")
    if outcome is None:
        return move
    judged_at, cooling = _finite(entry.get("judgedAt")), _signed(entry.get("cooling"))
    attributed, reason = _signed(entry.get("attributed")), entry.get("reason")
    if outcome not in _OUTCOMES or judged_at is None or cooling is None or attributed is None:
        return None
    if not isinstance(reason, str):
        return None
    return replace(
        move,
        outcome=outcome,
        judged_at_s=judged_at,
        cooling=cooling,
        attributed=attributed,
        reason=reason[:MAX_REASON],
    )


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 512 else None


def _record(entry: Any) -> EvictionRecord | None:
    if not isinstance(entry, dict):
        return None
    pod, uid, node = _text(entry.get("pod")), _text(entry.get("uid")), _text(entry.get("node"))
    cpu, memory = _finite(entry.get("cpuCores")), _finite(entry.get("memoryBytes"))
    at_s = _finite(entry.get("at"))
    if pod is None or uid is None or node is None or cpu is None or memory is None:
        return None
    if at_s is None:
        return None
    return EvictionRecord(
        pod_key=pod,
        uid=uid,
        node=node,
        destination=_text(entry.get("destination")),
        usage=Resources(cpu, memory),
        evicted_at_s=at_s,
        workload=_text(entry.get("workload")),
    )


def _hot_round(value: Any) -> tuple[int, float] | None:
    if not isinstance(value, list) or len(value) != 2:
        return None
    count, at_s = value
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return None
    at = _finite(at_s)
    return None if at is None else (count, at)


class StateStore(OwnConfigMapStore):
    """Reads and writes the state ConfigMap (``get``, ``create`` and ``update`` on
    configmaps in the descheduler's own namespace: app/kube/permissions.py)."""

    default_name = DEFAULT_NAME

    async def load(self, now_s: float, since_s: float) -> DeschedulerState:
        """The state as stored; an empty one (``exists`` False) if there is no object.

        Raises what the client raises, and StateUnreadable: the run must not evict
        without its state."""
        try:
            stored = await self._client.get(ConfigMap, self.name, namespace=self.namespace)
        except ApiError as error:
            if error.status.code == 404:
                return DeschedulerState()
            raise
        text = (stored.data or {}).get(STATE_KEY, "")
        state, ignored = decode(text, now_s, since_s)
        state.resource_version = stored.metadata.resourceVersion if stored.metadata else None
        for what in ignored:
            log.warning("%s: ignoring %s", self.where, what)
        return state

    async def save(self, state: DeschedulerState, now_s: float, since_s: float) -> None:
        """Write ``memory``; on a conflict, merge with what is stored and try again.

        Raises what the client raises after ``_SAVE_ATTEMPTS`` conflicts or on any
        other error; ``memory`` then holds what this process knows."""
        for attempt in range(_SAVE_ATTEMPTS):
            body = own_config_map(
                self.name, self.namespace, "descheduler",
                {STATE_KEY: encode(state, since_s)}, state.resource_version,
            )
            try:
                if state.exists:
                    saved = await self._client.replace(body)
                else:
                    saved = await self._client.create(body)
            except ApiError as error:
                if error.status.code != 409 or attempt == _SAVE_ATTEMPTS - 1:
                    raise
                self._merge(state, await self.load(now_s, since_s))
                continue
            state.exists = True
            state.resource_version = saved.metadata.resourceVersion if saved.metadata else None
            return

    @staticmethod
    def _merge(state: DeschedulerState, stored: DeschedulerState) -> None:
        """Another writer came first (a leader change): keep both sides' evictions and
        this process's debounce counts, on top of the stored object's version."""
        for uid, record in stored.evictions.items():
            state.evictions.setdefault(uid, record)
        for name, rounds in stored.hot_rounds.items():
            state.hot_rounds.setdefault(name, rounds)
        for key, move in stored.moves.items():
            mine = state.moves.get(key)
            if mine is None or (mine.outcome is None and move.outcome is not None):
                state.moves[key] = move
        mine_at = {at_s for at_s, _ in state.demand}
        merged = state.demand + [(t, d) for t, d in stored.demand if t not in mine_at]
        state.demand = sorted(merged, key=lambda item: item[0])[-MAX_DEMAND_SAMPLES:]
        state.exists = stored.exists
        state.resource_version = stored.resource_version
