"""scripts/soft_taint_floor.py's bound (docs/simulate-results.md quotes it): the fewest
nodes above a limit that any placement of some pods can leave, every node at or below
a harm line."""

from __future__ import annotations

import numpy as np

from tests.support.scripts import load_script

floor = load_script("soft_taint_floor").nodes_above_at_least


def test_the_demand_beyond_every_node_at_its_limit_needs_nodes_above_it() -> None:
    """10 nodes at 0.75 of demand in all, limit 0.65: the 1.0 beyond 6.5 fills at most
    0.35 a node above the limit (up to 1.0) or 0.25 (up to 0.9): 3 or 4 nodes; pods of
    0.01 make no pod alone above the limit."""
    demands = np.full(750, 0.01)
    assert floor(demands, 10, 0.65, 1.0) == 3
    assert floor(demands, 10, 0.65, 0.9) == 4
    assert floor(np.full(600, 0.01), 10, 0.65, 1.0) == 0  # room for all under the limit


def test_a_pod_above_the_limit_alone_puts_a_node_above_it_under_any_placement() -> None:
    """cpu-heavy's background: three pods of 0.75 on 10 nodes, little else; no two can
    share a node at or below 1.0, so three nodes are above 0.65 whatever the placement,
    and a pod of 0.6 is below the limit alone."""
    demands = np.array([0.75, 0.75, 0.75, 0.1, 0.1])
    assert floor(demands, 10, 0.65, 1.0) == 3
    assert floor(np.array([0.6, 0.6]), 10, 0.65, 1.0) == 0
