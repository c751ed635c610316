"""Every shipped kube-scheduler configuration, run by the real kube-scheduler v1.36.

Each file in scheduler-config/, and the one the second-scheduler overlay embeds, is
loaded as a user would load it, with only what a test must change: the API server's
kubeconfig, the extender's address (loopback, a free port) and the certificate paths
(files made by scripts/extender-certs, as docs/install.md does). The extender is
started the way the matching deployment starts it (mutual TLS, server TLS, plain HTTP,
node cache on or off; for plain HTTP, the shared extender of its node-cache mode). Then
a pod must avoid the hot nodes: the extender was really called, over the transport the
file sets up.
"""

from __future__ import annotations

import contextlib
import copy
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.e2e.burst import annotations_at, outcome_of, shared_extender
from tests.e2e.harness import REPO, ControlPlane, pod_object, wait_until
from tests.support.ports import free_port

CONFIGS = [
    *sorted((REPO / "scheduler-config").glob("*.yaml")),
    REPO / "deploy" / "components" / "second-scheduler" / "kube-scheduler-config.yaml",
]
CERT_FILES = {"ca.crt", "client.crt", "client.key"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("certs") / "extender"
    subprocess.run(
        ["bash", str(REPO / "scripts" / "extender-certs"), str(folder)],
        check=True,
        capture_output=True,
    )
    return folder


def adapted(config: dict[str, Any], port: int, certs: Path) -> tuple[dict[str, Any], list[str]]:
    """The config with the test's addresses and files, and the extender flags it needs."""
    config = copy.deepcopy(config)
    config.pop("clientConnection", None)  # the harness names the test API server
    (extender,) = config["extenders"]
    url = urlsplit(extender["urlPrefix"])
    extender["urlPrefix"] = url._replace(netloc=f"127.0.0.1:{port}").geturl()
    flags: list[str] = []
    if not extender.get("nodeCacheCapable", False):
        flags.append("--no-node-cache")
    if url.scheme == "https":
        flags += ["--tls-cert", str(certs / "tls.crt"), "--tls-key", str(certs / "tls.key")]
        tls = extender.get("tlsConfig") or {}
        for key in ("caFile", "certFile", "keyFile"):
            if key in tls:
                name = Path(tls[key]).name
                assert name in CERT_FILES, f"{key}: {tls[key]}"
                tls[key] = str(certs / name)
        if "certFile" in tls:
            flags += ["--client-ca", str(certs / "ca.crt")]
        else:
            flags.append("--allow-unauthenticated")  # as the extender-tls overlay runs it
    return config, flags


def scheduler_name(config: dict[str, Any]) -> str:
    profiles = config.get("profiles") or [{}]
    return str(profiles[0].get("schedulerName", "default-scheduler"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO)))
def test_the_shipped_config_runs_and_its_extender_steers_pods_off_hot_nodes(
    cluster: ControlPlane, namespace: str, certs: Path, path: Path, request: pytest.FixtureRequest
) -> None:
    document = yaml.safe_load(path.read_text())
    cluster.make_node("cool", cpu="8", memory="32Gi", annotations=annotations_at(0.20))
    for i in range(3):
        cluster.make_node(f"hot-{i}", cpu="8", memory="32Gi", annotations=annotations_at(0.90))
    client = cluster.client()
    name = scheduler_name(document)
    for i in range(3):
        client.create(
            pod_object(
                {
                    "metadata": {"name": f"p-{i}", "namespace": namespace},
                    "spec": {
                        "schedulerName": name,
                        "containers": [{"name": "c", "image": "example.invalid/app"}],
                    },
                }
            )
        )
    (entry,) = document["extenders"]
    extender: contextlib.AbstractContextManager[object]
    if urlsplit(entry["urlPrefix"]).scheme == "http":
        # Plain HTTP: the extender's flags are only its node cache's, as the shared
        # extender of that mode runs (tests/e2e/conftest.py); it serves this test too.
        shared = shared_extender(request, node_cache=bool(entry.get("nodeCacheCapable")))
        config, flags = adapted(document, int(urlsplit(shared.url).port or 0), certs)
        assert set(flags) <= {"--no-node-cache"}, flags
        extender = contextlib.nullcontext()
    else:
        config, flags = adapted(document, free_port(), certs)
        port = int(urlsplit(config["extenders"][0]["urlPrefix"]).port or 0)
        extender = cluster.extender(*flags, port=port)
    with extender, cluster.scheduler(config):
        wait_until(lambda: outcome_of(client, namespace).bound == 3, 120, "3 pods bound")
    outcome = outcome_of(client, namespace)
    assert outcome.placed == {"cool": 3}, outcome.describe()
