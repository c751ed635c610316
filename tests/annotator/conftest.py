"""Fixtures for the annotator tests: the fake API server, and Prometheus behind a proxy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.annotator.promproxy import PromProxy, running_proxy
from tests.support.fakekube_fixtures import fake_kube
from tests.support.prom_fixtures import PromNodeData

__all__ = ["fake_kube"]


@pytest.fixture
def prom_proxy(prometheus_node_data: PromNodeData) -> Iterator[PromProxy]:
    """The session's real Prometheus behind a counting, fault-injecting proxy."""
    with running_proxy(prometheus_node_data.url) as proxy:
        yield proxy


@pytest.fixture
def static_prom() -> Iterator[PromProxy]:
    """A stand-in Prometheus that answers every query with ``static_result`` (default empty)."""
    with running_proxy(None) as proxy:
        yield proxy
