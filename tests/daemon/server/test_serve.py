"""Running the reference server under uvicorn inside an anyio task group."""

from __future__ import annotations

import os
import signal
import socket
import stat
from pathlib import Path

import anyio
import httpx
import pytest

from daemon.errors import ConfigError
from daemon.server.serve import SHUTDOWN_GRACE, running_server, serve
from daemon.server.token import ensure_token
from tests.daemon.server.helpers import register_http
from tests.helpers import TOKEN, embedded_server, server_client

pytestmark = pytest.mark.anyio


def _refuses_connections(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


async def test_serve_reports_the_bound_port_and_stops_on_cancel(db_path: Path) -> None:
    """`tg.start(serve, ...)` returns a live port; cancelling the scope closes it."""
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve, db_path, "127.0.0.1", 0, TOKEN)
        assert port > 0
        async with server_client(f"http://127.0.0.1:{port}") as client:
            assert (await client.get("/api/daemon/workspaces")).status_code == 200
        tg.cancel_scope.cancel()
    assert _refuses_connections(port)


async def test_stops_promptly_with_a_client_still_connected(db_path: Path) -> None:
    """An idle keep-alive connection does not hold up shutdown past the grace period."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        with anyio.fail_after(SHUTDOWN_GRACE + 5):
            async with embedded_server(db_path) as url:
                assert (await client.get(url + "/api/tasks")).status_code == 200
        with pytest.raises(httpx.TransportError):
            await client.get(url + "/api/tasks")


async def test_data_survives_a_server_restart(db_path: Path) -> None:
    """Tasks and runtime ids are still there when a new server opens the same file."""
    async with embedded_server(db_path) as url, server_client(url) as client:
        runtime = (await register_http(client))["claude"]
        task_id = (await client.post("/api/tasks", json={"prompt": "keep me"})).json()["id"]
    async with embedded_server(db_path) as url, server_client(url) as client:
        shown = (await client.get(f"/api/tasks/{task_id}")).json()
        assert (shown["prompt"], shown["status"]) == ("keep me", "queued")
        assert (await register_http(client))["claude"] == runtime


async def test_without_a_token_it_makes_one_owner_only_and_keeps_it(db_path: Path) -> None:
    """No token given: one is generated into server.token (0600 whatever the umask), required
    from then on, and the same one is used by the next start."""
    token_file = db_path.parent / "server.token"
    old_umask = os.umask(0)
    try:
        async with running_server(db_path) as url, httpx.AsyncClient(base_url=url) as client:
            token = token_file.read_text().strip()
            without = await client.get("/api/daemon/workspaces")
            auth = {"Authorization": f"Bearer {token}"}
            with_it = await client.get("/api/daemon/workspaces", headers=auth)
    finally:
        os.umask(old_umask)
    assert (without.status_code, with_it.status_code) == (401, 200)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert len(token) >= 40
    assert [p.name for p in token_file.parent.iterdir() if "token" in p.name] == ["server.token"]
    async with running_server(db_path) as url, httpx.AsyncClient(base_url=url) as client:
        again = await client.get("/api/daemon/workspaces", headers=auth)
    assert again.status_code == 200
    assert token_file.read_text().strip() == token


def test_a_malformed_token_file_is_a_clear_error(tmp_path: Path) -> None:
    """A token file that holds no token stops start-up naming the file, never a random token."""
    path = tmp_path / "server.token"
    path.write_text("two words\n")
    with pytest.raises(ConfigError, match=r"server\.token is malformed"):
        ensure_token(path)
    assert path.read_text() == "two words\n"


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
