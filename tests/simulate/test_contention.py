"""What a step's demand does to the nodes: each bound pod gets the same share of what it
asked for on a node asked for more CPU than it has."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.simulate.contention import Binding, cpu_got, demand_per_node


@settings(max_examples=60, deadline=None)
@given(
    node_of=st.lists(st.integers(-1, 3), min_size=1, max_size=30),
    cpu=st.lists(st.floats(0.0, 8.0, allow_nan=False), min_size=30, max_size=30),
    allocatable=st.lists(st.floats(0.5, 8.0), min_size=4, max_size=4),
)
def test_each_bound_pod_gets_its_nodes_share_of_what_it_asked_and_an_unbound_slot_none(
    node_of: list[int], cpu: list[float], allocatable: list[float]
) -> None:
    """Worked out slot by slot: a pod on a node asked for more than it has gets the
    node's allocatable over its demand times what it asked, bit for bit; a slot bound
    nowhere gets 0.0 (the last node's share, which it would read by index -1, unused)."""
    binding = Binding.of(np.array(node_of, dtype=np.int64))
    asked = np.array(cpu[: len(node_of)])
    capacity = np.array(allocatable)
    demand = demand_per_node(binding, asked, len(capacity))
    got = cpu_got(binding, asked, demand, capacity)
    for slot, node in enumerate(node_of):
        if node < 0:
            assert got[slot] == 0.0
            assert not np.signbit(got[slot])
        else:
            share = min(1.0, capacity[node] / max(demand[node], 1e-12))
            assert got[slot] == asked[slot] * share, (slot, node)
