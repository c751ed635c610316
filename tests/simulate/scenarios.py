"""Small scenarios for the simulator's tests."""

from __future__ import annotations

from typing import Any

from app.simulate.scenario import Scenario, scenario_from_mapping


def small(**overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": "small",
        "duration": "40m",
        "step": "30s",
        "nodes": [{"name": "node", "count": 4, "cpu": 8, "memory": "32Gi"}],
        "workloads": [
            {
                "name": "web",
                "replicas": 12,
                "requests": {"cpu": "500m", "memory": "1Gi"},
                "usage": {
                    "profile": "spiky",
                    "cpu": "600m",
                    "memory": "1Gi",
                    "spike": {"cpu": "2", "memory": "1Gi"},
                    "spikeFraction": 0.2,
                    "jitter": 0.3,
                },
                "arrival": {"at": "0s", "over": "10m"},
            },
            {
                "name": "burst",
                "replicas": 20,
                "requests": {"cpu": "100m", "memory": "256Mi"},
                "usage": {"profile": "constant", "cpu": "700m", "memory": "512Mi"},
                "arrival": {"at": "20m", "over": "1m"},
            },
        ],
    }
    document.update(overrides)
    return document


def load(document: dict[str, Any]) -> Scenario:
    return scenario_from_mapping(document, "test")
