"""The tests' one-off HTTP requests, made with httpx on one shared TLS context.

``httpx.get`` and ``httpx.post`` build a client, and the client an SSL context that
loads the whole CA bundle (~25 ms of CPU), even for an ``http://`` URL. The tests poll
``/readyz`` and post to the verbs hundreds of times a run; with these they make httpx's
default context once per process (an SSLContext is safe to share between threads).
A ``verify`` given by the caller wins, as with httpx.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx


@functools.cache
def default_tls() -> ssl.SSLContext:
    """What httpx verifies with when it is given no ``verify``."""
    return httpx.create_ssl_context()


def request(method: str, url: str, **options: Any) -> httpx.Response:
    options.setdefault("verify", default_tls())
    return httpx.request(method, url, **options)


def get(url: str, **options: Any) -> httpx.Response:
    return request("GET", url, **options)


def post(url: str, **options: Any) -> httpx.Response:
    return request("POST", url, **options)
