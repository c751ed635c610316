"""The policy reloads when its ConfigMap file changes; a broken file keeps the old one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.extender.extender import Extender
from app.policy import DEFAULT_POLICY_YAML, Policy, default_policy
from app.runtime.in_force import InForce
from app.runtime.policy_reload import policy_in_force
from tests.extender.nodes import usage_annotations


class ConfigMapVolume:
    """A directory laid out like a mounted ConfigMap: file → ..data/file → ..<version>/file."""

    def __init__(self, root: Path, text: str) -> None:
        self.root = root
        self.version = 0
        self.update(text)
        (root / "policy.yaml").symlink_to("..data/policy.yaml")

    @property
    def path(self) -> Path:
        return self.root / "policy.yaml"

    def update(self, text: str) -> None:
        self.version += 1
        versioned = self.root / f"..v{self.version}"
        versioned.mkdir()
        (versioned / "policy.yaml").write_text(text)
        staging = self.root / "..data_tmp"
        staging.symlink_to(versioned.name)
        os.replace(staging, self.root / "..data")  # the atomic swap the kubelet does


@pytest.fixture
def volume(tmp_path: Path) -> ConfigMapVolume:
    return ConfigMapVolume(tmp_path, DEFAULT_POLICY_YAML)


def watched_extender(volume: ConfigMapVolume) -> tuple[Extender, InForce[Policy]]:
    in_force = policy_in_force(volume.path)
    extender = Extender(in_force, mode="test")
    extender.table.upsert("n1", usage_annotations(cpu=0.7, mem=0.1))
    return extender, in_force


def reloads(extender: Extender, result: str) -> float:
    value = extender.metrics.registry.get_sample_value(
        "loadaware_policy_reloads_total", {"result": result}
    )
    return value or 0.0


def overloaded(extender: Extender) -> bool:
    entry = extender.table.get("n1")
    assert entry is not None
    return entry.reason is not None


def test_configmap_update_takes_effect_and_recomputes_verdicts(volume: ConfigMapVolume) -> None:
    extender, watcher = watched_extender(volume)
    assert overloaded(extender)  # 0.7 > 0.65
    volume.update(DEFAULT_POLICY_YAML.replace("maxLimitPecent: 0.65", "maxLimitPecent: 0.8"))
    assert watcher.check_once()
    assert not overloaded(extender)
    assert reloads(extender, "success") == 1
    assert watcher.value is extender.table.policy  # in force once the extender adopted it


def test_broken_update_keeps_the_old_policy_and_counts_an_error(volume: ConfigMapVolume) -> None:
    extender, watcher = watched_extender(volume)
    volume.update(DEFAULT_POLICY_YAML.replace("period: 3m", "period: soon"))
    assert not watcher.check_once()
    assert overloaded(extender)
    assert extender.table.policy.spec.predicate[0].max_limit_fraction == 0.65
    assert reloads(extender, "error") == 1
    assert not watcher.check_once()  # the same broken file is not reported again
    assert reloads(extender, "error") == 1


def test_unchanged_content_does_not_reload(volume: ConfigMapVolume) -> None:
    extender, watcher = watched_extender(volume)
    volume.update(DEFAULT_POLICY_YAML)
    assert not watcher.check_once()
    assert reloads(extender, "success") == 0


def test_deleted_file_keeps_the_old_policy(volume: ConfigMapVolume) -> None:
    extender, watcher = watched_extender(volume)
    (volume.root / "..data").unlink()
    assert not watcher.check_once()
    assert overloaded(extender)


def test_default_policy_source_is_named() -> None:
    assert "built-in" in default_policy().source
