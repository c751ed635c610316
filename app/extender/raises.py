"""Which pods hold one of their workload's raises: the bounded workload-usage raise in
the extender's reserve (``app.load.estimate``, "Bounds"; issue 42).

A pod placed through the scheduler whose workload's pods are observed to use far more
than it declares is estimated at what they use. One tenant's burner could otherwise
publish 7.5 cores as its workload's usage and have a wave of never-started pods of the
same workload key each count as a whole node. So a pod takes one of its workload's
raises when it is reserved or bound, only while fewer of the workload's pods hold one
than the annotator measured running (``measured``; none below ``MIN_MEASURED_PODS``),
and holds it until it leaves the reserve, ``maxAge`` passes, or its grace ends without
its containers started (``started_in_grace``). ``hand_out`` gives them out again in
binding order after a change of what the workloads use (``bounded_raises``, the one
rule the annotator's soft taints and the descheduler use too); ``left`` tells the pod in
hand's estimate whether it would get one. A pod holding no raise is estimated at no
more than its workload's usage (``app.load.lowering``; issue 43).

Cheap on the request path: a lookup per pod, and a scan of a workload's holders only
when all its raises are held.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from app.load import (
    MIN_MEASURED_PODS,
    START_GRACE_S,
    Evidence,
    PlacedPod,
    bounded_raises,
    holds_raise,
    lowering,
    raise_end_s,
    raises,
    started_in_grace,
)
from app.objects import Demand, Resources, requests_and_limits
from app.policy import Policy

Observed = Callable[[str | None], Resources | None]
"""A workload's observed per-pod usage (``app.extender.workload_usage``); None: none."""

Measured = Callable[[str], int]
"""How many of a workload's running pods its published usage was measured on."""


class PublishedUsage(Protocol):
    """What the workloads are observed to use (``app.extender.workload_usage``)."""

    def observed(self, workload: str | None) -> Resources | None: ...

    def measured(self, workload: str) -> int: ...


def nothing_observed(_workload: str | None) -> Resources | None:
    return None


def none_measured(_workload: str) -> int:
    return 0


@dataclass(frozen=True, slots=True)
class BoundPod:
    """A pod bound within ``maxAge``, as the reserve estimates it."""

    requests: Resources
    limits: Resources
    bound_at_s: float
    evidence: Evidence
    workload: str | None = None
    started_at_s: float | None = None  # its first container's start; None: not yet
    # Its class of pods, known from its reservation (None: none, or not reserved here).
    pod_class: str | None = None

    def placed(self, observed: Resources | None) -> PlacedPod:
        return PlacedPod(
            self.requests,
            self.limits,
            self.bound_at_s,
            self.evidence,
            observed,
            self.started_at_s,
            self.pod_class,
        )


class Reserved(Protocol):
    """What a reservation tells about its pod."""

    @property
    def pod(self) -> str: ...  # namespace/name

    @property
    def demand(self) -> Demand: ...

    @property
    def made_at_s(self) -> float: ...

    @property
    def workload(self) -> str | None: ...


