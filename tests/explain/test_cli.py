"""``loadaware explain`` as a user types it: one line and the documented exit code for
bad input, an unreachable cluster, or a pod or node that does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.cli import main
from tests.support.fakekube_fixtures import FakeKube


def kubeconfig(path: Path, server: str) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return str(path)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(["explain", *argv])
    except SystemExit as stopped:  # refused by the parser (a name no pod can have)
        code = int(stopped.code or 0)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["pod"], "name one pod: NAMESPACE/NAME, or -f FILE"),
        (["pod", "shop/web", "-f", "pod.yaml"], "name one pod"),
        (["pod", "web"], "expected NAMESPACE/NAME, got 'web'"),
        (["pod", "shop/web/x"], "expected NAMESPACE/NAME"),
        (["pod", "-f", "/nonexistent/pod.yaml"], "/nonexistent/pod.yaml"),
    ],
)
def test_bad_usage_is_one_line_and_exit_code_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    code, err = run([*argv, "--kubeconfig", config], capsys)
    assert code == 2
    assert says in err
    # One line; a refusal by the parser adds its hint to --help, as for every flag.
    lines = [line for line in err.strip().splitlines() if not line.startswith("(run 'loadaware")]
    assert len(lines) == 1, err


@pytest.mark.parametrize(
    "manifest",
    ["kind: Deployment\nmetadata: {name: x}\n", "[1, 2]\n", "metadata: {name: x}\nspec: {}\n"],
    ids=["not-a-pod", "not-a-mapping", "no-containers"],
)
def test_a_manifest_that_is_not_a_pod_is_refused_with_exit_code_2(
    manifest: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(manifest)
    config = kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    code, err = run(["pod", "-f", str(path), "--kubeconfig", config], capsys)
    assert code == 2
    assert str(path) in err
    assert len(err.strip().splitlines()) == 1, err


def test_an_unreachable_cluster_is_one_line_and_exit_code_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    for argv in (["pod", "shop/web"], ["node", "n1"]):
        code, err = run([*argv, "--kubeconfig", config], capsys)
        assert code == 1
        assert err.startswith(f"loadaware explain {argv[0]}: error: cannot read ")
        assert len(err.strip().splitlines()) == 1, err


def test_a_pod_or_node_that_does_not_exist_is_exit_code_1(
    fake_kube: FakeKube, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")
    config = kubeconfig(tmp_path / "kubeconfig", fake_kube.url)
    code, err = run(["pod", "shop/missing", "--kubeconfig", config], capsys)
    assert (code, err.strip()) == (1, "loadaware explain pod: error: pod shop/missing not found")
    code, err = run(["node", "missing", "--kubeconfig", config], capsys)
    assert (code, err.strip()) == (1, "loadaware explain node: error: node missing not found")


def test_a_broken_policy_configmap_is_a_configuration_error(
    fake_kube: FakeKube, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.support.fakekube import CONFIGMAPS

    fake_kube.store.add(
        CONFIGMAPS,
        {
            "metadata": {"name": "loadaware-policy", "namespace": "loadaware"},
            "data": {"policy.yaml": "spec: {predicate: 3}\n"},
        },
    )
    fake_kube.store.add_pod("web", namespace="shop")
    config = kubeconfig(tmp_path / "kubeconfig", fake_kube.url)
    code, err = run(["pod", "shop/web", "--kubeconfig", config], capsys)
    assert code == 2
    assert "ConfigMap loadaware/loadaware-policy" in err
    assert len(err.strip().splitlines()) == 1, err


def test_prometheus_down_is_said_and_the_plan_shown_on_estimates(
    fake_kube: FakeKube, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.descheduler import cluster

    cluster.seed(fake_kube.store, memory=False)
    config = kubeconfig(tmp_path / "kubeconfig", fake_kube.url)
    refused = "http://127.0.0.1:9"  # nothing listens on the discard port
    code = main(["explain", "node", "hot", "--prometheus-url", refused, "--kubeconfig", config])
    out = capsys.readouterr().out
    assert code == 0
    assert "usage query failed" in out
    assert "the descheduler would evict nothing now" in out
    assert "each pod's usage is the extender's estimate" in out
    assert "memory: ConfigMap loadaware/loadaware-descheduler-state not found" in out
    # The descheduler's first run acts like any other (app/descheduler/descheduler.py).
    assert "first run makes it and acts like any other" in " ".join(out.split())
    assert "only observes" not in out
