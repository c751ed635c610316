"""A run is simulated with the cyclic collector's young threshold raised, and the
thresholds in force before are back after it, an error included."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from app.simulate.collector import YOUNG_THRESHOLD, fewer_collections


@pytest.fixture
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.mark.usefixtures("thresholds")
def test_young_collections_are_rarer_within_and_as_before_after() -> None:
    gc.set_threshold(700, 11, 12)
    with fewer_collections():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 11, 12)
    assert gc.get_threshold() == (700, 11, 12)


@pytest.mark.usefixtures("thresholds")
def test_the_thresholds_come_back_when_the_run_fails() -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("a step failed")
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("young", [0, YOUNG_THRESHOLD * 2])
@pytest.mark.usefixtures("thresholds")
def test_collection_switched_off_or_rarer_already_is_left_alone(young: int) -> None:
    gc.set_threshold(young, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (young, 10, 10)
    assert gc.get_threshold() == (young, 10, 10)