class Raises:
    """Per workload, the pods (namespace/name) holding a raise and when each ends."""

    def __init__(
        self,
        policy: Callable[[], Policy],
        clock: Callable[[], float],
        usage: PublishedUsage | None = None,  # None: nothing observed
    ) -> None:
        self._policy = policy
        self._clock = clock
        self.observed: Observed = usage.observed if usage is not None else nothing_observed
        self.measured: Measured = usage.measured if usage is not None else none_measured
        self._held: dict[str, dict[str, float]] = {}
        # per workload, no held raise ends before this (a lower bound; -inf: unknown)
        self._first_end_s: dict[str, float] = {}

    def left(self, workload: str, now_s: float) -> bool:
        """Whether a pod of ``workload`` placed now would take one of its raises."""
        cap = self.measured(workload)
        if cap < MIN_MEASURED_PODS:
            return False
        holders = self._held.get(workload)
        if holders is None or len(holders) < cap:
            return True
        if now_s < self._first_end_s.get(workload, -math.inf):
            return False  # all held, and none ends before: no scan on the request path
        for pod in [pod for pod, end_s in holders.items() if end_s <= now_s]:
            del holders[pod]
        self._first_end_s[workload] = min(holders.values(), default=math.inf)
        return len(holders) < cap

    def left_now(self, workload: str) -> bool:
        """``left`` at the clock's time: what a request asks of a pod it scores."""
        return self.left(workload, self._clock())

    def holds(self, workload: str | None, pod: str) -> bool:
        holders = self._held.get(workload) if workload is not None else None
        return holders is not None and pod in holders

    def release(self, workload: str | None, pod: str) -> None:
        if workload is None:
            return
        holders = self._held.get(workload)
        if holders is not None and holders.pop(pod, None) is not None and not holders:
            del self._held[workload]
            self._first_end_s.pop(workload, None)

    def _take(self, workload: str | None, pod: str, end_s: float, now_s: float) -> bool:
        """Give ``pod`` one of its workload's raises until ``end_s``, if one is left."""
        if workload is None or not self.left(workload, now_s):
            return False
        self._hold(workload, pod, end_s)
        return True

    def for_reservation(
        self, workload: str | None, pod: str, demand: Demand, now_s: float
    ) -> Resources | None:
        """What a pod reserved now is estimated at: its workload's usage if it holds a
        raise or takes one (until its grace ends; binding extends it), else None."""
        observed = self.observed(workload)
        if observed is None or self.holds(workload, pod):
            return observed
        settings = self._policy().spec.estimation
        requests, limits = requests_and_limits(demand)
        if raises(requests, limits, observed, settings) and self._take(
            workload, pod, now_s + START_GRACE_S, now_s
        ):
            return observed
        return self._lowering(workload, requests, limits, Evidence.SCORED)

    def of_reservation(self, reservation: Reserved) -> Resources | None:
        """A live reservation's workload usage if it holds a raise, else what of it
        lowers its estimate (``lowering``)."""
        if not self.holds(reservation.workload, reservation.pod):
            requests, limits = requests_and_limits(reservation.demand)
            return self._lowering(reservation.workload, requests, limits, Evidence.SCORED)
        return self.observed(reservation.workload)

    def _lowering(
        self, workload: str | None, requests: Resources, limits: Resources, evidence: Evidence
    ) -> Resources | None:
        """What of its workload's usage lowers the estimate of a pod holding no raise:
        a workload measured on at least ``MIN_MEASURED_PODS`` pods, a pod placed through
        the scheduler (``app.load.estimate``, "Lowered to what is measured")."""
        if workload is None or evidence is Evidence.PLACED:
            return None
        if self.measured(workload) < MIN_MEASURED_PODS:
            return None
        observed = self.observed(workload)
        return lowering(requests, limits, observed, self._policy().spec.estimation)

    def on_bound(self, key: str, pod: BoundPod, now_s: float, reserved: bool) -> None:
        """A pod just bound keeps the raise its reservation held (until its own end), or
        takes one if its estimate rises and one is left."""
        settings = self._policy().spec.estimation
        observed = self.observed(pod.workload)
        end_s = raise_end_s(pod.placed(observed), settings)
        if reserved and pod.workload is not None and self.holds(pod.workload, key):
            self._hold(pod.workload, key, end_s)
            return
        if pod.evidence is not Evidence.PLACED and raises(
            pod.requests, pod.limits, observed, settings
        ):
            self._take(pod.workload, key, end_s, now_s)

    def on_started(self, key: str, pod: BoundPod) -> None:
        """A holder's containers started: it holds its raise until ``maxAge``, if in time."""
        if pod.workload is not None and self.holds(pod.workload, key):
            end_s = raise_end_s(pod.placed(None), self._policy().spec.estimation)
            self._hold(pod.workload, key, end_s)

    def raised(self, key: str, pod: BoundPod, now_s: float) -> Resources | None:
        """What a bound pod's estimate may be raised to now: its workload's usage while
        it holds a raise and its grace allows (``started_in_grace``); else what of that
        usage lowers it (``_lowering``), or None."""
        if not self.holds(pod.workload, key) or not started_in_grace(
            pod.bound_at_s, pod.started_at_s, now_s
        ):
            return self._lowering(pod.workload, pod.requests, pod.limits, pod.evidence)
        return self.observed(pod.workload)

    def hand_out(
        self,
        bound: Iterable[tuple[str, BoundPod]],
        reservations: Iterable[Reserved],
        now_s: float,
    ) -> None:
        """Hand the raises out again, in binding order, to every pod bound within
        ``maxAge`` and every live reservation (``bounded_raises``): after a change of
        what the workloads use or how many pods they were measured on."""
        settings = self._policy().spec.estimation
        members: list[tuple[str | None, PlacedPod]] = []
        keys: list[str] = []
        for key, pod in bound:
            members.append((pod.workload, pod.placed(self.observed(pod.workload))))
            keys.append(key)
        for reservation in reservations:
            requests, limits = requests_and_limits(reservation.demand)
            observed = self.observed(reservation.workload)
            placed = PlacedPod(
                requests, limits, reservation.made_at_s, Evidence.SCORED, observed, None
            )
            members.append((reservation.workload, placed))
            keys.append(reservation.pod)
        measured = {w: self.measured(w) for w, _ in members if w is not None}
        self._held, self._first_end_s = {}, {}
        for (workload, _), key, placed in zip(
            members, keys, bounded_raises(members, measured, now_s, settings), strict=True
        ):
            if workload is not None and holds_raise(placed, settings):
                self._hold(workload, key, raise_end_s(placed, settings))

    def _hold(self, workload: str, pod: str, end_s: float) -> None:
        """``pod`` holds a raise of ``workload`` until ``end_s``."""
        self._held.setdefault(workload, {})[pod] = end_s
        first_end_s = self._first_end_s.get(workload, math.inf)
        self._first_end_s[workload] = min(first_end_s, end_s)
