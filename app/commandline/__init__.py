"""The command line every loadaware process shares: its flags (``flags``: converters,
environment variables, exit codes), its log lines (``logs``: text or JSON) and the
progress bar of the long commands (``progress``).

Standard library only, so that ``loadaware --help`` stays quick.
"""

from app.commandline.flags import (
    DEPRECATIONS,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Parser,
    UsageError,
    add_component,
    add_deprecated_alias,
    add_flag,
    count,
    duration,
    env_name,
    fraction,
    host,
    http_url,
    log_level,
    port,
    port_or_off,
    positive_number,
    seed,
    timeout,
    usage_error,
)
from app.commandline.logs import LOG_FORMATS, RateLimitedLog, configure_logging
from app.commandline.progress import progress_bar

__all__ = [
    "DEPRECATIONS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "LOG_FORMATS",
    "Parser",
    "RateLimitedLog",
    "UsageError",
    "add_component",
    "add_deprecated_alias",
    "add_flag",
    "configure_logging",
    "count",
    "duration",
    "env_name",
    "fraction",
    "host",
    "http_url",
    "log_level",
    "port",
    "port_or_off",
    "positive_number",
    "progress_bar",
    "seed",
    "timeout",
    "usage_error",
]
