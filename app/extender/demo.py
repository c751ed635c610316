"""A built-in demo cluster, so ``loadaware demo`` answers curl with no Kubernetes at all.

Seven nodes show each case the load model distinguishes. Their timestamps are
re-stamped every minute so that fresh nodes stay fresh while the demo runs. The
cluster stays as built: full Node objects in a request are judged by the annotations
they carry, as in full-nodes mode, but are not added to it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from app.extender.extender import Extender
from app.extender.table import NodeTable
from app.extender.verbs import RequestNodes
from app.kube import NodeCache
from app.load import HOT_VALUE_KEY, format_hot_value, format_usage
from app.policy import default_policy

_METRICS = ("usage_avg_5m", "usage_max_avg_1h", "usage_max_avg_1d")

# name → (cpu 5m/1h/1d, mem 5m/1h/1d, hot value, data age in seconds, what it shows)
DEMO_NODES: dict[str, tuple[tuple[float, ...], tuple[float, ...], int, float, str]] = {
    "cool-1": ((0.12, 0.18, 0.35), (0.20, 0.22, 0.30), 0, 30, "cool: passes, high score"),
    "cool-2": ((0.30, 0.41, 0.55), (0.35, 0.38, 0.45), 0, 30, "moderate: passes"),
    "hot-cpu": ((0.82, 0.79, 0.90), (0.30, 0.31, 0.40), 0, 30, "CPU over 0.65: filtered"),
    "hot-mem": ((0.25, 0.30, 0.40), (0.71, 0.80, 0.85), 0, 30, "memory over limit: filtered"),
    "stale": ((0.95, 0.95, 0.95), (0.95, 0.95, 0.95), 0, 6 * 3600, "stale data: passes"),
    "burst": ((0.20, 0.25, 0.30), (0.25, 0.27, 0.33), 3, 30, "hot value 3: score -30"),
}
NO_DATA_NODE = "no-data"  # no annotations at all: passes, scores as a node without data


def demo_annotations(now_s: float) -> dict[str, Mapping[str, str]]:
    nodes: dict[str, Mapping[str, str]] = {NO_DATA_NODE: {}}
    for name, (cpu, mem, hot, age_s, _) in DEMO_NODES.items():
        at_s = now_s - age_s
        values = {f"cpu_{m}": format_usage(v, at_s) for m, v in zip(_METRICS, cpu, strict=True)}
        values |= {f"mem_{m}": format_usage(v, at_s) for m, v in zip(_METRICS, mem, strict=True)}
        if hot:
            values[HOT_VALUE_KEY] = format_hot_value(hot, now_s - 10)
        nodes[name] = values
    return nodes


def load_demo_nodes(table: NodeTable) -> None:
    for name, node_annotations in demo_annotations(time.time()).items():
        table.upsert(name, node_annotations)


async def keep_demo_nodes_fresh(table: NodeTable, interval_s: float = 60.0) -> None:
    while True:
        await asyncio.sleep(interval_s)
        load_demo_nodes(table)


def demo_node_names() -> list[str]:
    return [*DEMO_NODES, NO_DATA_NODE]


class DemoExtender(Extender):
    """The extender over the built-in cluster, with crane's default policy."""

    def __init__(self) -> None:
        super().__init__(default_policy(), mode="demo")
        load_demo_nodes(self.table)

    async def start(self) -> None:
        await super().start()
        self.upkeep.add(keep_demo_nodes_fresh(self.table), "demo")

    @staticmethod
    def request_nodes_mode(node_cache: NodeCache | None) -> RequestNodes:
        return RequestNodes.APART  # the demo cluster stays as built

    def unknown_nodes_advice(self) -> str:
        return "The demo cluster has only " + ", ".join(demo_node_names())


def curl_examples(base_url: str) -> str:
    names = ",".join(f'"{n}"' for n in demo_node_names())
    body = (
        '{"Pod":{"metadata":{"name":"demo","namespace":"default"}},'
        f'"Nodes":null,"NodeNames":[{names}]}}'
    )
    return "\n".join(
        [
            "Try it:",
            f"  curl -s {base_url}/filter -H 'Content-Type: application/json' -d '{body}'",
            f"  curl -s {base_url}/prioritize -H 'Content-Type: application/json' -d '{body}'",
            f"  curl -s {base_url}/debug/nodes",
            f"  curl -s {base_url}/debug/nodes/hot-cpu",
            f"  curl -s {base_url}/metrics | grep loadaware_",
        ]
    )
