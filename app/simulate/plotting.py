"""Whether PNG plots can be drawn: matplotlib is an optional extra. Asked before a
simulation starts (``--plots``), so this module loads nothing of the simulator."""

from __future__ import annotations

import importlib.util

PLOTS_HINT = "for PNG plots install the extra: pip install 'loadaware[simulate]'"


def plots_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None
