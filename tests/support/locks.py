"""One lock shared by the test session's worker processes: a file lock (``flock``), so
that whichever worker asks first builds a costly thing once and the others wait."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold the lock of ``path`` (created if missing) for the block."""
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
