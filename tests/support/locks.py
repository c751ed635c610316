"""One lock shared by the test session's worker processes: a file lock (``flock``), so
that whichever worker asks first builds a costly thing once and the others wait
(``kept_once``: the simulation runs, the kustomize renders)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
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


def kept_once(path: Path, make: Callable[[], bytes]) -> bytes:
    """``path``'s contents, made by ``make`` in whichever process asks first (the others
    wait on its lock, then read it). Written whole or not at all: a process killed
    while writing leaves only a partial file of its own, never a half-written ``path``."""
    with exclusive(path.with_name(f"{path.name}.lock")):
        if path.exists():
            return path.read_bytes()
        made = make()
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_bytes(made)
        partial.replace(path)
        return made
