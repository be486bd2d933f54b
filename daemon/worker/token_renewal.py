"""Keeps a Multica login token alive: renewed once at start, then every few days.

Multica's personal tokens expire after 90 days unless renewed; the server extends one in place
when it is within its renewal window (the server decides, the daemon only asks), as Multica's
own daemon does every 72 h. A failure never stops the daemon: a 401 asks the operator to log
in again, a server without the route (the embedded one) is left alone, anything else is tried
again next cycle.
"""

from __future__ import annotations

import logging

import anyio

from daemon.errors import RoundBoundary, ServerError
from daemon.protocol.client import ServerClient
from daemon.protocol.runtime_actions import renew_token

log = logging.getLogger(__name__)

RENEW_TIMEOUT = 15.0
"""Seconds one renewal may take; it must not hold up start-up."""


async def renew_once(
    client: ServerClient, profile: str = "", *, within: float = RENEW_TIMEOUT
) -> None:
    """One renewal round trip within `within` seconds, logged; never raises a server error."""
    login = f"'multica login --profile {profile}'" if profile else "'multica login'"
    with anyio.move_on_after(within) as bounded:
        try:
            answer = await renew_token(client)
        except ServerError as exc:
            if exc.status == 401:
                log.warning("auth token rejected by the server: run %s, then restart", login)
            elif exc.status == 404:
                log.debug("token renewal: the server has no renewal route")
            else:
                log.info("token renewal failed, again next cycle: %s", exc)
            return
        if answer.renewed:
            log.info("auth token renewed, now expires %s", answer.expires_at or "(not said)")
        else:
            log.debug("auth token not yet due for renewal (expires %s)", answer.expires_at)
    if bounded.cancelled_caught:
        log.info("token renewal: no answer within %gs, again next cycle", within)


async def renewal_loop(client: ServerClient, interval: float, profile: str = "") -> None:
    """Renew every `interval` seconds (the start-up renewal is `renew_once`, run before)."""
    boundary = RoundBoundary("token renewal")
    while True:
        await anyio.sleep(interval)
        with boundary:
            await renew_once(client, profile)
