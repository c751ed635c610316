"""The scenario fields a captured cluster needs: named nodes, the real placement at the
start, recorded usage with the replicas' spread, replica counts over time, and the
fidelity check against the recorded per-node usage."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.simulate.cluster import PRE_BOUND_S, SimulatedCluster
from app.simulate.fidelity import BOUND_POINTS, fidelity
from app.simulate.policies import plan_for
from app.simulate.scenario import ScenarioError, scenario_from_mapping

GI = 2**30


def _document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": "replay",
        "duration": "1h",
        "step": "30s",
        "nodes": [{"name": "shape-0", "count": 3, "cpu": 10, "memory": 40 * GI,
                   "names": ["alpha", "beta", "gamma"]}],
        "workloads": [
            {
                "name": "web",
                "replicas": 3,
                "requests": {"cpu": 1, "memory": GI},
                "placement": ["alpha", "alpha", "beta"],
                # mean per replica: 1 core for 30 minutes, then 2; the replicas' spread
                # is 0.5, 1.5 and 1 times the mean.
                "usage": {"profile": "history", "interval": "30m", "cpu": [1, 1, 2],
                          "memory": [GI, GI, GI], "spread": {"cpu": [0.5, 1.5, 1.0]}},
                "replicaHistory": [{"at": "40m", "replicas": 1}],
            }
        ],
    }
    document.update(changes)
    return document


def test_the_replay_starts_from_the_real_placement_with_each_replicas_spread() -> None:
    scenario = scenario_from_mapping(_document(), "test")
    cluster = SimulatedCluster(scenario, plan_for("default"))
    assert cluster.state.node_names == ["alpha", "beta", "gamma"]
    assert cluster.state.node_of.tolist() == [0, 0, 1]
    assert cluster.state.bound_at_s.tolist() == [PRE_BOUND_S] * 3
    run = cluster.simulate()
    # Step 0: alpha holds the 0.5 and 1.5 replicas, beta the 1.0 one, gamma nothing.
    assert run.cpu_utilisation[0].tolist() == pytest.approx([0.2, 0.1, 0.0])
    # 45 minutes in: the mean is 1.5 cores (halfway to 2), and the history wants 1
    # replica: slots 1 and 2 were deleted at 40m, slot 0 (0.5) stays on alpha.
    step = round(45 * 60 / 30)
    assert run.cpu_utilisation[step].tolist() == pytest.approx([0.075, 0.0, 0.0])
    assert [(d.t_s, d.slot) for d in run.deletions] == [(2400.0, 1), (2400.0, 2)]
    assert run.evictions == []
    assert run.waits_s == []  # the placed pods were never pending


def test_a_scale_up_in_the_history_creates_pending_pods_the_policy_places() -> None:
    document = _document()
    document["workloads"][0]["replicaHistory"] = [{"at": "10m", "replicas": 5}]
    scenario = scenario_from_mapping(document, "test")
    run = SimulatedCluster(scenario, plan_for("default")).simulate()
    late = [p for p in run.placements if p.t_s >= 0]
    assert [(p.t_s, p.slot) for p in late] == [(600.0, 3), (600.0, 4)]
    # The two new pods use the mean (no measured spread): 1 core each.
    step = round(15 * 60 / 30)
    assert float(run.cpu_utilisation[step].sum()) == pytest.approx(0.2 + 0.1 + 0.2)


def test_a_workload_that_scales_down_and_up_again_gets_new_pending_pods() -> None:
    document = _document()
    document["workloads"][0]["replicaHistory"] = [
        {"at": "10m", "replicas": 1}, {"at": "20m", "replicas": 3}
    ]
    scenario = scenario_from_mapping(document, "test")
    cluster = SimulatedCluster(scenario, plan_for("default+desched"))
    run = cluster.simulate()
    assert len(run.deletions) == 2
    back = [p for p in run.placements if p.t_s >= 1200.0]
    assert sorted(p.slot for p in back) == [1, 2]
    assert np.all(cluster.state.node_of >= 0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"placement": ["alpha", "delta", "beta"]}, "no such node delta"),
        ({"placement": ["alpha"] * 4}, "placement names 4 nodes for 3 replicas"),
        ({"usage": {"profile": "history", "interval": "5m", "cpu": [1, 2], "memory": [1]}},
         "cpu has 2 points and memory 1"),
        ({"usage": {"profile": "history", "interval": "5m", "cpu": [-1], "memory": [1]}},
         "cpu[0] must be a finite number >= 0"),
        ({"replicaHistory": [{"at": "20m", "replicas": 1}, {"at": "10m", "replicas": 2}]},
         "replicaHistory must be in time order"),
    ],
)  # fmt: skip
def test_a_bad_captured_field_is_named(change: dict[str, Any], message: str) -> None:
    document = _document()
    document["workloads"][0].update(change)
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        scenario_from_mapping(document, "test")


def test_node_names_must_match_the_count_and_be_unique() -> None:
    nodes = [{"name": "a", "count": 2, "cpu": 1, "memory": GI, "names": ["x"]}]
    with pytest.raises(ScenarioError, match="1 names for 2 nodes"):
        scenario_from_mapping(_document(nodes=nodes, workloads=[]), "test")
    nodes = [{"name": "a", "count": 1, "cpu": 1, "memory": GI, "names": ["x"]},
             {"name": "b", "count": 1, "cpu": 1, "memory": GI, "names": ["x"]}]  # fmt: skip
    with pytest.raises(ScenarioError, match="node names must be unique"):
        scenario_from_mapping(_document(nodes=nodes, workloads=[]), "test")


def _observed(cpu: dict[str, list[float]]) -> dict[str, Any]:
    return {"interval": "30m", "nodes": [
        {"name": name, "cpu": values, "memory": [GI] * len(values)} for name, values in cpu.items()
    ]}  # fmt: skip


def test_fidelity_is_near_zero_when_the_recording_is_what_the_replay_does() -> None:
    document = _document()
    del document["workloads"][0]["replicaHistory"]
    document["workloads"][0]["usage"]["memory"] = [GI / 3] * 3
    # alpha: 0.5 + 1.5 = 2 x the mean; beta: 1 x the mean; gamma: nothing.
    document["observed"] = _observed({"alpha": [2, 2, 4], "beta": [1, 1, 2], "gamma": [0, 0, 0]})
    document["observed"]["nodes"][0]["memory"] = [2 * GI / 3] * 3
    document["observed"]["nodes"][1]["memory"] = [GI / 3] * 3
    document["observed"]["nodes"][2]["memory"] = [0] * 3
    scenario = scenario_from_mapping(document, "test")
    found = fidelity(SimulatedCluster(scenario, plan_for("default")).simulate(), scenario)
    assert found is not None
    assert found.cpu_points == pytest.approx(0.0, abs=0.01)
    assert found.memory_points == pytest.approx(0.0, abs=0.01)
    assert found.faithful
    assert "reproduces the past" in found.line()


def test_a_replay_that_does_not_match_says_so_and_names_the_node() -> None:
    document = _document()
    del document["workloads"][0]["replicaHistory"]
    # gamma was busy in the recording (8 of 10 cores), by something the replay lacks.
    document["observed"] = _observed({"alpha": [2, 2, 4], "beta": [1, 1, 2], "gamma": [8, 8, 8]})
    scenario = scenario_from_mapping(document, "test")
    found = fidelity(SimulatedCluster(scenario, plan_for("default")).simulate(), scenario)
    assert found is not None
    assert not found.faithful
    assert [e.node for e in found.off] == ["gamma"]
    assert found.off[0].cpu_points == pytest.approx(80.0, abs=0.1)
    assert found.off[0].cpu_points > BOUND_POINTS
    assert "DOES NOT reproduce the past" in found.line()
    assert "gamma (CPU 80.0" in found.line()


def test_a_scenario_without_a_recording_has_no_fidelity() -> None:
    document = _document()
    scenario = scenario_from_mapping(document, "test")
    assert fidelity(SimulatedCluster(scenario, plan_for("default")).simulate(), scenario) is None
