"""What every long-running component shares, one floor above the API adapter.

- ``service``: the leader-elected service skeleton (caches, watchers, health server,
  Lease; the one status shape), ``run_once`` for a single unit of work, and running
  until SIGTERM;
- ``leader_election``: the ``coordination.k8s.io/v1`` Lease election;
- ``flags``: the election's and the health server's flags, and the ``LeaseSettings``
  they give;
- ``filewatch``: reloading a configuration file when it changes;
- ``in_force``: the one owner of a value a process runs on (built once, reloaded in
  one place, read through it);
- ``policy_reload``: the policy in force (``--policy`` or the default), its watcher
  and reload metrics;
- ``startup``: the start-up sequence every long-running component runs (settings and
  policy, client, health port, serving until a signal, shutdown).

The health server itself is ``app/health`` (a floor down): the extender serves it too.

Each module lists its names once, in its ``__all__``. The flags and the start-up
sequence load at once; the other modules on first use (each pulls in a heavy library:
the Kubernetes client, the web server, Prometheus' client, pydantic), so that a command
that stops at a bad flag, or prints its help, never pays for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.objects import load_modules_on_use
from app.runtime.flags import *  # noqa: F403
from app.runtime.startup import *  # noqa: F403

if TYPE_CHECKING:
    from app.runtime.filewatch import *  # noqa: F403
    from app.runtime.in_force import *  # noqa: F403
    from app.runtime.leader_election import *  # noqa: F403
    from app.runtime.policy_reload import *  # noqa: F403
    from app.runtime.service import *  # noqa: F403

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_modules_on_use(
    __name__, ("filewatch", "in_force", "leader_election", "policy_reload", "service"), globals()
)
