"""The verdict index: node name → (extender score, filter reason), answering whole requests.

``filter`` and ``prioritize`` sit on kube-scheduler's serial scheduling cycle and cost
time per node name, so the index answers a whole request in one call that returns the
response body. It computes nothing itself: NodeTable keeps it in step with the load
model, and it only looks names up and writes JSON.

Two implementations give the same answers (the same JSON, if not always the same bytes):

* the native one, ``app/extender/_verdict_index.c``, built when the package is
  installed with a C compiler at hand (the Dockerfile and ``scripts/setup`` have one).
  It hashes each name's bytes once and probes two compact arrays, where Python dicts
  pay a SipHash per freshly parsed name and reach into objects scattered in memory;
* ``PyVerdictIndex`` below, the fallback when the extension is missing. It keeps no
  rule of its own: prioritize looks the names up and asks ``app.load.prioritize``'s
  ``host_priorities_and_preferred``, the reference the native index is held
  to on random inputs (``tests/extender/test_index.py``).

``LOADAWARE_VERDICT_INDEX=python`` forces the fallback (to compare the two, or to rule
the extension out while debugging).
"""

from __future__ import annotations

import math
import os
import secrets
from collections import Counter
from itertools import filterfalse, repeat
from typing import Protocol, cast

import orjson

from app.load import host_priorities_and_preferred, plain_priority

try:
    from app.extender._verdict_index import VerdictIndex as NativeVerdictIndex
    from app.extender._verdict_index import pod_fields as pod_fields
    from app.extender._verdict_index import split_args as split_args
except ImportError:  # built without a C compiler
    NativeVerdictIndex = None  # type: ignore[assignment,misc]
    split_args = None  # type: ignore[assignment]
    pod_fields = None  # type: ignore[assignment]

IMPLEMENTATION_ENV = "LOADAWARE_VERDICT_INDEX"


class VerdictIndex(Protocol):
    """What NodeTable keeps and the verbs ask."""

    unknown_score: int  # the score of a name the index does not hold

    def __len__(self) -> int: ...

    def set(
        self,
        name: str,
        score: int,
        reason: str | None,
        preferable: bool = True,
        cpu_room: float = math.inf,
        memory_room: float = math.inf,
        /,
    ) -> None:
        """Record a node's extender score, filter reason (None: it passes), whether it
        may be the preferred node (``app.load.prioritize.can_be_preferred``) and the cpu cores
        and memory bytes it can still take under its limits (``limit_room``)."""

    def discard(self, name: str, /) -> None: ...

    def clear(self) -> None: ...

    def get(self, name: str, /) -> tuple[int, str | None] | None: ...

    def filter(self, names: list[str], exempt: bool, /) -> tuple[bytes, dict[str, int]]:
        """The ExtenderFilterResult body for these names, and how many each reason rejected.

        Names the index does not hold pass. With ``exempt`` every name passes.
        Raises TypeError when a name is not a str.
        """

    def prioritize(
        self, names: list[str], cpu: float = 0.0, memory: float = 0.0, /
    ) -> tuple[bytes, int, int]:
        """The HostPriorityList body for these names, how many the index lacks, and the
        position of the preferred name, -1 when none may be preferred.

        The rules are ``app.load.prioritize``'s: the preferred name is the first name with the
        highest score among the passing names set as preferable whose rooms hold the
        pod's estimate, ``cpu`` cores and ``memory`` bytes, or where none has room, among
        all passing names set as preferable (unknown names pass and score
        ``unknown_score``, but are never preferred). It is answered
        min(top + 1, 10) and every other name min(score, 9): the answer has a unique
        top (every other name is answered at most the preferred one's score), so where
        nodes tie kube-scheduler still binds where the extender reserves
        (README "Burst-aware estimation"). Where no name may be preferred, none is
        lifted.

        Raises TypeError when a name is not a str.
        """

    def filter_text(
        self, body: bytes, start: int, end: int, exempt: bool, /
    ) -> tuple[bytes, dict[str, int], int] | None:
        """As ``filter``, with the names read from ``body[start:end]``, a NodeNames
        array's JSON text (``split_args``), and how many names there were. None when
        the text is not in the plain form kube-scheduler writes (names of printable
        ASCII, no escapes), or the index reads no text: the caller parses it then."""

    def prioritize_text(
        self, body: bytes, start: int, end: int, cpu: float, memory: float, /
    ) -> tuple[bytes, int, str | None, int] | None:
        """As ``prioritize``, with the names read from ``body[start:end]`` as in
        ``filter_text``: the body, how many names the index lacks, the preferred name
        (not its position) or None, and how many names there were."""


