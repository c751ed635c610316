"""The file watcher reads a changed file as the loaders do: a file swapped for a device
or for a file past the size limit is a failed reload, counted, not a read without end."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from app.documents import MAX_CONFIG_BYTES
from app.policy import DEFAULT_POLICY_YAML, Policy, PolicyError, load_policy
from app.runtime.filewatch import FileWatcher


def test_a_policy_swapped_for_a_device_or_a_huge_file_is_a_failed_reload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEFAULT_POLICY_YAML)
    results: list[str] = []
    applied: list[Policy] = []
    watcher = FileWatcher(
        path, load_policy, applied.append, errors=(PolicyError,), what="policy",
        on_result=results.append,
    )  # fmt: skip
    watcher.load_initial()

    path.unlink()
    os.symlink("/dev/zero", path)  # as a ConfigMap's ..data link could be made to point
    with caplog.at_level(logging.ERROR):
        assert not watcher.check_once()
    assert results == ["error"]
    assert "not a regular file" in caplog.text

    path.unlink()
    path.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))
    assert not watcher.check_once()
    assert results == ["error", "error"]
    assert "larger than the limit of 1 MiB" in caplog.text

    path.write_text(DEFAULT_POLICY_YAML.replace("weight: 0.2", "weight: 0.25"))
    assert watcher.check_once()
    assert results[-1] == "success"
    assert applied[-1].spec.priority[0].weight == 0.25
