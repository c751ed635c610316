"""deploy/ renders with kustomize, base and every overlay, into objects the Kubernetes
API would accept (offline JSON-schema validation) and that are hardened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.deploy.manifests import (
    DEPLOY,
    Obj,
    documents,
    kustomizations,
    named,
    of_kind,
    pod_templates,
    render,
    yaml_files,
)

KUBERNETES_VERSION = "1.36.0"
# Custom resources: no schema in kubernetes-validate. PrometheusRule's rules are
# checked with promtool by tests/prom/test_rules.py.
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "PrometheusRule")}
RENDERS = kustomizations()
# What an operator installs: the base and each overlay (the others are parts of them).
INSTALLS = [DEPLOY, *sorted((DEPLOY / "overlays").iterdir())]


def by_name(directory: Path) -> str:
    return directory.relative_to(DEPLOY.parent).as_posix()


def test_every_overlay_is_rendered_here() -> None:
    assert set(INSTALLS) <= set(RENDERS)


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY.parent)))
def test_every_yaml_file_parses(path: Path) -> None:
    assert list(yaml.safe_load_all(path.read_text())), f"{path} is empty"


def _referenced_files() -> set[Path]:
    """Files named by some kustomization or component (resources, patches, generators)."""
    found = set()
    for path in DEPLOY.rglob("kustomization.yaml"):
        found.add(path)
        (kustomization,) = documents(path)
        names = list(kustomization.get("resources", []))
        names += [p["path"] for p in kustomization.get("patches", []) if "path" in p]
        for generator in kustomization.get("configMapGenerator", []):
            # "key=file" names the key the file is stored under
            names += [f.split("=", 1)[-1] for f in generator.get("files", [])]
        found |= {(path.parent / name).resolve() for name in names}
    return found


def test_every_manifest_in_deploy_is_used_by_a_kustomization() -> None:
    referenced = _referenced_files()
    unused = [p for p in DEPLOY.rglob("*.yaml") if p.resolve() not in referenced]
    assert unused == [], "listed in no kustomization.yaml"


def test_the_kustomizations_name_nothing_outside_deploy() -> None:
    """The kept renders (tests/deploy/manifests.py) are named by a digest of deploy/'s
    files and kubectl: a render reading a file from elsewhere could be kept stale."""
    outside = sorted(p for p in _referenced_files() if not p.is_relative_to(DEPLOY.resolve()))
    assert outside == []


# Objects this process has seen pass, as canonical JSON. The overlays repeat the base's
# objects: of ~400 rendered objects 52 differ, and each validation loads and compiles
# its kind's schema anew (~10 ms). Only a pass is kept, so an object that fails
# fails in every render that holds it.
_VALID: set[str] = set()


def validate(obj: Obj) -> None:
    canonical = json.dumps(obj, sort_keys=True)
    if canonical not in _VALID:
        # Imported here, by the one test that validates (jsonschema and its formats:
        # ~50 ms of every worker's collection otherwise).
        import kubernetes_validate

        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        _VALID.add(canonical)


@pytest.mark.parametrize("directory", RENDERS, ids=by_name)
def test_rendered_objects_validate_against_the_kubernetes_schemas(directory: Path) -> None:
    for obj in render(directory):
        if (obj["apiVersion"], obj["kind"]) in CUSTOM_KINDS:
            continue
        validate(obj)


@pytest.mark.parametrize("directory", RENDERS, ids=by_name)
def test_every_workload_is_probed_limited_and_locked_down(directory: Path) -> None:
    for workload, spec in pod_templates(render(directory)):
        name = f"{workload['kind']} {workload['metadata']['name']}"
        pod_security = spec["securityContext"]
        assert pod_security["runAsNonRoot"] is True, name
        assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in spec["containers"]:
            where = f"{by_name(directory)}: {name}/{container['name']}"
            if workload["kind"] == "Deployment":  # a CronJob's run exits: nothing to probe
                assert "readinessProbe" in container, where
                assert "livenessProbe" in container, where
            assert {"cpu", "memory"} <= container["resources"]["requests"].keys(), where
            assert "memory" in container["resources"]["limits"], where
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["capabilities"] == {"drop": ["ALL"]}, where


def _selects(selector: Obj, labels: Obj) -> bool:
    return bool(selector) and selector.items() <= labels.items()


def shared_extender_installs() -> list[Path]:
    """The installs whose extender is a Deployment behind a Service (the others run it
    beside their scheduler, on loopback: tests/deploy/test_extender_shapes.py)."""
    return [
        d
        for d in INSTALLS
        if any(
            o["metadata"]["name"] == "loadaware-extender" for o in of_kind(render(d), "Deployment")
        )
    ]


@pytest.mark.parametrize("directory", shared_extender_installs(), ids=by_name)
def test_the_extender_has_two_replicas_a_disruption_budget_and_a_service(
    directory: Path,
) -> None:
    objects = render(directory)
    deployment = named(objects, "Deployment", "loadaware-extender")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] >= 2
    budget = named(objects, "PodDisruptionBudget", "loadaware-extender")
    assert _selects(budget["spec"]["selector"]["matchLabels"], labels)
    assert budget["spec"]["minAvailable"] < deployment["spec"]["replicas"]
    assert _selects(named(objects, "Service", "loadaware-extender")["spec"]["selector"], labels)


def test_the_namespace_enforces_the_restricted_pod_security_standard() -> None:
    (namespace,) = of_kind(render(DEPLOY), "Namespace")
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
