"""A progress bar on stderr for the long commands (``simulate``, ``capture``): one line,
redrawn only when it grows."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

__all__ = ["progress_bar"]


def progress_bar(label: str, stream: TextIO) -> Callable[[int, int], None]:
    width = 30
    last = [-1]

    def show(done: int, total: int) -> None:
        filled = done * width // total
        if filled == last[0] and done != total:
            return
        last[0] = filled
        stream.write(f"\r{label:24} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done == total:
            stream.write("\n")
        stream.flush()

    return show
