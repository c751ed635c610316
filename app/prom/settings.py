"""Where Prometheus is and how to reach it (``PrometheusSettings``, from the
``--prometheus-*`` flags), checked when built: apart from the client (requests,
prometheus-api-client), so that a command's parser and a bad flag need no client."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PrometheusSettings", "redact_url"]


@dataclass(frozen=True, slots=True)
class PrometheusSettings:
    url: str
    token_file: Path | None = None
    username: str | None = None
    password_file: Path | None = None
    ca_file: Path | None = None
    insecure_skip_verify: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not re.match(r"^https?://[^/]", self.url):
            raise ValueError(
                f"--prometheus-url {redact_url(self.url)!r} is not an http(s) URL; "
                "expected e.g. http://prometheus.monitoring:9090"
            )
        if self.token_file is not None and self.username is not None:
            raise ValueError(
                "both a bearer token file and basic-auth username are set; "
                "Prometheus accepts one Authorization header, so choose one"
            )
        if self.username is not None and self.password_file is None:
            raise ValueError("--prometheus-username needs --prometheus-password-file")
        if self.password_file is not None and self.username is None:
            raise ValueError("--prometheus-password-file needs --prometheus-username")
        if self.ca_file is not None and self.insecure_skip_verify:
            raise ValueError(
                "--prometheus-ca-file and --prometheus-insecure-skip-verify contradict each "
                "other; drop the skip-verify flag once the CA is in place"
            )
        if self.timeout_s <= 0:
            raise ValueError(f"query timeout must be positive, got {self.timeout_s}s")


def redact_url(url: str) -> str:
    """``url`` fit for logs and errors: a password in it (``http://user:pass@host``) is masked.

    Credentials belong in --prometheus-password-file, but a URL that carries them still
    works (requests sends them as basic auth), so every message that names the URL
    goes through here.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def parse_header(text: str) -> tuple[str, str]:
    """``"Name: value"`` from ``--prometheus-header``."""
    name, separator, value = text.partition(":")
    name = name.strip()
    if not separator or not name or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
        raise ValueError(
            f"--prometheus-header {text!r} is not 'Name: value' (e.g. 'X-Scope-OrgID: tenant-1')"
        )
    return name, value.strip()
