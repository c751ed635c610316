"""The one owner of a value a process runs on: its policy, the descheduler's configuration.

An ``InForce`` is built once at start, before the component that runs on it: from the
file a flag names (read then, so a broken file stops the process with its error) or
from a built-in default. It is reloaded in one place, its ``FileWatcher``, which hands
each good new value to the component following it and keeps it in force only once the
component adopted it (a raise keeps the old value, counted as a failed reload). Every
part reads the value in force through ``value``.

The component follows it when it is built (``follow``), as it listens to a cache: main
builds the owner, then the component with the owner, and wires nothing afterwards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from app.runtime.filewatch import FileWatcher, ReloadResult

__all__ = [
    "InForce",
]

T = TypeVar("T")

Adopt = Callable[[T], None]
"""Builds everything for a new value and swaps it in, or raises and keeps the old one."""


def _no_count(_result: str) -> None:
    return None


class InForce(Generic[T]):
    """A value in force, the file it is reloaded from (if any) and who follows it."""

    def __init__(
        self,
        default: Callable[[], T],
        path: str | Path | None = None,
        load: Callable[[Path], T] | None = None,
        *,
        errors: tuple[type[Exception], ...] = (),
        what: str = "configuration",
        interval_s: float = 5.0,
        warnings_of: Callable[[T], tuple[str, ...]] = lambda _value: (),
    ) -> None:
        """``path`` (with ``load``) is read now and watched from ``run``; without one,
        ``default()`` is in force for good."""
        self._followers: list[tuple[Adopt[T], ReloadResult]] = []
        self.watcher: FileWatcher[T] | None = None
        if path and load is not None:
            self.watcher = FileWatcher(
                path,
                load,
                self.adopt,
                errors=errors,
                what=what,
                on_result=self._count,
                interval_s=interval_s,
                warnings_of=warnings_of,
            )
            self._value = self.watcher.load_initial()
        else:
            self._value = default()

    @classmethod
    def fixed(cls, value: T) -> InForce[T]:
        """``value`` in force for good: no file, no reload."""
        return cls(lambda: value)

    @property
    def value(self) -> T:
        return self._value

    def follow(self, adopt: Adopt[T], count: ReloadResult = _no_count) -> None:
        """``adopt`` each reloaded value (before it is in force); ``count`` each reload's
        result, "success" or "error"."""
        self._followers.append((adopt, count))

    def adopt(self, value: T) -> None:
        """Put ``value`` in force as a reload does: each follower adopts it, then it is
        in force; a follower's raise keeps the old value (and propagates)."""
        for adopt, _count in self._followers:
            adopt(value)
        self._value = value

    def _count(self, result: str) -> None:
        for _adopt, count in self._followers:
            count(result)

    def check_once(self) -> bool:
        """Reload now if the file changed; True when a new value took effect."""
        return self.watcher is not None and self.watcher.check_once()

    async def run(self) -> None:
        """Reload whenever the file changes, for as long as the process runs (returns at
        once without a file)."""
        if self.watcher is not None:
            await self.watcher.run()
