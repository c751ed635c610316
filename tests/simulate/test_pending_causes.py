"""``scripts/pending_causes.py`` (issue 43): a pod left pending is *held* where it fits a
node by requests (the load filter kept it off) and waits for *no room* where it fits
none; docs/tuning.md uses the split to say where ``loadaware+autoscaler`` waits more."""

from __future__ import annotations

from typing import Any

from tests.simulate.scenarios import load
from tests.support.scripts import load_script

script = load_script("pending_causes")


def one_node(*workloads: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "one-node",
        "duration": "30m",
        "step": "30s",
        "nodes": [{"name": "node", "count": 1, "cpu": 8, "memory": "32Gi"}],
        "workloads": list(workloads),
    }


def test_pods_kept_off_a_hot_node_they_fit_by_requests_are_held() -> None:
    scenario = load(
        one_node(
            {
                "name": "hog",
                "replicas": 1,
                "requests": {"cpu": "1", "memory": "1Gi"},
                "usage": {"profile": "constant", "cpu": "7", "memory": "1Gi"},
            },
            {
                "name": "late",
                "replicas": 2,
                "requests": {"cpu": "500m", "memory": "1Gi"},
                "usage": {"profile": "constant", "cpu": "100m", "memory": "256Mi"},
                "arrival": {"at": "10m", "over": "0s"},
            },
        )
    )
    loadaware = script.pending_causes(scenario, "loadaware")
    # Both pods wait from 10m to the end, and the node fails the filter at each of
    # those 40 steps of 30s.
    assert loadaware.held == {(0, "late"): 40.0}
    assert not loadaware.no_room
    assert loadaware.refused_node_steps == 40
    default = script.pending_causes(scenario, "default")
    assert not default.held
    assert not default.no_room
    assert default.refused_node_steps == 0


def test_pods_that_fit_no_node_by_requests_wait_for_no_room_under_every_policy() -> None:
    scenario = load(
        one_node(
            {
                "name": "big",
                "replicas": 2,
                "requests": {"cpu": "5", "memory": "1Gi"},
                "usage": {"profile": "constant", "cpu": "1", "memory": "1Gi"},
            }
        )
    )
    for policy in ("default", "loadaware"):
        causes = script.pending_causes(scenario, policy)
        assert causes.no_room == {(0, "big"): 30.0}, policy
        assert not causes.held, policy
