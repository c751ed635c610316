"""What the extender's weight costs, as scheduler-config/README.md says it with
scripts/extender_weight.py: on ``zones-uneven`` (three zones, one warmer, no node near a
limit) the shipped weight 8 spreads a service's replicas less evenly over zones and
nodes than the 2 shipped before, and buys nothing there; and the script's spread
measure reads a run's placements as they end."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from app.simulate.scenario import load_scenario

SCRIPT = Path(__file__).parents[2] / "scripts" / "extender_weight.py"
ZONES = str(Path(__file__).parents[1] / "fixtures" / "simulate" / "zones-uneven.yaml")
SEEDS = (1, 2, 3)


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("extender_weight", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


script = load_script()


@cache
def outcome(policy: str, weight: int, seed: int) -> Any:
    return script.simulate(ZONES, policy, weight, seed)


def test_the_simulator_runs_the_weight_every_shipped_configuration_gives() -> None:
    repo = Path(__file__).parents[2]
    files = [
        *sorted((repo / "scheduler-config").glob("*.yaml")),
        repo / "deploy" / "components" / "second-scheduler" / "kube-scheduler-config.yaml",
    ]
    weights = {
        extender["weight"]
        for path in files
        for extender in yaml.safe_load(path.read_text())["extenders"]
    }
    assert weights == {load_scenario(ZONES).scheduler.extender_weight} == {8}


def test_a_higher_weight_spreads_replicas_less_evenly_where_nodes_differ_in_load() -> None:
    for seed in SEEDS:
        low, high = outcome("loadaware", 2, seed), outcome("loadaware", 8, seed)
        # Nothing to gain: no node above a limit, no harm, no pod waiting, either way.
        for run in (low, high):
            assert run.above == run.harm == run.pending == 0.0, seed
        assert 1 / 3 <= low.zone_share <= high.zone_share, seed
        assert 1.0 <= low.node_excess <= high.node_excess, seed
    # Over the seeds, strictly: the largest zone holds more, the busiest node more.
    assert sum(outcome("loadaware", 2, s).zone_share for s in SEEDS) < sum(
        outcome("loadaware", 8, s).zone_share for s in SEEDS
    )
    assert sum(outcome("loadaware", 2, s).node_excess for s in SEEDS) < sum(
        outcome("loadaware", 8, s).node_excess for s in SEEDS
    )


def test_the_stock_scheduler_spreads_the_service_evenly() -> None:
    """The measure itself: with requests alone every zone gets a third and no node more
    than the even count (36 replicas on 12 nodes: 3 each)."""
    for seed in SEEDS:
        run = outcome("default", 8, seed)
        assert abs(run.zone_share - 1 / 3) < 1e-9, seed
        assert run.node_excess == 1.0, seed
