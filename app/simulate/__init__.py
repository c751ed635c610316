"""`loadaware simulate`: what loadaware would do for a cluster, offline (docs/simulate.md)."""

from app.simulate.scenario import ScenarioError, scenario_from_mapping

__all__ = [
    "ScenarioError",
    "scenario_from_mapping",
]
