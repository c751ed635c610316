"""Reload the policy file when it changes, keeping the old policy if the new one is broken.

A ConfigMap update swaps a symlink (``..data``) under the mounted file, so the file is
polled by ``stat`` (which follows links) and by content, rather than watched by inode.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from app.policy import Policy, PolicyError, load_policy

log = logging.getLogger(__name__)

ReloadResult = Callable[[str], None]  # called with "success" or "error"


class PolicyWatcher:
    def __init__(
        self,
        path: str | Path,
        on_change: Callable[[Policy], None],
        on_result: ReloadResult = lambda result: None,
        interval_s: float = 5.0,
    ) -> None:
        self._path = Path(path)
        self._on_change = on_change
        self._on_result = on_result
        self._interval_s = interval_s
        self._signature: tuple[int, int, int] | None = None
        self._digest: bytes | None = None

    def load_initial(self) -> Policy:
        """Load the file at start; a broken file here is fatal (raises PolicyError)."""
        self._signature = self._stat()
        policy = load_policy(self._path)
        self._digest = self._read_digest()
        for warning in policy.warnings:
            log.warning("policy %s: %s", self._path, warning)
        return policy

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            stat = os.stat(self._path)
        except OSError:
            return None
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def _read_digest(self) -> bytes | None:
        try:
            return hashlib.sha256(self._path.read_bytes()).digest()
        except OSError:
            return None

    def check_once(self) -> bool:
        """Reload if the file changed; return True when a new policy took effect."""
        signature = self._stat()
        if signature == self._signature:
            return False
        self._signature = signature
        digest = self._read_digest()
        if digest is None or digest == self._digest:
            return False
        self._digest = digest
        try:
            policy = load_policy(self._path)
        except PolicyError as error:
            log.error("policy reload failed, the previous policy stays in force: %s", error)
            self._on_result("error")
            return False
        for warning in policy.warnings:
            log.warning("policy %s: %s", self._path, warning)
        self._on_change(policy)
        self._on_result("success")
        log.info("policy reloaded from %s", self._path)
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                self.check_once()
            except Exception:  # never let a reload problem end the watcher
                log.exception("policy watcher failed; will retry")
