"""The login token's renewal: what each answer is logged as, and that nothing stops the daemon."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import httpx
import pytest

from daemon.protocol.client import ServerClient, make_http_client
from daemon.worker.token_renewal import renew_once
from tests.fakes.multica_server import multica_server
from tests.helpers import eventually, serving_daemon

pytestmark = pytest.mark.anyio
LOGGER = "daemon.worker.token_renewal"


def messages(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= level]


def answering(status: int, body: object = None, delay: float = 0.0) -> ServerClient:
    """A client whose every request gets `status` with `body` after `delay` seconds."""

    async def handler(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(delay)
        return httpx.Response(status, json=body if body is not None else {"error": "x"})

    transport = httpx.MockTransport(handler)
    return ServerClient(make_http_client("http://test", "t", "1", transport=transport))


async def test_a_renewed_token_is_logged_with_its_expiry(caplog: pytest.LogCaptureFixture) -> None:
    """A `renewed: true` answer logs the new expiry at INFO."""
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        await renew_once(answering(200, {"expires_at": "2027-01-01T00:00:00Z", "renewed": True}))
    assert messages(caplog) == ["auth token renewed, now expires 2027-01-01T00:00:00Z"]


async def test_a_rejected_token_asks_for_multica_login(caplog: pytest.LogCaptureFixture) -> None:
    """A 401 from the real route (a wrong token) warns to run `multica login`, profile named."""
    async with (
        multica_server(token="mul_right") as fake,
        make_http_client(fake.url, "mul_wrong", "1") as http,
    ):
        with caplog.at_level(logging.DEBUG, logger=LOGGER):
            await renew_once(ServerClient(http), "work")
    assert [r.route for r in fake.requests] == ["renew"]
    assert messages(caplog, logging.WARNING) == [
        "auth token rejected by the server: run 'multica login --profile work', then restart"
    ]


async def test_other_failures_wait_for_the_next_cycle(caplog: pytest.LogCaptureFixture) -> None:
    """A 500 or no answer within the timeout is logged at INFO, never raised."""
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        await renew_once(answering(500))
        await renew_once(answering(200, {}, delay=5), within=0.05)
    logged = messages(caplog)
    assert len(logged) == 2
    assert logged[0].startswith("token renewal failed, again next cycle")
    assert logged[1] == "token renewal: no answer within 0.05s, again next cycle"


async def test_the_embedded_server_without_the_route_is_quiet(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Against the embedded server (no renewal route) the daemon says nothing above DEBUG."""
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        async with serving_daemon(tmp_path, MULTICA_DAEMON_TOKEN_RENEW_INTERVAL="50ms"):
            await eventually(lambda: len(messages(caplog, logging.DEBUG)) >= 3)
    assert messages(caplog) == []
    assert set(messages(caplog, logging.DEBUG)) == {
        "token renewal: the server has no renewal route"
    }
