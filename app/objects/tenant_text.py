"""Text a tenant writes, checked once where it enters a view (issue 42, points 2 and 6).

The API server validates a pod's name, namespace, labels and annotation keys, but of
an ownerReference only that kind and name are non-empty: a tenant may name its pod's
controller ``nothing.example/v1 Widget`` with a 1.1 MB name, or put escape sequences
in it, and the garbage collector never deletes a pod whose owner kind it cannot
resolve. ``valid_owner`` accepts an owner only in the shapes Kubernetes itself gives
its objects (an API group that is a DNS subdomain, a version that is a DNS label, a
kind that is an identifier of at most 63 characters, a name of at most 253 printable
characters without ``/``, ``%`` or whitespace); the pod views treat a pod with any
other controller as bare (``app.kube.pods``), so such text never reaches a workload
key, a cache, a document, a plan or a log.

``printable`` is for the rest of what a tenant writes that is shown to an operator
(annotation values, an owner read from a file): control characters (escape sequences
that clear a screen or forge a log line) become ``?``, and the text is cut to a bound.
"""

from __future__ import annotations

import re

__all__ = [
    "printable",
    "valid_owner",
]

MAX_NAME = 253  # a DNS subdomain, the longest name Kubernetes gives an object
MAX_KIND = 63
MAX_SHOWN = 256  # what an operator is shown of one tenant-written value

_DNS_SUBDOMAIN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,62}$")
# A path-segment name (what the API server accepts for most objects' names), held to
# printable ASCII: no '/', '%', whitespace or control characters.
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9._:@+=]{0,251}[A-Za-z0-9])?$")


def valid_owner_kind(kind: object) -> bool:
    return isinstance(kind, str) and _KIND.match(kind) is not None


def valid_owner_name(name: object) -> bool:
    return isinstance(name, str) and len(name) <= MAX_NAME and _NAME.match(name) is not None


def valid_api_version(api_version: object) -> bool:
    """``v1`` or ``group/version``: a DNS-subdomain group and a DNS-label version."""
    if not isinstance(api_version, str):
        return False
    group, _, version = api_version.rpartition("/")
    if group and _DNS_SUBDOMAIN.match(group) is None:
        return False
    return _DNS_LABEL.match(version) is not None


def valid_owner(api_version: object, kind: object, name: object) -> bool:
    """An ownerReference in a shape Kubernetes gives its objects (module doc); an empty
    ``api_version`` is not checked (a view built without one)."""
    if api_version not in (None, "") and not valid_api_version(api_version):
        return False
    return valid_owner_kind(kind) and valid_owner_name(name)


def printable(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` with every character that is not printable (control characters, line
    breaks, bidirectional overrides) as ``?``, cut to ``limit`` characters (then
    `` [...]`` says so)."""
    cleaned = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return cleaned + (" [...]" if len(text) > limit else "")
