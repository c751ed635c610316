"""The shared free-port helper: a port it hands out is free, below the kernel's
ephemeral range, in this worker's slice, and never handed out twice in a row."""

from __future__ import annotations

import socket

import pytest

from tests.support import ports


def test_ports_come_from_this_workers_slice_below_the_ephemeral_range() -> None:
    handed = [ports.free_port() for _ in range(20)]
    assert len(set(handed)) == 20
    assert all(port in ports._PORTS for port in handed)
    assert max(handed) < ports._ephemeral_floor()


def test_a_port_somebody_holds_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    start = ports._cursor
    held = ports._PORTS[start % ports.SLICE]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", held))
        holder.listen()
        monkeypatch.setattr(ports, "_cursor", start)
        assert ports.free_port() != held


def test_each_worker_has_its_own_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    first = ports._slice()
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    fourth = ports._slice()
    assert set(first).isdisjoint(fourth)
