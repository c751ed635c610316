"""What node pools cost the extender's filter in full-nodes mode, in process.

With the node cache (the recommended mode) a node's pool is resolved on its watch
event and the verbs answer from the verdict index: pools change nothing there. In
full-nodes mode (``--no-node-cache``) every request carries the Nodes, and their labels
are read again only where they differ from those the table holds. This times
``Verbs.filter`` on the same 100 full Nodes under crane's default policy and under the
same policy with two node pools, in alternating rounds, and prints the fastest and the
median round of each (microseconds per request).

    .venv/bin/python bench/node_pools.py
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import orjson

from app.extender.extender import Extender
from app.extender.verbs import Outcome, parse_args
from app.load.samples import format_usage
from app.policy import DEFAULT_POLICY_YAML, Policy, default_policy, policy_from_yaml

NODES = 100
ROUNDS = 9
CALLS = 200

POOLS = """  nodePools:
    - name: gpu
      nodeSelector: {matchLabels: {pool: gpu}}
      predicate: [{name: cpu_usage_avg_5m, maxLimitPercent: 0.4}]
    - name: general
      nodeSelector: {matchExpressions: [{key: pool, operator: In, values: [general]}]}
      predicate: [{name: cpu_usage_avg_5m, maxLimitPercent: 0.9}]
"""


def body(policy: Policy, now_s: float) -> bytes:
    def node(i: int) -> dict[str, Any]:
        labels = {"kubernetes.io/hostname": f"n{i}", "pool": "gpu" if i % 4 == 0 else "general"}
        usage = {m: format_usage(0.3 + (i % 5) / 20, now_s - 30) for m in policy.metrics}
        return {"metadata": {"name": f"n{i}", "labels": labels, "annotations": usage}}

    return orjson.dumps({"Pod": {}, "Nodes": {"items": [node(i) for i in range(NODES)]}})


def one_round(extender: Extender, request: bytes) -> float:
    started = time.perf_counter()
    for _ in range(CALLS):
        extender.verbs.filter(parse_args(request), Outcome())
    return (time.perf_counter() - started) / CALLS * 1e6


def main() -> None:
    now_s = time.time()
    policies = {
        "no pools": default_policy(),
        "2 pools": policy_from_yaml(DEFAULT_POLICY_YAML + POOLS, "two pools"),
    }
    cases = {
        name: (Extender(policy, mode="bench"), body(policy, now_s))
        for name, policy in policies.items()
    }
    for extender, request in cases.values():
        one_round(extender, request)  # warm: the table holds every node
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, (extender, request) in cases.items():
            times[name].append(one_round(extender, request))
    for name, rounds in times.items():
        print(
            f"filter, {NODES} full Nodes, {name}: fastest {min(rounds):.0f} us, "
            f"median {statistics.median(rounds):.0f} us per request"
        )


if __name__ == "__main__":
    main()
