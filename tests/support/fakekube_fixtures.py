"""pytest fixtures for the fake Kubernetes API server (tests/support/fakekube.py).

    def test_annotates(fake_kube: FakeKube) -> None:
        fake_kube.store.add_node("n1", internal_ip="10.0.0.1")
        client = fake_kube.client()
        client.patch(Node, "n1", {"metadata": {"annotations": {"a": "1"}}},
                     patch_type=PatchType.MERGE)
        assert fake_kube.store.get_node("n1")["metadata"]["annotations"] == {"a": "1"}
        assert len(fake_kube.requests("PATCH", "/api/v1/nodes/*")) == 1
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import httpx2
import lightkube
import pytest
from lightkube.config.kubeconfig import KubeConfig
from lightkube.config.models import Cluster, User

from tests.support.fakekube import FakeKubeServer, FakeKubeStore, Faults, RecordedRequest

__all__ = ["FakeKube", "fake_kube", "kubeconfig_for"]

#: Short enough that a test waiting on a hung request fails fast.
CLIENT_TIMEOUT = 5.0


def kubeconfig_for(url: str, namespace: str = "default") -> KubeConfig:
    """A no-auth kubeconfig for url.

    Not KubeConfig.from_server(url): in lightkube 1.0.1 that config has no
    user, and building a client from it fails with AssertionError("Missing
    user"). An empty User means "no credentials".

    insecure=True only skips loading the CA bundle (~0.1 s per client, which
    lightkube does even for http://); the fake is plain HTTP, so no TLS happens.
    """
    cluster = Cluster(server=url, insecure=True)
    return KubeConfig.from_one(cluster=cluster, user=User(), namespace=namespace)


class FakeKube:
    """What the fake_kube fixture yields: a running fake server and helpers."""

    def __init__(self, server: FakeKubeServer) -> None:
        self.server = server
        self._closers: list[Callable[[], None]] = []

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def store(self) -> FakeKubeStore:
        return self.server.store

    @property
    def faults(self) -> Faults:
        return self.server.faults

    def fail_next(self, method: str, path: str, status: int = 500, *, times: int = 1,
                  reason: str | None = None, message: str | None = None,
                  retry_after: int | None = None) -> None:
        """Answer the next `times` requests matching method and path glob with a Status."""
        self.faults.fail(method, path, status, times=times, reason=reason, message=message,
                         retry_after=retry_after)

    def delay(self, method: str, path: str, seconds: float, *, times: int | None = None) -> None:
        """Hold matching requests for `seconds` (times=None: every one)."""
        self.faults.delay(method, path, seconds, times=times)

    def restart_server(self) -> None:
        """Restart the API server on the same URL with the same store (open watches end,
        connections drop, objects survive); faults and the request log start empty."""
        self.server = self.server.restarted()

    def requests(self, method: str = "*", path: str = "*") -> list[RecordedRequest]:
        """Requests received so far whose method and path (fnmatch glob) match."""
        return self.server.requests.matching(method, path)

    def kubeconfig(self, namespace: str = "default") -> KubeConfig:
        return kubeconfig_for(self.url, namespace)

    def client(self, namespace: str = "default", **kwargs: Any) -> lightkube.Client:
        """A sync lightkube Client on the fake; closed when the test ends."""
        client = lightkube.Client(self.kubeconfig(namespace), **_client_options(kwargs))
        self._closers.append(client.close)
        return client

    def async_client(self, namespace: str = "default", **kwargs: Any) -> lightkube.AsyncClient:
        """An AsyncClient on the fake. Close it in the test's event loop, e.g.
        `async with fake_kube.async_client() as client:`."""
        return lightkube.AsyncClient(self.kubeconfig(namespace), **_client_options(kwargs))

    def http(self) -> httpx.Client:
        """A plain httpx client on the fake, for wire-level requests lightkube
        cannot make (odd content types, malformed bodies); closed when the test ends."""
        # verify=False only skips loading the CA bundle; the fake is plain HTTP.
        client = httpx.Client(base_url=self.url, verify=False, trust_env=False,
                              timeout=CLIENT_TIMEOUT)
        self._closers.append(client.close)
        return client

    def close_clients(self) -> None:
        for close in self._closers:
            close()
        self._closers.clear()


def _client_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    # trust_env=False keeps HTTP(S)_PROXY and ~/.kube/config out of the picture.
    return {"trust_env": False, "timeout": httpx2.Timeout(CLIENT_TIMEOUT), **kwargs}


class _Reaper:
    """Joins fake servers late. uvicorn's shutdown has a fixed 0.1 s grace
    sleep; letting it run alongside the next tests instead of in every
    teardown saves seconds per run. At most MAX_PENDING servers are ever left
    shutting down, and one that hangs still fails loudly when joined."""

    MAX_PENDING = 4

    def __init__(self) -> None:
        self._pending: list[FakeKubeServer] = []

    def hand_over(self, server: FakeKubeServer) -> None:
        server.request_stop()
        self._pending = [s for s in self._pending if s.running]
        while len(self._pending) >= self.MAX_PENDING:
            self._pending.pop(0).join()
        self._pending.append(server)

    def reap(self) -> None:
        while self._pending:
            self._pending.pop(0).join()


@pytest.fixture(scope="session")
def _fake_kube_reaper() -> Iterator[_Reaper]:
    reaper = _Reaper()
    yield reaper
    reaper.reap()


@pytest.fixture
def fake_kube(_fake_kube_reaper: _Reaper) -> Iterator[FakeKube]:
    """A fresh fake API server and store for one test."""
    server = FakeKubeServer()
    server.start()
    handle = FakeKube(server)
    try:
        yield handle
    finally:
        handle.close_clients()
        _fake_kube_reaper.hand_over(handle.server)
