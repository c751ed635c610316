"""Series are matched to nodes by instance label in crane's order, then by a node label."""

from __future__ import annotations

import pytest

from app.prom.client import PromSample
from app.prom.matching import MatchRule, NodeAddress, match_series, split_instance

NODE = NodeAddress("node-a", "10.0.0.7")


def s(value: float = 50.0, /, **labels: str) -> PromSample:
    return PromSample(labels=labels, value=value, timestamp_s=1_700_000_000.0)


@pytest.mark.parametrize(
    ("labels", "rule"),
    [
        ({"instance": "10.0.0.7"}, MatchRule.INTERNAL_IP),
        ({"instance": "10.0.0.7:9100"}, MatchRule.IP_PORT),
        ({"instance": "node-a"}, MatchRule.NAME),
        ({"instance": "node-a:9100"}, MatchRule.NAME_PORT),
        ({"instance": "something-else", "node": "node-a"}, MatchRule.NODE_LABEL),
        ({"node": "node-a"}, MatchRule.NODE_LABEL),
    ],
)
def test_each_label_form_finds_the_node(labels: dict[str, str], rule: MatchRule) -> None:
    match = match_series([s(**labels)], [NODE])
    assert match.rules == {"node-a": rule}
    assert match.nodes_without_data == ()


@pytest.mark.parametrize(
    ("candidates", "winner"),
    [
        # Every pair: the earlier rule in crane's order wins.
        (["10.0.0.7", "10.0.0.7:9100"], "10.0.0.7"),
        (["10.0.0.7:9100", "node-a"], "10.0.0.7:9100"),
        (["node-a", "node-a:9100"], "node-a"),
        (["node-a:9100", "node-label"], "node-a:9100"),
        (["node-label", "10.0.0.7"], "10.0.0.7"),
    ],
)
def test_crane_order_decides_between_forms(candidates: list[str], winner: str) -> None:
    samples = []
    for value, instance in enumerate(candidates):
        if instance == "node-label":
            samples.append(s(float(value), instance="x", node="node-a"))
        else:
            samples.append(s(float(value), instance=instance))
    match = match_series(samples, [NODE])
    chosen = match.samples["node-a"]
    expected = "x" if winner == "node-label" else winner
    assert chosen.labels["instance"] == expected


def test_a_node_with_no_series_is_listed_without_data() -> None:
    match = match_series([s(instance="10.0.0.8:9100")], [NODE])
    assert match.samples == {}
    assert match.nodes_without_data == ("node-a",)
    assert match.unmatched_series == 1


def test_a_node_without_internal_ip_is_matched_by_name() -> None:
    match = match_series([s(instance="node-b:9100")], [NodeAddress("node-b", None)])
    assert match.rules == {"node-b": MatchRule.NAME_PORT}


def test_two_series_under_one_rule_use_the_higher_value() -> None:
    samples = [s(30.0, instance="10.0.0.7:9100"), s(80.0, instance="10.0.0.7:9101")]
    match = match_series(samples, [NODE])
    assert match.samples["node-a"].value == 80.0
    assert match.extra_series == 1
    assert match.unmatched_series == 0


def test_an_ip_is_not_matched_as_a_prefix_of_another_ip() -> None:
    match = match_series([s(instance="10.0.0.70:9100")], [NODE])
    assert match.samples == {}


def test_many_nodes_each_get_their_own_series() -> None:
    nodes = [NodeAddress(f"n{i}", f"10.1.{i // 250}.{i % 250}") for i in range(1000)]
    samples = [s(float(i % 100), instance=f"10.1.{i // 250}.{i % 250}:9100") for i in range(1000)]
    match = match_series(samples, nodes)
    assert len(match.samples) == 1000
    assert all(match.samples[f"n{i}"].value == float(i % 100) for i in range(1000))


@pytest.mark.parametrize(
    ("instance", "split"),
    [
        ("10.0.0.7:9100", ("10.0.0.7", "9100")),
        ("10.0.0.7", ("10.0.0.7", None)),
        ("node-a", ("node-a", None)),
        ("[fd00::7]:9100", ("fd00::7", "9100")),
        ("fd00::7", ("fd00::7", None)),
        ("host:notaport", ("host:notaport", None)),
    ],
)
def test_split_instance(instance: str, split: tuple[str, str | None]) -> None:
    assert split_instance(instance) == split


def test_ipv6_node_matches_bracketed_instance_with_port() -> None:
    node = NodeAddress("v6", "fd00::7")
    match = match_series([s(instance="[fd00::7]:9100")], [node])
    assert match.rules == {"v6": MatchRule.IP_PORT}
