"""The list-then-watch loop shared by every cache fed from the API server.

It lists, watches from the list's resourceVersion, relists at once when the watch
expires (410 Gone) and backs off on any other failure, so that an API server outage
never ends the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from lightkube.core.exceptions import ApiError

from app.kube.api_errors import describe_api_error

log = logging.getLogger(__name__)


async def list_then_watch(
    relist: Callable[[], Awaitable[str]],
    watch: Callable[[str], Awaitable[None]],
    *,
    what: str,
    retry_delay_s: float,
    max_retry_delay_s: float,
    while_down: str = "",
    on_failure: Callable[[BaseException], None] = lambda _error: None,
    server: str = "",
) -> None:
    """Run ``relist`` then ``watch(resource_version)`` forever. ``what`` names the
    resource in logs; ``while_down`` tells the operator what suffers meanwhile;
    ``on_failure`` hears of every failure except an expired watch; ``server`` (the API
    server's URL) is named in the log when it cannot be reached."""
    delay_s = retry_delay_s
    consequence = f"; {while_down}" if while_down else ""
    while True:
        try:
            resource_version = await relist()
            delay_s = retry_delay_s
            await watch(resource_version)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # network or decode errors must not end the loop
            if isinstance(error, ApiError) and error.status.code == 410:
                log.info("%s watch expired (410 Gone); relisting", what)
                continue
            on_failure(error)
            log.warning(
                "%s list/watch failed: %s%s; retrying in %.0fs",
                what,
                describe_api_error(error, server),
                consequence,
                delay_s,
            )
        await asyncio.sleep(delay_s)
        delay_s = min(delay_s * 2, max_retry_delay_s)
