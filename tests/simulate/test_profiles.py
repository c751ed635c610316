"""Each slot's usage per step, from its workload's profile."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.simulate.profiles import SlotUsage
from tests.simulate.scenarios import load, small


def spiky(name: str, replicas: int, spike_cpu: str) -> dict[str, object]:
    return {
        "name": name,
        "replicas": replicas,
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "usage": {
            "profile": "spiky",
            "cpu": "200m",
            "memory": "256Mi",
            "spike": {"cpu": spike_cpu, "memory": "64Mi"},
            "spikeFraction": 0.4,
        },
    }


@settings(max_examples=30, deadline=None)
@given(
    usage=st.lists(st.sampled_from([0.0, -0.0, 0.25, -0.25, 1.5]), min_size=30, max_size=30),
    draws=st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=30, max_size=30),
)
def test_spikes_added_to_the_spiky_slots_alone_are_the_sums_over_every_slot(
    usage: list[float], draws: list[float]
) -> None:
    # Two spiky workloads between constant ones: adding each one's spike or 0.0 to
    # every slot, as the definition does, and adding spikes to their own slots after
    # one 0.0 are the same bits, signed zeros included.
    document = small()
    constant = document["workloads"][1] | {"replicas": 8}
    document["workloads"] = [
        constant | {"name": "before"},
        spiky("first", 7, "2"),
        constant | {"name": "between", "replicas": 5},
        spiky("second", 4, "500m"),
        constant | {"name": "after", "replicas": 6},
    ]
    slots = SlotUsage(load(document))
    assert slots.slots == len(usage)
    values, drawn = np.array(usage), np.array(draws)
    for resource in (0, 1):
        expected = values
        for mask, profile in slots._spiky:
            spike = profile.spike.cpu if resource == 0 else profile.spike.memory
            expected = expected + np.where(mask & (drawn < profile.spike_fraction), spike, 0.0)
        assert slots._spiked(values, drawn, resource).tobytes() == expected.tobytes()


def test_each_workloads_slots_are_one_run_of_them() -> None:
    """``slots_of`` (what the PDBs count from) names exactly the slots of each workload,
    an empty run for a workload of no replicas, with scale-ups and a replica history."""
    document = small(
        workloads=[
            {"name": "a", "replicas": 2, "requests": {"cpu": "100m", "memory": "64Mi"},
             "usage": {"profile": "constant", "cpu": "100m", "memory": "64Mi"},
             "scaleUps": [{"at": "10m", "replicas": 5}]},
            {"name": "none", "replicas": 0, "requests": {"cpu": "100m", "memory": "64Mi"},
             "usage": {"profile": "constant", "cpu": "100m", "memory": "64Mi"}},
            {"name": "c", "replicas": 1, "requests": {"cpu": "100m", "memory": "64Mi"},
             "usage": {"profile": "constant", "cpu": "100m", "memory": "64Mi"},
             "replicaHistory": [{"at": "5m", "replicas": 4}, {"at": "9m", "replicas": 2}]},
        ]
    )
    usage = SlotUsage(load(document))
    assert [s.stop - s.start for s in usage.slots_of] == [5, 0, 4]
    for workload, slots in enumerate(usage.slots_of):
        assert np.flatnonzero(usage.workload_of == workload).tolist() == list(
            range(usage.slots)[slots])
