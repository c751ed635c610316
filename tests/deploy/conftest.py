"""Fixtures for the deploy tests: the fake API server."""

from __future__ import annotations

from tests.support.fakekube_fixtures import fake_kube

__all__ = ["fake_kube"]
