"""Reload a configuration file when it changes, keeping the old value if the new one is broken.

A ConfigMap update swaps a symlink (``..data``) under the mounted file, so the file is
polled by ``stat`` (which follows links) and by content, rather than watched by inode.
The policy and the descheduler's configuration are both reloaded this way.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from app.documents import MAX_CONFIG_BYTES, read_bytes

__all__ = [
    "FileWatcher",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

ReloadResult = Callable[[str], None]  # called with "success" or "error"


class _Unreadable(Exception):
    pass


class FileWatcher(Generic[T]):
    """Polls ``path``; ``load`` turns it into a value or raises one of ``errors``."""

    def __init__(
        self,
        path: str | Path,
        load: Callable[[Path], T],
        on_change: Callable[[T], None],
        *,
        errors: tuple[type[Exception], ...],
        what: str,
        on_result: ReloadResult = lambda result: None,
        interval_s: float = 5.0,
        warnings_of: Callable[[T], tuple[str, ...]] = lambda _value: (),
    ) -> None:
        self._path = Path(path)
        self._load = load
        self._on_change = on_change
        self._errors = errors
        self._what = what
        self._on_result = on_result
        self._interval_s = interval_s
        self._warnings_of = warnings_of
        self._signature: tuple[int, int, int] | None = None
        self._digest: bytes | None = None

    def load_initial(self) -> T:
        """Load the file at start; a broken file here is fatal (raises)."""
        self._signature = self._stat()
        value = self._load(self._path)
        self._digest = self._read_digest()
        self._warn(value)
        return value

    def _warn(self, value: T) -> None:
        for warning in self._warnings_of(value):
            log.warning("%s %s: %s", self._what, self._path, warning)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            stat = os.stat(self._path)
        except OSError:
            return None
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def _read_digest(self) -> bytes:
        """The digest of the file's content, read bounded (a file swapped for a device or
        a huge file is not read to its end); of why it cannot be read, when it cannot,
        so that the load is tried and says why."""
        try:
            content = read_bytes(self._path, self._what, _Unreadable, MAX_CONFIG_BYTES)
        except _Unreadable as refused:
            content = f"unreadable: {refused}".encode()
        return hashlib.sha256(content).digest()

    def check_once(self) -> bool:
        """Reload if the file changed; return True when a new value took effect."""
        signature = self._stat()
        if signature == self._signature:
            return False
        self._signature = signature
        if signature is None:
            # Deleted (or its folder unmounted): said once, counted as a failed reload.
            log.error(
                "%s file %s is gone or cannot be read; the previous %s stays in force",
                self._what,
                self._path,
                self._what,
            )
            self._digest = None
            self._on_result("error")
            return False
        digest = self._read_digest()
        if digest == self._digest:
            return False
        self._digest = digest
        try:
            value = self._load(self._path)
        except Exception as error:  # a bug in a loader too: counted, the old value kept
            return self._failed(
                error, "%s reload failed, the previous %s stays in force", self._what, self._what
            )
        try:
            # The receiver builds everything for the new value before it swaps, and
            # raises (keeping the old value whole) when it cannot use it.
            self._on_change(value)
        except Exception as error:  # any failure keeps the old value
            return self._failed(
                error,
                "%s reload failed while adopting %s, the previous %s stays in force",
                self._what,
                self._path,
                self._what,
            )
        self._warn(value)
        self._on_result("success")
        log.info("%s reloaded from %s", self._what, self._path)
        return True

    def _failed(self, error: Exception, message: str, *args: object) -> bool:
        """Log a failed reload (``message`` % ``args``, then the error, with its
        traceback where it is not one a bad file raises) and count it; False: nothing
        new took effect."""
        unexpected = not isinstance(error, self._errors)
        log.error(message + ": %s", *args, error, exc_info=unexpected)
        self._on_result("error")
        return False

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                self.check_once()
            except Exception:  # never let a reload problem end the watcher
                log.exception("%s watcher failed; will retry", self._what)
