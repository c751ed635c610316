"""Kubernetes names given on the command line (``--install-namespace``, ``--state-name``,
``explain node NAME``): checked where they are typed, as the API server would check
them, so that a name that cannot exist is one line naming the flag, not a request to
a path the name rewrote (``--state-name ../x`` asked for ``.../namespaces/loadaware/x``)
or an answer about some other object.
"""

from __future__ import annotations

import argparse
import re
from typing import Final

__all__ = [
    "kubernetes_name",
    "kubernetes_namespace",
]

# RFC 1123 as Kubernetes applies it: a label (namespaces), and a subdomain of labels
# (most object names: ConfigMaps, Leases, Nodes, Pods).
_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAMESPACE: Final = re.compile(_LABEL)
_NAME: Final = re.compile(rf"{_LABEL}(\.{_LABEL})*")
MAX_NAMESPACE_CHARS: Final = 63
MAX_NAME_CHARS: Final = 253


def kubernetes_namespace(text: str) -> str:
    """A namespace's name: a DNS-1123 label."""
    if len(text) <= MAX_NAMESPACE_CHARS and _NAMESPACE.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(
        f"expected a namespace: lower-case letters, digits and '-', at most "
        f"{MAX_NAMESPACE_CHARS} characters, starting and ending with a letter or digit, "
        f"got {text!r}"
    )


def kubernetes_name(text: str) -> str:
    """An object's name (a ConfigMap, a Lease, a Node, a Pod): a DNS-1123 subdomain."""
    if len(text) <= MAX_NAME_CHARS and _NAME.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(
        f"expected a Kubernetes name: lower-case letters, digits, '-' and '.', at most "
        f"{MAX_NAME_CHARS} characters, starting and ending with a letter or digit, "
        f"got {text!r}"
    )