class PyVerdictIndex:
    """The pure-Python fallback of the native index: dicts for the lookups, and
    ``app.load.prioritize``'s own functions for the preferred node and the answer."""

    def __init__(self) -> None:
        self.unknown_score = 0
        self._entries: dict[str, tuple[int, str | None]] = {}
        self._rejections: dict[str, str] = {}  # the small index most names miss
        self._preferable: dict[str, bool] = {}  # passes and may be preferred
        self._rooms: dict[str, tuple[float, float]] = {}  # (cpu cores, memory bytes)
        # Each name's HostPriority item as most answers carry it (plain_priority),
        # encoded once; an answer that differs is encoded when it is made.
        self._plain: dict[str, int] = {}
        self._items: dict[str, bytes] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def set(
        self,
        name: str,
        score: int,
        reason: str | None,
        preferable: bool = True,
        cpu_room: float = math.inf,
        memory_room: float = math.inf,
        /,
    ) -> None:
        if not 0 <= score <= 255:
            raise ValueError(f"score {score} is outside 0..255")
        if not _has_utf8_form(name):
            return  # as the native index: no request can carry such a name
        self._entries[name] = (score, reason)
        if math.isnan(cpu_room) or math.isnan(memory_room):
            raise ValueError("a room must be a number, not NaN")
        self._preferable[name] = reason is None and preferable
        self._rooms[name] = (cpu_room, memory_room)
        plain = self._plain[name] = plain_priority(score)
        self._items[name] = orjson.dumps({"Host": name, "Score": plain})
        if reason is None:
            self._rejections.pop(name, None)
        else:
            self._rejections[name] = reason

    def discard(self, name: str, /) -> None:
        self._entries.pop(name, None)
        self._preferable.pop(name, None)
        self._rooms.pop(name, None)
        self._plain.pop(name, None)
        self._items.pop(name, None)
        self._rejections.pop(name, None)

    def clear(self) -> None:
        self._entries.clear()
        self._preferable.clear()
        self._rooms.clear()
        self._plain.clear()
        self._items.clear()
        self._rejections.clear()

    def get(self, name: str, /) -> tuple[int, str | None] | None:
        return self._entries.get(name)

    def filter(self, names: list[str], exempt: bool, /) -> tuple[bytes, dict[str, int]]:
        _check_names(names)
        failed: dict[str, str] = {}
        rejected: dict[str, int] = {}
        passed = names
        if not exempt:
            rejections = self._rejections
            hits = list(filter(rejections.__contains__, names))
            if hits:
                reasons = list(map(rejections.__getitem__, hits))
                failed = dict(zip(hits, reasons, strict=True))  # a repeated name, once
                rejected = dict(Counter(failed.values()))
                passed = list(filterfalse(failed.__contains__, names))
        body = orjson.dumps(
            {
                "NodeNames": passed,
                "FailedNodes": {},
                # Preemption cannot lower measured load within this cycle.
                "FailedAndUnresolvableNodes": failed,
                "Error": "",
            }
        )
        return body, rejected

    def filter_text(
        self, body: bytes, start: int, end: int, exempt: bool, /
    ) -> tuple[bytes, dict[str, int], int] | None:
        return None  # this index reads parsed names only

    def prioritize_text(
        self, body: bytes, start: int, end: int, cpu: float, memory: float, /
    ) -> tuple[bytes, int, str | None, int] | None:
        return None

    def prioritize(
        self, names: list[str], cpu: float = 0.0, memory: float = 0.0, /
    ) -> tuple[bytes, int, int]:
        _check_names(names)
        # The rule itself is app.load.prioritize's, asked in the request's order: this index
        # only looks each name up (an unknown name scores ``unknown_score``, never preferred).
        known = list(map(self._entries.get, names))
        unknown = known.count(None)
        scores = [self.unknown_score if entry is None else entry[0] for entry in known]
        can = list(map(self._preferable.get, names, repeat(False)))
        roomy = [
            cpu <= cpu_room and memory <= memory_room
            for cpu_room, memory_room in map(self._rooms.get, names, repeat(_NO_ROOM))
        ]
        answered, best = host_priorities_and_preferred(scores, can, roomy)
        pieces = list(map(self._items.get, names))
        plains = list(map(self._plain.get, names))
        for position, score in enumerate(answered):
            if score != plains[position]:  # unknown, lifted, or capped below the lifted
                pieces[position] = orjson.dumps({"Host": names[position], "Score": score})
        body = b"[" + b",".join(cast("list[bytes]", pieces)) + b"]"
        return body, unknown, best


_NO_ROOM = (-1.0, -1.0)  # an unknown name: never preferred, so never asked for room


def _has_utf8_form(name: str) -> bool:
    try:
        name.encode()
    except UnicodeEncodeError:  # lone surrogates, which JSON parsers refuse
        return False
    return True


def _check_names(names: list[str]) -> None:
    try:
        # str.join type-checks every item in C, far cheaper than a Python loop.
        "".join(names)
    except TypeError:
        index, name = next((i, n) for i, n in enumerate(names) if not isinstance(n, str))
        raise TypeError(f"NodeNames[{index}] is {type(name).__name__}, not a string") from None


def native_available() -> bool:
    return NativeVerdictIndex is not None


def new_verdict_index(implementation: str | None = None) -> VerdictIndex:
    """The native index when it was built, unless asked for ``python``."""
    wanted = implementation or os.environ.get(IMPLEMENTATION_ENV, "auto")
    if wanted not in ("auto", "native", "python"):
        raise ValueError(f"{IMPLEMENTATION_ENV} must be auto, native or python, not {wanted!r}")
    if wanted == "python":
        return PyVerdictIndex()
    if NativeVerdictIndex is None:
        if wanted == "native":
            raise RuntimeError("the native verdict index was not built (no C compiler?)")
        return PyVerdictIndex()
    # A per-process seed: request names cannot be chosen to collide in the table.
    return NativeVerdictIndex(seed=secrets.randbits(64))


def implementation_of(index: VerdictIndex) -> str:
    if NativeVerdictIndex is not None and isinstance(index, NativeVerdictIndex):
        return "native"
    return "python"
