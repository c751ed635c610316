"""The descheduler says once per node that two node pools select it, in its
configuration or in the policy (the node then gets the defaults: app/policy/pools.py)."""

from __future__ import annotations

import logging

import pytest

from app.descheduler.descheduler import say_overlapping_pools
from app.descheduler.gather import View
from app.kube.state import DeschedulerState
from tests.rebalance.builders import NOW, POLICY, cluster, config, node
from tests.support.pools import policy_with_pools

POLICY_POOLS = policy_with_pools({"gpu": ({"pool": "gpu"}, 0.4), "zone-a": ({"zone": "a"}, 0.5)})
CONFIG_POOLS = config(nodePools=[
    {"name": "gpu", "nodeSelector": {"matchLabels": {"pool": "gpu"}},
     "targetThresholds": {"cpu": 40}},
    {"name": "big", "nodeSelector": {"matchLabels": {"size": "big"}},
     "targetThresholds": {"cpu": 80}},
])  # fmt: skip


def view(*labels: dict[str, str]) -> View:
    nodes = [node(f"n{i}", 0.3, labels=each) for i, each in enumerate(labels)]
    return View(cluster(nodes, []), DeschedulerState(), NOW)


def test_each_overlap_is_said_once_per_node_and_file(caplog: pytest.LogCaptureFixture) -> None:
    cluster_view = view({"pool": "gpu", "zone": "a", "size": "big"}, {"pool": "gpu"})
    with caplog.at_level(logging.ERROR, logger="app.descheduler.descheduler"):
        said = say_overlapping_pools(cluster_view, CONFIG_POOLS, POLICY_POOLS, set())
        said = say_overlapping_pools(cluster_view, CONFIG_POOLS, POLICY_POOLS, said)
    messages = sorted(r.getMessage() for r in caplog.records)
    assert messages == [
        "node n0 is selected by node pools gpu, big of the configuration; it is judged by "
        "the configuration's own thresholds until one pool selects it",
        "node n0 is selected by node pools gpu, zone-a of the policy; it is judged by the "
        "policy's own limits until one pool selects it",
    ]
    assert said == {"n0 configuration", "n0 policy"}
    # Relabelled into one pool: forgotten, and said again if it overlaps again.
    assert say_overlapping_pools(view({"pool": "gpu"}), CONFIG_POOLS, POLICY_POOLS, said) == set()


def test_without_pools_nothing_is_looked_at() -> None:
    assert say_overlapping_pools(view({"pool": "gpu", "zone": "a"}), config(), POLICY, set()) == (
        set()
    )
