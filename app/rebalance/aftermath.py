"""Did it help? One move judged ``settleTime`` after it was made; pure.

A move is what one round evicted from one source (one pod, or a few evicted together:
their effects on the source cannot be told apart). The plan said what it should do
(``Planned``); ``settleTime`` later the caller measures what happened (``Measured``),
and ``judge`` says whether it **helped**, had **no effect**, or **backfired**, with the
numbers and a reason. Every amount is a usage fraction of the resource the move is
judged on (the one the evicted pods were the largest share of), of the source's
allocatable, except the landing node's own usage, a fraction of its allocatable.

What changed on the source for other reasons is taken out as far as can be told: the
pods that were on it before and stayed (or left) are compared with themselves
(``others_before`` and ``stayed_after``), and the pods that arrived since, other than
the replacements, are added back (``arrived``). A caller that cannot tell them apart
leaves them unknown (None, 0): what came onto the source since then counts against
the move, as a replacement put back on it does. The simulator's count of evictions
that "bought nothing" (``app/simulate``) is this judgement's ``outcome != helped`` with
``arrived`` 0 and no landing or workload facts.

The rules, in order:

1. **backfired**: the source is hotter than other causes explain by more than
   ``NOISE_SHARE`` of what the move took off it; or a replacement's node went from at
   or below its targetThreshold to above it; or the workload was OOM-killed more, or
   throttled ``THROTTLE_RISE`` times as much (and at least once more), after than
   before;
2. **no effect**: nothing was taken off (no usage to move); every replacement came back
   to the source; or the source is cooler, less what other causes explain, by no more
   than ``NOISE_SHARE`` of what the move took off it (noise: a pod's usage jitters from
   sample to sample, and a pod like the evicted one may land there by chance);
3. **helped**: otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from app.objects import MoveRecord

__all__ = ["NOISE_SHARE", "Judgement", "Measured", "Outcome", "Planned", "judge", "judged_move"]

NOISE_SHARE = 0.5
THROTTLE_RISE = 1.5


class Outcome(StrEnum):
    HELPED = "helped"
    NO_EFFECT = "no effect"
    BACKFIRED = "backfired"


@dataclass(frozen=True, slots=True)
class Planned:
    """What the plan said, as the round measured it."""

    source: str
    resource: str  # "cpu" | "memory": the one the move is judged on
    source_before: float  # the source's usage fraction as the round measured it
    moved: float  # what the evicted pods used, as a fraction of the source's allocatable
    destination: str  # the node the plan reserved room on ("" when none)
    pods: int = 1
    others_before: float | None = None  # the other pods on the source then (None: unknown)


@dataclass(frozen=True, slots=True)
class Measured:
    """What ``settleTime`` later shows. None: not known."""

    source_after: float
    stayed_after: float | None = None  # the pods of ``others_before`` still there, now
    arrived: float = 0.0  # other pods that came onto the source since (not replacements)
    returned: int = 0  # replacements that came back to the source
    landed_on: str | None = None  # where a replacement landed, when not on the source
    landed_before: float | None = None  # that node's usage fraction at the eviction
    landed_after: float | None = None
    landed_high: float | None = None  # that node's targetThreshold
    throttled_before: int | None = None  # the workload's throttled periods, before/after
    throttled_after: int | None = None
    oom_before: int | None = None  # the workload's OOM kills, before/after
    oom_after: int | None = None


@dataclass(frozen=True, slots=True)
class Judgement:
    outcome: Outcome
    cooling: float  # source_before - source_after: how much cooler the source is
    explained: float  # of that, what other causes explain (pods that left or came)
    attributed: float  # cooling - explained: what the move bought
    moved: float  # what it took off
    reason: str

    @property
    def helped(self) -> bool:
        return self.outcome is Outcome.HELPED


def judged_move(move: MoveRecord, judgement: Judgement, now_s: float) -> MoveRecord:
    """``move`` as the memory keeps it once judged at ``now_s``."""
    return replace(
        move,
        outcome=judgement.outcome.value,
        judged_at_s=now_s,
        cooling=judgement.cooling,
        attributed=judgement.attributed,
        reason=judgement.reason,
    )


def judge(planned: Planned, measured: Measured) -> Judgement:
    """The move's outcome, its numbers and why (the rules in the module's docstring)."""
    cooling = planned.source_before - measured.source_after
    explained = -measured.arrived
    if planned.others_before is not None and measured.stayed_after is not None:
        explained += planned.others_before - measured.stayed_after
    attributed = cooling - explained
    moved = planned.moved
    on = f"{planned.resource} on {planned.source}"
    numbers = (
        f"{on} went {planned.source_before:.3f} -> {measured.source_after:.3f}, "
        f"{explained:+.3f} of it from other pods; the move took {moved:.3f} off"
        f"{_workload_numbers(measured)}"
    )

    def verdict(outcome: Outcome, why: str) -> Judgement:
        return Judgement(outcome, cooling, explained, attributed, moved, f"{why}: {numbers}")

    why_backfired = _backfired(planned, measured, attributed)
    if why_backfired is not None:
        return verdict(Outcome.BACKFIRED, why_backfired)
    if moved <= 0:
        return verdict(Outcome.NO_EFFECT, "the evicted pods used none of it")
    if measured.returned >= planned.pods:
        return verdict(Outcome.NO_EFFECT, "the replacement came back to the source")
    if attributed <= NOISE_SHARE * moved:
        return verdict(
            Outcome.NO_EFFECT,
            f"the source is cooler by {attributed:.3f} less other causes, not more than "
            f"{NOISE_SHARE:g} of what was moved",
        )
    return verdict(Outcome.HELPED, f"the source is cooler by {attributed:.3f}")


def _workload_numbers(measured: Measured) -> str:
    """The workload's throttling and OOM kills before -> after, where both are known."""
    parts = []
    if measured.throttled_before is not None and measured.throttled_after is not None:
        parts.append(f"throttled {measured.throttled_before} -> {measured.throttled_after} periods")
    if measured.oom_before is not None and measured.oom_after is not None:
        parts.append(f"OOM-killed {measured.oom_before} -> {measured.oom_after} times")
    return "; the workload was " + ", ".join(parts) if parts else ""


def _backfired(planned: Planned, measured: Measured, attributed: float) -> str | None:
    if planned.moved > 0 and attributed < -NOISE_SHARE * planned.moved:
        return f"the source is hotter by {-attributed:.3f} than other causes explain"
    landed = measured.landed_on
    before, after, high = measured.landed_before, measured.landed_after, measured.landed_high
    if (
        landed is not None
        and before is not None
        and after is not None
        and high is not None
        and before <= high < after
    ):
        return (
            f"the replacement made {landed} hot ({before:.3f} -> {after:.3f}, "
            f"targetThreshold {high:.3f})"
        )
    oom = (measured.oom_before, measured.oom_after)
    if oom[0] is not None and oom[1] is not None and oom[1] > oom[0]:
        return f"the workload was OOM-killed more ({oom[0]} -> {oom[1]})"
    throttled = (measured.throttled_before, measured.throttled_after)
    if (
        throttled[0] is not None
        and throttled[1] is not None
        and throttled[1] > max(THROTTLE_RISE * throttled[0], throttled[0])
    ):
        return f"the workload was throttled more ({throttled[0]} -> {throttled[1]})"
    return None
