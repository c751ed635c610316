"""The shipped manifests and scheduler configs must match the code they configure."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import build_parser
from app.extender.main import DEFAULT_PORT
from app.flags import env_name
from app.policy import DEFAULT_POLICY_YAML, policy_from_yaml

ROOT = Path(__file__).resolve().parents[1]
EXTENDER_VERBS = {"filter", "prioritize"}


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def env_vars_of(command: str) -> set[str]:
    parser = subcommands()[command]
    return {
        env_name(flag)
        for a in parser._actions
        for flag in a.option_strings
        if flag.startswith("--")
    }


@pytest.mark.parametrize(
    "path", sorted((ROOT / "scheduler-config").glob("*.yaml")), ids=lambda p: p.name
)
def test_scheduler_configs_call_verbs_the_extender_serves(path: Path) -> None:
    (config,) = documents(path)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    (extender,) = config["extenders"]
    assert {extender["filterVerb"], extender["prioritizeVerb"]} == EXTENDER_VERBS
    assert extender["urlPrefix"].endswith(f":{DEFAULT_PORT}")
    assert extender["weight"] > 0
    assert extender["nodeCacheCapable"] is ("full-nodes" not in path.name)
    assert extender["urlPrefix"].startswith("https://") is extender.get("enableHTTPS", False)


def containers() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted((ROOT / "deploy").glob("*.yaml")):
        for document in documents(path):
            if document.get("kind") == "Deployment":
                for container in document["spec"]["template"]["spec"]["containers"]:
                    found.append((path.name, container))
    return found


@pytest.mark.parametrize(
    ("name", "container"), containers(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_deployments_run_real_subcommands_with_real_flags(
    name: str, container: dict[str, Any]
) -> None:
    command = container["args"][0]
    assert command in subcommands(), f"{name}: unknown subcommand {command!r}"
    known = env_vars_of(command)
    for variable in container.get("env", []):
        assert variable["name"] in known, f"{name}: {variable['name']} is not a flag of {command}"


def test_policy_configmap_holds_a_valid_policy_equal_to_the_default() -> None:
    (configmap,) = documents(ROOT / "deploy" / "policy-configmap.yaml")
    text = configmap["data"]["policy.yaml"]
    assert policy_from_yaml(text).spec == policy_from_yaml(DEFAULT_POLICY_YAML).spec
    assert (ROOT / "deploy" / "policy.yaml").read_text() == DEFAULT_POLICY_YAML


def test_kustomization_lists_every_manifest() -> None:
    (kustomization,) = documents(ROOT / "deploy" / "kustomization.yaml")
    listed = set(kustomization["resources"])
    manifests = {p.name for p in (ROOT / "deploy").glob("*.yaml")} - {
        "kustomization.yaml",
        "policy.yaml",
    }
    assert listed == manifests
