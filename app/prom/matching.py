"""Which series belongs to which node: pure, so that the rules are a table test.

A node's series is found by its ``instance`` label, in crane's order:

1. the node's InternalIP (``10.0.0.7``),
2. the InternalIP with a port (``10.0.0.7:9100``, ``[fd00::7]:9100``),
3. the node name (``node-a``), then the name with a port (``node-a:9100``),
4. a ``node`` label equal to the node name (kept by rules that group by ``node``).

The first rule that finds anything wins. Should one rule find several series (two
exporters on one host), the highest value is used: over-reporting load makes the
scheduler avoid a node for a while, under-reporting it can overload the node.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from app.prom.client import PromSample

__all__ = ["NodeAddress", "match_series"]


class MatchRule(StrEnum):
    INTERNAL_IP = "internal_ip"
    IP_PORT = "ip_port"
    NAME = "name"
    NAME_PORT = "name_port"
    NODE_LABEL = "node_label"


@dataclass(frozen=True, slots=True)
class NodeAddress:
    name: str
    internal_ip: str | None


@dataclass(frozen=True, slots=True)
class SeriesMatch:
    samples: Mapping[str, PromSample]  # node name -> its sample
    rules: Mapping[str, MatchRule]  # node name -> the rule that found it
    nodes_without_data: tuple[str, ...]
    unmatched_series: int  # series that belong to no known node
    extra_series: int = 0  # series set aside because a node had several under one rule


def split_instance(instance: str) -> tuple[str, str | None]:
    """``host:port`` into (host, port); a bare host or bare IPv6 address has no port."""
    if instance.startswith("["):
        host, bracket, rest = instance[1:].partition("]")
        if bracket and rest.startswith(":") and rest[1:].isdigit():
            return host, rest[1:]
        return instance, None
    host, colon, port = instance.rpartition(":")
    if colon and port.isdigit() and ":" not in host and host:
        return host, port
    return instance, None


def match_series(samples: Iterable[PromSample], nodes: Iterable[NodeAddress]) -> SeriesMatch:
    """Assign each node at most one sample, following the rules in the module docstring."""
    by_instance: dict[str, list[PromSample]] = defaultdict(list)
    by_host_with_port: dict[str, list[PromSample]] = defaultdict(list)
    by_node_label: dict[str, list[PromSample]] = defaultdict(list)
    all_samples = list(samples)
    for sample in all_samples:
        instance = sample.labels.get("instance")
        if instance:
            by_instance[instance].append(sample)
            host, port = split_instance(instance)
            if port is not None:
                by_host_with_port[host].append(sample)
        node_label = sample.labels.get("node")
        if node_label:
            by_node_label[node_label].append(sample)

    chosen: dict[str, PromSample] = {}
    rules: dict[str, MatchRule] = {}
    without: list[str] = []
    used: set[int] = set()
    extra = 0
    for node in nodes:
        candidates: list[tuple[MatchRule, list[PromSample]]] = []
        if node.internal_ip:
            candidates.append((MatchRule.INTERNAL_IP, by_instance.get(node.internal_ip, [])))
            candidates.append((MatchRule.IP_PORT, by_host_with_port.get(node.internal_ip, [])))
        candidates.append((MatchRule.NAME, by_instance.get(node.name, [])))
        candidates.append((MatchRule.NAME_PORT, by_host_with_port.get(node.name, [])))
        candidates.append((MatchRule.NODE_LABEL, by_node_label.get(node.name, [])))
        found = next(((rule, group) for rule, group in candidates if group), None)
        if found is None:
            without.append(node.name)
            continue
        rule, group = found
        best = max(group, key=lambda s: s.value)
        chosen[node.name] = best
        rules[node.name] = rule
        used.update(id(s) for s in group)
        extra += len(group) - 1

    unmatched = sum(1 for sample in all_samples if id(sample) not in used)
    return SeriesMatch(chosen, rules, tuple(without), unmatched, extra)
