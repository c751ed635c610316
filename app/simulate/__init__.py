"""`loadaware simulate`: what loadaware would do for a cluster, offline (docs/simulate.md).

The scenario schema (pydantic, the planner's configuration) loads on first use, so that
`loadaware simulate --help` and a bad flag never pay for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.objects import load_modules_on_use

if TYPE_CHECKING:
    from app.simulate.scenario import *  # noqa: F403

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_modules_on_use(__name__, ("scenario",), globals())
