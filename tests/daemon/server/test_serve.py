"""Running the reference server under uvicorn inside an anyio task group."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import anyio
import httpx
import pytest

from daemon.errors import ConfigError
from daemon.server.serve import SHUTDOWN_GRACE, running_server, serve
from tests.daemon.server.helpers import register_http

pytestmark = pytest.mark.anyio


def _refuses_connections(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


async def test_serve_reports_the_bound_port_and_stops_on_cancel(db_path: Path) -> None:
    """`tg.start(serve, ...)` returns a live port; cancelling the scope closes it."""
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve, db_path, "127.0.0.1", 0)
        assert port > 0
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            assert (await client.get("/api/daemon/workspaces")).status_code == 200
        tg.cancel_scope.cancel()
    assert _refuses_connections(port)


async def test_stops_promptly_with_a_client_still_connected(db_path: Path) -> None:
    """An idle keep-alive connection does not hold up shutdown past the grace period."""
    async with httpx.AsyncClient() as client:
        with anyio.fail_after(SHUTDOWN_GRACE + 5):
            async with running_server(db_path) as url:
                assert (await client.get(url + "/api/tasks")).status_code == 200
        with pytest.raises(httpx.TransportError):
            await client.get(url + "/api/tasks")


async def test_data_survives_a_server_restart(db_path: Path) -> None:
    """Tasks and runtime ids are still there when a new server opens the same file."""
    async with running_server(db_path) as url, httpx.AsyncClient(base_url=url) as client:
        runtime = (await register_http(client))["claude"]
        task_id = (await client.post("/api/tasks", json={"prompt": "keep me"})).json()["id"]
    async with running_server(db_path) as url, httpx.AsyncClient(base_url=url) as client:
        shown = (await client.get(f"/api/tasks/{task_id}")).json()
        assert (shown["prompt"], shown["status"]) == ("keep me", "queued")
        assert (await register_http(client))["claude"] == runtime


async def test_refuses_non_loopback_host_without_token(db_path: Path) -> None:
    """Serving beyond loopback without a token stops with a message naming the fix."""
    with pytest.raises(ConfigError, match="without a token"):
        await serve(db_path, "0.0.0.0", 0)
    assert not await anyio.Path(db_path).exists()


async def test_port_in_use_is_a_clear_error(db_path: Path) -> None:
    """A port another socket holds is reported as a configuration error, not a traceback."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        taken = holder.getsockname()[1]
        with pytest.raises(ConfigError, match="cannot listen"):
            await serve(db_path, "127.0.0.1", taken)


async def test_leaves_process_signal_handlers_alone(db_path: Path) -> None:
    """uvicorn does not replace the daemon's SIGINT/SIGTERM handlers while serving."""
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    async with running_server(db_path):
        during = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    assert during == before
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
