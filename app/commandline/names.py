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
    return _checked(text, _NAMESPACE, MAX_NAMESPACE_CHARS, "a namespace", "digits and '-'")


def kubernetes_name(text: str) -> str:
    """An object's name (a ConfigMap, a Lease, a Node, a Pod): a DNS-1123 subdomain."""
    return _checked(text, _NAME, MAX_NAME_CHARS, "a Kubernetes name", "digits, '-' and '.'")


def _checked(
    text: str, pattern: re.Pattern[str], max_chars: int, what: str, characters: str
) -> str:
    if len(text) <= max_chars and pattern.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(
        f"expected {what}: lower-case letters, {characters}, at most {max_chars} "
        f"characters, starting and ending with a letter or digit, got {text!r}"
    )
