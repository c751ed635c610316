"""``loadaware report``: the descheduler's evictions by outcome, per node and workload,
from its memory ConfigMap; read-only."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from app.cli import main
from app.explain.report import summarize
from app.kube import state
from app.objects import MoveRecord
from tests.explain.test_cli import kubeconfig
from tests.support.fakekube import CONFIGMAPS
from tests.support.fakekube_fixtures import FakeKube

WEB, DB = "shop/Deployment/web", "shop/StatefulSet/db"


def move(
    source: str,
    outcome: str | None,
    pods: int,
    workloads: tuple[str, ...],
    ago_s: float = 600.0,
    attributed: float = 0.0,
) -> MoveRecord:
    at_s = time.time() - ago_s
    return MoveRecord(source, at_s, "cpu", 0.9, 0.2, 0.6, "cool", pods, workloads,
                      outcome=outcome, judged_at_s=None if outcome is None else at_s + 300,
                      attributed=attributed, reason="r")  # fmt: skip


MOVES = [
    move("hot-1", "helped", 2, (WEB,), attributed=0.2),
    move("hot-1", "no effect", 1, (WEB, DB), ago_s=900.0),
    move("hot-2", "backfired", 1, (DB,), attributed=-0.1),
    move("hot-2", None, 3, (WEB,), ago_s=60.0),
    move("hot-3", "helped", 5, (WEB,), ago_s=30 * 3600.0),  # older than --since
]


def test_evictions_are_counted_by_outcome_per_node_and_workload() -> None:
    summary = summarize(MOVES, time.time() - 86400)
    assert summary["total"]["evictions"] == {
        "helped": 2, "no effect": 1, "backfired": 1, "pending": 3,
    }  # fmt: skip
    assert sorted(summary["nodes"]) == ["hot-1", "hot-2"]
    assert summary["nodes"]["hot-1"]["meanCooling"] == pytest.approx(0.2 / 3, abs=1e-4)
    assert summary["nodes"]["hot-2"]["evictions"]["pending"] == 3
    assert summary["workloads"][DB]["evictions"] == {
        "helped": 0, "no effect": 1, "backfired": 1, "pending": 0,
    }  # fmt: skip


def test_report_reads_the_memory_configmap_read_only(
    fake_kube: FakeKube, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    saved_state = state.DeschedulerState()
    for m in MOVES:
        saved_state.moves[m.key] = m
    text = state.encode(saved_state, time.time() - 3600)
    fake_kube.store.add(CONFIGMAPS, {
        "metadata": {"name": state.DEFAULT_NAME, "namespace": "loadaware"},
        "data": {state.STATE_KEY: text},
    })  # fmt: skip
    config = kubeconfig(tmp_path / "kubeconfig", fake_kube.url)
    assert main(["report", "--kubeconfig", config, "--since", "2h", "-o", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["total"]["evictions"]["helped"] == 2
    assert summary["total"]["evictions"]["pending"] == 3
    assert "hot-3" not in summary["nodes"]
    assert main(["report", "--kubeconfig", config]) == 0
    out = capsys.readouterr().out
    assert "per source node:" in out
    assert "hot-1" in out
    assert fake_kube.requests("PUT", "*") == []
    assert fake_kube.requests("POST", "*") == []


def test_an_unreachable_cluster_is_one_line_and_exit_code_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    assert main(["report", "--kubeconfig", config]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_minutes_above_count_each_node_minute_once_per_row() -> None:
    """Two moves from one node ten minutes apart: their windows overlap, and a minute
    in both counts once; the "after" of a move is clipped to now."""
    from app.explain.report_measures import Hot, minutes_above

    now_s = 100_000 * 60.0
    first, second = now_s - 40 * 60.0, now_s - 30 * 60.0
    hot = Hot(60.0, {"hot-1": frozenset(now_s - k * 60.0 for k in range(35, 60))})
    moves = [move("hot-1", "helped", 1, (WEB,)), move("hot-1", "helped", 1, (WEB,))]
    moves = [replace(moves[0], round_s=first), replace(moves[1], round_s=second)]
    counted = minutes_above(moves, hot, 1800.0, now_s)
    # before: minutes 70..31 ago (the union of both windows), hot 59..35 ago: 25 of 40;
    # after: minutes 40..0 ago (the first's 30m, the second's clipped to now), hot
    # 40..35 ago: 6 of 41 (those are in the second move's "before" too).
    assert counted["beforeOf"] == 40
    assert counted["before"] == 25
    assert counted["afterOf"] == 41
    assert counted["after"] == 6
