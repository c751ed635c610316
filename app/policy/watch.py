"""Reload the policy file when it changes, keeping the old policy if the new one is broken."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.filewatch import FileWatcher, ReloadResult
from app.policy import Policy, PolicyError, load_policy


class PolicyWatcher(FileWatcher[Policy]):
    def __init__(
        self,
        path: str | Path,
        on_change: Callable[[Policy], None],
        on_result: ReloadResult = lambda result: None,
        interval_s: float = 5.0,
    ) -> None:
        super().__init__(
            path,
            load_policy,
            on_change,
            errors=(PolicyError,),
            what="policy",
            on_result=on_result,
            interval_s=interval_s,
            warnings_of=lambda policy: tuple(policy.warnings),
        )
