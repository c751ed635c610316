"""Fixtures for the security tests: the fake API server and a stand-in Prometheus."""

from __future__ import annotations

from tests.annotator.conftest import static_prom
from tests.support.fakekube_fixtures import fake_kube

__all__ = ["fake_kube", "static_prom"]
