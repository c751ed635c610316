"""The numbers every loadaware listener holds its clients to (``ConnectionLimits``), and
their defaults: the flags' defaults and checks need them before the server is loaded, so
they live apart from the protocol that enforces them (``connections``) and from uvicorn.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HANDSHAKE_TIMEOUT_S",
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_IDLE_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_CONNECTIONS_PER_CLIENT",
    "ConnectionLimits",
]

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 10.0
# Longer than Go's http.Transport IdleConnTimeout (90 s, what kube-scheduler's extender
# client uses): the client, not the server, closes an idle connection, so a POST is never
# sent on a connection that the server is closing at the same moment.
DEFAULT_IDLE_TIMEOUT_S = 120.0
DEFAULT_MAX_CONNECTIONS = 512
# kube-scheduler keeps one or two connections; the kubelet's probes and Prometheus a few.
DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 32
# A TLS handshake takes milliseconds inside a cluster; Go's client gives it 10 s.
DEFAULT_HANDSHAKE_TIMEOUT_S = 5.0
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
BODY_GRACE_S = 1.0


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_client: int = DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES

    def check(self) -> None:
        """Raise ValueError naming the flag whose value cannot work."""
        for flag, value in (
            ("--header-timeout", self.header_timeout_s),
            ("--body-timeout", self.body_timeout_s),
            ("--idle-timeout", self.idle_timeout_s),
            ("--tls-handshake-timeout", self.handshake_timeout_s),
        ):
            if not value > 0 or value == float("inf"):
                raise ValueError(f"{flag} must be a positive number of seconds, got {value}")
        if self.max_connections < 1:
            raise ValueError(f"--max-connections must be at least 1, got {self.max_connections}")
        if self.max_connections_per_client < 1:
            raise ValueError(
                "--max-connections-per-client must be at least 1, got "
                f"{self.max_connections_per_client}"
            )


EXTENDER_CONNECTION_LIMITS = ConnectionLimits()
# The annotator's and the descheduler's health listeners: probes and scrapes only, each
# answered at once, so few connections and a short idle time (uvicorn's default). 128
# stays well below a small file limit (256), so their own Prometheus and API calls
# always find a descriptor.
HEALTH_CONNECTION_LIMITS = ConnectionLimits(
    idle_timeout_s=5.0, max_connections=128, max_connections_per_client=16
)
