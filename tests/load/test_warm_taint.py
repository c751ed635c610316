"""The warm taint's rule (app/load/warm_taint.py): nodes whose usage runs ahead of their
requests further than the median node's, with less room than it, within a share."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from app.load import format_usage
from app.load.warm_taint import (
    WarmExcess,
    WarmNode,
    WarmTaints,
    WarmTaintSettings,
    decide_warm_taints,
    judge_warm,
    warm_excess,
)
from app.objects import Resources
from app.policy import default_policy

CPU = "cpu_usage_avg_5m"
LIMIT = {CPU: 0.65}
# The rule on a few nodes (it marks none below 20 by default: ``min_nodes``).
SETTINGS = WarmTaintSettings(
    margin=0.15, release=0.05, min_hold_s=600.0, max_share=0.25, min_nodes=4
)


def excess_of(usage: list[float], requested: list[float]) -> WarmExcess:
    return warm_excess({CPU: np.array(usage)}, {CPU: np.array(requested)}, LIMIT)


def decide(
    usage: list[float],
    requested: list[float],
    memory: list[float] | None = None,
    now_s: float = 1000.0,
    hot: list[bool] | None = None,
) -> WarmTaints:
    judged = excess_of(usage, requested)
    was = np.array(memory if memory is not None else [math.nan] * len(usage))
    hot_now = None if hot is None else np.array(hot)
    return decide_warm_taints(judged, (CPU,), was, now_s, SETTINGS, hot_now)


# Eight nodes: six busy by their requests as much as by usage, two whose one pod uses
# far more than it requests (a batch pod: half a core asked, four used).
USAGE = [0.30, 0.28, 0.30, 0.29, 0.31, 0.30, 0.45, 0.47]
ASKED = [0.15, 0.14, 0.15, 0.15, 0.16, 0.15, 0.12, 0.12]


def test_the_nodes_far_ahead_of_their_requests_are_warm_and_no_other() -> None:
    decided = decide(USAGE, ASKED)
    assert decided.tainted.tolist() == [False] * 6 + [True, True]
    assert decided.reasons[7].startswith("warm: cpu_usage_avg_5m 0.47 with 0.12 requested")
    assert decided.reasons[0].startswith("not warm")


def test_usage_ahead_of_requests_on_every_node_taints_none() -> None:
    """A tenant that runs every node ahead of its requests moves the median with it."""
    usage = [0.60, 0.58, 0.61, 0.59, 0.60, 0.62, 0.60, 0.61]
    decided = decide(usage, [0.05] * 8)
    assert not decided.tainted.any()


def test_a_node_ahead_of_its_requests_but_with_more_room_than_most_is_not_warm() -> None:
    """Turning pods away from it would send them somewhere busier."""
    usage = [0.55, 0.55, 0.56, 0.55, 0.54, 0.55, 0.55, 0.35]
    asked = [0.50, 0.50, 0.50, 0.50, 0.50, 0.50, 0.50, 0.05]
    decided = decide(usage, asked)
    assert not decided.tainted[7]


def test_at_most_the_share_of_nodes_the_furthest_ahead_first() -> None:
    usage = [0.30, 0.28, 0.30, 0.29, 0.30, 0.31, 0.30, 0.50, 0.52, 0.47]
    asked = [0.15, 0.14, 0.15, 0.15, 0.15, 0.16, 0.15, 0.12, 0.12, 0.12]
    decided = decide(usage, asked)
    assert decided.tainted.tolist() == [False] * 7 + [True, True, False]  # 2 of 10
    assert decided.reasons[9].startswith("warm, over the share: 2 nodes at most")


def test_a_hot_node_carries_it_too_and_takes_none_of_the_share() -> None:
    """So TaintToleration ranks a hot node (two taints) below a warm one (one)."""
    usage = [0.30, 0.28, 0.30, 0.29, 0.31, 0.80, 0.45, 0.47]
    decided = decide(usage, ASKED, hot=[False] * 5 + [True, False, False])
    assert decided.tainted.tolist() == [False] * 5 + [True, False, True]  # cap 2 less 1 hot
    assert math.isnan(decided.warm_at_s[5])  # no memory: it carries it for being hot
    assert decided.reasons[5].startswith("hot")


def test_with_no_warm_node_a_hot_node_carries_only_the_hot_taint() -> None:
    usage = [0.30, 0.28, 0.30, 0.29, 0.31, 0.80, 0.30, 0.30]
    decided = decide(usage, ASKED, hot=[False] * 5 + [True, False, False])
    assert not decided.tainted.any()


def test_the_hot_taints_take_their_nodes_off_the_share() -> None:
    usage = [0.30, 0.28, 0.30, 0.29, 0.80, 0.80, 0.45, 0.47]
    decided = decide(usage, ASKED, hot=[False] * 4 + [True, True, False, False])
    assert not decided.tainted.any()  # 2 of 8 at most, both hot


def test_a_tainted_node_is_kept_down_to_the_release_line_then_held() -> None:
    usage = [0.30, 0.28, 0.30, 0.29, 0.31, 0.30, 0.30, 0.42]  # node 7: +0.14 ahead
    memory = [math.nan] * 7 + [900.0]
    assert not decide(usage, ASKED).tainted[7]  # below the margin: not put on
    kept = decide(usage, ASKED, memory, now_s=1000.0)
    assert kept.tainted[7]  # above margin - release
    assert kept.warm_at_s[7] == 1000.0
    cool = [0.30, 0.28, 0.30, 0.29, 0.31, 0.30, 0.30, 0.30]
    held = decide(cool, ASKED, memory, now_s=1400.0)
    assert held.tainted[7]  # within the hold of 600 s
    assert held.warm_at_s[7] == 900.0
    assert held.reasons[7].startswith("warm (held)")
    assert not decide(cool, ASKED, memory, now_s=1600.0).tainted[7]


def test_no_reading_fails_open_at_once() -> None:
    usage = [0.30, 0.28, 0.30, 0.29, 0.31, 0.30, 0.45, math.nan]
    decided = decide(usage, ASKED, [math.nan] * 7 + [990.0], now_s=1000.0)
    assert not decided.tainted[7]
    assert decided.tainted[6]


def test_a_cluster_of_fewer_than_min_nodes_gets_none() -> None:
    decided = decide([0.2, 0.2, 0.6], [0.2, 0.2, 0.05])
    assert not decided.tainted.any()
    assert WarmTaintSettings().cap(19) == 0
    assert WarmTaintSettings().cap(20) == 5
    assert WarmTaintSettings().cap(200) == 50


@pytest.mark.parametrize(
    ("field", "value"),
    [("margin", 0.0), ("margin", 1.0), ("release", 0.2), ("min_hold_s", math.inf),
     ("max_share", 1.5), ("min_nodes", 3)],
)  # fmt: skip
def test_bad_settings_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match="warm"):
        WarmTaintSettings(**{field: value})  # type: ignore[arg-type]


def test_judge_warm_reads_fresh_annotations_and_the_requests() -> None:
    policy = default_policy()
    now_s = time.time()
    allocatable = Resources(16.0, 64 * 2**30)

    def node(usage: float, asked_cores: float, age_s: float = 10.0) -> WarmNode:
        annotations = {CPU: format_usage(usage, now_s - age_s)}
        return WarmNode(annotations, allocatable, Resources(asked_cores, 0.0), policy)

    nodes = {f"n{i}": node(0.30, 2.4) for i in range(6)}
    nodes["batch"] = node(0.46, 2.0)
    nodes["stale"] = node(0.90, 0.0, age_s=3 * 3600)
    metrics, judged = judge_warm(nodes, policy, now_s)
    assert CPU in metrics
    names = list(nodes)
    j = metrics.index(CPU)
    assert judged.requested[names.index("batch"), j] == pytest.approx(2.0 / 16)
    assert judged.excess[names.index("batch")] == pytest.approx((0.46 - 0.125) - (0.30 - 0.15))
    assert judged.metric[names.index("stale")] == -1  # stale: no reading, fail open
