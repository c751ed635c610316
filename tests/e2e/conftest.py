"""Fixtures for the end-to-end tests: one real control plane per worker's run through
this folder (package scope: a worker stops it when it moves on), wiped between tests.

tests/conftest.py leaves this folder out of collection when LOADAWARE_KUBE_ASSETS is unset.
"""

from __future__ import annotations

import atexit
import re
import secrets
from collections.abc import Iterator

import pytest

from tests.e2e.harness import (
    ControlPlane,
    Extender,
    HarnessError,
    assets_dir,
    start_control_plane,
)


@pytest.fixture(scope="package")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    assets = assets_dir()
    if assets is None:  # tests/conftest.py does not collect tests/e2e then
        raise HarnessError(
            "LOADAWARE_KUBE_ASSETS is unset: set it to a folder holding etcd, kube-apiserver, "
            "kube-controller-manager and kube-scheduler to run tests/e2e (see docs/developer.md)"
        )
    plane = start_control_plane(assets, tmp_path_factory.mktemp("control-plane"))
    atexit.register(plane.stop)  # also when the session is interrupted
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The shared control plane; what the test made is wiped afterwards."""
    try:
        yield control_plane
    finally:
        control_plane.wipe()


@pytest.fixture
def namespace(cluster: ControlPlane, request: pytest.FixtureRequest) -> str:
    """A fresh namespace for one test (emptied and retired by the wipe)."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:40].strip("-")
    return cluster.namespace(f"{base}-{secrets.token_hex(3)}")


# One extender per control plane (package scope, as control_plane), for the tests that
# need an extender to call, not a fresh one: each start is about 0.8 CPU-s, nearly all
# of it imports, and the e2e tests started 26 (now 11). A production extender outlives
# many pods and Nodes, so a test that meets one that saw earlier tests come and go asks
# no less of it. The test waits, through tests.e2e.burst.shared_extender, until the
# extender's watches have shown it the wipe's deletions and the test's own Nodes
# (/debug/*, hence --debug-endpoints).


@pytest.fixture(scope="package")
def extender_with_node_cache(control_plane: ControlPlane) -> Iterator[Extender]:
    """``loadaware extender --debug-endpoints``, node cache on, shared by the tests."""
    with control_plane.extender("--debug-endpoints") as extender:
        yield extender


@pytest.fixture(scope="package")
def extender_without_node_cache(control_plane: ControlPlane) -> Iterator[Extender]:
    """``loadaware extender --debug-endpoints --no-node-cache``, shared by the tests."""
    with control_plane.extender("--debug-endpoints", "--no-node-cache") as extender:
        yield extender
