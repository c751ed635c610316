"""The ``crane`` policy is crane-scheduler as it ships, each difference a switch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.load.model import evaluate_node
from app.load.samples import format_usage
from app.policy import DEFAULT_POLICY_YAML, policy_from_yaml
from app.simulate.cluster import SimulatedCluster
from app.simulate.policies import plan_for
from tests.simulate.scenarios import load, small
from tests.simulate.test_estimation import burst

NOW_S = 1_700_000_000.0


def crane_cluster(**crane: Any) -> SimulatedCluster:
    return SimulatedCluster(load(small(crane=crane) if crane else small()), plan_for("crane"))


def test_crane_writes_its_hot_value_only_on_its_node_sync() -> None:
    cluster = crane_cluster()
    assert cluster.state.pipeline.hot_value_interval_s == 180.0  # the default policy's 3m
    cluster.simulate()
    written_at_s = cluster.state.pipeline.hot_written_at_s
    written = written_at_s[~np.isnan(written_at_s)]
    assert len(written) > 0
    assert np.all(np.mod(written, 180.0) == 0)
    loadaware = SimulatedCluster(load(small()), plan_for("loadaware"))
    assert loadaware.state.pipeline.hot_value_interval_s == 30.0
    switched = crane_cluster(hotValueOnNodeSync=False)
    assert switched.state.pipeline.hot_value_interval_s == 30.0


def test_crane_scores_as_a_plugin_at_weight_3_beside_the_default_plugins() -> None:
    cluster = crane_cluster()
    assert cluster.scheduler.plugin_weight == 3
    cluster.simulate()
    load_filter = cluster.load_filter
    assert load_filter is not None
    # It picks among the best of default plugins + 3 x the 0..100 load score.
    load_filter.score[:] = [10, 90, 50, 0]  # crane's view, over whatever the plugins say
    load_filter.rescored.update(range(4))  # as evaluating the nodes tells the scheduler
    pod = cluster.state.shapes[1]
    feasible = cluster.state.requests.fits(pod) & load_filter.passes
    assert feasible.any()
    total = cluster.state.requests.scores(pod) + load_filter.score * 3
    best = set(np.flatnonzero(feasible & (total == total[feasible].max())).tolist())
    assert cluster.scheduler.choose(pod) in best
    assert best == {1} or not feasible[1]
    assert crane_cluster(pluginWeight=0).scheduler.plugin_weight == 0
    assert SimulatedCluster(load(small()), plan_for("loadaware")).scheduler.plugin_weight == 0


def test_crane_scores_a_metric_without_fresh_data_as_fully_used() -> None:
    policy = policy_from_yaml(DEFAULT_POLICY_YAML)
    crane = policy.as_crane_scores()
    # Only the 5-minute metrics are fresh; the 1h and 1d windows have no data yet.
    annotations = {
        "cpu_usage_avg_5m": format_usage(0.2, NOW_S - 30),
        "mem_usage_avg_5m": format_usage(0.2, NOW_S - 30),
    }
    ours = evaluate_node(annotations, policy, NOW_S)
    theirs = evaluate_node(annotations, crane, NOW_S)
    # 1h metrics: loadaware assumes their limit (0.75), crane 1.0; 1d: both 1.0.
    assert ours.load_score == int((0.8 * 0.2 + 0.25 * 0.3) * 2 * 100 / 2.0)
    assert theirs.load_score == int((0.8 * 0.2) * 2 * 100 / 2.0)
    assert theirs.load_score < ours.load_score
    assert crane_cluster().state.policy.missing_scored_as_full
    assert not crane_cluster(missingDataAsFull=False).state.policy.missing_scored_as_full


def test_with_every_switch_off_crane_is_loadaware_without_its_estimate() -> None:
    """The three switches are the whole difference: turned off, the crane row places
    exactly as loadaware's extender with estimation disabled."""
    off = {"hotValueOnNodeSync": False, "pluginWeight": 0, "missingDataAsFull": False}
    document = burst({"enabled": False}) | {"crane": off}
    crane = SimulatedCluster(load(document), plan_for("crane")).simulate()
    loadaware = SimulatedCluster(load(document), plan_for("loadaware")).simulate()
    assert crane.placements == loadaware.placements
    real_crane = SimulatedCluster(load(burst({"enabled": False})), plan_for("crane")).simulate()
    assert real_crane.placements != crane.placements


@pytest.mark.parametrize("weight", [-1, 101])
def test_a_plugin_weight_out_of_range_is_refused(weight: int) -> None:
    with pytest.raises(ValueError, match="pluginWeight"):
        load(small(crane={"pluginWeight": weight}))
