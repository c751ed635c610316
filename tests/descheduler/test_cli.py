"""`loadaware descheduler --once --dry-run` as a real process: it prints the plan and
evicts nothing (the fake API server, a real Prometheus with cAdvisor series)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.descheduler import cluster
from tests.support.cadvisor import cadvisor_prometheus
from tests.support.fakekube_fixtures import FakeKube


def write_kubeconfig(path: Path, server: str) -> None:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "nobody", "user": {}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "nobody"}}],
        "current-context": "fake",
    }), encoding="utf-8")


@pytest.mark.prometheus
def test_once_dry_run_prints_the_plan_table_and_evicts_nothing(fake_kube: FakeKube,
                                                               tmp_path: Path) -> None:
    cluster.seed(fake_kube.store)
    before = fake_kube.store.resource_version
    out = dry_run(fake_kube, tmp_path, "consecutiveHotRounds: 1\n")
    assert "Nodes: 2 source, 0 debouncing, 2 destination, 1 neutral, 1 no-data, 0 excluded" in out
    lines = out.splitlines()
    # The defaults: at most 10 % of a workload's pods (at least one) unavailable at once.
    evictions = lines[lines.index("Evictions (1):") + 2:lines.index("Evictions (1):") + 3]
    assert [line.split()[:3] for line in evictions] == [["shop/web-0", "hot", "cool-1"]]
    assert all("prometheus" in line and "cpu_usage_avg_5m" in line for line in evictions)
    assert "Skipped (10):" in out  # web-1 .. web-7 among them
    assert "one more would make 2 unavailable (maxUnavailablePerWorkload 10% = 1)" in out
    assert "last Ready replica of ReplicaSet solo-7c6b5" in out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("dry run: 1 evictions planned, none made; replacements from hot: ")
    # Nothing evicted, no Event, no debounce annotation: nothing written at all.
    assert fake_kube.requests("POST", "/api/v1/namespaces/*/pods/*/eviction") == []
    assert fake_kube.requests("POST") == []
    assert fake_kube.requests("PATCH") == []
    assert fake_kube.store.resource_version == before
    assert len(fake_kube.store.pods()) == len(cluster.WEB_PODS) + 6


ROOT = Path(__file__).resolve().parents[2]
# Where the docs show this example's dry-run table as "the real output".
EXAMPLE_DOCS = ("README.md", "docs/install.md", "docs/troubleshooting.md")


def dry_run(fake_kube: FakeKube, tmp_path: Path, config_text: str) -> str:
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, fake_kube.url)
    config = tmp_path / "descheduler.yaml"
    config.write_text("apiVersion: loadaware.io/v1alpha1\nkind: DeschedulerConfiguration\n"
                      + config_text, encoding="utf-8")
    with cadvisor_prometheus(cluster.series()) as prometheus_url:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "descheduler", "--once", "--dry-run",
             "--no-leader-elect", "--descheduler-config", str(config),
             "--kubeconfig", str(kubeconfig),
             "--prometheus-url", prometheus_url, "--sync-timeout", "20s"],
            capture_output=True, text=True, timeout=120, check=False,
        )
    assert done.returncode == 0, done.stderr
    return done.stdout


def shown_as(block: list[str], real: list[str]) -> bool:
    """Whether a documented block is the real output, where a line starting with
    "..." stands for one or more real lines (those of the same kind as the line before)."""
    pattern = "".join(
        r"(?:[^\n]*\n)+" if line.startswith("...") else re.escape(line.rstrip()) + r"\n"
        for line in block
    )
    return re.fullmatch(pattern, "".join(line.rstrip() + "\n" for line in real)) is not None


@pytest.mark.prometheus
def test_the_dry_run_tables_in_the_docs_are_the_real_output(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    cluster.seed(fake_kube.store)
    real = {
        rounds: dry_run(fake_kube, tmp_path, text).rstrip("\n").splitlines()
        for rounds, text in ((3, ""), (1, "consecutiveHotRounds: 1\n"))
    }
    found = [
        (name, body.splitlines())
        for name in EXAMPLE_DOCS
        for body in re.findall(r"```\n((?:Scheduler|Nodes): .*?)```", (ROOT / name).read_text(),
                               re.S)
    ]
    assert len(found) >= 4, found  # README, install.md (two), troubleshooting.md
    wrong = [
        f"{name}: the block starting {block[0][:40]!r} is not what the command prints now; "
        "replace it with the output of this test's run (consecutiveHotRounds 1 or 3)"
        for name, block in found
        if not any(shown_as(block, lines) for lines in real.values())
    ]
    assert wrong == [], "\n".join(wrong)


def test_a_configuration_that_turns_consolidation_on_is_taken(tmp_path: Path) -> None:
    # The live descheduler drains nodes since issue 43's step 1 (app/descheduler/consolidate.py).
    from app.descheduler.main import load_config

    path = tmp_path / "descheduler.yaml"
    path.write_text(
        "apiVersion: loadaware.io/v1alpha1\nkind: DeschedulerConfiguration\n"
        "consolidation: {enabled: true, abandonAfter: 20m}\n"
    )
    config = load_config(path)
    assert config.consolidation.enabled is True
    assert config.consolidation.abandon_after == 1200.0
