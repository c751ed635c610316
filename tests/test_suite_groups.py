"""Every e2e file belongs to one of the suite's e2e groups (tests/conftest.py): a file
left out runs ungrouped and starts a control plane of its own on each worker."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import E2E_GROUPS


def test_every_e2e_file_is_in_exactly_one_group() -> None:
    files = sorted(
        p.stem.removeprefix("test_") for p in (Path(__file__).parent / "e2e").glob("test_*.py")
    )
    grouped = [name for names in E2E_GROUPS.values() for name in names]
    assert sorted(grouped) == files
