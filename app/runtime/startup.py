"""The start-up sequence the long-running components share (the extender, the
annotator, the descheduler), in the order each runs it:

1. ``configured``: the flags and files turned into settings, the policy in force
   among them (read now: a broken file stops the process with its error);
2. ``kube_client``: the Kubernetes client (``--kubeconfig``);
3. ``health_listener`` (the extender binds its own listeners): the ports bound once
   every input is known good, before the component, the web server and the clients
   load, so that a port in use is told at once;
4. the component built, with what the steps above gave it;
5. ``until_signalled``: run until SIGTERM or SIGINT, then close what it used; or, for
   the extender's HTTP servers, ``stop_on_signals`` and ``serve_until_stopped``: SIGTERM
   and SIGINT stop every server gracefully (the requests in flight are answered).

Logging is set up before any of it, for every command, by ``app.cli``. Each step that
finds bad input raises ``StartupError``; ``run_component`` turns it into one line on
stderr and exit code 2, never a traceback.

The Kubernetes client and the health server load in the steps that need them: a
command that stops at a bad flag, or prints its help, never pays for them."""

from __future__ import annotations

import argparse
import asyncio
import functools
import signal
from collections.abc import Callable, Coroutine, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from app.commandline import EXIT_OK, usage_error

if TYPE_CHECKING:
    import socket

    from app.health import EmbeddedServer
    from app.kube import KubeClient

__all__ = [
    "StartupError",
    "configured",
    "health_listener",
    "kube_client",
    "run_component",
    "serve_until_stopped",
    "stop_on_signals",
    "until_signalled",
]

S = TypeVar("S")


class StartupError(Exception):
    """Bad usage or configuration found while starting: one line, exit code 2."""


class Closeable(Protocol):
    def close(self) -> None: ...


def configured(
    settings_from_args: Callable[[argparse.Namespace], S],
    args: argparse.Namespace,
    errors: tuple[type[Exception], ...] = (),
) -> S:
    """The component's settings (``settings_from_args``), its policy in force among
    them; a ValueError, a PolicyError or one of ``errors`` is a StartupError."""
    from app.policy import PolicyError

    caught: tuple[type[Exception], ...] = (ValueError, PolicyError, *errors)
    try:
        return settings_from_args(args)
    except caught as error:
        raise StartupError(str(error)) from error


def kube_client(kubeconfig: str | None, advice: str = "") -> KubeClient:
    """The Kubernetes client ``--kubeconfig`` (or the cluster) gives; ``advice`` is
    added to the error when there is none."""
    from app.kube import KubeConfigError, make_client

    try:
        return make_client(kubeconfig)
    except KubeConfigError as error:
        raise StartupError(f"{error}{advice}") from error


def health_listener(host: str, port: int | None) -> socket.socket | None:
    """The health port's socket, bound now (None: no health port)."""
    from app.health import CannotListen, listen_for_health

    try:
        return listen_for_health(host, port)
    except CannotListen as error:
        raise StartupError(str(error)) from error


def run_component(
    component: str, start: Callable[[argparse.Namespace], int], args: argparse.Namespace
) -> int:
    """Run ``start`` (the steps above, then serving) and return its exit code; bad
    usage or configuration found on the way, or a port that cannot be listened on once
    running, is one line on stderr and exit code 2."""
    from app.health import CannotListen

    try:
        return start(args)
    except (StartupError, CannotListen) as error:
        return usage_error(f"loadaware {component}", str(error))


def until_signalled(
    component: str, work: Coroutine[Any, Any, None], closing: Sequence[Closeable] = ()
) -> int:
    """Run ``work`` until SIGTERM or SIGINT (its ``finally`` blocks release the Lease
    and stop the health server), then close each of ``closing``; exit code 0."""
    from app.runtime.service import run_until_signalled

    try:
        asyncio.run(run_until_signalled(component, work))
    finally:
        for resource in closing:
            resource.close()
    return EXIT_OK


def stop_on_signals(servers: Sequence[EmbeddedServer]) -> None:
    """SIGTERM and SIGINT stop every server gracefully, and a second SIGINT forces the
    exit. uvicorn's own handlers are off (``EmbeddedServer``): they would raise the
    signal again after its shutdown (a KeyboardInterrupt traceback, or death by
    signal). Set before the servers listen, so that a signal is never missed."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, functools.partial(_stop_servers, servers))


def _stop_servers(
    servers: Sequence[EmbeddedServer], signum: int, frame: FrameType | None
) -> None:
    for server in servers:
        server.handle_exit(signum, frame)


def serve_until_stopped(
    servers: Sequence[EmbeddedServer], sockets: Sequence[socket.socket]
) -> None:
    """Serve each server on its socket (listening already) until they stop
    (``stop_on_signals``), then close the sockets."""
    try:
        asyncio.run(_serve_all(servers, sockets))
    finally:
        for sock in sockets:
            sock.close()


async def _serve_all(
    servers: Sequence[EmbeddedServer], sockets: Sequence[socket.socket]
) -> None:
    await asyncio.gather(
        *(server.serve(sockets=[sock]) for server, sock in zip(servers, sockets, strict=True))
    )
