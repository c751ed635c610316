"""Every deploy/ overlay, sent to a real kube-apiserver v1.36 with strict field validation.

kustomize renders each one as `kubectl apply -k` would; each object is then created with
``fieldValidation=Strict`` and ``dryRun=All``: the API server decodes it strictly (an
unknown or duplicated field is an error, not a warning), defaults and validates it, and
runs admission, without keeping it. Namespaces are created for real first, as apply would.

Objects whose API a bare API server lacks cannot be checked this way: the
prometheus-operator overlay's PrometheusRule (its CRD comes with the operator). The test
names them, and fails if any other object cannot be served.
"""

from __future__ import annotations

import ssl
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy.manifests import DEPLOY, render
from tests.e2e.harness import ControlPlane

DIRECTORIES = [DEPLOY, *sorted(p for p in (DEPLOY / "overlays").iterdir() if p.is_dir())]
# apiVersion/kind -> why the bare API server cannot serve it
NEEDS_CRDS = {
    "monitoring.coreos.com/v1/PrometheusRule": "prometheus-operator's CRD",
}


class Api:
    """Plain REST calls as the test's admin, with the API's own discovery."""

    def __init__(self, cluster: ControlPlane) -> None:
        self.http = httpx.Client(
            base_url=cluster.api_url,
            headers={"Authorization": f"Bearer {cluster.admin_token}"},
            verify=ssl.create_default_context(cafile=str(cluster.ca_file)),
            timeout=30,
        )

    @cache  # noqa: B019 - one Api per test module
    def resources(self, api_version: str) -> dict[str, tuple[str, bool]]:
        """kind -> (plural, namespaced) for one group/version; empty if not served."""
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        response = self.http.get(prefix)
        if response.status_code == 404:
            return {}
        response.raise_for_status()
        return {
            r["kind"]: (r["name"], r["namespaced"])
            for r in response.json()["resources"]
            if "/" not in r["name"]
        }

    def path(self, obj: dict[str, Any]) -> str | None:
        api_version, kind = obj["apiVersion"], obj["kind"]
        found = self.resources(api_version).get(kind)
        if found is None:
            return None
        plural, namespaced = found
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced:
            namespace = obj["metadata"].get("namespace", "default")
            return f"{prefix}/namespaces/{namespace}/{plural}"
        return f"{prefix}/{plural}"


@pytest.fixture(scope="module")
def api(control_plane: ControlPlane) -> Api:
    return Api(control_plane)


@pytest.mark.parametrize("directory", DIRECTORIES, ids=lambda p: str(p.relative_to(DEPLOY.parent)))
def test_every_object_passes_strict_validation_on_the_real_api_server(
    cluster: ControlPlane, api: Api, directory: Path
) -> None:
    objects = render(directory)
    unserved: set[str] = set()
    for namespace in (o for o in objects if o["kind"] == "Namespace"):
        created = api.http.post(
            "/api/v1/namespaces", params={"fieldValidation": "Strict"}, json=namespace
        )
        assert created.status_code in (201, 409), created.text
    # Namespaces an overlay writes into but does not make are the user's (monitoring,
    # where their Prometheus runs): they exist before `kubectl apply -k`.
    for name in {o["metadata"].get("namespace") for o in objects} - {None}:
        existing = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        created = api.http.post("/api/v1/namespaces", json=existing)
        assert created.status_code in (201, 409), created.text
    problems = []
    for obj in objects:
        if obj["kind"] == "Namespace":
            continue
        path = api.path(obj)
        if path is None:
            unserved.add(f"{obj['apiVersion']}/{obj['kind']}")
            continue
        response = api.http.post(
            path, params={"fieldValidation": "Strict", "dryRun": "All"}, json=obj
        )
        if response.status_code != 201:
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {response.text}")
    assert not problems, "\n".join(problems)
    assert unserved <= set(NEEDS_CRDS), f"not served by kube-apiserver: {unserved}"
    if directory.name == "prometheus-operator":
        assert unserved == set(NEEDS_CRDS)  # named, and really present in that overlay


def test_strict_validation_refuses_a_misspelt_field(cluster: ControlPlane, api: Api) -> None:
    """The check above can fail: the same call refuses a field the API does not have."""
    objects = render(DEPLOY)
    for namespace in (o for o in objects if o["kind"] == "Namespace"):
        api.http.post("/api/v1/namespaces", json=namespace)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    path = api.path(deployment)
    assert path is not None
    response = api.http.post(
        path, params={"fieldValidation": "Strict", "dryRun": "All"}, json=deployment
    )
    assert response.status_code == 400, response.text
    assert "imagePullPolice" in response.text
