"""`loadaware simulate`: what loadaware would do for a cluster, offline (docs/simulate.md).

The scenario schema (pydantic, the planner's configuration) loads on first use, so that
`loadaware simulate --help` and a bad flag never pay for it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.simulate.scenario import ScenarioError, scenario_from_mapping

__all__ = [
    "ScenarioError",
    "scenario_from_mapping",
]

# Each name loaded on first use, with its module (PEP 562).
_LOADED_ON_USE = {
    name: module
    for module, names in {
        "scenario": ("ScenarioError", "scenario_from_mapping"),
    }.items()
    for name in names
}


def __getattr__(name: str) -> object:
    if name not in _LOADED_ON_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LOADED_ON_USE[name]}"), name)
    globals()[name] = value  # once: the next lookup finds it here
    return value
