"""Free loopback ports for servers that a test starts in another process.

Binding port 0 and closing the socket hands out a port of the kernel's
ephemeral range. Any outgoing connection may take that port as its local end
before the server binds it, and a second xdist worker may be handed the same
port. A test then talks to somebody else's server (CI saw an extender's
``/debug/nodes`` answered by another test's process). So each worker draws
from its own slice of ports below the ephemeral range, starting at a point
set by its process id (two test sessions may run at once on one machine), and
a port is handed out only if it binds now.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

FIRST_PORT = 20_000
SLICE = 700


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = worker.removeprefix("gw")
    return int(digits) if digits.isdigit() else 0


def _slice() -> range:
    start = FIRST_PORT + _worker_index() * SLICE
    if start + SLICE > _ephemeral_floor():
        raise RuntimeError(
            f"xdist worker {_worker_index()} has no port slice below the ephemeral range "
            f"(starts at {_ephemeral_floor()}); run fewer workers"
        )
    return range(start, start + SLICE)


_PORTS = _slice()
_cursor = os.getpid() % SLICE


def _binds(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port of this worker's slice that nothing holds now."""
    global _cursor
    for _ in range(SLICE):
        port = _PORTS[_cursor % SLICE]
        _cursor += 1
        if _binds(port):
            return port
    raise RuntimeError(f"no free port in {_PORTS.start}-{_PORTS.stop - 1}")
