"""Did it help? The judgement of one move settleTime after it (app/rebalance/aftermath.py)."""

from __future__ import annotations

import pytest

from app.rebalance.aftermath import Measured, Outcome, Planned, judge

# A hot source at 0.90 cpu; the pod evicted from it used 0.20; 0.60 is the other pods'.
PLANNED = Planned("hot", "cpu", 0.90, 0.20, "cool", others_before=0.60)

CASES = [
    # (name, measured, outcome, reason contains)
    ("cooler by what it used", Measured(0.70, stayed_after=0.60), Outcome.HELPED, "cooler"),
    (
        "cooler only because another pod left",
        Measured(0.70, stayed_after=0.40),
        Outcome.NO_EFFECT,
        "not more than",
    ),
    (
        "hotter only because another pod arrived",
        Measured(0.85, stayed_after=0.60, arrived=0.15),
        Outcome.HELPED,
        "cooler",
    ),
    (
        "a newcomer nobody can tell apart eats the gain",
        Measured(0.85, stayed_after=0.60),
        Outcome.NO_EFFECT,
        "not more than",
    ),
    (
        "the replacement came back",
        Measured(0.70, stayed_after=0.60, returned=1),
        Outcome.NO_EFFECT,
        "came back",
    ),
    (
        "hotter than other causes explain",
        Measured(1.05, stayed_after=0.60),
        Outcome.BACKFIRED,
        "hotter by",
    ),
    (
        "the replacement made its node hot",
        Measured(0.70, landed_on="cool", landed_before=0.55, landed_after=0.85, landed_high=0.8),
        Outcome.BACKFIRED,
        "made cool hot",
    ),
    (
        "the replacement landed on a node already hot",
        Measured(0.70, landed_on="warm", landed_before=0.85, landed_after=0.90, landed_high=0.8),
        Outcome.HELPED,
        "cooler",
    ),
    (
        "the workload was OOM-killed more",
        Measured(0.70, oom_before=0, oom_after=2),
        Outcome.BACKFIRED,
        "OOM-killed more",
    ),
    (
        "the workload was throttled much more",
        Measured(0.70, throttled_before=10, throttled_after=40),
        Outcome.BACKFIRED,
        "throttled more",
    ),
    (
        "the workload was throttled a little more",
        Measured(0.70, throttled_before=10, throttled_after=12),
        Outcome.HELPED,
        "cooler",
    ),
    (
        "unknown other pods: the whole change counts",
        Measured(0.72),
        Outcome.HELPED,
        "cooler",
    ),
]


@pytest.mark.parametrize(
    ("measured", "outcome", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_move_is_judged_on_what_it_bought(
    measured: Measured, outcome: Outcome, reason: str
) -> None:
    judgement = judge(PLANNED, measured)
    assert judgement.outcome is outcome
    assert reason in judgement.reason
    assert "cpu on hot went 0.900" in judgement.reason


def test_the_numbers_take_out_what_other_pods_explain() -> None:
    judgement = judge(PLANNED, Measured(0.82, stayed_after=0.55, arrived=0.05))
    assert judgement.cooling == pytest.approx(0.08)
    assert judgement.explained == pytest.approx(0.0)  # 0.05 left, 0.05 came
    assert judgement.attributed == pytest.approx(0.08)
    assert judgement.outcome is Outcome.NO_EFFECT  # 0.08 is not more than half of 0.20


def test_a_move_of_nothing_has_no_effect_and_never_backfires_on_noise() -> None:
    judgement = judge(Planned("hot", "cpu", 0.9, 0.0, "cool"), Measured(0.91))
    assert judgement.outcome is Outcome.NO_EFFECT


def test_some_replacements_back_leave_the_numbers_to_decide() -> None:
    two = Planned("hot", "cpu", 0.90, 0.40, "cool", pods=2, others_before=0.40)
    assert judge(two, Measured(0.72, stayed_after=0.40, returned=1)).outcome is Outcome.NO_EFFECT
    assert judge(two, Measured(0.55, stayed_after=0.40, returned=1)).outcome is Outcome.HELPED
    assert judge(two, Measured(0.55, stayed_after=0.40, returned=2)).outcome is Outcome.NO_EFFECT


@pytest.mark.parametrize(
    ("came", "helped"),
    [(0.0, True), (0.09, True), (0.11, False), (0.20, False)],
)
def test_the_simulators_bought_nothing_is_not_helped(came: float, helped: bool) -> None:
    """app/simulate counts an eviction as buying nothing when what came onto its source
    uses at least half of what it used: the same line, with arrivals not told apart."""
    planned = Planned("hot", "cpu", 0.90, 0.20, "", others_before=0.60)
    judgement = judge(planned, Measured(0.70 + came, stayed_after=0.60))
    assert judgement.helped is helped
