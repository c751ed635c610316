"""A run shared between the session's workers (``tests/simulate/runs.py``) is read
back as it was made."""

from __future__ import annotations

import dataclasses

import numpy as np

from app.simulate.cluster import Deletion
from app.simulate.scenario import load_scenario
from tests.simulate.runs import packed, simulate_now, unpacked


def test_a_run_is_read_back_as_it_was_made_record_for_record() -> None:
    """Placements, evictions and deletions (kept as rows of their fields) come back as
    the same records in the same order, and every other field as it was."""
    scenario = load_scenario("drifting-hot-spot").model_copy(update={"seed": 1})
    outcome = simulate_now(scenario, "loadaware+desched")
    run = outcome.run
    assert run.placements
    assert run.evictions
    run.deletions.append(Deletion(60.0, 3, 1))  # a deletion too, whatever the scenario made
    back = unpacked(packed(outcome))
    assert back.taint_steered == outcome.taint_steered
    for field in dataclasses.fields(run):
        made, read = getattr(run, field.name), getattr(back.run, field.name)
        if isinstance(made, np.ndarray):
            assert np.array_equal(made, read), field.name
            assert made.dtype == read.dtype, field.name
        else:
            assert made == read, field.name
    assert [type(p) for p in back.run.placements] == [type(p) for p in run.placements]
