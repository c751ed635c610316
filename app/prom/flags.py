"""The Prometheus connection flags, shared by every component that queries Prometheus."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from app.commandline import add_flag, duration, http_url
from app.prom.settings import PrometheusSettings, parse_header

__all__ = ["add_prometheus_flags", "label_matchers", "prometheus_settings_from_args"]


class _AppendHeaders(argparse.Action):
    """Repeatable ``--prometheus-header``; the command line replaces the environment's list.

    From the environment, several headers are separated by newlines or ``;``.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        current = getattr(namespace, self.dest, None)
        items = list(current) if isinstance(current, list) else []
        items.append(str(values))
        setattr(namespace, self.dest, items)


# PromQL label matchers: name, one of = != =~ !~, and a quoted string ("", '' or ``).
_STRING = r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`"""
_MATCHER = rf"\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*(?:{_STRING})\s*"
_LIST = rf"(?:{_MATCHER}(?:,{_MATCHER})*,?)?\s*"
_MATCHERS = re.compile(rf"\s*(?:\{{{_LIST}\}}|{_LIST})\s*")
# A header value may not break the request apart: no CR, LF or other control bytes.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def label_matchers(text: str) -> str:
    """``--query-selector``: PromQL label matchers such as ``cluster="prod",job=~"node.*"``."""
    if not _MATCHERS.fullmatch(text):
        raise argparse.ArgumentTypeError(
            "expected PromQL label matchers such as 'cluster=\"prod\"' or "
            f'\'cluster="prod",job=~"node.*"\' (values in quotes), got {text!r}'
        )
    return text


def header_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in value.replace(";", "\n").splitlines() if part.strip()]
    return list(value)


def add_prometheus_flags(parser: argparse.ArgumentParser, url_unset: str = "none, required") -> Any:
    """Add the connection flags; return their group, for a component's own query flags.
    ``url_unset`` says what an unset ``--prometheus-url`` means, for a command that can
    do without one."""
    prom = parser.add_argument_group("Prometheus (also Thanos, Mimir, VictoriaMetrics)")
    add_flag(
        prom,
        "--prometheus-url",
        metavar="URL",
        type=http_url,
        default_text=url_unset,
        help="base URL of the query API, e.g. http://prometheus.monitoring:9090",
    )
    add_flag(
        prom,
        "--prometheus-token-file",
        metavar="FILE",
        help="send 'Authorization: Bearer <contents>'; the file is re-read for every query, "
        "so rotated tokens are picked up without a restart",
    )
    add_flag(
        prom,
        "--prometheus-username",
        metavar="USER",
        help="basic-auth user (with --prometheus-password-file)",
    )
    add_flag(
        prom,
        "--prometheus-password-file",
        metavar="FILE",
        help="basic-auth password, re-read for every query",
    )
    add_flag(
        prom,
        "--prometheus-ca-file",
        metavar="FILE",
        help="PEM CA bundle to verify Prometheus' TLS certificate",
    )
    add_flag(
        prom,
        "--prometheus-insecure-skip-verify",
        action="store_true",
        help="do not verify Prometheus' TLS certificate (testing only)",
    )
    add_flag(
        prom,
        "--prometheus-header",
        action=_AppendHeaders,
        default_text="none",
        metavar="'NAME: VALUE'",
        help="extra HTTP header on every query, repeatable, e.g. 'X-Scope-OrgID: prod' for "
        "Mimir; in the environment separate several with ';'",
    )
    add_flag(
        prom,
        "--query-timeout",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="give up on one query after this long",
    )
    return prom


def prometheus_settings_from_args(args: argparse.Namespace) -> PrometheusSettings:
    """The connection from parsed flags; ValueError naming the flag when it is unusable."""
    if not args.prometheus_url:
        raise ValueError(
            "--prometheus-url is required (or LOADAWARE_PROMETHEUS_URL), "
            "e.g. http://prometheus.monitoring:9090"
        )
    texts = header_list(args.prometheus_header)
    for text in texts:
        if _CONTROL.search(text):
            raise ValueError(
                f"--prometheus-header {text!r}: a header may not hold control characters "
                "(CR, LF): give one 'Name: value' per flag"
            )
    headers = dict(parse_header(text) for text in texts)
    prometheus = PrometheusSettings(
        url=args.prometheus_url,
        token_file=Path(args.prometheus_token_file) if args.prometheus_token_file else None,
        username=args.prometheus_username or None,
        password_file=Path(args.prometheus_password_file)
        if args.prometheus_password_file
        else None,
        ca_file=Path(args.prometheus_ca_file) if args.prometheus_ca_file else None,
        insecure_skip_verify=bool(args.prometheus_insecure_skip_verify),
        headers=headers,
        timeout_s=args.query_timeout,
    )
    for path, flag in (
        (prometheus.token_file, "--prometheus-token-file"),
        (prometheus.password_file, "--prometheus-password-file"),
        (prometheus.ca_file, "--prometheus-ca-file"),
    ):
        if path is not None and not path.is_file():
            raise ValueError(f"{flag} {path} does not exist or is not a file")
    return prometheus
