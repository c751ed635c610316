"""The small HTTP server every component answers probes on: ``/healthz``, ``/readyz``,
``/metrics`` (``server``), held to connection limits against slow and crowding
clients (``connections``, which the extender's verb listener uses too; the numbers
themselves are ``connection_limits``).

Each module lists its names once, in its ``__all__``. The limits and the listening
sockets load at once; the server and the protocol (uvicorn, FastAPI: a few tenths of a
second) on first use, so that a command that stops at a bad flag, or prints its help,
never pays for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.health.connection_limits import *  # noqa: F403
from app.health.listening import *  # noqa: F403
from app.objects import load_modules_on_use

if TYPE_CHECKING:
    from app.health.connections import *  # noqa: F403
    from app.health.server import *  # noqa: F403

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_modules_on_use(__name__, ("connections", "server"), globals())
