"""The fakes' TCP listener: cancelled while a client is connecting, it leaves no socket behind;
a port reserved for a proxy that goes down stays its own."""

from __future__ import annotations

import gc
import socket
import warnings

import anyio
import httpx
import pytest
from anyio.abc import SocketStream

from tests.fakes.chaos_proxy import chaos_proxy
from tests.fakes.tcp_listener import listening_socket, serve

pytestmark = pytest.mark.anyio


async def _close(stream: SocketStream) -> None:
    await stream.aclose()


async def test_a_cancel_in_the_iteration_a_client_arrives_leaves_nothing_unclosed() -> None:
    """The client's connect makes the socket readable; the cancel runs before the accept
    callback in that same loop iteration (anyio's listener accepted then, and dropped the
    socket with InvalidStateError: the chaos proxy's ResourceWarning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(20):
            sock = listening_socket()
            with sock:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(serve, sock, _close, tg)
                    await anyio.wait_all_tasks_blocked()
                    with socket.create_connection(sock.getsockname()):
                        await anyio.lowlevel.checkpoint()  # the next select sees it readable
                        tg.cancel_scope.cancel()
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def _neighbour_binds(port: int) -> bool:
    """Whether another server (bound as uvicorn binds: SO_REUSEADDR, no SO_REUSEPORT) could
    take `port` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


async def test_a_down_chaos_proxy_refuses_connections_and_keeps_its_port() -> None:
    """While `down`, connects are refused and no neighbour can bind the port (another test's
    server took it once and answered the daemon 404 for its own tasks); back up, the proxy
    listens on the same port."""
    async with chaos_proxy("http://127.0.0.1:9") as proxy:
        port = proxy.port
        await proxy.set_mode("down")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert not _neighbour_binds(port)
        await proxy.set_mode("500")
        assert proxy.port == port
        async with httpx.AsyncClient(base_url=proxy.url) as client:
            assert (await client.get("/api/daemon/heartbeat")).status_code == 500
    assert _neighbour_binds(port)
