"""Each component, run as the real process against the fake API server, makes exactly
the API calls app/kube/permissions.py lists for it: every request it sends is covered
by its list, and every entry of its list is used.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

from app import cli
from app.kube.permissions import EXPLAIN, EXPLAIN_CONFIGMAPS, PERMISSIONS, Scope, grants_of
from app.load.taints import SOFT_TAINT_KEY
from app.policy import DEFAULT_POLICY_YAML
from tests.annotator.promproxy import running_proxy
from tests.deploy.requestinfo import RequestAttributes, attributes
from tests.descheduler import cluster
from tests.support import http_client
from tests.support.cadvisor import cadvisor_prometheus
from tests.support.fakekube import CONFIGMAPS, NODES
from tests.support.fakekube_fixtures import FakeKube
from tests.support.ports import free_port

NAMESPACE = "loadaware"  # the component's own namespace, as deployed


def kubeconfig_file(fake_kube: FakeKube, directory: Path) -> Path:
    path = directory / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": fake_kube.url}}],
                "users": [{"name": "nobody", "user": {}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "nobody"}}],
                "current-context": "fake",
            }
        )
    )
    return path


@contextmanager
def loadaware(*argv: str) -> Iterator[subprocess.Popen[str]]:
    """``loadaware ARGV`` as a child process, stopped (SIGTERM) after the block."""
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def until(condition: Callable[[], bool], process: subprocess.Popen[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            output = process.stdout.read() if process.stdout else ""
            raise AssertionError(f"condition not met; the process said:\n{output}")
        time.sleep(0.05)


def seen(fake_kube: FakeKube) -> set[RequestAttributes]:
    return {attributes(r.method, r.path, r.query) for r in fake_kube.requests()}


def ready(url: str) -> bool:
    try:
        return http_client.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def run_extender(fake_kube: FakeKube, tmp_path: Path) -> None:
    port = free_port()
    kubeconfig = kubeconfig_file(fake_kube, tmp_path)
    with loadaware(
        "extender", "--kubeconfig", str(kubeconfig), "--host", "127.0.0.1", "--port", str(port),
        "--workload-usage-namespace", NAMESPACE,
    ) as process:  # fmt: skip
        until(lambda: ready(f"http://127.0.0.1:{port}/readyz"), process, 20)
        until(lambda: any(r.is_watch for r in fake_kube.requests()), process, 10)
        until(
            lambda: ("configmaps", "get") in {(a.resource, a.verb) for a in seen(fake_kube)},
            process,
            10,
        )


def run_annotator(fake_kube: FakeKube, tmp_path: Path) -> None:
    """With soft taints on and a 1ms hold, the leader takes loadaware's taint off the node
    that carries it, cool or without data (a read and a conditional write; soft taints
    off take it off the same way), and reads the descheduler's state for its evictions
    (app/annotator/drained.py)."""
    taint = {"key": SOFT_TAINT_KEY, "value": "true", "effect": "PreferNoSchedule"}
    fake_kube.store.modify(NODES, "n1", lambda node: node["spec"].update(taints=[taint]))
    port = free_port()
    kubeconfig = kubeconfig_file(fake_kube, tmp_path)
    with running_proxy(None) as prometheus:
        prometheus.static_result = [
            {"metric": {"instance": "10.0.0.1:9100"}, "value": [time.time(), "42"]}
        ]
        with loadaware(
            "annotator",
            "--kubeconfig", str(kubeconfig),
            "--prometheus-url", prometheus.url,
            "--lease-namespace", NAMESPACE,
            "--workload-usage-namespace", NAMESPACE,
            "--soft-taints",
            "--soft-taint-hold", "1ms",
            "--descheduler-state-namespace", NAMESPACE,
            "--leader-elect-retry-period", "0.2",
            "--health-host", "127.0.0.1",
            "--health-port", str(port),
        ) as process:  # fmt: skip
            until(lambda: ready(f"http://127.0.0.1:{port}/readyz"), process, 20)

            def everything_seen() -> bool:
                verbs = {(a.resource, a.verb) for a in seen(fake_kube)}
                wanted = {
                    ("nodes", "patch"),
                    ("nodes", "get"),
                    ("leases", "update"),
                    ("pods", "watch"),
                    # the workload-usage ConfigMap: a replace, then its create (a 404 first)
                    ("configmaps", "update"),
                    ("configmaps", "create"),
                    ("configmaps", "get"),  # the descheduler's state (a 404: none yet)
                }
                return wanted <= verbs

            until(everything_seen, process, 20)


def run_descheduler(fake_kube: FakeKube, tmp_path: Path) -> None:
    """The descheduler's loop on a cluster with a hot node: the first run makes its
    memory and evicts, records the Events and updates the memory, and the Lease is
    renewed; a later run, the hot spot cooled, drains an idle node (consolidation)."""
    cluster.seed(fake_kube.store, memory=False)
    config = tmp_path / "descheduler.yaml"
    config.write_text(
        "apiVersion: loadaware.io/v1alpha1\nkind: DeschedulerConfiguration\n"
        "consecutiveHotRounds: 1\nevictionsPerSecond: 50\ninterval: 1s\n"
        "consolidation: {enabled: true}\n"
    )
    port = free_port()
    kubeconfig = kubeconfig_file(fake_kube, tmp_path)
    with cadvisor_prometheus(cluster.series()) as prometheus_url, loadaware(
        "descheduler",
        "--kubeconfig", str(kubeconfig),
        "--descheduler-config", str(config),
        "--prometheus-url", prometheus_url,
        "--lease-namespace", NAMESPACE,
        "--state-namespace", NAMESPACE,
        "--leader-elect-retry-period", "0.2",
        "--health-host", "127.0.0.1",
        "--health-port", str(port),
    ) as process:  # fmt: skip
        until(lambda: ready(f"http://127.0.0.1:{port}/readyz"), process, 20)

        def everything_seen() -> bool:
            verbs = {(a.resource, a.verb) for a in seen(fake_kube)}
            wanted = {
                ("pods/eviction", "create"),
                ("events", "create"),
                ("configmaps", "get"),
                ("configmaps", "create"),
                ("configmaps", "update"),
                ("leases", "update"),
                ("poddisruptionbudgets", "watch"),
                # consolidation drains an idle node once the hot one is cooled: its taint
                ("nodes", "get"),
                ("nodes", "patch"),
            }
            return wanted <= verbs

        until(everything_seen, process, 30)


DRIVERS: dict[str, Callable[[FakeKube, Path], None]] = {
    "extender": run_extender,
    "annotator": run_annotator,
    "descheduler": run_descheduler,
}


def test_every_component_with_permissions_is_driven_here() -> None:
    assert set(DRIVERS) == set(PERMISSIONS)


@pytest.mark.parametrize(
    "component",
    [
        pytest.param(name, marks=pytest.mark.prometheus) if name == "descheduler" else name
        for name in sorted(DRIVERS)
    ],
)
def test_a_component_makes_exactly_its_listed_api_calls(
    component: str, fake_kube: FakeKube, tmp_path: Path
) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")
    fake_kube.store.add_pod("p1", node_name="n1")
    DRIVERS[component](fake_kube, tmp_path)
    listed = grants_of(component)
    used: set[tuple[str, str, str, Scope]] = set()
    for call in seen(fake_kube):
        # A ClusterRole covers a call in any namespace; a Role only one in its own.
        candidates = {(call.api_group, call.resource, call.verb, Scope.CLUSTER)}
        if call.namespace == NAMESPACE:
            candidates.add((call.api_group, call.resource, call.verb, Scope.OWN_NAMESPACE))
        covering = candidates & listed
        assert covering, f"{component} made {call}, which PERMISSIONS does not list"
        used |= covering
    assert listed - used == set(), f"{component}: listed in PERMISSIONS but never used"


def test_explain_makes_exactly_the_reads_its_roles_grant_and_writes_nothing(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    """``explain pod`` (a Pending pod: its Events too) and ``explain node``, against a
    cluster with loadaware's ConfigMaps in their namespace."""
    cluster.seed(fake_kube.store, memory=False)
    fake_kube.store.add(CONFIGMAPS, cluster.empty_memory(NAMESPACE))
    for name, key, text in (
        ("loadaware-policy", "policy.yaml", DEFAULT_POLICY_YAML),
        ("loadaware-descheduler-config", "descheduler.yaml", "consecutiveHotRounds: 1\n"),
    ):
        fake_kube.store.add(
            CONFIGMAPS, {"metadata": {"name": name, "namespace": NAMESPACE}, "data": {key: text}}
        )
    fake_kube.store.add_pod("waiting", namespace="shop")
    kubeconfig = str(kubeconfig_file(fake_kube, tmp_path))
    for argv in (("pod", "shop/waiting"), ("node", "hot")):
        # The CLI's main in this process: a one-shot command, no server to start.
        assert cli.main(["explain", *argv, "--kubeconfig", kubeconfig]) == 0
    listed = {grant for permission in EXPLAIN for grant in permission.grants()}
    used: set[tuple[str, str, str, Scope]] = set()
    for call in seen(fake_kube):
        candidates = {(call.api_group, call.resource, call.verb, Scope.CLUSTER)}
        if call.namespace == NAMESPACE:
            candidates.add((call.api_group, call.resource, call.verb, Scope.OWN_NAMESPACE))
        covering = candidates & listed
        assert covering, f"explain made {call}, which EXPLAIN does not list"
        used |= covering
    assert listed - used == set(), "listed in EXPLAIN but never used"
    # Its Role names the ConfigMaps it may get; it asks for no other.
    asked = {r.path.rsplit("/", 1)[1] for r in fake_kube.requests() if "/configmaps/" in r.path}
    assert asked == set(EXPLAIN_CONFIGMAPS)
