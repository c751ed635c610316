"""The load model: pure functions from node annotations, policy and clock to verdicts and scores.

Each module lists its names once, in its ``__all__``. The annotation format
(``samples``) and the soft taint's settings (``soft_taint_rule``) load at once; the
model itself (numpy, the policy's schema: about a quarter of a second) on first use,
so that a command that stops at a bad flag, or prints its help, never pays for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.load.samples import *  # noqa: F403
from app.load.soft_taint_rule import *  # noqa: F403
from app.objects import load_modules_on_use

if TYPE_CHECKING:
    from app.load.classes import *  # noqa: F403
    from app.load.default_profile import *  # noqa: F403
    from app.load.drained import *  # noqa: F403
    from app.load.estimate import *  # noqa: F403
    from app.load.landing_guard import *  # noqa: F403
    from app.load.model import *  # noqa: F403
    from app.load.prioritize import *  # noqa: F403
    from app.load.taints import *  # noqa: F403
    from app.load.verdict import *  # noqa: F403
    from app.load.warm_taint import *  # noqa: F403

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_modules_on_use(
    __name__,
    (
        "classes",
        "default_profile",
        "drained",
        "estimate",
        "landing_guard",
        "model",
        "taints",
        "verdict",
        "prioritize",
        "warm_taint",
    ),
    globals(),
)
