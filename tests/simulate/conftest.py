"""The simulator's tests share their runs across the session's workers (runs.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.simulate.runs import share_runs_in


@pytest.fixture(scope="session", autouse=True)
def shared_runs(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[None]:
    """A folder of this session's runs: beside the workers' own temporary folders (an
    xdist worker's is ``<session>/popen-gwN``), or in the session's when run alone."""
    own = tmp_path_factory.getbasetemp()
    session = own if worker_id == "master" else own.parent
    folder = session / "simulation-runs"
    folder.mkdir(exist_ok=True)
    share_runs_in(folder)
    yield
    share_runs_in(None)
