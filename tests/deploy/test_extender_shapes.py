"""Every install runs the extender in a shape that authenticates its caller and keeps
one scheduler's calls on one extender process (where its reservations are), checked
against the code that reads the same settings (issue 18 "Authenticate the caller",
issue 16 item 4 "Replicas").

Two shapes: a shared Deployment behind a Service with sessionAffinity: ClientIP and a
NetworkPolicy (the base and its TLS overlays), or the extender beside the scheduler in
its pod on loopback (the second-scheduler overlay)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.extender.main import check_caller_authentication, connection_limits, is_loopback
from tests.deploy.manifests import DEPLOY, Obj, env_of, named, of_kind, pod_templates, render
from tests.deploy.test_kustomize import INSTALLS, by_name

# The installs that serve the verbs to any client that reaches them, by explicit choice.
UNAUTHENTICATED = {"overlays/extender-tls", "overlays/extender-plain-http"}


def extender_containers(objects: list[Obj]) -> list[tuple[Obj, Obj, Obj]]:
    """(workload, pod spec, container) for every extender container."""
    return [
        (workload, spec, container)
        for workload, spec in pod_templates(objects)
        for container in spec["containers"]
        if container["image"].startswith("loadaware")
        and container.get("args", [])[:1] == ["extender"]
    ]


def parsed_flags(container: Obj, monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """The flags `loadaware extender` reads from this container's environment."""
    from app.cli import build_parser  # after the environment is set: defaults read it

    for name, value in env_of(container).items():
        monkeypatch.setenv(name, value)
    return build_parser().parse_args(container["args"])


@pytest.mark.parametrize("directory", INSTALLS, ids=by_name)
def test_every_extender_authenticates_its_caller_or_says_it_does_not(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = by_name(directory).removeprefix("deploy/").removeprefix("deploy")
    found = extender_containers(render(directory))
    assert found, f"{where}: no extender"
    for _, _, container in found:
        with monkeypatch.context() as patched:
            args = parsed_flags(container, patched)
            warning = check_caller_authentication(args)  # exits 2 on a refused shape
            connection_limits(args)
        explicit = bool(args.allow_unauthenticated)
        assert explicit is (where in UNAUTHENTICATED), where
        if not explicit:
            assert args.client_ca or is_loopback(args.host), where
        assert ("ANY client" in (warning or "")) is explicit


def test_the_base_is_mutual_tls_on_all_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    [(_, spec, container)] = extender_containers(render(DEPLOY))
    args = parsed_flags(container, monkeypatch)
    assert args.host == "0.0.0.0"
    assert args.tls_cert
    assert args.tls_key
    assert args.client_ca
    mounted = {m["mountPath"] for m in container["volumeMounts"]}
    for path in (args.tls_cert, args.tls_key, args.client_ca):
        assert str(Path(path).parent) in mounted
    secrets = {v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    assert secrets == {"loadaware-extender-tls", "loadaware-extender-client-ca"}


@pytest.mark.parametrize("directory", INSTALLS, ids=by_name)
def test_probes_use_the_plain_health_port_which_serves_nothing_else(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _, _, container in extender_containers(render(directory)):
        with monkeypatch.context() as patched:
            args = parsed_flags(container, patched)
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["health"] == args.health_port > 0
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"]["port"] == "health"
            assert "scheme" not in container[probe]["httpGet"]


def shared(objects: list[Obj]) -> bool:
    return any(
        o["metadata"]["name"] == "loadaware-extender" for o in of_kind(objects, "Deployment")
    )


@pytest.mark.parametrize("directory", INSTALLS, ids=by_name)
def test_one_schedulers_calls_stay_on_one_extender_process(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = render(directory)
    if shared(objects):
        service = named(objects, "Service", "loadaware-extender")
        assert service["spec"]["sessionAffinity"] == "ClientIP"
        # Longer than any scheduling burst; kube-proxy's default, stated.
        timeout_s = service["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"]
        assert timeout_s >= 3600
        return
    # Otherwise each scheduler replica has its own extender, on loopback in its pod.
    (workload, spec, container) = extender_containers(objects)[0]
    assert workload["metadata"]["name"] == "loadaware-scheduler"
    assert "kube-scheduler" in {c["name"] for c in spec["containers"]}
    args = parsed_flags(container, monkeypatch)
    assert is_loopback(args.host)
    assert [p["containerPort"] for p in container["ports"]] == [args.health_port]
    assert "loadaware-extender" not in {s["metadata"]["name"] for s in of_kind(objects, "Service")}


def ingress_by_port(policy: Obj) -> dict[str, list[Obj]]:
    rules: dict[str, list[Obj]] = {}
    for rule in policy["spec"]["ingress"]:
        for port in rule["ports"]:
            rules.setdefault(port["port"], []).extend(rule.get("from", [{"anyone": True}]))
    return rules


@pytest.mark.parametrize("directory", INSTALLS, ids=by_name)
def test_a_network_policy_admits_only_schedulers_to_the_verbs(directory: Path) -> None:
    objects = render(directory)
    if not shared(objects):
        policy = named(objects, "NetworkPolicy", "loadaware-scheduler")
        # The verbs are on loopback: the network reaches only health and metrics ports.
        assert set(ingress_by_port(policy)) == {"https", "health"}
        return
    policy = named(objects, "NetworkPolicy", "loadaware-extender")
    labels = named(objects, "Deployment", "loadaware-extender")["spec"]["template"]["metadata"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    rules = ingress_by_port(policy)
    assert set(rules) == {"extender", "health"}
    schedulers = rules["extender"]
    assert schedulers
    assert all("ipBlock" not in peer for peer in schedulers)
    for peer in schedulers:
        selected = peer["podSelector"]["matchLabels"]
        assert selected.get("app.kubernetes.io/component") == "scheduler" or selected == {
            "component": "kube-scheduler"
        }
        if "namespaceSelector" in peer:
            assert peer["namespaceSelector"]["matchLabels"] == {
                "kubernetes.io/metadata.name": "kube-system"
            }
    # The second scheduler's pods carry the labels the first rule admits.
    scheduler_labels = {
        "app.kubernetes.io/name": "loadaware",
        "app.kubernetes.io/component": "scheduler",
    }
    assert any(peer["podSelector"]["matchLabels"] == scheduler_labels for peer in schedulers)
