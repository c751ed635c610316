"""``loadaware simulate`` end to end through the real CLI parser."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import build_parser
from app.simulate.main import run
from app.simulate.scenario import builtin_names
from app.simulate.summary import Summary, verdict
from tests.simulate.scenarios import small


def simulate(*argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["simulate", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = run(args, out, err)
    return code, out.getvalue(), err.getvalue()


def write_small(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(small(duration="10m")), encoding="utf-8")
    return path


def test_list_shows_every_builtin_scenario() -> None:
    code, out, _ = simulate("--list")
    assert code == 0
    # One entry per scenario; its first sentence wraps onto indented lines, whole.
    listed = [line.split()[0] for line in out.splitlines() if not line.startswith(" ")]
    assert listed == builtin_names()


def test_a_scenario_file_prints_one_table_row_per_policy(tmp_path: Path) -> None:
    code, out, _ = simulate(str(write_small(tmp_path)), "--policies", "default,crane")
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert [row.split("|")[1].strip() for row in rows] == ["policy", "default", "crane"]


def test_json_has_the_columns_and_the_seed(tmp_path: Path) -> None:
    code, out, _ = simulate(
        str(write_small(tmp_path)), "--json", "--seed", "5", "--policies", "crane"
    )
    assert code == 0
    document = json.loads(out)
    assert document["seed"] == 5
    (crane,) = document["policies"]
    assert crane["policy"] == "crane"
    assert crane["pdb_violations"] == 0


def test_json_has_what_users_feel(tmp_path: Path) -> None:
    code, out, _ = simulate(str(write_small(tmp_path)), "--json", "--policies", "loadaware")
    assert code == 0
    (loadaware,) = json.loads(out)["policies"]
    for key in (
        "pending_pod_minutes",
        "most_pending",
        "wait_p50_s",
        "wait_p95_s",
        "oom_events",
        "throttled_cpu_minutes",
        "evictions",
        "pods_evicted_repeatedly",
    ):
        assert key in loadaware
    assert loadaware["node_minutes_above"].keys() == {
        "cpu_usage_avg_5m > 0.65",
        "cpu_usage_max_avg_1h > 0.75",
        "mem_usage_avg_5m > 0.65",
        "mem_usage_max_avg_1h > 0.75",
    }


def test_seeds_report_the_median_and_the_range_across_them(tmp_path: Path) -> None:
    path = str(write_small(tmp_path))
    code, out, err = simulate(path, "--seeds", "3", "--seed", "4", "--policies", "default")
    assert code == 0, err
    assert "### small (seeds 4-6)" in out
    row = next(line for line in out.splitlines() if line.startswith("| default |"))
    code, document, _ = simulate(
        path, "--seeds", "3", "--seed", "4", "--json", "--policies", "default"
    )
    runs = json.loads(document)
    assert runs["seeds"] == [4, 5, 6]
    peaks = sorted(run["policies"][0]["cpu_peak"] for run in runs["runs"])
    median = f"{peaks[1] * 100:.0f}%"
    low, high = f"{peaks[0] * 100:.0f}%", f"{peaks[2] * 100:.0f}%"
    expected = median if low == high else f"{median} ({low}-{high})"
    assert row.split(" | ")[1] == expected


def test_plots_are_written_as_png(tmp_path: Path) -> None:
    code, _, err = simulate(
        str(write_small(tmp_path)),
        "--policies",
        "default,crane",
        "--plots",
        str(tmp_path / "plots"),
    )
    assert code == 0, err
    assert (tmp_path / "plots" / "small.png").read_bytes().startswith(b"\x89PNG")


def test_a_bad_scenario_file_is_reported_with_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nduration: 1h\nnodes: [{name: n, count: 0, cpu: 1, memory: 1Gi}]\n")
    code, _, err = simulate(str(path))
    assert code == 2
    assert "nodes.0.count" in err


def test_an_unknown_policy_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        simulate(str(write_small(tmp_path)), "--policies", "fastest")
    assert stopped.value.code == 2
    assert "argument --policies: fastest: unknown policy" in capsys.readouterr().err


def test_the_scenario_example_in_the_docs_runs_as_written(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "docs" / "simulate.md").read_text(encoding="utf-8")
    example = text.split("## Scenario files", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "example.yaml"
    # Shortened, so that the test stays quick; everything else is the docs' text.
    path.write_text(example.replace("duration: 2h", "duration: 20m"), encoding="utf-8")
    code, out, err = simulate(str(path), "--policies", "loadaware")
    assert code == 0, err
    assert "### example (seed 1)" in out


def _summary(policy: str, **numbers: float) -> Summary:
    zero: dict[str, Any] = {f: 0 for f in Summary.__dataclass_fields__ if f != "policy"}
    return Summary(policy=policy, **{**zero, "node_minutes_above": {}, **numbers})


@pytest.mark.parametrize(
    ("rows", "line"),
    [
        # A column where every policy is the same is not named.
        ([_summary("a", cpu_peak=0.9), _summary("b", cpu_peak=0.5)],
         "best (lowest): CPU peak b (50%)"),
        # Ties are named together; more winners than losers are said as "all but".
        ([_summary("a", pending_at_end=3), _summary("b"), _summary("c")],
         "best (lowest): never bound all but a (0)"),
        ([_summary("a", evictions=2, oom_events=1), _summary("b", evictions=1)],
         "best (lowest): OOM events b (0); evictions b (1)"),
        ([_summary("a"), _summary("b")], "best: every policy alike on this scenario"),
    ],
)  # fmt: skip
def test_the_verdict_names_the_lowest_of_each_column_that_differs(
    rows: list[Summary], line: str
) -> None:
    assert verdict([rows]) == line


def test_with_several_seeds_the_verdict_compares_medians() -> None:
    seeds = [
        [_summary("a", evictions=0), _summary("b", evictions=5)],
        [_summary("a", evictions=9), _summary("b", evictions=5)],
        [_summary("a", evictions=9), _summary("b", evictions=5)],
    ]
    assert verdict(seeds) == "best (lowest): evictions b (5)"


def test_the_table_has_a_legend_and_a_verdict_the_json_neither() -> None:
    code, out, _ = simulate("burst", "--policies", "default,loadaware")
    assert code == 0
    text = " ".join(out.split())
    assert "Lower is better in every column" in text
    assert "never bound: pods still waiting for a node when the scenario ends" in text
    # On burst loadaware holds pods back where default overloads a node.
    assert "best (lowest): CPU peak loadaware (" in text
    assert "never bound default (0)" in text
    code, out, _ = simulate("burst", "--policies", "default,loadaware", "--json")
    assert code == 0
    document = json.loads(out)
    assert set(document) == {"scenario", "seed", "policies", "seconds"}
    assert "best" not in out


def test_jobs_default_to_one_process_for_a_small_scenario_and_every_cpu_for_a_large_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker process costs more to start than a small scenario's run: burst took 0.55 s
    # in one process and 1.7 s in two.
    from app.simulate import main
    from app.simulate.scenario import load_scenario

    monkeypatch.setattr(main, "usable_cpus", lambda: 7)
    assert main.default_jobs(load_scenario("burst")) == 1
    assert main.default_jobs(load_scenario("thousand-nodes")) == 7
