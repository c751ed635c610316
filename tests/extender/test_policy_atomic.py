"""Absurd policy values are refused field by field, and a reload that fails leaves the
old policy whole: both request modes keep answering with it, /readyz stays truthful,
and the failure is counted (issue 18, attack 5)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli import build_parser
from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.policy import DEFAULT_POLICY_YAML, Policy, PolicyError, PriorityPolicy, default_policy
from app.runtime.in_force import InForce
from app.runtime.policy_reload import policy_in_force
from tests.extender.nodes import usage_annotations
from tests.extender.test_policy_reload import ConfigMapVolume
from tests.support import http_client
from tests.support.asgi_server import serve
from tests.support.zygote import Zygote, clean_environment

HOT = usage_annotations(cpu=0.7, mem=0.1)  # over the default 0.65 cpu limit
COOL = usage_annotations(cpu=0.1, mem=0.1)
FIRST_WEIGHT = "weight: 0.2"  # cpu_usage_avg_5m's weight in DEFAULT_POLICY_YAML

ABSURD = [
    (FIRST_WEIGHT, "weight: .inf", "spec.priority.0.weight", "finite"),
    (FIRST_WEIGHT, "weight: 1e308", "spec.priority.0.weight", "less than or equal"),
    (FIRST_WEIGHT, "weight: .nan", "spec.priority.0.weight", "finite"),
    ("maxLimitPecent: 0.65", "maxLimitPecent: .nan", "spec.predicate.0.maxLimitPecent", "finite"),
    ("count: 5", "count: 100000000000", "spec.hotValue.0.count", "less than or equal"),
    ("period: 3m", "period: 100000h", "spec.syncPolicy.0.period", "longer than the maximum"),
    (
        "period: 3m",
        "period: " + "9" * 400 + "h",
        "spec.syncPolicy.0.period",
        "too large to represent",
    ),
    ("timeRange: 5m", "timeRange: 1000h", "spec.hotValue.0.timeRange", "longer than the maximum"),
]
ESTIMATION_ABSURD = [
    ("factors: {cpu: .inf}", "spec.estimation.factors.cpu", "finite"),
    ("defaultPodUsage: {cpu: '1e300'}", "spec.estimation.defaultPodUsage.cpu", "less than"),
    ("defaultPodUsage: {memory: 1e300}", "spec.estimation.defaultPodUsage.memory", "less than"),
    ("maxAge: 1000h", "spec.estimation.maxAge", "longer than the maximum"),
]


def absurd_policies() -> list[tuple[str, str, str]]:
    cases = [(DEFAULT_POLICY_YAML.replace(a, b, 1), field, why) for a, b, field, why in ABSURD]
    for estimation, field, why in ESTIMATION_ABSURD:
        cases.append((DEFAULT_POLICY_YAML + f"  estimation:\n    {estimation}\n", field, why))
    return cases


@pytest.mark.parametrize(("text", "field", "why"), absurd_policies())
def test_policy_check_names_the_absurd_field(
    tmp_path: Path, text: str, field: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `loadaware policy check FILE` through the command line's own parser, in this
    # process: what is checked is the message, and a process for each of the twelve
    # files cost 0.2 CPU-s of start-up each. tests/test_cli_bad_input.py runs the
    # command in a process of its own, as an operator would.
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    args = build_parser("policy").parse_args(["policy", "check", str(path)])
    code = args.run(args)  # an exception would fail the test: no traceback
    assert code == 2
    captured = capsys.readouterr()
    message = captured.err + captured.out
    line = next(line for line in message.splitlines() if field in line)
    assert why in line


@pytest.mark.parametrize("weight", [".inf", "1e308"])
def test_extender_refuses_an_absurd_weight_at_start_with_exit_code_2(
    cli_zygote: Zygote, tmp_path: Path, weight: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEFAULT_POLICY_YAML.replace(FIRST_WEIGHT, f"weight: {weight}", 1))
    result = cli_zygote.run(
        ["extender", "--no-node-cache", "--policy", str(path)], clean_environment(tmp_path)
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "spec.priority.0.weight" in result.stderr


class Served:
    def __init__(self, extender: Extender, watcher: InForce[Policy], url: str) -> None:
        self.extender, self.watcher, self.url = extender, watcher, url

    def cache_mode_verdicts(self) -> dict[str, Any]:
        body = {"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["hot", "cool", "ghost"]}
        answer: dict[str, Any] = http_client.post(f"{self.url}/filter", json=body).json()
        return answer

    def full_mode_verdicts(self) -> dict[str, Any]:
        items = [
            {"metadata": {"name": name, "annotations": annotations}}
            for name, annotations in (("hot", HOT), ("cool", COOL))
        ]
        body = {"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": items}}
        answer: dict[str, Any] = http_client.post(f"{self.url}/filter", json=body).json()
        return answer

    def scores(self) -> dict[str, int]:
        body = {"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["hot", "cool"]}
        answer = http_client.post(f"{self.url}/prioritize", json=body).json()
        return {entry["Host"]: entry["Score"] for entry in answer}

    def reloads(self, result: str) -> float:
        value = self.extender.metrics.registry.get_sample_value(
            "loadaware_policy_reloads_total", {"result": result}
        )
        return value or 0.0


def served(in_force: InForce[Policy]) -> Iterator[Served]:
    """An extender running on ``in_force``, which it follows from its construction."""
    extender = Extender(in_force, mode="test")
    extender.table.upsert("hot", HOT)
    extender.table.upsert("cool", COOL)
    with serve(ExtenderApp(extender)) as url:
        yield Served(extender, in_force, url)


@pytest.fixture
def volume(tmp_path: Path) -> ConfigMapVolume:
    return ConfigMapVolume(tmp_path, DEFAULT_POLICY_YAML)


@pytest.fixture
def from_file(volume: ConfigMapVolume) -> Iterator[Served]:
    yield from served(policy_in_force(volume.path))


def assert_old_policy_answers(extender: Served, cache: Any, full: Any, scores: Any) -> None:
    assert extender.cache_mode_verdicts() == cache
    assert extender.full_mode_verdicts() == full
    assert extender.scores() == scores
    assert "hot" in cache["FailedAndUnresolvableNodes"]
    assert http_client.get(f"{extender.url}/readyz").status_code == 200


@pytest.mark.parametrize("weight", [".inf", "1e308"])
def test_hot_reload_of_an_absurd_weight_keeps_the_old_policy_whole(
    from_file: Served, volume: ConfigMapVolume, weight: str
) -> None:
    before = (from_file.cache_mode_verdicts(), from_file.full_mode_verdicts(), from_file.scores())
    volume.update(DEFAULT_POLICY_YAML.replace(FIRST_WEIGHT, f"weight: {weight}", 1))
    assert not from_file.watcher.check_once()
    assert from_file.reloads("error") == 1
    assert from_file.reloads("success") == 0
    assert_old_policy_answers(from_file, *before)
    metrics = http_client.get(f"{from_file.url}/metrics").text
    assert 'loadaware_policy_reloads_total{result="error"} 1.0' in metrics


def unusable_policy() -> Policy:
    """A policy that got past validation yet fails while nodes are judged under it (as a
    bug in the load model would): a NaN score."""
    spec = default_policy().spec
    priority = (PriorityPolicy.model_construct(name="cpu_usage_avg_5m", weight=math.inf),)
    return Policy.from_spec(spec.model_copy(update={"priority": priority}), "unusable")


def test_a_policy_that_fails_while_being_adopted_leaves_the_old_one_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("first")
    policies = iter([default_policy(), unusable_policy()])

    in_force = InForce(
        default_policy, path, lambda _p: next(policies), errors=(PolicyError,), what="policy"
    )
    for extender in served(in_force):
        before = (extender.cache_mode_verdicts(), extender.full_mode_verdicts(), extender.scores())
        path.write_text("second, a different size")
        assert not extender.watcher.check_once()
        assert extender.reloads("error") == 1
        assert extender.extender.table.policy.source == "<built-in default policy>"
        assert extender.watcher.value is extender.extender.table.policy  # still in force
        assert_old_policy_answers(extender, *before)
        # The old policy keeps working for what comes next, too.
        extender.extender.table.upsert("cool", HOT)
        assert "cool" in extender.cache_mode_verdicts()["FailedAndUnresolvableNodes"]
